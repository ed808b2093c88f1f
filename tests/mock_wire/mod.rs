//! Raw HTTP for the mock's wire tests: send a request and keep every body chunk with its
//! arrival time, or note the error that ended the body.

use std::time::{Duration, Instant};

use futures_util::StreamExt;

/// Body chunks with arrival times (from send), or the error that ended the body.
pub struct Got {
    pub status: u16,
    pub headers: reqwest::header::HeaderMap,
    pub chunks: Vec<(Duration, Vec<u8>)>,
    pub error: bool,
}

impl Got {
    pub fn body(&self) -> Vec<u8> {
        self.chunks.iter().flat_map(|c| c.1.clone()).collect()
    }
}

/// Sends the request and reads the whole body chunk by chunk.
pub async fn collect(rb: reqwest::RequestBuilder) -> Result<Got, reqwest::Error> {
    let t0 = Instant::now();
    let r = rb.send().await?;
    let (status, headers) = (r.status().as_u16(), r.headers().clone());
    let mut s = r.bytes_stream();
    let (mut chunks, mut error) = (Vec::new(), false);
    while let Some(c) = s.next().await {
        match c {
            Ok(b) => chunks.push((t0.elapsed(), b.to_vec())),
            Err(_) => {
                error = true;
                break;
            }
        }
    }
    Ok(Got { status, headers, chunks, error })
}
