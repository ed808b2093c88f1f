//! Replicas from a Kubernetes Service's EndpointSlices, with list/watch semantics: list (paged,
//! remembering `metadata.resourceVersion`), then watch from that version (bookmarks on),
//! re-watch from the last version seen when a stream ends, re-list on `410 Gone` (an HTTP
//! status or an `ERROR` event) and after any other error. Versions come from a pod label, one
//! Pod `get` per pod (cached by name and uid); a 403 there means "version unknown".
//!
//! Plain HTTP through the crate's reqwest/rustls stack: every answer is read bounded (a list
//! page, a watch line, a Pod), every request has a timeout, and errors back off 1 s doubling to
//! 30 s. In-cluster access uses the pod's service account (`KUBERNETES_SERVICE_HOST`/`_PORT`,
//! the token re-read when it rotates, the cluster CA, the pod's namespace).

//!
//! Files: `model.rs` (the API objects, parsed leniently, and the replica set they make),
//! `api.rs` (requests to the API server), `watch.rs` (the list/watch loop).

mod api;
pub mod model;
mod watch;

pub use api::{Api, ApiError, MAX_LIST_BYTES, MAX_POD_BYTES, MAX_WATCH_LINE, SERVICE_ACCOUNT_DIR, in_cluster};
pub(super) use watch::run;
