//! In-process OTLP trace and metric receivers (gRPC via tonic, HTTP/protobuf via axum) on
//! 127.0.0.1:0, keeping every export request as raw protobuf bytes.
#![allow(dead_code)]

use std::sync::{Arc, Mutex};

use opentelemetry_proto::tonic::collector::trace::v1::trace_service_server::{TraceService, TraceServiceServer};
use opentelemetry_proto::tonic::collector::trace::v1::{ExportTraceServiceRequest, ExportTraceServiceResponse};
use opentelemetry_proto::tonic::trace::v1::Span;
use prost::Message;

/// Every export request received, as raw protobuf bytes.
pub type Received = Arc<Mutex<Vec<Vec<u8>>>>;

struct Grpc(Received);

#[tonic::async_trait]
impl TraceService for Grpc {
    async fn export(&self, req: tonic::Request<ExportTraceServiceRequest>) -> Result<tonic::Response<ExportTraceServiceResponse>, tonic::Status> {
        self.0.lock().unwrap().push(req.into_inner().encode_to_vec());
        Ok(tonic::Response::new(ExportTraceServiceResponse { partial_success: None }))
    }
}

/// A gRPC receiver; returns its endpoint URL.
pub async fn grpc_receiver(received: Received) -> String {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let incoming = tonic::transport::server::TcpIncoming::from(listener);
    tokio::spawn(tonic::transport::Server::builder().add_service(TraceServiceServer::new(Grpc(received))).serve_with_incoming(incoming));
    format!("http://{addr}")
}

/// An HTTP/protobuf receiver (`POST /v1/traces`); returns its endpoint URL.
pub async fn http_receiver(received: Received) -> String {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let app = axum::Router::new().route(
        "/v1/traces",
        axum::routing::post(move |body: axum::body::Bytes| {
            let received = received.clone();
            async move {
                ExportTraceServiceRequest::decode(body.as_ref()).expect("valid OTLP protobuf");
                received.lock().unwrap().push(body.to_vec());
                ExportTraceServiceResponse { partial_success: None }.encode_to_vec()
            }
        }),
    );
    tokio::spawn(async move { axum::serve(listener, app).await });
    format!("http://{addr}")
}

/// Every span received so far.
pub fn spans(received: &Received) -> Vec<Span> {
    let requests = received.lock().unwrap().iter().map(|b| ExportTraceServiceRequest::decode(b.as_slice()).unwrap()).collect::<Vec<_>>();
    requests.into_iter().flat_map(|r| r.resource_spans).flat_map(|r| r.scope_spans).flat_map(|s| s.spans).collect()
}

// ---- Metrics -------------------------------------------------------------------------------------

use opentelemetry_proto::tonic::collector::metrics::v1::metrics_service_server::{MetricsService, MetricsServiceServer};
use opentelemetry_proto::tonic::collector::metrics::v1::{ExportMetricsServiceRequest, ExportMetricsServiceResponse};
use opentelemetry_proto::tonic::metrics::v1::Metric;

struct GrpcMetrics(Received);

#[tonic::async_trait]
impl MetricsService for GrpcMetrics {
    async fn export(&self, req: tonic::Request<ExportMetricsServiceRequest>) -> Result<tonic::Response<ExportMetricsServiceResponse>, tonic::Status> {
        self.0.lock().unwrap().push(req.into_inner().encode_to_vec());
        Ok(tonic::Response::new(ExportMetricsServiceResponse { partial_success: None }))
    }
}

/// A gRPC metrics receiver; returns its endpoint URL.
pub async fn grpc_metrics_receiver(received: Received) -> String {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let incoming = tonic::transport::server::TcpIncoming::from(listener);
    tokio::spawn(tonic::transport::Server::builder().add_service(MetricsServiceServer::new(GrpcMetrics(received))).serve_with_incoming(incoming));
    format!("http://{addr}")
}

/// An HTTP/protobuf metrics receiver (`POST /v1/metrics`); returns its endpoint URL.
pub async fn http_metrics_receiver(received: Received) -> String {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let app = axum::Router::new().route(
        "/v1/metrics",
        axum::routing::post(move |body: axum::body::Bytes| {
            let received = received.clone();
            async move {
                ExportMetricsServiceRequest::decode(body.as_ref()).expect("valid OTLP protobuf");
                received.lock().unwrap().push(body.to_vec());
                ExportMetricsServiceResponse { partial_success: None }.encode_to_vec()
            }
        }),
    );
    tokio::spawn(async move { axum::serve(listener, app).await });
    format!("http://{addr}")
}

/// Every metric received so far, in arrival order.
pub fn metrics(received: &Received) -> Vec<Metric> {
    let requests = received.lock().unwrap().iter().map(|b| ExportMetricsServiceRequest::decode(b.as_slice()).unwrap()).collect::<Vec<_>>();
    requests.into_iter().flat_map(|r| r.resource_metrics).flat_map(|r| r.scope_metrics).flat_map(|s| s.metrics).collect()
}
