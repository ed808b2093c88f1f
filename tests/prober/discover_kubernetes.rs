//! Kubernetes replica discovery against a fake API server (axum on loopback) serving real
//! EndpointSlice, Pod and Status shapes (tests/fixtures/kubernetes, modelled on Kubernetes 1.30
//! objects): the list, then a watch that adds a replica, turns one not-ready, removes one, ends
//! after a bookmark, answers 410 (HTTP, then as an ERROR event) so the watcher re-lists; every
//! step's published set is checked, and so are the watch requests' resource versions, the
//! bearer token (rotated mid-run), the version label and the one Pod `get` per pod.

use std::collections::{HashMap, VecDeque};
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime};

use axum::body::Body;
use axum::extract::{Path, Query, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use serde_json::{Value, json};
use tokio::sync::{mpsc, watch};

use crate::common::PATIENCE;

/// Waits until the fake API server has been asked `n` requests that `which` selects (by their
/// query).
async fn wait_for_requests(fake: &Fake, what: &str, n: usize, which: impl Fn(&HashMap<String, String>) -> bool) {
    let deadline = std::time::Instant::now() + PATIENCE;
    while fake.requests.lock().unwrap().iter().filter(|(q, _)| which(q)).count() < n {
        assert!(std::time::Instant::now() < deadline, "waited {PATIENCE:?} for {n} {what}");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}
use tokio_util::sync::CancellationToken;

use llmprobe::replicas::discover::{ApiAccess, DiscoverSpec, KubernetesSpec, PortRef, Replica};

fn fixture(name: &str) -> Value {
    let path = format!("{}/tests/fixtures/kubernetes/{name}", env!("CARGO_MANIFEST_DIR"));
    serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap_or_else(|e| panic!("{path}: {e}"))
}

/// What one watch request gets.
enum WatchPlan {
    /// `410 Gone` with a Status body.
    Gone,
    /// A stream of lines the test sends; it ends when the test drops the sender.
    Stream(mpsc::UnboundedReceiver<String>),
    /// One raw body, then the end.
    Raw(Vec<u8>),
}

/// What a list request gets.
enum ListPlan {
    Json(Value),
    Raw(StatusCode, Vec<u8>),
    /// The list, once the test lets it go.
    Held(Arc<tokio::sync::Notify>, Value),
}

#[derive(Default)]
struct Fake {
    lists: Mutex<VecDeque<ListPlan>>,
    watches: Mutex<VecDeque<WatchPlan>>,
    /// Every list/watch request: (its query, its Authorization header).
    requests: Mutex<Vec<(HashMap<String, String>, String)>>,
    /// Pod `get`s by pod name.
    pod_gets: Mutex<HashMap<String, usize>>,
    /// Pod name -> uid (from the fixtures) and version label.
    pods: Mutex<HashMap<String, (String, String)>>,
    forbidden_pods: Vec<String>,
    token: Mutex<String>,
}

fn status(code: StatusCode, body: Value) -> Response {
    (code, [("content-type", "application/json")], body.to_string()).into_response()
}

/// The request's `Authorization` when it carries the current token.
fn authorized(fake: &Fake, headers: &HeaderMap) -> Option<String> {
    let got = headers.get("authorization").and_then(|v| v.to_str().ok()).unwrap_or("").to_string();
    (got == format!("Bearer {}", fake.token.lock().unwrap())).then_some(got)
}

fn unauthorized() -> Response {
    status(
        StatusCode::UNAUTHORIZED,
        json!({"kind":"Status","apiVersion":"v1","metadata":{},"status":"Failure","message":"Unauthorized","reason":"Unauthorized","code":401}),
    )
}

async fn slices(State(fake): State<Arc<Fake>>, Path(ns): Path<String>, Query(q): Query<HashMap<String, String>>, headers: HeaderMap) -> Response {
    let Some(auth) = authorized(&fake, &headers) else { return unauthorized() };
    assert_eq!(ns, "inference");
    assert_eq!(q.get("labelSelector").map(String::as_str), Some("kubernetes.io/service-name=vllm"));
    fake.requests.lock().unwrap().push((q.clone(), auth));
    if q.get("watch").map(String::as_str) == Some("1") {
        let plan = fake.watches.lock().unwrap().pop_front();
        return match plan {
            Some(WatchPlan::Gone) => status(StatusCode::GONE, fixture("status-410-expired.json")),
            Some(WatchPlan::Stream(rx)) => {
                let stream = futures_util::stream::unfold(rx, |mut rx| async move { rx.recv().await.map(|line| (Ok::<_, std::io::Error>(line), rx)) });
                ([("content-type", "application/json")], Body::from_stream(stream)).into_response()
            }
            Some(WatchPlan::Raw(body)) => ([("content-type", "application/json")], body).into_response(),
            // No more plans: a stream that stays open and quiet.
            None => {
                ([("content-type", "application/json")], Body::from_stream(futures_util::stream::pending::<Result<String, std::io::Error>>())).into_response()
            }
        };
    }
    let plan = {
        let mut lists = fake.lists.lock().unwrap();
        if lists.len() > 1 {
            lists.pop_front()
        } else {
            lists.front().map(|p| match p {
                ListPlan::Json(v) => ListPlan::Json(v.clone()),
                ListPlan::Held(gate, v) => ListPlan::Held(gate.clone(), v.clone()),
                ListPlan::Raw(s, b) => ListPlan::Raw(*s, b.clone()),
            })
        }
    };
    match plan {
        Some(ListPlan::Json(v)) => status(StatusCode::OK, v),
        Some(ListPlan::Held(gate, v)) => {
            gate.notified().await;
            status(StatusCode::OK, v)
        }
        Some(ListPlan::Raw(code, body)) => (code, body).into_response(),
        None => status(StatusCode::INTERNAL_SERVER_ERROR, json!({"kind":"Status","code":500})),
    }
}

async fn pod(State(fake): State<Arc<Fake>>, Path((ns, name)): Path<(String, String)>, headers: HeaderMap) -> Response {
    if authorized(&fake, &headers).is_none() {
        return unauthorized();
    }
    assert_eq!(ns, "inference");
    *fake.pod_gets.lock().unwrap().entry(name.clone()).or_default() += 1;
    if fake.forbidden_pods.contains(&name) {
        return status(StatusCode::FORBIDDEN, fixture("status-403-pod.json"));
    }
    let Some((uid, version)) = fake.pods.lock().unwrap().get(&name).cloned() else {
        return status(StatusCode::NOT_FOUND, json!({"kind":"Status","apiVersion":"v1","metadata":{},"status":"Failure","reason":"NotFound","code":404}));
    };
    let mut p = fixture("pod.json");
    p["metadata"]["name"] = json!(name);
    p["metadata"]["uid"] = json!(uid);
    p["metadata"]["labels"]["app.kubernetes.io/version"] = json!(version);
    status(StatusCode::OK, p)
}

/// Every pod named in a slice or a list (name -> uid), for the fake's Pod answers.
fn pods_in(v: &Value, out: &mut HashMap<String, (String, String)>) {
    let slices: Vec<&Value> = match v.get("items") {
        Some(items) => items.as_array().unwrap().iter().collect(),
        None => vec![v],
    };
    for s in slices {
        for ep in s["endpoints"].as_array().into_iter().flatten() {
            let r = &ep["targetRef"];
            out.insert(r["name"].as_str().unwrap().into(), (r["uid"].as_str().unwrap().into(), "0.6.3".into()));
        }
    }
}

async fn serve(fake: Arc<Fake>) -> String {
    let app = axum::Router::new()
        .route("/apis/discovery.k8s.io/v1/namespaces/{ns}/endpointslices", get(slices))
        .route("/api/v1/namespaces/{ns}/pods/{name}", get(pod))
        .with_state(fake);
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
    format!("http://{addr}")
}

fn token_file(name: &str, token: &str) -> std::path::PathBuf {
    let path = std::env::temp_dir().join(format!("llmprobe-discover-{name}-{}", std::process::id()));
    std::fs::write(&path, format!("{token}\n")).unwrap();
    path
}

fn spec(url: String, token: &std::path::Path, version_label: Option<&str>) -> DiscoverSpec {
    DiscoverSpec::Kubernetes(KubernetesSpec {
        service: "vllm".into(),
        namespace: Some("inference".into()),
        port: PortRef::Name("http".into()),
        version_label: version_label.map(str::to_string),
        api: Some(ApiAccess { url, token_file: Some(token.to_path_buf()), ca_file: None }),
    })
}

type Row = (String, String, Option<String>, Option<String>, Option<String>);

fn row(id: &str, addr: &str, node: &str, zone: &str, version: Option<&str>) -> Row {
    (id.into(), addr.into(), Some(node.into()), Some(zone.into()), version.map(str::to_string))
}

fn rows(set: &[Replica]) -> Vec<Row> {
    set.iter().map(|r| (r.id.clone(), r.addr.to_string(), r.node.clone(), r.zone.clone(), r.version.clone())).collect()
}

/// Waits until the published set equals `want` (in order).
async fn expect(rx: &mut watch::Receiver<Vec<Replica>>, step: &str, want: Vec<Row>) {
    let ok = tokio::time::timeout(Duration::from_secs(10), rx.wait_for(|set| rows(set) == want)).await.is_ok();
    if !ok {
        panic!("{step}: published set is\n{:#?}\nwanted\n{want:#?}", rows(&rx.borrow()));
    }
}

fn event(kind: &str, object: Value) -> String {
    format!("{}\n", json!({"type": kind, "object": object}))
}

fn with_rv(mut v: Value, rv: &str) -> Value {
    v["metadata"]["resourceVersion"] = json!(rv);
    v
}

#[tokio::test]
async fn list_watch_follows_every_change_and_relists_on_410() {
    let (w1_tx, w1_rx) = mpsc::unbounded_channel();
    let (w3_tx, w3_rx) = mpsc::unbounded_channel();
    let (_w4_tx, w4_rx) = mpsc::unbounded_channel();
    let list = fixture("endpointslices-list.json");
    let relist = fixture("endpointslices-relist.json");
    // The second re-list: one more ready pod in the slice.
    let mut relist2 = relist.clone();
    relist2["metadata"]["resourceVersion"] = json!("48500");
    relist2["items"][0]["endpoints"].as_array_mut().unwrap().push(json!({
        "addresses": ["10.244.3.15"],
        "conditions": {"ready": true, "serving": true, "terminating": false},
        "targetRef": {"kind": "Pod", "namespace": "inference", "name": "vllm-6d4f9c7b8-w7xcs", "uid": "1a3c5e7a-9b0d-4f2a-b4c6-d8e0f2a4c6a9"},
        "nodeName": "worker-c",
        "zone": "us-east-1c"
    }));
    let added = fixture("endpointslice-added.json");
    let mut pods = HashMap::new();
    for v in [&list, &relist, &relist2, &added] {
        pods_in(v, &mut pods);
    }
    pods.get_mut("vllm-6d4f9c7b8-kd8vb").unwrap().1 = "0.6.4".into();
    let fake = Arc::new(Fake {
        lists: Mutex::new(VecDeque::from([ListPlan::Json(list), ListPlan::Json(relist), ListPlan::Json(relist2)])),
        watches: Mutex::new(VecDeque::from([WatchPlan::Stream(w1_rx), WatchPlan::Gone, WatchPlan::Stream(w3_rx), WatchPlan::Stream(w4_rx)])),
        pods: Mutex::new(pods),
        forbidden_pods: vec!["vllm-6d4f9c7b8-7mzrt".into()],
        token: Mutex::new("token-1".into()),
        ..Fake::default()
    });
    let url = serve(fake.clone()).await;
    let token = token_file("watch", "token-1");
    let (tx, mut rx) = watch::channel(Vec::new());
    let stop = CancellationToken::new();
    let task = tokio::spawn(llmprobe::replicas::discover::run(spec(url, &token, Some("app.kubernetes.io/version")), tx, stop.clone()));

    // The list: two ready pods; the not-ready one and the terminating one are left out. The
    // pod that may not be read has no version.
    let p1 = row("vllm-6d4f9c7b8-2xkqp", "10.244.1.12:8000", "worker-a", "us-east-1a", Some("0.6.3"));
    expect(&mut rx, "after the list", vec![p1.clone(), row("vllm-6d4f9c7b8-7mzrt", "10.244.2.7:8000", "worker-b", "us-east-1b", None)]).await;

    // ADDED: a new slice with a new pod.
    w1_tx.send(event("ADDED", added.clone())).unwrap();
    let p3 = row("vllm-6d4f9c7b8-kd8vb", "10.244.4.21:8000", "worker-d", "us-east-1c", Some("0.6.4"));
    expect(&mut rx, "after ADDED", vec![p1.clone(), row("vllm-6d4f9c7b8-7mzrt", "10.244.2.7:8000", "worker-b", "us-east-1b", None), p3.clone()]).await;

    // MODIFIED: one pod turns not-ready.
    w1_tx.send(event("MODIFIED", fixture("endpointslice-modified.json"))).unwrap();
    expect(&mut rx, "after MODIFIED", vec![p1.clone(), p3.clone()]).await;

    // DELETED: the added slice goes; a bookmark moves the version on; the token rotates; the
    // stream ends.
    w1_tx.send(event("DELETED", with_rv(added, "48350"))).unwrap();
    expect(&mut rx, "after DELETED", vec![p1.clone()]).await;
    *fake.token.lock().unwrap() = "token-2".into();
    std::fs::write(&token, "token-2\n").unwrap();
    std::fs::File::options().write(true).open(&token).unwrap().set_modified(SystemTime::now() + Duration::from_secs(5)).unwrap();
    tokio::time::sleep(Duration::from_millis(1100)).await;
    w1_tx.send(format!("{}\n", fixture("watch-bookmark.json"))).unwrap();
    drop(w1_tx);

    // The re-watch from the bookmark gets 410: a re-list.
    let p4 = row("vllm-6d4f9c7b8-zp6fd", "10.244.2.30:8000", "worker-b", "us-east-1b", Some("0.6.3"));
    expect(&mut rx, "after the 410 re-list", vec![p1.clone(), p4.clone()]).await;

    // An ERROR event with code 410 on the next watch: another re-list.
    w3_tx.send(event("ERROR", fixture("status-410-expired.json"))).unwrap();
    let p5 = row("vllm-6d4f9c7b8-w7xcs", "10.244.3.15:8000", "worker-c", "us-east-1c", Some("0.6.3"));
    expect(&mut rx, "after the ERROR 410 re-list", vec![p1.clone(), p5, p4]).await;

    // The watches resumed from the right versions, with bookmarks asked for.
    wait_for_requests(&fake, "watches", 4, |q| q.get("watch").is_some()).await;
    let watches: Vec<(String, String)> = {
        let requests = fake.requests.lock().unwrap();
        requests
            .iter()
            .filter(|(q, _)| q.get("watch").is_some())
            .map(|(q, auth)| {
                assert_eq!(q.get("allowWatchBookmarks").map(String::as_str), Some("true"));
                assert!(q.get("timeoutSeconds").is_some());
                (q.get("resourceVersion").cloned().unwrap_or_default(), auth.clone())
            })
            .collect()
    };
    let want: Vec<(String, String)> = [("48211", "token-1"), ("48390", "token-2"), ("48400", "token-2"), ("48500", "token-2")]
        .iter()
        .map(|(a, b)| (a.to_string(), format!("Bearer {b}")))
        .collect();
    assert_eq!(watches, want);
    let lists = fake.requests.lock().unwrap().iter().filter(|(q, _)| q.get("watch").is_none()).count();
    assert_eq!(lists, 3);

    // One Pod get per pod, even for the pod still there after two re-lists and the forbidden one.
    let gets = fake.pod_gets.lock().unwrap().clone();
    for name in ["vllm-6d4f9c7b8-2xkqp", "vllm-6d4f9c7b8-7mzrt", "vllm-6d4f9c7b8-kd8vb", "vllm-6d4f9c7b8-zp6fd", "vllm-6d4f9c7b8-w7xcs"] {
        assert_eq!(gets.get(name), Some(&1), "{name}: {gets:?}");
    }
    assert_eq!(gets.len(), 5, "{gets:?}");

    stop.cancel();
    tokio::time::timeout(Duration::from_secs(5), task).await.expect("discovery stops when told").unwrap();
    std::fs::remove_file(&token).unwrap();
}

#[tokio::test]
async fn bad_answers_keep_the_last_set_until_a_good_list() {
    // A watch line over the cap, then a list that is not JSON, then a good list with another
    // set: the published set stays the first one until that good list.
    let huge = vec![b'x'; llmprobe::replicas::discover::kubernetes::MAX_WATCH_LINE + 10];
    let good_list = Arc::new(tokio::sync::Notify::new());
    let fake = Arc::new(Fake {
        lists: Mutex::new(VecDeque::from([
            ListPlan::Json(fixture("endpointslices-list.json")),
            ListPlan::Raw(StatusCode::OK, b"{\"kind\":\"EndpointSliceList\",\"items\":[{\"endpoints\":[{\"addresses\":".to_vec()),
            ListPlan::Held(good_list.clone(), fixture("endpointslices-relist.json")),
        ])),
        watches: Mutex::new(VecDeque::from([WatchPlan::Raw(huge)])),
        token: Mutex::new("t".into()),
        ..Fake::default()
    });
    let url = serve(fake.clone()).await;
    let token = token_file("bad", "t");
    let (tx, mut rx) = watch::channel(Vec::new());
    let stop = CancellationToken::new();
    let task = tokio::spawn(llmprobe::replicas::discover::run(spec(url, &token, None), tx, stop.clone()));
    let p1 = row("vllm-6d4f9c7b8-2xkqp", "10.244.1.12:8000", "worker-a", "us-east-1a", None);
    let p2 = row("vllm-6d4f9c7b8-7mzrt", "10.244.2.7:8000", "worker-b", "us-east-1b", None);
    expect(&mut rx, "after the list", vec![p1.clone(), p2]).await;
    let first = rx.borrow_and_update().clone();
    // The over-long line and the broken list back off 1 s and 2 s: nothing changes meanwhile.
    // The good list is held until the test has looked; its request says the broken list was
    // read and dealt with.
    wait_for_requests(&fake, "lists", 3, |q| q.get("watch").is_none()).await;
    assert!(!rx.has_changed().unwrap(), "a failure changed the set");
    assert_eq!(*rx.borrow(), first);
    good_list.notify_one();
    let p4 = row("vllm-6d4f9c7b8-zp6fd", "10.244.2.30:8000", "worker-b", "us-east-1b", None);
    expect(&mut rx, "after the good list", vec![p1, p4]).await;
    assert_eq!(fake.requests.lock().unwrap().iter().filter(|(q, _)| q.get("watch").is_none()).count(), 3);
    stop.cancel();
    tokio::time::timeout(Duration::from_secs(5), task).await.unwrap().unwrap();
    std::fs::remove_file(&token).unwrap();
}

#[tokio::test]
async fn port_by_number_and_unmatched_port() {
    let fake = Arc::new(Fake {
        lists: Mutex::new(VecDeque::from([ListPlan::Json(fixture("endpointslices-list.json"))])),
        token: Mutex::new("t".into()),
        ..Fake::default()
    });
    let url = serve(fake).await;
    let token = token_file("port", "t");
    for (port, want) in [(PortRef::Number(50051), vec!["10.244.1.12:50051", "10.244.2.7:50051"]), (PortRef::Number(8001), vec![])] {
        let DiscoverSpec::Kubernetes(mut k) = spec(url.clone(), &token, None) else { unreachable!() };
        k.port = port.clone();
        let (tx, mut rx) = watch::channel(vec![Replica { id: "sentinel".into(), addr: "127.0.0.1:1".parse().unwrap(), node: None, zone: None, version: None }]);
        let stop = CancellationToken::new();
        let task = tokio::spawn(llmprobe::replicas::discover::run(DiscoverSpec::Kubernetes(k), tx, stop.clone()));
        let got =
            tokio::time::timeout(Duration::from_secs(10), rx.wait_for(|set| set.iter().all(|r| r.id != "sentinel"))).await.expect("published").unwrap().clone();
        let addrs: Vec<String> = got.iter().map(|r| r.addr.to_string()).collect();
        assert_eq!(addrs, want, "port {port:?}");
        stop.cancel();
        task.await.unwrap();
    }
    std::fs::remove_file(&token).unwrap();
}
