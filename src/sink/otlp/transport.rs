//! What the trace and metric exporters share: the transport to the collector (gRPC with
//! metadata, or HTTP/protobuf with headers) and the resource they describe llmprobe with.

use anyhow::Context;
use opentelemetry::KeyValue;
use opentelemetry_otlp::tonic_types::metadata::MetadataMap;
use opentelemetry_otlp::{WithExportConfig, WithHttpConfig, WithTonicConfig};
use opentelemetry_sdk::Resource;

use super::settings::Transport;

/// The resource of both signals: `service.version`, and `service.name` unless
/// `OTEL_SERVICE_NAME` names it.
pub(super) fn resource(service_name: Option<&str>) -> Resource {
    let mut resource = Resource::builder().with_attribute(KeyValue::new("service.version", env!("CARGO_PKG_VERSION")));
    if let Some(name) = service_name {
        resource = resource.with_service_name(name.to_owned());
    }
    resource.build()
}

/// A gRPC exporter builder with the config's headers as metadata and its endpoint, if any.
pub(super) fn grpc<B: WithExportConfig + WithTonicConfig>(builder: B, transport: &Transport, headers: &[(String, String)]) -> anyhow::Result<B> {
    let builder = builder.with_metadata(grpc_metadata(headers)?);
    Ok(with_endpoint(builder, transport))
}

/// An HTTP/protobuf exporter builder with the config's headers and its endpoint, if any.
pub(super) fn http<B: WithExportConfig + WithHttpConfig>(builder: B, transport: &Transport, headers: &[(String, String)]) -> B {
    let builder = builder.with_protocol(opentelemetry_otlp::Protocol::HttpBinary).with_headers(headers.iter().cloned().collect());
    with_endpoint(builder, transport)
}

fn with_endpoint<B: WithExportConfig>(builder: B, transport: &Transport) -> B {
    match &transport.endpoint {
        Some(e) => builder.with_endpoint(e.clone()),
        None => builder,
    }
}

/// `OTEL_EXPORTER_OTLP_HEADERS` / `tracing.headers` as gRPC metadata.
fn grpc_metadata(pairs: &[(String, String)]) -> anyhow::Result<MetadataMap> {
    let mut headers = reqwest::header::HeaderMap::new();
    for (k, v) in pairs {
        let name = reqwest::header::HeaderName::from_bytes(k.as_bytes()).context("tracing.headers: invalid header name")?;
        headers.insert(name, v.parse().context("tracing.headers: invalid header value")?);
    }
    Ok(MetadataMap::from_headers(headers))
}
