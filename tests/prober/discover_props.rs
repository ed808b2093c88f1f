//! Property tests over hostile API-server answers for Kubernetes discovery: the list, watch
//! event, Status and Pod parsers, the bounded line splitter and the slice set must return a
//! value or an error for any input, never panic, and keep their invariants. A seeded generator
//! (splitmix64, as in hostile_input_props.rs) drives them, so a failure prints its seed;
//! `PROPS_ITERS` raises the case count.

use crate::props;

use llmprobe::replicas::discover::PortRef;
use llmprobe::replicas::discover::kubernetes::model::{self, LineSplitter, SliceSet, WatchEvent};

use props::{Rng, for_seeds, iters};

/// JSON-ish fragments that steer random input towards the fields the parsers read.
const PIECES: &[&str] = &[
    "{",
    "}",
    "[",
    "]",
    ",",
    ":",
    "\"",
    "\n",
    "\r\n",
    "null",
    "true",
    "false",
    "\"type\"",
    "\"ADDED\"",
    "\"MODIFIED\"",
    "\"DELETED\"",
    "\"BOOKMARK\"",
    "\"ERROR\"",
    "\"object\"",
    "\"metadata\"",
    "\"name\"",
    "\"uid\"",
    "\"namespace\"",
    "\"resourceVersion\"",
    "\"continue\"",
    "\"labels\"",
    "\"kubernetes.io/service-name\"",
    "\"vllm\"",
    "\"items\"",
    "\"endpoints\"",
    "\"addresses\"",
    "\"10.0.0.1\"",
    "\"::1\"",
    "\"conditions\"",
    "\"ready\"",
    "\"terminating\"",
    "\"targetRef\"",
    "\"kind\"",
    "\"Pod\"",
    "\"nodeName\"",
    "\"zone\"",
    "\"ports\"",
    "\"port\"",
    "\"protocol\"",
    "\"TCP\"",
    "\"http\"",
    "\"code\"",
    "410",
    "8000",
    "0",
    "-1",
    "65536",
    "4294967297",
    "18446744073709551616",
    "1e308",
    "0.5",
    "\u{feff}",
    "\u{0}",
    "é",
];

fn json_ish(rng: &mut Rng) -> Vec<u8> {
    props::fragments(rng, PIECES, 60)
}

fn fixture(name: &str) -> Vec<u8> {
    std::fs::read(format!("{}/tests/fixtures/kubernetes/{name}", env!("CARGO_MANIFEST_DIR"))).unwrap()
}

/// A real answer with a few bytes replaced, inserted or removed.
fn mutate(rng: &mut Rng, real: &[u8]) -> Vec<u8> {
    let mut v = real.to_vec();
    for _ in 0..=rng.below(6) {
        if v.is_empty() {
            break;
        }
        let i = rng.below(v.len() as u64) as usize;
        match rng.below(4) {
            0 => v[i] = rng.next() as u8,
            1 => {
                v.remove(i);
            }
            2 => {
                let piece = rng.pick(PIECES).as_bytes().to_vec();
                v.splice(i..i, piece);
            }
            _ => v.truncate(i),
        }
    }
    v
}

fn ports() -> [PortRef; 4] {
    [PortRef::Name("http".into()), PortRef::Name("".into()), PortRef::Number(8000), PortRef::Number(0)]
}

/// The set's members are unique, sorted by id, and each has a port the slice lists.
fn check_members(set: &SliceSet) {
    for port in ports() {
        let (members, _) = set.members(&port);
        for pair in members.windows(2) {
            assert!(pair[0].replica.id < pair[1].replica.id, "members not sorted and unique: {:?}", members);
        }
        if let PortRef::Number(n) = port {
            assert!(members.iter().all(|m| m.replica.addr.port() == n));
        }
        assert!(members.iter().all(|m| m.replica.addr.port() != 0 && m.replica.id.len() <= 253));
    }
}

fn apply(set: &mut SliceSet, line: &[u8]) {
    match model::parse_watch_event(line) {
        Ok(WatchEvent::Added(s) | WatchEvent::Modified(s)) => set.upsert(s),
        Ok(WatchEvent::Deleted(s)) => set.remove(&s),
        Ok(WatchEvent::Bookmark(_) | WatchEvent::Error(_)) | Err(_) => {}
    }
}

#[test]
fn list_parser_never_panics() {
    let real = [fixture("endpointslices-list.json"), fixture("endpointslices-relist.json")];
    for_seeds("list", iters(3000), |rng| {
        let body = match rng.below(3) {
            0 => json_ish(rng),
            1 => rng.bytes(256),
            _ => {
                let r = rng.pick(&real).clone();
                mutate(rng, &r)
            }
        };
        if let Ok(list) = model::parse_list(&body) {
            let mut set = SliceSet::new("vllm");
            set.replace(list.items);
            check_members(&set);
        }
        let _ = model::parse_status(&body);
        let _ = model::parse_pod(&body);
    });
}

#[test]
fn watch_event_parser_never_panics() {
    let objects = [fixture("endpointslice-added.json"), fixture("endpointslice-modified.json"), fixture("status-410-expired.json")];
    let kinds = ["ADDED", "MODIFIED", "DELETED", "BOOKMARK", "ERROR", "SYNC", ""];
    for_seeds("watch event", iters(3000), |rng| {
        let mut set = SliceSet::new("vllm");
        set.replace(model::parse_list(&fixture("endpointslices-list.json")).unwrap().items);
        for _ in 0..4 {
            let line = match rng.below(3) {
                0 => json_ish(rng),
                1 => rng.bytes(128),
                _ => {
                    let r = rng.pick(&objects).clone();
                    let object = mutate(rng, &r);
                    let mut line = format!("{{\"type\":\"{}\",\"object\":", rng.pick(&kinds)).into_bytes();
                    line.extend(object);
                    line.push(b'}');
                    line
                }
            };
            apply(&mut set, &line);
            check_members(&set);
        }
    });
}

#[test]
fn pod_and_status_parsers_never_panic() {
    let real = [fixture("pod.json"), fixture("status-403-pod.json"), fixture("status-410-expired.json")];
    for_seeds("pod", iters(2000), |rng| {
        let body = if rng.below(2) == 0 {
            json_ish(rng)
        } else {
            let r = rng.pick(&real).clone();
            mutate(rng, &r)
        };
        if let Ok(pod) = model::parse_pod(&body) {
            for v in pod.metadata.labels.values() {
                if let Some(v) = model::version_value(v) {
                    assert!(v.len() <= model::MAX_VERSION);
                }
            }
        }
        let _ = model::parse_status(&body);
    });
}

#[test]
fn line_splitter_keeps_every_byte_and_the_cap() {
    for_seeds("lines", iters(2000), |rng| {
        let max = 1 + rng.below(64) as usize;
        let mut stream = Vec::new();
        for _ in 0..rng.below(20) {
            let pieces: [&[u8]; 6] = [b"\n", b"\r\n", b"ab", b" ", b"{\"type\":1}", b"x"];
            let piece = rng.pick(&pieces);
            stream.extend_from_slice(piece);
            if rng.below(10) == 0 {
                stream.extend(rng.bytes(8));
            }
        }
        let mut splitter = LineSplitter::new(max);
        let mut lines = Vec::new();
        let mut rest = &stream[..];
        let mut failed = false;
        while !rest.is_empty() {
            let n = 1 + rng.below(rest.len() as u64) as usize;
            match splitter.push(&rest[..n]) {
                Ok(got) => lines.extend(got),
                Err(_) => {
                    failed = true;
                    break;
                }
            }
            rest = &rest[n..];
        }
        if !failed {
            lines.extend(splitter.finish());
            // The same lines as a plain split, as long as none is over the cap.
            let want: Vec<Vec<u8>> =
                stream.split(|b| *b == b'\n').map(|l| l.strip_suffix(b"\r").unwrap_or(l).to_vec()).filter(|l| !l.iter().all(u8::is_ascii_whitespace)).collect();
            assert_eq!(lines, want);
        } else {
            // A failure means some line really was over the cap.
            assert!(stream.split(|b| *b == b'\n').any(|l| l.len() > max), "refused a stream whose lines all fit {max}");
        }
        assert!(lines.iter().all(|l| l.len() <= max));
    });
}

#[test]
fn watch_stream_of_arbitrary_lines_never_panics() {
    let real = [fixture("endpointslice-added.json"), fixture("endpointslice-modified.json"), fixture("watch-bookmark.json")];
    for_seeds("watch stream", iters(500), |rng| {
        let mut stream = Vec::new();
        for _ in 0..rng.below(8) {
            match rng.below(3) {
                0 => stream.extend(json_ish(rng)),
                1 => {
                    stream.extend_from_slice(format!("{{\"type\":\"{}\",\"object\":", rng.pick(&["ADDED", "MODIFIED", "DELETED"])).as_bytes());
                    let raw: &Vec<u8> = rng.pick(&real);
                    let compact: serde_json::Value = serde_json::from_slice(raw).unwrap();
                    stream.extend(mutate(rng, compact.to_string().as_bytes()));
                    stream.push(b'}');
                }
                _ => stream.extend(rng.bytes(32)),
            }
            stream.push(b'\n');
        }
        let mut splitter = LineSplitter::new(4096);
        let mut set = SliceSet::new("vllm");
        for chunk in stream.chunks(1 + rng.below(64) as usize) {
            let Ok(lines) = splitter.push(chunk) else { break };
            for line in lines {
                apply(&mut set, &line);
            }
        }
        check_members(&set);
    });
}
