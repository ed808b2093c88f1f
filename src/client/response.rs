//! A probe's response, from the lean client or the general one, read alike.

use reqwest::header::HeaderMap;

use super::classify::error_chain;
use super::general::Reusable;
use super::idle::SETTLE_TIME;

/// A probe's answer, from the lean client or the general one, read alike.
pub enum ProbeResponse {
    Lean(crate::client::http1::Response),
    /// `piece` holds the last body piece handed out; `reusable`, the connection, until the
    /// answer's end is read.
    General {
        response: reqwest::Response,
        piece: bytes::Bytes,
        reusable: Option<Reusable>,
    },
}

impl ProbeResponse {
    pub fn status(&self) -> reqwest::StatusCode {
        match self {
            ProbeResponse::Lean(r) => r.head.status,
            ProbeResponse::General { response, .. } => response.status(),
        }
    }

    pub fn headers(&self) -> &HeaderMap {
        match self {
            ProbeResponse::Lean(r) => &r.head.headers,
            ProbeResponse::General { response, .. } => response.headers(),
        }
    }

    /// When the head or the body piece last handed out reached the host, where the client
    /// knows (the lean client, from the kernel's receive stamps); else the caller's read time
    /// stands.
    pub fn arrived(&self) -> Option<std::time::Instant> {
        match self {
            ProbeResponse::Lean(r) => r.arrived(),
            ProbeResponse::General { .. } => None,
        }
    }

    /// After a stream's end marker: reads the body's own end briefly, so that a kept-alive
    /// connection is free for the next request (past that, the lean client drains the rest in
    /// the background; hyper reads it on its own).
    pub async fn settle(&mut self) {
        match self {
            ProbeResponse::Lean(r) => r.settle().await,
            ProbeResponse::General { response, reusable, .. } => {
                if let Ok(Ok(None)) = tokio::time::timeout(SETTLE_TIME, response.chunk()).await {
                    if let Some(connection) = reusable.take() {
                        connection.ended();
                    }
                }
            }
        }
    }

    /// The next piece of the body (`None` at its end); `Err` says why it broke off. Cancel
    /// safe: a piece is either handed out or left to the next call.
    pub async fn chunk(&mut self) -> Result<Option<&[u8]>, String> {
        match self {
            ProbeResponse::Lean(r) => r.chunk().await,
            ProbeResponse::General { response, piece, reusable } => match response.chunk().await {
                Ok(Some(bytes)) => {
                    *piece = bytes;
                    Ok(Some(&piece[..]))
                }
                Ok(None) => {
                    if let Some(connection) = reusable.take() {
                        connection.ended();
                    }
                    Ok(None)
                }
                Err(e) => Err(error_chain(&e)),
            },
        }
    }
}
