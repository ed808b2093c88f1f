//! `targets[].discover` and `targets[].replicas`: probe every replica behind a target.

use std::path::PathBuf;
use std::time::Duration;

use serde::Deserialize;

use super::check::Checker;
use super::duration::RawDuration;

/// `discover:` as written.
#[derive(Debug, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields, expecting = "a mapping with kind (dns or kubernetes) and its fields")]
pub struct RawDiscover {
    /// `dns` (A/AAAA records of `name`) or `kubernetes` (EndpointSlices of `service`).
    pub kind: String,
    /// dns: the name to resolve (e.g. a headless Service `vllm-headless.llm.svc`).
    pub name: Option<String>,
    /// dns: the port of every replica; kubernetes: the EndpointSlice port, a number or a name.
    #[schemars(schema_with = "port_schema")]
    pub port: Option<serde_norway::Value>,
    /// dns: how often the name is re-resolved. Default `30s`.
    pub interval: Option<RawDuration>,
    /// kubernetes: the Service whose EndpointSlices list the replicas.
    pub service: Option<String>,
    /// kubernetes: default the prober pod's own namespace.
    pub namespace: Option<String>,
    /// kubernetes: a pod label read as the replica's version (`app.kubernetes.io/version`).
    pub version_label: Option<String>,
    /// kubernetes: an API server from outside the cluster; default in-cluster.
    pub api: Option<RawApiAccess>,
}

/// `discover.port`: checked in validation; the schema names the two forms.
fn port_schema(_: &mut schemars::SchemaGenerator) -> schemars::Schema {
    schemars::json_schema!({"type": ["integer", "string", "null"]})
}

#[derive(Debug, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct RawApiAccess {
    pub url: String,
    pub token_file: Option<String>,
    pub ca_file: Option<String>,
}

/// `replicas:` as written.
#[derive(Debug, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields, expecting = "a mapping with rate, max, grace")]
pub struct RawReplicas {
    /// `split` (default: the target's rate spread round-robin over its replicas) or `per_replica`
    /// (every probe goes to every replica at the same moment: each replica gets the full rate).
    pub rate: Option<String>,
    /// Most replicas probed at once (default 16); beyond it, the probed ones rotate at every
    /// discovery change, so label cardinality stays bounded.
    pub max: Option<u64>,
    /// Series of a replica that disappeared are removed this long after (default `5m`).
    pub grace: Option<RawDuration>,
}

/// How a target's rate is shared by its replicas.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ReplicaRate {
    Split,
    PerReplica,
}

/// The validated pair.
#[derive(Debug, Clone, PartialEq)]
pub struct Replicas {
    pub discover: DiscoverSpec,
    pub rate: ReplicaRate,
    pub max: usize,
    pub grace: Duration,
}

const DEFAULT_MAX_REPLICAS: u64 = 16;
/// More replicas than this per target is a config error (series per replica add up).
const MAX_REPLICAS: u64 = 256;

pub(super) fn replicas(path: &str, discover: Option<&RawDiscover>, raw: Option<&RawReplicas>, c: &mut Checker) -> Option<Replicas> {
    let Some(d) = discover else {
        if raw.is_some() {
            c.error(format!("{path}.replicas"), "needs discover: (dns or kubernetes) to find the replicas");
        }
        return None;
    };
    let at = format!("{path}.discover");
    let port = |c: &mut Checker| -> Option<PortRef> {
        match &d.port {
            Some(serde_norway::Value::Number(n)) => match n.as_u64().and_then(|n| u16::try_from(n).ok()).filter(|n| *n > 0) {
                Some(p) => Some(PortRef::Number(p)),
                None => {
                    c.error(format!("{at}.port"), format!("must be a port 1 to 65535, got {n:?}"));
                    None
                }
            },
            Some(serde_norway::Value::String(s)) if !s.is_empty() => Some(PortRef::Name(s.clone())),
            Some(_) => {
                c.error(format!("{at}.port"), "must be a port number or a port name");
                None
            }
            None => {
                c.error(format!("{at}.port"), "required: the replicas' port");
                None
            }
        }
    };
    let spec = match d.kind.as_str() {
        "dns" => {
            let name = d.name.clone().filter(|n| !n.is_empty());
            if name.is_none() {
                c.error(format!("{at}.name"), "required for kind dns: the name whose A/AAAA records are the replicas");
            }
            let port = match port(c) {
                Some(PortRef::Number(p)) => Some(p),
                Some(PortRef::Name(_)) => {
                    c.error(format!("{at}.port"), "kind dns needs a port number");
                    None
                }
                None => None,
            };
            let interval = d.interval.as_ref().map_or(Duration::from_secs(30), |i| c.positive_duration(&format!("{at}.interval"), i));
            for (field, set) in
                [("service", d.service.is_some()), ("namespace", d.namespace.is_some()), ("version_label", d.version_label.is_some()), ("api", d.api.is_some())]
            {
                if set {
                    c.error(format!("{at}.{field}"), "only for kind kubernetes");
                }
            }
            DiscoverSpec::Dns { name: name.unwrap_or_default(), port: port.unwrap_or(1), interval }
        }
        "kubernetes" => {
            let service = d.service.clone().filter(|s| !s.is_empty());
            if service.is_none() {
                c.error(format!("{at}.service"), "required for kind kubernetes: the Service whose EndpointSlices list the replicas");
            }
            if d.name.is_some() || d.interval.is_some() {
                c.error(&at, "name and interval are only for kind dns (kubernetes watches)");
            }
            let api = d.api.as_ref().map(|a| {
                c.http_url(&format!("{at}.api.url"), &a.url);
                ApiAccess { url: a.url.clone(), token_file: a.token_file.as_ref().map(Into::into), ca_file: a.ca_file.as_ref().map(Into::into) }
            });
            DiscoverSpec::Kubernetes(KubernetesSpec {
                service: service.unwrap_or_default(),
                namespace: d.namespace.clone(),
                port: port(c).unwrap_or(PortRef::Number(1)),
                version_label: d.version_label.clone(),
                api,
            })
        }
        other => {
            c.error(format!("{at}.kind"), format!("unknown kind \"{other}\": expected dns or kubernetes"));
            return None;
        }
    };
    let rate = match raw.and_then(|r| r.rate.as_deref()) {
        None | Some("split") => ReplicaRate::Split,
        Some("per_replica") => ReplicaRate::PerReplica,
        Some(other) => {
            c.error(format!("{path}.replicas.rate"), format!("unknown \"{other}\": expected split or per_replica"));
            ReplicaRate::Split
        }
    };
    let max = raw.and_then(|r| r.max).unwrap_or(DEFAULT_MAX_REPLICAS);
    if !(1..=MAX_REPLICAS).contains(&max) {
        c.error(format!("{path}.replicas.max"), format!("must be 1 to {MAX_REPLICAS}, got {max}"));
    }
    let grace = raw.and_then(|r| r.grace.as_ref()).map_or(Duration::from_secs(300), |g| c.duration(&format!("{path}.replicas.grace"), g));
    Some(Replicas { discover: spec, rate, max: max.clamp(1, MAX_REPLICAS) as usize, grace })
}

/// Where a target's replicas come from.
#[derive(Debug, Clone, PartialEq)]
pub enum DiscoverSpec {
    /// Every A/AAAA record of `name`, at `port`, re-resolved every `interval`.
    Dns { name: String, port: u16, interval: Duration },
    /// The ready endpoints of a Kubernetes Service's EndpointSlices.
    Kubernetes(KubernetesSpec),
}

/// A Kubernetes Service whose EndpointSlices name the replicas.
#[derive(Debug, Clone, PartialEq)]
pub struct KubernetesSpec {
    pub service: String,
    /// Default: the pod's own namespace from the service-account files (else `default`).
    pub namespace: Option<String>,
    /// The EndpointSlice port (the pods' target port) by name or number.
    pub port: PortRef,
    /// A pod label (e.g. `app.kubernetes.io/version`, `pod-template-hash`) read from each Pod
    /// as the replica's version, when the service account may `get` pods.
    pub version_label: Option<String>,
    /// `None`: in-cluster (`KUBERNETES_SERVICE_HOST`/`_PORT` and the service-account files).
    pub api: Option<ApiAccess>,
}

/// An EndpointSlice port, by name or by number. Either must match a TCP port the slice lists.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PortRef {
    Name(String),
    Number(u16),
}

impl std::fmt::Display for PortRef {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            PortRef::Name(n) => write!(f, "{n:?}"),
            PortRef::Number(n) => write!(f, "{n}"),
        }
    }
}

/// An API server reached from outside the cluster (or an explicit in-cluster setup).
#[derive(Debug, Clone, PartialEq)]
pub struct ApiAccess {
    /// `https://host:port` (a path prefix is kept).
    pub url: String,
    /// A bearer token, re-read when the file changes; `None`: no `Authorization` header.
    pub token_file: Option<PathBuf>,
    /// PEM certificates trusted besides the system roots.
    pub ca_file: Option<PathBuf>,
}
