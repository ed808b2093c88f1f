//! `POST /mock/control`: a simulated release at run time. A JSON body
//! `{"engine_version": "0.33.0", "slowdown": 1.3, "faults": "invalid_json=0.3"}` (each field
//! optional) changes what `/version` and `/api/version` report, how slow every engine step is
//! from the next step on, and which faults are injected (`KIND=RATE,...` as `--fault`; `""`:
//! none) in place of the command line's;
//! the answer is the state now. `GET /mock/control` reads it. This is how tests and demos make
//! a release happen, with or without a regression, while the prober watches.

use std::sync::Arc;

use axum::Router;
use axum::body::Bytes;
use axum::extract::State;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use serde::Deserialize;

use super::app::App;

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct ControlRequest {
    engine_version: Option<String>,
    slowdown: Option<f64>,
    faults: Option<String>,
}

pub(crate) fn routes(app: Arc<App>) -> Router {
    Router::new().route("/mock/control", get(read).post(change)).with_state(app)
}

async fn read(State(app): State<Arc<App>>) -> Response {
    let state = app.control.lock().unwrap_or_else(|e| e.into_inner()).clone();
    axum::Json(state).into_response()
}

async fn change(State(app): State<Arc<App>>, body: Bytes) -> Response {
    let req: ControlRequest = match serde_json::from_slice(&body) {
        Ok(r) => r,
        Err(e) => return (StatusCode::BAD_REQUEST, format!("bad control request: {e}\n")).into_response(),
    };
    if let Some(s) = req.slowdown {
        if !(s.is_finite() && s > 0.0 && s <= 1000.0) {
            return (StatusCode::BAD_REQUEST, "slowdown must be a number in (0, 1000]\n").into_response();
        }
        let profile = app.opts.profile.slowed(s);
        app.driver.with_engine_mut(|e| e.set_profile(profile));
    }
    let rates = match req
        .faults
        .as_deref()
        .map(|spec| spec.split(',').map(str::trim).filter(|x| !x.is_empty()).map(super::faults::parse_rate).collect::<Result<Vec<_>, _>>())
    {
        Some(Err(e)) => return (StatusCode::BAD_REQUEST, format!("bad faults: {e}\n")).into_response(),
        Some(Ok(r)) => Some(r),
        None => None,
    };
    let state = {
        let mut c = app.control.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(r) = rates {
            c.faults = req.faults.as_deref().map(|s| s.chars().take(256).collect());
            c.fault_rates = Some(r);
        }
        if let Some(v) = req.engine_version {
            c.engine_version = Some(v.chars().take(64).collect());
        }
        if let Some(s) = req.slowdown {
            c.slowdown = s;
        }
        c.clone()
    };
    tracing::info!(engine_version = ?state.engine_version, slowdown = state.slowdown, "mock: simulated release");
    axum::Json(state).into_response()
}
