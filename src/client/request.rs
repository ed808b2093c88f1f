//! A probe's request: prepared for the lean client or the general one, then sent.

use reqwest::header::HeaderMap;

use super::response::ProbeResponse;
use super::runtime::TargetRuntime;
use crate::probe::handover::{Write, Written};
use crate::probe::outcome::{ErrorClass, Failure};

impl TargetRuntime {
    /// A probe request, ready to send: `POST base_url + path` with the target's headers, then
    /// `headers`, and `body`. Through the lean client where it applies.
    pub fn prepare(&self, path: &str, headers: HeaderMap, body: Vec<u8>) -> Result<PreparedRequest, Failure> {
        let Some(lean) = &self.lean else {
            let mut req = self.request(reqwest::Method::POST, path)?;
            for (name, value) in headers.iter() {
                req = req.header(name, value);
            }
            return Ok(PreparedRequest::General(req.body(body)));
        };
        let mut all = self.own_headers()?;
        for (name, value) in headers.iter() {
            all.append(name, value.clone());
        }
        Ok(PreparedRequest::Lean(lean.prepare(path, &all, &body)))
    }

    /// Sends a prepared probe request (the rest of it, when the dispatcher wrote the first
    /// `written` bytes) and returns once the answer's head is in.
    pub async fn send(&self, request: PreparedRequest, written: Option<Written>) -> Result<ProbeResponse, Failure> {
        let request = match request {
            PreparedRequest::Lean(request) => request,
            PreparedRequest::General(req) => {
                let (response, reusable) = self.send_general_noting(req).await?;
                return Ok(ProbeResponse::General { response, piece: bytes::Bytes::new(), reusable });
            }
        };
        match request.send(written).await {
            Ok(response) => Ok(ProbeResponse::Lean(response)),
            Err(crate::client::http1::SendError::ConnectTimeout(detail)) => Err(Failure::new(ErrorClass::TimeoutConnect, detail)),
            Err(crate::client::http1::SendError::Connect(detail)) => Err(Failure::new(ErrorClass::Connect, detail)),
            Err(crate::client::http1::SendError::InvalidAnswer(detail)) => Err(Failure::new(ErrorClass::Parse, detail)),
        }
    }
}

/// A probe request ready to send, for the lean client or the general one.
pub enum PreparedRequest {
    Lean(crate::client::http1::Request),
    General(reqwest::RequestBuilder),
}

impl PreparedRequest {
    /// Opens the lean client's connection for the request before `by`, when it has none.
    pub async fn connect_before(&mut self, by: std::time::Instant) {
        if let PreparedRequest::Lean(request) = self {
            request.connect_before(by).await;
        }
    }

    /// Opens the lean client's connection for a request sent at once, when it has none (see
    /// `http1::Request::connect_first`).
    pub async fn connect_first(&mut self) {
        if let PreparedRequest::Lean(request) = self {
            request.connect_first().await;
        }
    }

    /// Gives back the lean client's connection of a request that will not be sent.
    pub fn withdraw(&mut self) {
        if let PreparedRequest::Lean(request) = self {
            request.withdraw();
        }
    }

    /// The dispatcher's write of the request at its send time, where it can do it (the lean
    /// client with a connection).
    pub fn handover(&self) -> Option<Write> {
        match self {
            PreparedRequest::Lean(request) => request.handover(),
            PreparedRequest::General(_) => None,
        }
    }
}
