//! HTTP to the targets: a target's runtime (`runtime.rs`: its clients, key and headers), sending
//! through the general client with redirects (`redirects.rs`), a probe's request and response
//! (`request.rs`, `response.rs`), what the target serves (`discovery.rs`: model, engine,
//! version) and its `/tokenize` (`tokenize.rs`), error classes (`classify.rs`); the lean
//! HTTP/1.1 client with kernel receive stamps for plain-`http` probes (`http1.rs`,
//! `receive_stamp.rs`), the general client (TLS, proxies, HTTP/2) beside it (`general.rs`), when
//! either retires a kept-alive connection (`idle.rs`), and the API keys they carry (`secret.rs`).

mod classify;
mod discovery;
pub mod general;
pub mod http1;
pub mod idle;
pub mod receive_stamp;
mod redirects;
mod request;
mod response;
mod runtime;
pub mod secret;
pub mod tokenize;

pub use classify::error_chain;
pub use discovery::ServerIdentity;
pub use general::{USER_AGENT, plain_client};
pub use request::PreparedRequest;
pub use response::ProbeResponse;
pub use runtime::TargetRuntime;
