//! Stage 2 for `targets:`: names, URLs, api, key references, headers, timeouts.
//!
//! Secrets are never read here, and no message echoes a header value or a URL with
//! credentials.

use reqwest::header::{HeaderName, HeaderValue};

use super::duration::format_duration;
use super::kinds::{ContentCoding, ProtocolKind};
use super::raw::{RawHeaders, RawTarget, RawTimeouts, RawTls};
use super::validate::{Checker, check_name, check_unique};
use super::{HttpVersion, SecretRef, Target, Timeouts, TlsSettings};

/// Every target, plus the checks across them (at least one, unique names).
pub(super) fn targets(raws: &[RawTarget], c: &mut Checker) -> Vec<Target> {
    if raws.is_empty() {
        c.error("targets", "at least one target is required");
    }
    check_unique("targets", "target", raws.iter().map(|t| t.name.as_str()), c);
    raws.iter().enumerate().map(|(i, t)| target(&format!("targets[{i}]"), t, c)).collect()
}

fn target(path: &str, raw: &RawTarget, c: &mut Checker) -> Target {
    check_name(&format!("{path}.name"), &raw.name, c);
    let api_key = api_key(path, raw, c);
    if raw.model.as_deref() == Some("") {
        c.error(format!("{path}.model"), "must not be empty (omit it to use the first model listed by /v1/models)");
    }
    let base_url = base_url(&format!("{path}.base_url"), &raw.base_url, c);
    Target {
        name: raw.name.clone(),
        base_url,
        api: api(&format!("{path}.api"), &raw.api, c),
        model: raw.model.clone(),
        headers: headers(&format!("{path}.headers"), &raw.headers, api_key.is_some(), c),
        headers_from: headers_from(&format!("{path}.headers_from"), raw, api_key.is_some(), c),
        follow_redirects: raw.follow_redirects,
        api_key,
        timeouts: timeouts(&format!("{path}.timeouts"), &raw.timeouts, c),
        ignore_eos: raw.ignore_eos,
        stream: raw.stream,
        max_response_bytes: max_response_bytes(&format!("{path}.max_response_bytes"), raw.max_response_bytes, c),
        http_version: http_version(&format!("{path}.http_version"), &raw.http_version, c),
        tls: tls(&format!("{path}.tls"), &raw.tls, base_url_is_https(&raw.base_url), c),
        slo: super::slo::slo_override(&format!("{path}.slo"), raw.slo.as_ref(), c),
        accept_encoding: accept_encoding(&format!("{path}.accept_encoding"), raw.accept_encoding.as_deref(), c),
        replicas: super::replicas::replicas(path, raw.discover.as_ref(), raw.replicas.as_ref(), c),
    }
}

/// `accept_encoding`: codings the prober decodes; `br` and `zstd` are named as unsupported.
fn accept_encoding(path: &str, raw: Option<&[String]>, c: &mut Checker) -> Vec<ContentCoding> {
    let Some(raw) = raw else { return vec![ContentCoding::Identity] };
    if raw.is_empty() {
        c.error(path, "must name at least one coding (identity, gzip, deflate); omit it for identity");
    }
    let mut out = Vec::new();
    for (i, name) in raw.iter().enumerate() {
        match ContentCoding::parse(name) {
            Some(coding) if out.contains(&coding) => c.error(format!("{path}[{i}]"), format!("{name:?} is listed twice")),
            Some(coding) => out.push(coding),
            None => c.error(format!("{path}[{i}]"), format!("unsupported coding {name:?}: llmprobe decodes identity, gzip and deflate")),
        }
    }
    out
}

fn base_url_is_https(text: &str) -> bool {
    text.trim_start().to_ascii_lowercase().starts_with("https://")
}

fn max_response_bytes(path: &str, value: u64, c: &mut Checker) -> usize {
    const MIN: u64 = 1024;
    const MAX: u64 = 4 << 30;
    if !(MIN..=MAX).contains(&value) {
        c.error(path, format!("must be between {MIN} and {MAX} bytes, got {value}"));
    }
    usize::try_from(value.clamp(MIN, MAX)).unwrap_or(usize::MAX)
}

fn http_version(path: &str, text: &str, c: &mut Checker) -> HttpVersion {
    HttpVersion::ALL.iter().find(|(_, name)| *name == text).map(|(v, _)| *v).unwrap_or_else(|| {
        let valid: Vec<&str> = HttpVersion::ALL.iter().map(|(_, n)| *n).collect();
        c.error(path, format!("unknown http_version \"{text}\": expected one of {}", valid.join(", ")));
        HttpVersion::Auto
    })
}

fn tls(path: &str, raw: &RawTls, https: bool, c: &mut Checker) -> TlsSettings {
    let file = |name: &str, value: &Option<String>, c: &mut Checker| {
        if value.as_deref() == Some("") {
            c.error(format!("{path}.{name}"), "must not be empty");
        }
        value.as_ref().map(Into::into)
    };
    let ca_file = file("ca_file", &raw.ca_file, c);
    let cert = file("client_cert_file", &raw.client_cert_file, c);
    let key = file("client_key_file", &raw.client_key_file, c);
    let client_identity = match (cert, key) {
        (Some(cert), Some(key)) => Some((cert, key)),
        (Some(_), None) => {
            c.error(format!("{path}.client_cert_file"), "client_cert_file needs client_key_file too");
            None
        }
        (None, Some(_)) => {
            c.error(format!("{path}.client_key_file"), "client_key_file needs client_cert_file too");
            None
        }
        (None, None) => None,
    };
    if raw.insecure_skip_verify {
        c.warn(
            format!("{path}.insecure_skip_verify"),
            "server certificates are NOT verified for this target: anyone on the path can read the traffic and the API key",
        );
    }
    let set = ca_file.is_some() || client_identity.is_some() || raw.insecure_skip_verify;
    if set && !https {
        c.warn(path, "tls settings have no effect: base_url is not https://");
    }
    TlsSettings { ca_file, client_identity, insecure_skip_verify: raw.insecure_skip_verify }
}

/// Checks an http(s) URL with a host and returns it without a trailing `/`. A path prefix
/// (e.g. a proxy mount point) is kept; the API path is appended to it per request.
fn base_url(path: &str, text: &str, c: &mut Checker) -> String {
    // A URL with `user:password@` must not be echoed back.
    let shown = if text.contains('@') { "(hidden)".to_owned() } else { format!("\"{text}\"") };
    let Some(url) = c.http_url(path, text) else {
        return String::new();
    };
    if url.query().is_some() || url.fragment().is_some() {
        c.error(path, format!("invalid URL {shown}: must not have a query or fragment"));
    }
    let clean = url.as_str().trim_end_matches('/').to_owned();
    if clean.ends_with("/v1") {
        c.warn(path, "ends with /v1, but the API path (/v1/...) is appended to base_url: requests will go to /v1/v1/...");
    }
    clean
}

fn api(path: &str, text: &str, c: &mut Checker) -> ProtocolKind {
    ProtocolKind::ALL.into_iter().find(|k| k.as_str() == text).unwrap_or_else(|| {
        let valid: Vec<&str> = ProtocolKind::ALL.iter().map(|k| k.as_str()).collect();
        c.error(path, format!("unknown api \"{text}\": expected one of {}", valid.join(", ")));
        ProtocolKind::OpenaiChat
    })
}

/// Keeps only the reference; the secret is read at startup by whoever sends requests.
fn api_key(path: &str, raw: &RawTarget, c: &mut Checker) -> Option<SecretRef> {
    match (&raw.api_key_env, &raw.api_key_file) {
        (Some(_), Some(_)) => {
            c.error(format!("{path}.api_key_file"), "api_key_env and api_key_file are mutually exclusive: set only one");
            None
        }
        (Some(var), None) => {
            if var.is_empty() || var.contains(['=', '\0']) {
                c.error(
                    format!("{path}.api_key_env"),
                    // Not echoed: a pasted `NAME=key` would put the key in the message.
                    "invalid environment variable name: must be non-empty, without '=' or NUL",
                );
            }
            Some(SecretRef::Env(var.clone()))
        }
        (None, Some(file)) => {
            if file.is_empty() {
                c.error(format!("{path}.api_key_file"), "must not be empty");
            }
            Some(SecretRef::File(file.into()))
        }
        (None, None) => None,
    }
}

fn headers(path: &str, raw: &RawHeaders, has_api_key: bool, c: &mut Checker) -> Vec<(String, String)> {
    let mut seen: Vec<String> = Vec::new();
    for (name, value) in &raw.0 {
        let at = format!("{path}.{name}");
        let lower = name.to_ascii_lowercase();
        if HeaderName::from_bytes(name.as_bytes()).is_err() {
            c.error(&at, format!("invalid header name \"{name}\": must be an HTTP token (letters, digits, !#$%&'*+-.^_`|~)"));
        } else if HeaderValue::from_str(value).is_err() {
            c.error(&at, "invalid header value: only visible ASCII, spaces and tabs are allowed");
        }
        if has_api_key && lower == "authorization" {
            c.error(&at, "Authorization conflicts with api_key_env/api_key_file, which already send `Authorization: Bearer <key>`: remove one");
        }
        if lower == "accept-encoding" {
            c.error(&at, "set the target's accept_encoding instead (the prober must know which codings it asked for)");
        }
        if seen.contains(&lower) {
            c.error(&at, format!("header \"{name}\" is set more than once (names are case-insensitive)"));
        }
        seen.push(lower);
    }
    raw.0.clone()
}

fn headers_from(path: &str, raw: &RawTarget, has_api_key: bool, c: &mut Checker) -> Vec<(String, SecretRef)> {
    let mut out = Vec::new();
    for (name, source) in &raw.headers_from {
        let at = format!("{path}.{name}");
        let lower = name.to_ascii_lowercase();
        if HeaderName::from_bytes(name.as_bytes()).is_err() {
            c.error(&at, format!("invalid header name \"{name}\": must be an HTTP token (letters, digits, !#$%&'*+-.^_`|~)"));
        }
        if raw.headers.0.iter().any(|(n, _)| n.eq_ignore_ascii_case(name)) {
            c.error(&at, format!("header \"{name}\" is also set in headers: set it in one place"));
        }
        if has_api_key && lower == "authorization" {
            c.error(&at, "Authorization conflicts with api_key_env/api_key_file, which already send `Authorization: Bearer <key>`: remove one");
        }
        match (&source.env, &source.file) {
            (Some(env), None) if !env.is_empty() => out.push((name.clone(), SecretRef::Env(env.clone()))),
            (None, Some(file)) if !file.is_empty() => out.push((name.clone(), SecretRef::File(file.into()))),
            _ => c.error(&at, "set exactly one of env (a variable name) or file (a path), not empty"),
        }
    }
    out
}

fn timeouts(path: &str, raw: &RawTimeouts, c: &mut Checker) -> Timeouts {
    let t = Timeouts {
        connect: c.positive_duration(&format!("{path}.connect"), &raw.connect),
        ttft: c.positive_duration(&format!("{path}.ttft"), &raw.ttft),
        idle: c.positive_duration(&format!("{path}.idle"), &raw.idle),
        total: c.positive_duration(&format!("{path}.total"), &raw.total),
    };
    // The connect runs inside the TTFT window (and the total one for non-streamed probes).
    if t.connect >= t.ttft && !t.ttft.is_zero() {
        c.warn(
            format!("{path}.connect"),
            format!(
                "connect timeout ({}) is not shorter than the ttft timeout ({}): a connect that hangs is reported as timeout_ttft, not timeout_connect",
                format_duration(t.connect),
                format_duration(t.ttft),
            ),
        );
    }
    // A zero means that one was already reported as malformed or zero.
    for (name, d) in [("ttft", t.ttft), ("idle", t.idle)] {
        if d > t.total && !t.total.is_zero() {
            c.error(
                format!("{path}.{name}"),
                format!("{name} timeout ({}) must not exceed the total timeout ({})", format_duration(d), format_duration(t.total),),
            );
        }
    }
    t
}
