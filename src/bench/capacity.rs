//! The capacity planner: how many concurrent requests a deployment can hold (memory) and serve
//! at the TPOT objective (compute), what to run at, whether supply covers demand, and what one
//! million SLO-meeting output tokens cost. A bench result can supply the measured figures.
//!
//! KV bytes per request = 2 (K and V) × layers × kv_heads × head_dim × context tokens × bytes.
//! Decode compute per token ≈ 2 × parameters FLOPs.

use serde::{Deserialize, Serialize};

use super::figure::Figure;

/// Inputs; every field optional here so a YAML file and flags can be merged, then checked.
#[derive(Debug, Clone, Default, Deserialize, Serialize, clap::Args)]
#[serde(deny_unknown_fields)]
pub struct Spec {
    /// Model parameters, in billions.
    #[arg(long)]
    pub params_billion: Option<f64>,
    /// Bytes per weight (2 for bf16/fp16, 1 for fp8/int8). Default 2.
    #[arg(long)]
    pub weight_bytes: Option<f64>,
    /// Transformer layers.
    #[arg(long)]
    pub layers: Option<u64>,
    /// KV heads (grouped-query attention: fewer than attention heads).
    #[arg(long)]
    pub kv_heads: Option<u64>,
    /// Dimension of one head.
    #[arg(long)]
    pub head_dim: Option<u64>,
    /// Bytes per KV-cache element. Default 2.
    #[arg(long)]
    pub kv_bytes: Option<f64>,
    /// Tokens a request holds in the KV cache (prompt + output).
    #[arg(long)]
    pub context_tokens: Option<u64>,
    /// Memory per GPU, GiB.
    #[arg(long)]
    pub gpu_memory_gib: Option<f64>,
    /// GPUs per replica (tensor parallel). Default 1.
    #[arg(long)]
    pub gpus: Option<u64>,
    /// Share of GPU memory the engine may use (vLLM gpu_memory_utilization). Default 0.9.
    #[arg(long)]
    pub memory_utilization: Option<f64>,
    /// Dense peak TFLOPS per GPU at the weight precision.
    #[arg(long)]
    pub peak_tflops: Option<f64>,
    /// Achievable share of peak during decode (model FLOPs utilisation). Default 0.3.
    #[arg(long)]
    pub mfu: Option<f64>,
    /// TPOT objective in milliseconds: each request needs 1000/tpot tokens per second.
    #[arg(long)]
    pub tpot_ms: Option<f64>,
    /// Demand: requests per second.
    #[arg(long)]
    pub demand_rps: Option<f64>,
    /// Demand: output tokens per request.
    #[arg(long)]
    pub output_tokens: Option<f64>,
    /// Price of one GPU hour.
    #[arg(long)]
    pub gpu_hour_cost: Option<f64>,
}

impl Spec {
    /// Fields set here win over `base`'s.
    pub fn over(self, base: Spec) -> Spec {
        macro_rules! pick { ($($f:ident),*) => { Spec { $($f: self.$f.or(base.$f)),* } } }
        pick!(
            params_billion,
            weight_bytes,
            layers,
            kv_heads,
            head_dim,
            kv_bytes,
            context_tokens,
            gpu_memory_gib,
            gpus,
            memory_utilization,
            peak_tflops,
            mfu,
            tpot_ms,
            demand_rps,
            output_tokens,
            gpu_hour_cost
        )
    }
}

/// Figures measured by a bench run at its candidate knee.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Measured {
    pub source: String,
    pub mode: String,
    pub load: f64,
    pub output_tokens_per_s: f64,
    pub goodput_ratio: f64,
}

/// The plan.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct CapacityPlan {
    pub weights_bytes: f64,
    pub kv_bytes_per_request: f64,
    pub usable_memory_bytes: f64,
    pub kv_budget_bytes: f64,
    pub memory_bound_concurrency: u64,
    pub compute_tokens_per_s: Option<f64>,
    pub compute_bound_concurrency: Option<u64>,
    pub recommended_concurrency: u64,
    pub recommended_from: String,
    pub supply_output_tokens_per_s: Option<f64>,
    pub demand_output_tokens_per_s: Option<f64>,
    pub replicas_needed: Option<u64>,
    pub goodput_ratio: f64,
    pub cost_per_million_good_output_tokens: Option<f64>,
    pub measured: Option<Measured>,
    pub warnings: Vec<String>,
}

/// Computes the plan; `Err` lists every missing or invalid input.
pub fn plan(spec: &Spec, measured: Option<Measured>) -> Result<CapacityPlan, Vec<String>> {
    let mut errs = Vec::new();
    let mut need = |name: &str, v: Option<f64>| -> f64 {
        match v {
            Some(x) if x.is_finite() && x > 0.0 => x,
            Some(x) => {
                errs.push(format!("{name}: must be greater than 0, got {x}"));
                1.0
            }
            None => {
                errs.push(format!("{name}: required (flag --{} or YAML key {name})", name.replace('_', "-")));
                1.0
            }
        }
    };
    let params = need("params_billion", spec.params_billion) * 1e9;
    let layers = need("layers", spec.layers.map(|v| v as f64));
    let kv_heads = need("kv_heads", spec.kv_heads.map(|v| v as f64));
    let head_dim = need("head_dim", spec.head_dim.map(|v| v as f64));
    let context = need("context_tokens", spec.context_tokens.map(|v| v as f64));
    let gpu_mem = need("gpu_memory_gib", spec.gpu_memory_gib) * (1u64 << 30) as f64;
    let weight_bytes = need("weight_bytes", Some(spec.weight_bytes.unwrap_or(2.0)));
    let kv_bytes = need("kv_bytes", Some(spec.kv_bytes.unwrap_or(2.0)));
    let gpus = need("gpus", Some(spec.gpus.unwrap_or(1) as f64));
    let util = spec.memory_utilization.unwrap_or(0.9);
    if !(util > 0.0 && util <= 1.0) {
        errs.push(format!("memory_utilization: must be in (0, 1], got {util}"));
    }
    let mfu = spec.mfu.unwrap_or(0.3);
    if !(mfu > 0.0 && mfu <= 1.0) {
        errs.push(format!("mfu: must be in (0, 1], got {mfu}"));
    }
    for (name, v) in [
        ("peak_tflops", spec.peak_tflops),
        ("tpot_ms", spec.tpot_ms),
        ("demand_rps", spec.demand_rps),
        ("output_tokens", spec.output_tokens),
        ("gpu_hour_cost", spec.gpu_hour_cost),
    ] {
        if let Some(x) = v {
            if !(x.is_finite() && x >= 0.0) || (x == 0.0 && name != "demand_rps" && name != "gpu_hour_cost") {
                errs.push(format!("{name}: must be greater than 0, got {x}"));
            }
        }
    }
    if !errs.is_empty() {
        return Err(errs);
    }
    let mut warnings = Vec::new();
    let weights_bytes = params * weight_bytes;
    let kv_per_req = 2.0 * layers * kv_heads * head_dim * context * kv_bytes;
    let usable = gpu_mem * gpus * util;
    let kv_budget = usable - weights_bytes;
    let memory_bound = if kv_budget <= 0.0 {
        warnings.push(format!(
            "the weights ({:.1} GiB) do not fit in the usable memory ({:.1} GiB): no request can be served",
            gib(weights_bytes),
            gib(usable)
        ));
        0
    } else {
        (kv_budget / kv_per_req).floor() as u64
    };
    if memory_bound == 0 && kv_budget > 0.0 {
        warnings.push(format!("one request needs {:.2} GiB of KV cache but only {:.2} GiB is left after the weights", gib(kv_per_req), gib(kv_budget)));
    }
    let compute_tps = spec.peak_tflops.map(|t| t * 1e12 * gpus * mfu / (2.0 * params));
    let compute_bound = match (compute_tps, spec.tpot_ms) {
        (Some(tps), Some(tpot)) => Some((tps * tpot / 1e3).floor() as u64),
        _ => None,
    };
    if compute_bound == Some(0) {
        warnings.push("compute cannot reach the TPOT objective even for one request".into());
    }
    let mut recommended = memory_bound;
    let mut from = "memory".to_owned();
    if let Some(c) = compute_bound.filter(|&c| c < recommended) {
        recommended = c;
        from = "compute at the TPOT objective".into();
    }
    if let Some(m) = measured.as_ref().filter(|m| m.mode == "concurrency" && (m.load as u64) < recommended) {
        recommended = m.load as u64;
        from = format!("the measured candidate knee ({})", m.source);
    }
    if recommended == 0 {
        warnings.push("recommended concurrency is 0: this deployment cannot serve the workload as specified".into());
    }
    let per_req_tps = spec.tpot_ms.map(|t| 1e3 / t);
    let supply = match (&measured, per_req_tps) {
        (Some(m), _) => Some(m.output_tokens_per_s),
        (None, Some(r)) => Some(match compute_tps {
            Some(c) => (recommended as f64 * r).min(c),
            None => recommended as f64 * r,
        }),
        (None, None) => compute_tps.map(|c| if recommended == 0 { 0.0 } else { c }),
    };
    let demand = match (spec.demand_rps, spec.output_tokens) {
        (Some(r), Some(t)) => Some(r * t),
        _ => None,
    };
    let replicas = match (demand, supply) {
        (Some(d), Some(s)) if s > 0.0 => Some((d / s).ceil() as u64),
        (Some(d), Some(_)) if d > 0.0 => {
            warnings.push("supply is 0 tokens/s: no number of replicas meets the demand".into());
            None
        }
        _ => None,
    };
    let goodput_ratio = measured.as_ref().map_or(1.0, |m| m.goodput_ratio);
    if measured.is_none() {
        warnings.push("no measured input (--from-bench): supply assumes every request meets the SLO".into());
    }
    let cost = match (spec.gpu_hour_cost, supply) {
        (Some(c), Some(s)) if s * goodput_ratio > 0.0 => Some(c * gpus / (s * goodput_ratio * 3600.0) * 1e6),
        _ => None,
    };
    Ok(CapacityPlan {
        weights_bytes,
        kv_bytes_per_request: kv_per_req,
        usable_memory_bytes: usable,
        kv_budget_bytes: kv_budget,
        memory_bound_concurrency: memory_bound,
        compute_tokens_per_s: compute_tps,
        compute_bound_concurrency: compute_bound,
        recommended_concurrency: recommended,
        recommended_from: from,
        supply_output_tokens_per_s: supply,
        demand_output_tokens_per_s: demand,
        replicas_needed: replicas,
        goodput_ratio,
        cost_per_million_good_output_tokens: cost,
        measured,
        warnings,
    })
}

fn gib(b: f64) -> f64 {
    b / (1u64 << 30) as f64
}

/// The candidate knee of a bench result as measured input.
pub fn measured_from(summary: &super::summary::SummaryFile, source: &str) -> anyhow::Result<Measured> {
    let load = summary
        .knee
        .candidate
        .ok_or_else(|| anyhow::anyhow!("{source}: no point met the goodput objective, so there is no knee to plan with ({})", summary.knee.candidate_reason))?;
    let p = summary.points.iter().find(|p| p.load == load).expect("the knee is one of the points");
    Ok(Measured {
        source: source.to_owned(),
        mode: summary.mode.clone(),
        load,
        output_tokens_per_s: p.median(Figure::OutputTokenThroughput).unwrap_or(0.0),
        goodput_ratio: p.median(Figure::GoodputRatio).unwrap_or(0.0),
    })
}

/// The plan as text.
pub fn text(p: &CapacityPlan) -> String {
    let o = |v: Option<f64>, d: usize| v.map_or("–".into(), |v| format!("{v:.d$}"));
    let mut s = format!(
        "weights                      {:.2} GiB\nKV per request               {:.3} GiB ({:.0} bytes)\nusable memory                {:.2} GiB; left for KV {:.2} GiB\nmemory-bound concurrency     {}\ncompute tokens/s             {}\ncompute-bound concurrency    {}\nrecommended concurrency      {} (limited by {})\nsupply output tokens/s       {}\ndemand output tokens/s       {}\nreplicas needed              {}\ngoodput ratio used           {:.3}\ncost per 1M good output tok  {}\n",
        gib(p.weights_bytes),
        gib(p.kv_bytes_per_request),
        p.kv_bytes_per_request,
        gib(p.usable_memory_bytes),
        gib(p.kv_budget_bytes),
        p.memory_bound_concurrency,
        o(p.compute_tokens_per_s, 0),
        p.compute_bound_concurrency.map_or("–".into(), |c| c.to_string()),
        p.recommended_concurrency,
        p.recommended_from,
        o(p.supply_output_tokens_per_s, 1),
        o(p.demand_output_tokens_per_s, 1),
        p.replicas_needed.map_or("–".into(), |r| r.to_string()),
        p.goodput_ratio,
        o(p.cost_per_million_good_output_tokens, 4),
    );
    if let Some(m) = &p.measured {
        s.push_str(&format!(
            "measured input               {} knee {} at {:.1} output tok/s, goodput {:.3} ({})\n",
            m.mode,
            super::knee::fmt(m.load),
            m.output_tokens_per_s,
            m.goodput_ratio,
            m.source
        ));
    }
    for w in &p.warnings {
        s.push_str(&format!("warning: {w}\n"));
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Llama-3-8B-like: 32 layers, 8 KV heads, head_dim 128, bf16, on one 24 GiB card.
    fn llama8b() -> Spec {
        Spec {
            params_billion: Some(8.0),
            layers: Some(32),
            kv_heads: Some(8),
            head_dim: Some(128),
            context_tokens: Some(4096),
            gpu_memory_gib: Some(24.0),
            ..Default::default()
        }
    }

    #[test]
    fn kv_bytes_and_memory_bound() {
        let p = plan(&llama8b(), None).unwrap();
        // 2 × 32 × 8 × 128 × 4096 × 2 = 536870912 bytes = 0.5 GiB per request.
        assert_eq!(p.kv_bytes_per_request, 536_870_912.0);
        // 24 GiB × 0.9 = 21.6 GiB usable; weights 16e9 B = 14.90 GiB; 6.70 GiB left -> 13 requests.
        assert_eq!(p.memory_bound_concurrency, 13);
        assert_eq!(p.recommended_concurrency, 13);
    }

    #[test]
    fn weights_that_do_not_fit_give_zero_with_a_warning() {
        let spec = Spec { gpu_memory_gib: Some(16.0), ..llama8b() };
        let p = plan(&spec, None).unwrap();
        assert_eq!(p.memory_bound_concurrency, 0);
        assert_eq!(p.recommended_concurrency, 0, "never clamped to 1");
        assert!(p.warnings.iter().any(|w| w.contains("do not fit")));
        assert!(p.warnings.iter().any(|w| w.contains("recommended concurrency is 0")));
    }

    #[test]
    fn compute_bound_demand_supply_and_cost() {
        let spec = Spec {
            peak_tflops: Some(100.0),
            mfu: Some(0.5),
            tpot_ms: Some(50.0),
            demand_rps: Some(2.0),
            output_tokens: Some(500.0),
            gpu_hour_cost: Some(2.0),
            ..llama8b()
        };
        let p = plan(&spec, None).unwrap();
        // 100e12 × 0.5 / (2 × 8e9) = 3125 tokens/s; at 20 tokens/s per request -> 156 requests.
        assert_eq!(p.compute_tokens_per_s, Some(3125.0));
        assert_eq!(p.compute_bound_concurrency, Some(156));
        assert_eq!(p.recommended_concurrency, 13, "memory binds first");
        assert_eq!(p.supply_output_tokens_per_s, Some(260.0));
        assert_eq!(p.demand_output_tokens_per_s, Some(1000.0));
        assert_eq!(p.replicas_needed, Some(4));
        let cost = p.cost_per_million_good_output_tokens.unwrap();
        assert!((cost - 2.0 / (260.0 * 3600.0) * 1e6).abs() < 1e-9);
    }

    #[test]
    fn measured_knee_limits_and_supplies() {
        let m = Measured { source: "r".into(), mode: "concurrency".into(), load: 4.0, output_tokens_per_s: 400.0, goodput_ratio: 0.5 };
        let spec = Spec { gpu_hour_cost: Some(1.0), ..llama8b() };
        let p = plan(&spec, Some(m)).unwrap();
        assert_eq!(p.recommended_concurrency, 4);
        assert!(p.recommended_from.contains("knee"));
        assert_eq!(p.cost_per_million_good_output_tokens, Some(1.0 / (200.0 * 3600.0) * 1e6));
    }

    #[test]
    fn every_missing_input_is_listed() {
        let errs = plan(&Spec::default(), None).unwrap_err();
        assert_eq!(errs.len(), 6, "{errs:?}");
        assert!(errs[0].contains("params_billion: required"));
    }
}
