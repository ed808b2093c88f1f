//! The probe clients against real loopback servers: both clients agree on every fault, hostile and
//! malformed answers, keep-alive, redirects, TLS, log safety.
//! One test binary for the group: the crate is linked once, not once per file.

#[path = "../common/mod.rs"]
mod common;

mod clients_agree;
mod exec_connect;
mod exec_replay;
mod hostile_server;
mod http1_keepalive;
mod impossible_usage;
mod interim_answers;
mod keepalive_idle_race;
mod log_forging;
mod malformed_heads;
mod redirect_secrets;
mod redirects;
mod tls_loopback;
