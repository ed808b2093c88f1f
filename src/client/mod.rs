//! HTTP to the targets: the lean HTTP/1.1 client with kernel receive stamps for plain-`http`
//! probes, the general client (TLS, proxies, HTTP/2) beside it, when either retires a
//! kept-alive connection, and the API keys they carry.

pub mod general;
pub mod http1;
pub mod idle;
pub mod receive_stamp;
pub mod secret;
pub mod target;
