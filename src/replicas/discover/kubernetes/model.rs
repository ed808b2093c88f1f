//! The API objects read (EndpointSlice lists, watch events, Status, Pod), parsed leniently
//! (every field optional, `null` as absent), and the replica set they make. Pure functions, so
//! hostile answers are tested without a server: any bytes give a value or an error, never a panic.

use std::collections::BTreeMap;
use std::net::{IpAddr, SocketAddr};

use serde::{Deserialize, Deserializer};

use crate::replicas::discover::{PortRef, Replica};

/// The label an EndpointSlice carries naming its Service.
pub const SERVICE_NAME_LABEL: &str = "kubernetes.io/service-name";

/// `null` reads as the default, as the API server writes empty lists (`"endpoints": null`).
fn null_default<'de, D: Deserializer<'de>, T: Default + Deserialize<'de>>(d: D) -> Result<T, D::Error> {
    Ok(Option::<T>::deserialize(d)?.unwrap_or_default())
}

#[derive(Debug, Clone, Default, Deserialize)]
#[serde(default, rename_all = "camelCase")]
pub struct ListMeta {
    pub resource_version: Option<String>,
    #[serde(rename = "continue")]
    pub continue_token: Option<String>,
}

#[derive(Debug, Clone, Default, Deserialize)]
#[serde(default, rename_all = "camelCase")]
pub struct ObjectMeta {
    pub name: Option<String>,
    pub namespace: Option<String>,
    pub uid: Option<String>,
    pub resource_version: Option<String>,
    #[serde(deserialize_with = "null_default")]
    pub labels: BTreeMap<String, String>,
}

#[derive(Debug, Clone, Default, Deserialize)]
#[serde(default, rename_all = "camelCase")]
pub struct EndpointSliceList {
    #[serde(deserialize_with = "null_default")]
    pub metadata: ListMeta,
    #[serde(deserialize_with = "null_default")]
    pub items: Vec<EndpointSlice>,
}

#[derive(Debug, Clone, Default, Deserialize)]
#[serde(default, rename_all = "camelCase")]
pub struct EndpointSlice {
    #[serde(deserialize_with = "null_default")]
    pub metadata: ObjectMeta,
    pub address_type: Option<String>,
    #[serde(deserialize_with = "null_default")]
    pub endpoints: Vec<Endpoint>,
    #[serde(deserialize_with = "null_default")]
    pub ports: Vec<EndpointPort>,
}

#[derive(Debug, Clone, Default, Deserialize)]
#[serde(default, rename_all = "camelCase")]
pub struct Endpoint {
    #[serde(deserialize_with = "null_default")]
    pub addresses: Vec<String>,
    #[serde(deserialize_with = "null_default")]
    pub conditions: Conditions,
    pub target_ref: Option<ObjectReference>,
    pub node_name: Option<String>,
    pub zone: Option<String>,
}

#[derive(Debug, Clone, Default, Deserialize)]
#[serde(default)]
pub struct Conditions {
    pub ready: Option<bool>,
    pub serving: Option<bool>,
    pub terminating: Option<bool>,
}

#[derive(Debug, Clone, Default, Deserialize)]
#[serde(default)]
pub struct ObjectReference {
    pub kind: Option<String>,
    pub name: Option<String>,
    pub namespace: Option<String>,
    pub uid: Option<String>,
}

#[derive(Debug, Clone, Default, Deserialize)]
#[serde(default)]
pub struct EndpointPort {
    pub name: Option<String>,
    /// Any JSON integer; one outside 1..=65535 matches nothing.
    pub port: Option<i64>,
    pub protocol: Option<String>,
}

/// A `Status` (an error answer or a watch `ERROR` event's object).
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(default)]
pub struct Status {
    pub status: Option<String>,
    pub message: Option<String>,
    pub reason: Option<String>,
    pub code: Option<i64>,
}

/// The part of a Pod read: its name, uid and labels.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(default)]
pub struct Pod {
    #[serde(deserialize_with = "null_default")]
    pub metadata: ObjectMeta,
}

/// One line of a watch stream.
#[derive(Debug, Clone)]
pub enum WatchEvent {
    Added(EndpointSlice),
    Modified(EndpointSlice),
    Deleted(EndpointSlice),
    /// Only `metadata.resourceVersion` is meaningful.
    Bookmark(Option<String>),
    Error(Status),
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ParseError {
    #[error("not JSON of the expected shape: {0}")]
    Json(String),
    #[error("unknown watch event type {0:?}")]
    UnknownType(String),
}

fn json<'a, T: Deserialize<'a>>(bytes: &'a [u8]) -> Result<T, ParseError> {
    serde_json::from_slice(bytes).map_err(|e| ParseError::Json(e.to_string()))
}

/// Parses an `EndpointSliceList` answer.
pub fn parse_list(bytes: &[u8]) -> Result<EndpointSliceList, ParseError> {
    json(bytes)
}

/// Parses a `Status` answer.
pub fn parse_status(bytes: &[u8]) -> Result<Status, ParseError> {
    json(bytes)
}

/// Parses a Pod answer.
pub fn parse_pod(bytes: &[u8]) -> Result<Pod, ParseError> {
    json(bytes)
}

/// Parses one watch line (`{"type": "...", "object": {...}}`).
pub fn parse_watch_event(line: &[u8]) -> Result<WatchEvent, ParseError> {
    #[derive(Deserialize)]
    struct Raw {
        #[serde(rename = "type")]
        kind: String,
        #[serde(default)]
        object: serde_json::Value,
    }
    #[derive(Deserialize, Default)]
    #[serde(default)]
    struct Bookmark {
        #[serde(deserialize_with = "null_default")]
        metadata: ObjectMeta,
    }
    let raw: Raw = json(line)?;
    let object = |v: serde_json::Value| serde_json::from_value::<EndpointSlice>(v).map_err(|e| ParseError::Json(e.to_string()));
    Ok(match raw.kind.as_str() {
        "ADDED" => WatchEvent::Added(object(raw.object)?),
        "MODIFIED" => WatchEvent::Modified(object(raw.object)?),
        "DELETED" => WatchEvent::Deleted(object(raw.object)?),
        "BOOKMARK" => {
            let b: Bookmark = serde_json::from_value(raw.object).map_err(|e| ParseError::Json(e.to_string()))?;
            WatchEvent::Bookmark(b.metadata.resource_version)
        }
        "ERROR" => WatchEvent::Error(serde_json::from_value(raw.object).map_err(|e| ParseError::Json(e.to_string()))?),
        other => return Err(ParseError::UnknownType(other.chars().take(40).collect())),
    })
}

/// The longest name taken from an answer as a replica id or a path segment (a DNS subdomain).
const MAX_NAME: usize = 253;

/// The longest label value taken as a version (Kubernetes label values are at most 63).
pub const MAX_VERSION: usize = 63;

/// A name safe as a path segment and an id: a DNS subdomain (`[a-z0-9.-]`, at most 253).
pub fn is_object_name(name: &str) -> bool {
    let alnum = |b: u8| b.is_ascii_lowercase() || b.is_ascii_digit();
    let bytes = name.as_bytes();
    match (bytes.first(), bytes.last()) {
        (Some(&first), Some(&last)) => name.len() <= MAX_NAME && alnum(first) && alnum(last) && bytes.iter().all(|&b| alnum(b) || b == b'-' || b == b'.'),
        _ => false,
    }
}

/// A label value as a version: at most 63 printable ASCII characters, else unknown.
pub fn version_value(value: &str) -> Option<String> {
    (!value.is_empty() && value.len() <= MAX_VERSION && value.bytes().all(|b| b.is_ascii_graphic())).then(|| value.to_string())
}

/// The pod behind an endpoint, for the version lookup.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub struct PodRef {
    pub namespace: Option<String>,
    pub name: String,
    pub uid: Option<String>,
}

/// A ready endpoint as a replica (without its version yet) and its pod.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Member {
    pub replica: Replica,
    pub pod: Option<PodRef>,
}

/// Why a slice gave no members although it has endpoints (logged once per slice).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SliceProblem {
    /// None of its TCP ports matches; the ports it lists, as `name:port`.
    NoSuchPort(Vec<String>),
}

/// The port of a slice that `port` names: a TCP port (protocol absent means TCP) with that name
/// or number.
fn slice_port(slice: &EndpointSlice, port: &PortRef) -> Option<u16> {
    slice.ports.iter().filter(|p| p.protocol.as_deref().is_none_or(|proto| proto == "TCP")).find_map(|p| {
        let number = p.port.and_then(|n| u16::try_from(n).ok()).filter(|n| *n != 0)?;
        let matches = match port {
            PortRef::Name(name) => p.name.as_deref() == Some(name.as_str()),
            PortRef::Number(n) => number == *n,
        };
        matches.then_some(number)
    })
}

/// The ready members of one slice. Ready: `conditions.ready` not false and not terminating.
/// An endpoint's first address is used (the API: addresses are interchangeable); one that is not
/// an IP (an FQDN slice) is skipped.
fn slice_members(slice: &EndpointSlice, port: &PortRef) -> Result<Vec<Member>, SliceProblem> {
    let Some(number) = slice_port(slice, port) else {
        if slice.endpoints.is_empty() {
            return Ok(Vec::new());
        }
        let listed = slice.ports.iter().map(|p| format!("{}:{}", p.name.as_deref().unwrap_or(""), p.port.unwrap_or(0))).take(16).collect();
        return Err(SliceProblem::NoSuchPort(listed));
    };
    let mut out = Vec::new();
    for ep in &slice.endpoints {
        if ep.conditions.ready == Some(false) || ep.conditions.terminating == Some(true) {
            continue;
        }
        let Some(ip) = ep.addresses.first().and_then(|a| a.parse::<IpAddr>().ok()) else { continue };
        let addr = SocketAddr::new(ip, number);
        let pod = ep.target_ref.as_ref().filter(|r| r.kind.as_deref() == Some("Pod")).and_then(|r| {
            let name = r.name.as_deref().filter(|n| is_object_name(n))?;
            Some(PodRef {
                namespace: r.namespace.clone().filter(|n| is_object_name(n)),
                name: name.to_string(),
                uid: r.uid.clone().filter(|u| u.len() <= MAX_NAME),
            })
        });
        let id = pod.as_ref().map(|p| p.name.clone()).unwrap_or_else(|| addr.to_string());
        let bounded = |s: &Option<String>| s.clone().filter(|s| s.len() <= MAX_NAME);
        out.push(Member { replica: Replica { id, addr, node: bounded(&ep.node_name), zone: bounded(&ep.zone), version: None }, pod });
    }
    Ok(out)
}

/// The slices of one Service, by name, as the list and watch leave them.
#[derive(Debug, Clone, Default)]
pub struct SliceSet {
    service: String,
    slices: BTreeMap<String, EndpointSlice>,
}

impl SliceSet {
    pub fn new(service: &str) -> Self {
        SliceSet { service: service.to_string(), slices: BTreeMap::new() }
    }

    /// Replaces every slice with a list's items.
    pub fn replace(&mut self, items: Vec<EndpointSlice>) {
        self.slices.clear();
        for s in items {
            self.upsert(s);
        }
    }

    /// Adds or replaces a slice; one that no longer names the Service (or has no name) is
    /// dropped.
    pub fn upsert(&mut self, slice: EndpointSlice) {
        let Some(name) = slice.metadata.name.clone() else { return };
        if slice.metadata.labels.get(SERVICE_NAME_LABEL).is_some_and(|s| *s != self.service) {
            self.slices.remove(&name);
            return;
        }
        self.slices.insert(name, slice);
    }

    pub fn remove(&mut self, slice: &EndpointSlice) {
        if let Some(name) = &slice.metadata.name {
            self.slices.remove(name);
        }
    }

    pub fn len(&self) -> usize {
        self.slices.len()
    }

    pub fn is_empty(&self) -> bool {
        self.slices.is_empty()
    }

    /// Every ready member across the slices, one per id (a dual-stack pod in two slices keeps
    /// its lowest address), sorted by id; and the slices whose port did not match.
    pub fn members(&self, port: &PortRef) -> (Vec<Member>, Vec<(String, SliceProblem)>) {
        let mut by_id: BTreeMap<String, Member> = BTreeMap::new();
        let mut problems = Vec::new();
        for (name, slice) in &self.slices {
            match slice_members(slice, port) {
                Ok(members) => {
                    for m in members {
                        match by_id.get(&m.replica.id) {
                            Some(existing) if existing.replica.addr <= m.replica.addr => {}
                            _ => {
                                by_id.insert(m.replica.id.clone(), m);
                            }
                        }
                    }
                }
                Err(p) => problems.push((name.clone(), p)),
            }
        }
        (by_id.into_values().collect(), problems)
    }
}

/// Splits a byte stream into lines, refusing a line longer than `max` bytes.
#[derive(Debug)]
pub struct LineSplitter {
    buf: Vec<u8>,
    max: usize,
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("a watch line exceeded {0} bytes")]
pub struct LineTooLong(pub usize);

impl LineSplitter {
    pub fn new(max: usize) -> Self {
        LineSplitter { buf: Vec::new(), max }
    }

    /// Adds a chunk; returns the complete lines in it (without `\n` or `\r\n`, empty ones
    /// dropped), or an error once a line grows past the cap.
    pub fn push(&mut self, chunk: &[u8]) -> Result<Vec<Vec<u8>>, LineTooLong> {
        let mut lines = Vec::new();
        let mut rest = chunk;
        while let Some(i) = rest.iter().position(|b| *b == b'\n') {
            if self.buf.len() + i > self.max {
                return Err(LineTooLong(self.max));
            }
            self.buf.extend_from_slice(&rest[..i]);
            rest = &rest[i + 1..];
            let mut line = std::mem::take(&mut self.buf);
            if line.last() == Some(&b'\r') {
                line.pop();
            }
            if !line.iter().all(u8::is_ascii_whitespace) {
                lines.push(line);
            }
        }
        if self.buf.len() + rest.len() > self.max {
            return Err(LineTooLong(self.max));
        }
        self.buf.extend_from_slice(rest);
        Ok(lines)
    }

    /// What is left when the stream ends (a last line without `\n`), if anything.
    pub fn finish(&mut self) -> Option<Vec<u8>> {
        let mut line = std::mem::take(&mut self.buf);
        if line.last() == Some(&b'\r') {
            line.pop();
        }
        (!line.iter().all(u8::is_ascii_whitespace)).then_some(line)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn null_lists_read_as_empty() {
        let list =
            parse_list(br#"{"kind":"EndpointSliceList","metadata":{"resourceVersion":"7"},"items":[{"metadata":{"name":"s"},"endpoints":null,"ports":null}]}"#)
                .unwrap();
        assert_eq!(list.metadata.resource_version.as_deref(), Some("7"));
        assert!(list.items[0].endpoints.is_empty());
    }

    #[test]
    fn ready_and_not_terminating_only() {
        let slice: EndpointSlice = serde_json::from_str(
            r#"{"metadata":{"name":"s"},"addressType":"IPv4","ports":[{"name":"http","port":8000,"protocol":"TCP"}],"endpoints":[
                {"addresses":["10.0.0.1"],"conditions":{"ready":true},"targetRef":{"kind":"Pod","name":"p1","uid":"u1"},"nodeName":"n1","zone":"z1"},
                {"addresses":["10.0.0.2"],"conditions":{}},
                {"addresses":["10.0.0.3"],"conditions":{"ready":false}},
                {"addresses":["10.0.0.4"],"conditions":{"ready":true,"terminating":true}},
                {"addresses":["not-an-ip"],"conditions":{"ready":true}},
                {"addresses":[],"conditions":{"ready":true}}
            ]}"#,
        )
        .unwrap();
        let ids: Vec<String> = slice_members(&slice, &PortRef::Name("http".into())).unwrap().into_iter().map(|m| m.replica.id).collect();
        assert_eq!(ids, ["p1", "10.0.0.2:8000"]);
        assert_eq!(slice_port(&slice, &PortRef::Number(8000)), Some(8000));
        assert!(matches!(slice_members(&slice, &PortRef::Name("grpc".into())), Err(SliceProblem::NoSuchPort(p)) if p == ["http:8000"]));
    }

    #[test]
    fn splitter_caps_lines_and_handles_crlf() {
        let mut s = LineSplitter::new(8);
        assert_eq!(s.push(b"ab\r\n\ncd").unwrap(), [b"ab".to_vec()]);
        assert_eq!(s.push(b"e\n").unwrap(), [b"cde".to_vec()]);
        assert_eq!(s.push(b"123456789"), Err(LineTooLong(8)));
        let mut s = LineSplitter::new(8);
        assert_eq!(s.push(b"12345678\n").unwrap(), [b"12345678".to_vec()]);
        assert_eq!(s.push(b"tail").unwrap(), Vec::<Vec<u8>>::new());
        assert_eq!(s.finish(), Some(b"tail".to_vec()));
    }

    #[test]
    fn names_and_versions_are_bounded() {
        assert!(is_object_name("vllm-6d4f9c7b8-x2x4k"));
        assert!(!is_object_name("../etc"));
        assert!(!is_object_name(".."));
        assert!(!is_object_name("-a"));
        assert!(!is_object_name(""));
        assert_eq!(version_value("0.6.3").as_deref(), Some("0.6.3"));
        assert_eq!(version_value(&"x".repeat(64)), None);
        assert_eq!(version_value("a b"), None);
    }
}
