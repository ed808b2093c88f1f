//! The list/watch loop over one Service's EndpointSlices, and the Pod versions it reads.

use std::collections::{BTreeSet, HashMap};
use std::path::Path;
use std::time::{Duration, Instant};

use futures_util::StreamExt;

use super::api::{Api, ApiError, MAX_WATCH_LINE, SERVICE_ACCOUNT_DIR};
use super::model::{self, EndpointSlice, LineSplitter, Member, Pod, PodRef, SliceSet, WatchEvent};
use crate::replicas::discover::KubernetesSpec;
use crate::replicas::discover::replica::{Backoff, Replica, Streak};

/// A watch that ends this soon without an event counts as an error (no tight re-watch loop).
const WATCH_MIN: Duration = Duration::from_secs(1);
/// A Pod `get` that failed (other than 403/404) is retried after this long.
const POD_RETRY: Duration = Duration::from_secs(60);
/// Pod `get`s in flight at once.
const POD_CONCURRENCY: usize = 8;

/// How one watch ended.
#[derive(Debug)]
enum WatchEnd {
    /// The stream ended (server timeout, closed connection): re-watch from the last version.
    Ended { events: usize },
    /// 410: re-list.
    Gone,
    /// The stream broke off: re-watch after the backoff.
    Broken(String),
    /// A bad answer (error status, over-long line, unparsable event, ERROR event): re-list after
    /// the backoff.
    Failed(String),
}

/// What the pod `get` cache knows about one pod.
#[derive(Debug, Clone)]
enum Version {
    Known(Option<String>),
    Failed(Instant),
}

struct Watcher<'a> {
    spec: &'a KubernetesSpec,
    api: Api,
    slices: SliceSet,
    /// By `namespace/name`: the pod's uid when read and what its `get` gave.
    versions: HashMap<String, (Option<String>, Version)>,
    /// Slices whose port did not match, warned about once.
    warned_slices: BTreeSet<String>,
    pods_forbidden_logged: bool,
    pod_failure_logged: bool,
}

pub(in crate::replicas::discover) async fn run(spec: &KubernetesSpec, out: &tokio::sync::watch::Sender<Vec<Replica>>) {
    let namespace = spec.namespace.as_deref().unwrap_or("(own namespace)");
    let mut streak = Streak::new(format!("kubernetes discovery of service {}/{}", namespace, spec.service));
    let mut backoff = Backoff::new();
    let api = loop {
        match Api::new(spec, Path::new(SERVICE_ACCOUNT_DIR)) {
            Ok(api) => break api,
            Err(e) => {
                streak.fail(&e);
                tokio::time::sleep(backoff.next()).await;
            }
        }
    };
    let mut w = Watcher {
        spec,
        api,
        slices: SliceSet::new(&spec.service),
        versions: HashMap::new(),
        warned_slices: BTreeSet::new(),
        pods_forbidden_logged: false,
        pod_failure_logged: false,
    };
    loop {
        let mut rv = match w.api.list().await {
            Ok((items, rv)) => {
                w.slices.replace(items);
                streak.ok();
                backoff.reset();
                w.publish(out).await;
                rv
            }
            Err(e) => {
                streak.fail(&format!("list: {e}"));
                tokio::time::sleep(backoff.next()).await;
                continue;
            }
        };
        loop {
            let started = Instant::now();
            match w.watch_once(&mut rv, out, &mut streak).await {
                WatchEnd::Ended { events } if events == 0 && started.elapsed() < WATCH_MIN => {
                    tracing::debug!(service = %spec.service, "watch ended at once; re-watching after the backoff");
                    tokio::time::sleep(backoff.next()).await;
                }
                WatchEnd::Ended { .. } => backoff.reset(),
                WatchEnd::Gone => {
                    tracing::debug!(service = %spec.service, "resource version expired: re-listing");
                    break;
                }
                WatchEnd::Broken(e) => {
                    streak.fail(&format!("watch: {e}"));
                    tokio::time::sleep(backoff.next()).await;
                }
                WatchEnd::Failed(e) => {
                    streak.fail(&format!("watch: {e}"));
                    tokio::time::sleep(backoff.next()).await;
                    break;
                }
            }
        }
    }
}

impl Watcher<'_> {
    async fn watch_once(&mut self, rv: &mut String, out: &tokio::sync::watch::Sender<Vec<Replica>>, streak: &mut Streak) -> WatchEnd {
        let mut resp = match self.api.watch(rv).await {
            Ok(r) => r,
            Err(ApiError::Gone(_)) => return WatchEnd::Gone,
            Err(ApiError::Transport(e)) => return WatchEnd::Broken(e),
            Err(e) => return WatchEnd::Failed(e.to_string()),
        };
        // An open watch ends a failure streak that a broken stream started.
        streak.ok();
        let mut lines = LineSplitter::new(MAX_WATCH_LINE);
        let mut events = 0;
        loop {
            let (batch, end) = match resp.chunk().await {
                Ok(Some(chunk)) => match lines.push(&chunk) {
                    Ok(batch) => (batch, None),
                    Err(e) => return WatchEnd::Failed(e.to_string()),
                },
                Ok(None) => (lines.finish().into_iter().collect(), Some(WatchEnd::Ended { events: 0 })),
                Err(e) if e.is_timeout() => (Vec::new(), Some(WatchEnd::Ended { events: 0 })),
                Err(e) => (Vec::new(), Some(WatchEnd::Broken(format!("stream broke off: {}", crate::client::error_chain(&e))))),
            };
            let mut changed = false;
            for line in batch {
                let event = match model::parse_watch_event(&line) {
                    Ok(ev) => ev,
                    Err(e) => return WatchEnd::Failed(format!("watch event: {e}")),
                };
                events += 1;
                match event {
                    WatchEvent::Added(s) | WatchEvent::Modified(s) => {
                        remember_version(rv, &s);
                        self.slices.upsert(s);
                        changed = true;
                    }
                    WatchEvent::Deleted(s) => {
                        remember_version(rv, &s);
                        self.slices.remove(&s);
                        changed = true;
                    }
                    WatchEvent::Bookmark(v) => {
                        if let Some(v) = v.filter(|v| !v.is_empty()) {
                            *rv = v;
                        }
                    }
                    WatchEvent::Error(status) if status.code == Some(410) => return WatchEnd::Gone,
                    WatchEvent::Error(status) => {
                        let message: String = status.message.unwrap_or_default().chars().take(300).collect();
                        return WatchEnd::Failed(format!("ERROR event (code {}): {message}", status.code.unwrap_or(0)));
                    }
                }
            }
            if changed {
                self.publish(out).await;
            }
            match end {
                Some(WatchEnd::Ended { .. }) => return WatchEnd::Ended { events },
                Some(other) => return other,
                None => {}
            }
        }
    }

    /// Publishes the current members, with versions when configured.
    async fn publish(&mut self, out: &tokio::sync::watch::Sender<Vec<Replica>>) {
        let (members, problems) = self.slices.members(&self.spec.port);
        let mut still = BTreeSet::new();
        for (slice, problem) in problems {
            if !self.warned_slices.contains(&slice) {
                let model::SliceProblem::NoSuchPort(ports) = &problem;
                tracing::warn!(service = %self.spec.service, slice, "no TCP port {} in this EndpointSlice (it lists {ports:?}); its endpoints are not probed", self.spec.port);
            }
            still.insert(slice);
        }
        self.warned_slices = still;
        let replicas = match &self.spec.version_label {
            None => members.into_iter().map(|m| m.replica).collect(),
            Some(label) => self.with_versions(label, members).await,
        };
        crate::replicas::discover::replica::publish(out, replicas);
    }

    fn pod_key(&self, pod: &PodRef) -> String {
        format!("{}/{}", pod.namespace.as_deref().unwrap_or(self.api.namespace()), pod.name)
    }

    async fn with_versions(&mut self, label: &str, members: Vec<Member>) -> Vec<Replica> {
        let now = Instant::now();
        let wanted: Vec<(String, PodRef)> = members
            .iter()
            .filter_map(|m| m.pod.clone())
            .map(|p| (self.pod_key(&p), p))
            .filter(|(key, pod)| match self.versions.get(key) {
                None => true,
                Some((uid, _)) if pod.uid.is_some() && *uid != pod.uid => true,
                Some((_, Version::Failed(at))) => now.duration_since(*at) >= POD_RETRY,
                Some((_, Version::Known(_))) => false,
            })
            .collect();
        let api = &self.api;
        let fetched: Vec<(String, PodRef, Result<Option<Pod>, ApiError>)> = futures_util::stream::iter(wanted)
            .map(|(key, pod)| async move {
                let ns = pod.namespace.clone().unwrap_or_else(|| api.namespace().to_string());
                let got = api.pod(&ns, &pod.name).await;
                (key, pod, got)
            })
            .buffer_unordered(POD_CONCURRENCY)
            .collect()
            .await;
        for (key, pod, got) in fetched {
            let entry = match got {
                Ok(Some(p)) if pod.uid.is_some() && p.metadata.uid.is_some() && p.metadata.uid != pod.uid => Version::Failed(now),
                Ok(Some(p)) => Version::Known(p.metadata.labels.get(label).and_then(|v| model::version_value(v))),
                Ok(None) => Version::Known(None),
                Err(ApiError::Status { code: 403, message }) => {
                    if !self.pods_forbidden_logged {
                        self.pods_forbidden_logged = true;
                        tracing::warn!(service = %self.spec.service, "may not get pods, so replica versions are unknown: {message}");
                    }
                    Version::Known(None)
                }
                Err(e) => {
                    if !self.pod_failure_logged {
                        self.pod_failure_logged = true;
                        tracing::warn!(service = %self.spec.service, pod = %pod.name, "reading the pod's version label failed (retried later): {e}");
                    }
                    Version::Failed(now)
                }
            };
            self.versions.insert(key, (pod.uid.clone(), entry));
        }
        let live: BTreeSet<String> = members.iter().filter_map(|m| m.pod.as_ref()).map(|p| self.pod_key(p)).collect();
        self.versions.retain(|k, _| live.contains(k));
        members
            .into_iter()
            .map(|m| {
                let mut r = m.replica;
                if let Some(p) = &m.pod {
                    if let Some((_, Version::Known(v))) = self.versions.get(&self.pod_key(p)) {
                        r.version = v.clone();
                    }
                }
                r
            })
            .collect()
    }
}

fn remember_version(rv: &mut String, slice: &EndpointSlice) {
    if let Some(v) = slice.metadata.resource_version.as_deref().filter(|v| !v.is_empty()) {
        *rv = v.to_string();
    }
}
