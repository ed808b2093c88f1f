//! Sending through a target's general client: redirects followed by hand (when the target asks),
//! every secret header dropped on a hop to another origin.

use reqwest::header::{HeaderMap, HeaderName};

use super::classify::classify_send_error;
use super::general::Reusable;
use super::runtime::TargetRuntime;
use crate::probe::outcome::Failure;

impl TargetRuntime {
    /// Sends a request through the general client, following redirects itself when the target
    /// sets `follow_redirects` (the client follows none): at most `MAX_REDIRECTS`, then the last
    /// `3xx` answer is the answer. On a hop to another origin (scheme, host, port) every secret
    /// header is dropped first: the API key, `Cookie`/`Proxy-Authorization`, each `headers_from`
    /// header and any value marked sensitive, as browsers and curl do. `headers` stay.
    pub async fn send_general(&self, request: reqwest::RequestBuilder) -> Result<reqwest::Response, Failure> {
        Ok(self.send_general_noting(request).await?.0)
    }

    /// `send_general`, with the answer's connection where it can carry another request once the
    /// answer ends (`Reusable::ended`: what the client learns the server's idle close from).
    pub(super) async fn send_general_noting(&self, request: reqwest::RequestBuilder) -> Result<(reqwest::Response, Option<Reusable>), Failure> {
        let mut request = request.build().map_err(|e| classify_send_error(&e, self))?;
        let origin = Origin::of(request.url());
        let mut hops = 0;
        loop {
            let next = if self.config.follow_redirects && hops < MAX_REDIRECTS { request.try_clone() } else { None };
            // The pool's connection task reads a kept-alive connection (and so sees a close the
            // server sent while it was idle) before it writes the request, but only once the
            // runtime's reactor has seen the close: yielding once lets the reactor run first, so
            // a close that has arrived sends the request on a new connection instead of into the
            // closed one.
            tokio::task::yield_now().await;
            let sending = self.general.sending();
            let response = sending.client.execute(request).await.map_err(|e| classify_send_error(&e, self))?;
            let reusable = self.general.answered(&sending, &response, hops == 0);
            let status = response.status();
            let Some(mut next) = next.filter(|_| REDIRECTS.contains(&status.as_u16())) else { return Ok((response, reusable)) };
            let location = response.headers().get(reqwest::header::LOCATION).and_then(|v| v.to_str().ok());
            let Some(url) = location.and_then(|l| response.url().join(l).ok()).filter(|u| matches!(u.scheme(), "http" | "https")) else {
                return Ok((response, reusable));
            };
            // 303, and 301/302 after a POST, are followed with a GET and no body (as reqwest did).
            let to_get = status == reqwest::StatusCode::SEE_OTHER && next.method() != reqwest::Method::HEAD
                || matches!(status.as_u16(), 301 | 302) && next.method() == reqwest::Method::POST;
            if to_get {
                *next.method_mut() = reqwest::Method::GET;
                *next.body_mut() = None;
                for name in [reqwest::header::CONTENT_TYPE, reqwest::header::CONTENT_LENGTH, reqwest::header::CONTENT_ENCODING] {
                    next.headers_mut().remove(name);
                }
            }
            if Origin::of(&url) != origin {
                self.drop_secret_headers(next.headers_mut());
            }
            *next.url_mut() = url;
            request = next;
            hops += 1;
        }
    }

    /// Removes every secret header: the API key (`Authorization`), cookies, proxy credentials,
    /// the `headers_from` headers, and any value marked sensitive.
    fn drop_secret_headers(&self, headers: &mut HeaderMap) {
        for name in [reqwest::header::AUTHORIZATION, reqwest::header::COOKIE, reqwest::header::PROXY_AUTHORIZATION] {
            headers.remove(name);
        }
        headers.remove("cookie2");
        for (name, _) in self.secret_headers.iter() {
            if let Ok(name) = HeaderName::from_bytes(name.as_bytes()) {
                headers.remove(name);
            }
        }
        let sensitive: Vec<HeaderName> = headers.iter().filter(|(_, v)| v.is_sensitive()).map(|(n, _)| n.clone()).collect();
        for name in sensitive {
            headers.remove(name);
        }
    }
}

/// Redirects followed when a target sets `follow_redirects: true`.
const MAX_REDIRECTS: usize = 5;

/// The statuses followed as redirects.
const REDIRECTS: [u16; 5] = [301, 302, 303, 307, 308];

/// A URL's origin: scheme, host and port (the scheme's default port when none is written).
#[derive(PartialEq)]
struct Origin(String, Option<String>, Option<u16>);

impl Origin {
    fn of(url: &reqwest::Url) -> Origin {
        Origin(url.scheme().to_owned(), url.host_str().map(str::to_ascii_lowercase), url.port_or_known_default())
    }
}
