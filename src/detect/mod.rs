//! Release regression detection from sparse probes.
//!
//! Per target × scenario the detector keeps rolling baselines of log TTFT, TPOT and E2E (the
//! probes of the last `latency_baseline_s`, at most `baseline_max_samples` each) and of the bad
//! outcomes (`goodput_baseline_s` in 72 bins).
//!
//! **Release-armed tests.** `mark_release` freezes every scenario's baseline and, for
//! `armed_window_s`, tests the probes after it sequentially:
//! - latency: winsorized log latency (baseline median ± (`clip_sigmas` robust sd + the largest
//!   slowdown of the test's grid), so one 10x probe moves nothing much while a tight baseline
//!   cannot clip a real slowdown away); the likelihood ratio of "post mean = pre mean + δ" against "= pre
//!   mean" for the difference of the two means, whose variance σ²(1/n + 1/m) carries the
//!   baseline's own sampling error;
//! - goodput: the bad indicator; the null predicts each post probe from the baseline's Beta
//!   posterior updated with the post probes so far (Beta-binomial, baseline error integrated
//!   out), the alternative is bad fraction = baseline + d.
//!
//! Scenarios are pooled by multiplying their likelihood ratios for a common effect; the effect is
//! mixed over a grid starting at the minimum effect of interest (latency 1.10, 1.21, 1.46, 2.14x;
//! goodput +1, +2, +4 points). A mixture of likelihood ratios is a test martingale under the
//! null, so by Ville's inequality the chance it ever reaches 1/α, checked after every probe, is
//! at most α. `armed_alpha` (per release, per target) is split: goodput ½, each latency signal ⅙.
//! A scenario row is `regressed` when its pooled row is and its own evidence reaches
//! ln(1/`attribution_alpha`).
//!
//! **Continuous detector.** Per target and signal a CUSUM of log-likelihood ratios (latency:
//! standardized winsorized log latency against a slow EWMA per scenario, alternative
//! `continuous_latency_min_effect`; goodput: Bernoulli against the EWMA bad fraction,
//! alternative + `continuous_goodput_min_effect`). Threshold h = ln(4 · ARL days · 86400 · rate):
//! Lorden's bound ARL₀ ≥ e^h probes, the target's budget split over its four charts.
//!
//! **Recovery.** While regressed a CUSUM of "no change" against "min effect" on the new probes
//! (reference: the frozen baseline, or the EWMA at the continuous alarm); at ln(1/`recovery_alpha`)
//! the row is `recovered`, and after another `armed_window_s` back to `watching`.
//!
//! Memory: at most `max_keys` target × scenario keys (256), each with 3 × `baseline_max_samples`
//! (2048) latency values plus as many post-release values, and 72 goodput bins: about 100 KB a
//! key at the cap.

pub mod compare;
pub mod detector;
pub mod math;
pub mod persist;
pub mod sim;

pub use crate::config::DetectSettings;
pub use detector::{Detector, Estimate, Event, Ignored, Observation, Restored, Signal, SignalReport, Source, State};
