//! Error text and classes: an error with its sources for logs, and the class of a failure to get
//! an answer's head through the general client.

use super::runtime::TargetRuntime;
use crate::probe::outcome::{ErrorClass, Failure};

/// The error and all its sources, joined, for logs.
pub fn error_chain(err: &dyn std::error::Error) -> String {
    let mut text = err.to_string();
    let mut source = err.source();
    while let Some(s) = source {
        text.push_str(": ");
        text.push_str(&s.to_string());
        source = s.source();
    }
    text
}

/// Classifies a failure to get response headers.
pub fn classify_send_error(err: &reqwest::Error, target: &TargetRuntime) -> Failure {
    let chain = target.redact(&error_chain(err));
    // Classify from the error's sources only: reqwest's own message names the URL, and a host
    // called `vllm-tls` must not make a refused connection a TLS error.
    let mut causes = String::new();
    let mut invalid_answer = false;
    let mut source = std::error::Error::source(err);
    while let Some(s) = source {
        causes.push_str(&s.to_string().to_ascii_lowercase());
        causes.push(' ');
        invalid_answer |= s.downcast_ref::<hyper::Error>().is_some_and(hyper::Error::is_parse);
        source = s.source();
    }
    let lower = causes;
    let class = if err.is_connect() && err.is_timeout() {
        ErrorClass::TimeoutConnect
    } else if ["certificate", "tls", "handshake", "fatal alert"].iter().any(|w| lower.contains(w)) {
        // rustls errors reach us as text inside hyper's: e.g. `invalid peer certificate:
        // UnknownIssuer`, or `received fatal alert: CertificateRequired` (mTLS, no client cert).
        ErrorClass::Tls
    } else if invalid_answer {
        // The server answered with a head that is not valid HTTP/1.x (hyper's parse errors:
        // status line, a field, framing, a head too large): an invalid answer, not a failed
        // connection.
        ErrorClass::Parse
    } else {
        // The connect failed (`is_connect`), or the connection was closed or reset before a
        // response head (hyper's incomplete message): either way no answer came.
        ErrorClass::Connect
    };
    Failure::new(class, chain)
}
