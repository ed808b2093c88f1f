//! HTTP to the targets: the lean HTTP/1.1 client with kernel receive stamps for plain-`http`
//! probes, the general client (TLS, proxies, HTTP/2) beside it, and the API keys they carry.

pub mod http1;
pub mod receive_stamp;
pub mod secret;
pub mod target;
