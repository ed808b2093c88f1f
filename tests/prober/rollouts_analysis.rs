//! The chart's Argo Rollouts AnalysisTemplate judged the way Argo Rollouts judges it, against a
//! real prober: the template is rendered by `helm template` (helm from `.tools/bin` or `PATH`,
//! installed by `scripts/install-test-tools.sh`), its web provider's URL and header are sent as
//! rendered (Argo's `{{args.*}}` filled in), its `jsonPath` is applied to the verdict JSON and its
//! `successCondition`/`failureCondition` are evaluated as Argo evaluates them
//! (`utils/evaluate.EvaluateResult` of argo-rollouts v1.9: failure wins; neither is Inconclusive),
//! for each verdict state: `grace`, `watching`, `passed`, `inconclusive`, `regressed`. The
//! measurements are then assessed with the metric's limits as Argo's `assessMetricStatus` does.
//! The evaluator knows only what the template uses (`result`, string literals, `==`, `!=`, `&&`,
//! `||`, parentheses): anything else in the rendered conditions fails the test.

use crate::common;
use crate::release_detection::{GOODPUT_BASELINE_PROBES, READ_TOKEN, TOKEN, control, wait_for_probes, yaml};

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::{Duration, Instant};

use common::start_mock;
use llmprobe::app::{self, RunOptions};
use llmprobe::mock::MockOptions;
use serde_json::Value;
use tokio_util::sync::CancellationToken;

/// `helm` from the repository's tools, else from `PATH`; `None` when neither runs.
fn helm() -> Option<PathBuf> {
    let local = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join(".tools/bin/helm");
    [local, PathBuf::from("helm")].into_iter().find(|h| std::process::Command::new(h).arg("version").output().is_ok_and(|o| o.status.success()))
}

/// The verdict metric of the chart's AnalysisTemplate, rendered for a prober at `url`. `count`
/// is scaled as the detector's windows are: this test measures every 250 ms where a Rollout
/// measures every minute.
fn rendered_metric(helm: &PathBuf, url: &str, on_inconclusive: &str) -> serde_norway::Value {
    let chart = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("helm/llmprobe");
    let out = std::process::Command::new(helm)
        .args(["template", "t", chart.to_str().unwrap(), "--show-only", "templates/rollouts-argo.yaml"])
        .args(["--set", "rollouts.argo.enabled=true", "--set", "releaseApi.readToken.existingSecret=llmprobe-read-token"])
        .args(["--set", &format!("rollouts.argo.url={url}"), "--set", "rollouts.argo.target=t"])
        .args(["--set", &format!("rollouts.argo.onInconclusive={on_inconclusive}"), "--set", "rollouts.argo.count=2000"])
        .output()
        .unwrap();
    assert!(out.status.success(), "helm template: {}", String::from_utf8_lossy(&out.stderr));
    let template: serde_norway::Value = serde_norway::from_slice(&out.stdout).unwrap();
    assert_eq!(template["kind"].as_str(), Some("AnalysisTemplate"));
    let metrics = template["spec"]["metrics"].as_sequence().unwrap();
    assert_eq!(metrics.len(), 1, "one metric: the verdict");
    metrics[0].clone()
}

/// Argo's `{{args.NAME}}` filled in.
fn fill_args(text: &str, args: &BTreeMap<&str, &str>) -> String {
    args.iter().fold(text.to_owned(), |t, (name, value)| t.replace(&format!("{{{{args.{name}}}}}"), value))
}

/// One measurement as the web provider takes it: GET the rendered URL with the rendered headers;
/// a non-2xx answer or a failed request is an Error (`None`), else the JSON body.
async fn measure(client: &reqwest::Client, metric: &serde_norway::Value, args: &BTreeMap<&str, &str>) -> Option<Value> {
    let web = &metric["provider"]["web"];
    let mut request = client.get(fill_args(web["url"].as_str().unwrap(), args));
    for header in web["headers"].as_sequence().into_iter().flatten() {
        request = request.header(header["key"].as_str().unwrap(), fill_args(header["value"].as_str().unwrap(), args));
    }
    let response = request.timeout(Duration::from_secs(web["timeoutSeconds"].as_u64().unwrap_or(10))).send().await.ok()?;
    if !response.status().is_success() {
        return None;
    }
    serde_json::from_str(&response.text().await.ok()?).ok()
}

/// Kubernetes JSONPath as the template uses it: `{$.a.b}` or `{.a.b}`, a chain of field names.
fn json_path<'a>(path: &str, body: &'a Value) -> &'a Value {
    let inner = path.strip_prefix('{').and_then(|p| p.strip_suffix('}')).unwrap_or_else(|| panic!("jsonPath {path:?}: not {{...}}"));
    let fields = inner.strip_prefix('$').unwrap_or(inner).strip_prefix('.').unwrap_or_else(|| panic!("jsonPath {path:?}: unsupported here"));
    fields.split('.').fold(body, |v, field| {
        assert!(field.chars().all(|c| c.is_ascii_alphanumeric() || c == '_'), "jsonPath {path:?}: unsupported here");
        v.get(field).unwrap_or_else(|| panic!("jsonPath {path:?} finds nothing in {body}"))
    })
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Phase {
    Successful,
    Failed,
    Inconclusive,
    Error,
}

/// `EvaluateResult`: both conditions set (as in the chart), failure wins, neither is Inconclusive.
fn evaluate(result: &Value, success: Option<&str>, failure: Option<&str>) -> Phase {
    let holds = |c: Option<&str>| c.map(|c| Condition::new(c).eval(result));
    match (holds(success), holds(failure)) {
        (None, None) => Phase::Successful,
        (_, Some(true)) | (Some(false), None) => Phase::Failed,
        (Some(true), _) | (None, Some(false)) => Phase::Successful,
        (Some(false), Some(false)) => Phase::Inconclusive,
    }
}

/// A condition in the part of Argo's expression language the template uses.
struct Condition {
    tokens: Vec<String>,
    at: usize,
}

impl Condition {
    fn new(text: &str) -> Condition {
        let mut tokens = Vec::new();
        let mut chars = text.chars().peekable();
        while let Some(&c) = chars.peek() {
            if c.is_whitespace() {
                chars.next();
            } else if c == '"' {
                chars.next();
                let literal: String = chars.by_ref().take_while(|&c| c != '"').collect();
                tokens.push(format!("\"{literal}"));
            } else if c.is_ascii_alphabetic() {
                let mut word = String::new();
                while let Some(&c) = chars.peek().filter(|c| c.is_ascii_alphanumeric() || **c == '_') {
                    word.push(c);
                    chars.next();
                }
                tokens.push(word);
            } else {
                let two: String = chars.clone().take(2).collect();
                let op = if ["==", "!=", "&&", "||"].contains(&two.as_str()) { two } else { c.to_string() };
                assert!(["==", "!=", "&&", "||", "(", ")"].contains(&op.as_str()), "condition {text:?}: {op:?} is not supported by this evaluator");
                for _ in 0..op.len() {
                    chars.next();
                }
                tokens.push(op);
            }
        }
        Condition { tokens, at: 0 }
    }

    fn eval(mut self, result: &Value) -> bool {
        let value = self.or(result);
        assert_eq!(self.at, self.tokens.len(), "condition {:?}: trailing tokens", self.tokens);
        value.as_bool().unwrap_or_else(|| panic!("condition {:?} is not a bool", self.tokens))
    }

    fn next_is(&mut self, op: &str) -> bool {
        let is = self.tokens.get(self.at).is_some_and(|t| t == op);
        self.at += usize::from(is);
        is
    }

    fn or(&mut self, result: &Value) -> Value {
        let mut left = self.and(result);
        while self.next_is("||") {
            let right = self.and(result);
            left = Value::Bool(left.as_bool().unwrap() || right.as_bool().unwrap());
        }
        left
    }

    fn and(&mut self, result: &Value) -> Value {
        let mut left = self.compare(result);
        while self.next_is("&&") {
            let right = self.compare(result);
            left = Value::Bool(left.as_bool().unwrap() && right.as_bool().unwrap());
        }
        left
    }

    fn compare(&mut self, result: &Value) -> Value {
        let left = self.atom(result);
        if self.next_is("==") {
            return Value::Bool(left == self.atom(result));
        }
        if self.next_is("!=") {
            return Value::Bool(left != self.atom(result));
        }
        left
    }

    fn atom(&mut self, result: &Value) -> Value {
        let token = self.tokens.get(self.at).cloned().unwrap_or_else(|| panic!("condition {:?} ends early", self.tokens));
        self.at += 1;
        match token.as_str() {
            "result" => result.clone(),
            "(" => {
                let inner = self.or(result);
                assert!(self.next_is(")"), "condition {:?}: unbalanced parentheses", self.tokens);
                inner
            }
            literal if literal.starts_with('"') => Value::String(literal[1..].to_owned()),
            other => panic!("condition {:?}: {other:?} is not supported by this evaluator", self.tokens),
        }
    }
}

/// `assessMetricStatus` of argo-rollouts v1.9 over a metric's measurements so far: the failure,
/// inconclusive and error limits first, then `consecutiveSuccessLimit`, then `count` (reached
/// with both a failure limit and a success limit: Inconclusive). `None`: still running.
fn assess(metric: &serde_norway::Value, measurements: &[Phase]) -> Option<Phase> {
    let limit = |name: &str, default: i64| metric[name].as_i64().unwrap_or(default);
    let count_of = |p: Phase| measurements.iter().filter(|m| **m == p).count() as i64;
    let trailing = |p: Phase| measurements.iter().rev().take_while(|m| **m == p).count() as i64;
    let failure_limit = limit("failureLimit", 0);
    let success_limit = limit("consecutiveSuccessLimit", 0);
    // Argo checks all three and the last that applies wins.
    let mut limited = None;
    if failure_limit >= 0 && count_of(Phase::Failed) > failure_limit {
        limited = Some(Phase::Failed);
    }
    if count_of(Phase::Inconclusive) > limit("inconclusiveLimit", 0) {
        limited = Some(Phase::Inconclusive);
    }
    if trailing(Phase::Error) > limit("consecutiveErrorLimit", 4) {
        limited = Some(Phase::Error);
    }
    if limited.is_some() {
        return limited;
    }
    if success_limit > 0 && trailing(Phase::Successful) >= success_limit {
        return Some(Phase::Successful);
    }
    let counted = measurements.iter().filter(|m| **m != Phase::Error).count() as i64;
    let count = metric["count"].as_i64()?;
    (counted >= count).then_some(if failure_limit >= 0 && success_limit > 0 { Phase::Inconclusive } else { Phase::Successful })
}

/// Measures a prober through the rendered template every 250 ms until `done` (or `wait`
/// passes); returns each verdict state seen with its phase, and every measurement's phase from
/// the first answer on (before it the prober has not seen the marker yet: 404 or 409, which a
/// Rollout's analysis step after the marker never sees, and which at 250 ms would reach the
/// error limit meant for a one-minute interval).
async fn watch(metric: &serde_norway::Value, args: &BTreeMap<&str, &str>, wait: Duration, done: &str) -> (BTreeMap<String, Phase>, Vec<Phase>) {
    let client = reqwest::Client::new();
    let json_path_text = metric["provider"]["web"]["jsonPath"].as_str().unwrap();
    let (success, failure) = (metric["successCondition"].as_str(), metric["failureCondition"].as_str());
    let (mut seen, mut phases) = (BTreeMap::new(), Vec::new());
    let deadline = Instant::now() + wait;
    while Instant::now() < deadline {
        let phase = match measure(&client, metric, args).await {
            None if phases.is_empty() => {
                tokio::time::sleep(Duration::from_millis(250)).await;
                continue;
            }
            None => Phase::Error,
            Some(body) => {
                let result = json_path(json_path_text, &body);
                let phase = evaluate(result, success, failure);
                seen.insert(result.as_str().unwrap_or_default().to_owned(), phase);
                phase
            }
        };
        phases.push(phase);
        if seen.contains_key(done) {
            break;
        }
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
    (seen, phases)
}

/// The chart's AnalysisTemplate against two probers (as `release_verdicts_for_pipelines`): a
/// release without a slowdown goes `grace` → `watching` → `passed` on one, `inconclusive` on the
/// other (it must rule out a 1% slowdown), then a 2.5x slower release is `regressed`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_argo_analysis_judges_each_verdict_state() {
    let Some(helm) = helm() else {
        eprintln!("helm not installed (scripts/install-test-tools.sh); skipping");
        return;
    };
    let (mock, _stop) = start_mock(MockOptions::default()).await;
    let dir = std::env::temp_dir().join(format!("llmprobe-argo-analysis-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let (marker_file, read_file) = (dir.join("token"), dir.join("read-token"));
    std::fs::write(&marker_file, TOKEN).unwrap();
    std::fs::write(&read_file, READ_TOKEN).unwrap();
    let short = yaml(mock, Some(&marker_file))
        .replace("detect:\n", &format!("detect:\n  release_read_token_file: {}\n", read_file.display()))
        .replace("armed_window_s: 120,", "armed_window_s: 20,")
        .replace("latency_tolerance: 1.5,", "latency_tolerance: 1.5, verdict_latency_effect: 2.0, verdict_goodput_effect: 0.2,");
    let strict = short.replace("verdict_latency_effect: 2.0,", "verdict_latency_effect: 1.01,");
    let shutdown = CancellationToken::new();
    let a = app::start(llmprobe::app::loader::parse(&short, "a.yaml").unwrap(), RunOptions::default(), shutdown.clone()).await.unwrap();
    let b = app::start(llmprobe::app::loader::parse(&strict, "b.yaml").unwrap(), RunOptions::default(), shutdown.clone()).await.unwrap();
    let url = |addr: SocketAddr| format!("http://{addr}");
    let (metric_a, metric_b) = (rendered_metric(&helm, &url(a.metrics_addr), "pause"), rendered_metric(&helm, &url(b.metrics_addr), "pause"));
    let abort_b = rendered_metric(&helm, &url(b.metrics_addr), "abort");
    let args = |version| BTreeMap::from([("target", "t"), ("version", version), ("llmprobe-read-token", READ_TOKEN)]);

    // The goodput baseline (as in release_verdicts_for_pipelines).
    tokio::join!(wait_for_probes(a.metrics_addr, GOODPUT_BASELINE_PROBES), wait_for_probes(b.metrics_addr, GOODPUT_BASELINE_PROBES));
    control(mock, r#"{"engine_version":"1.0.0","slowdown":1.0}"#).await;
    let v1 = args("1.0.0");
    let ((seen_a, phases_a), (seen_b, phases_b)) =
        tokio::join!(watch(&metric_a, &v1, Duration::from_secs(90), "passed"), watch(&metric_b, &v1, Duration::from_secs(90), "inconclusive"));
    assert_eq!(seen_a.get("grace"), Some(&Phase::Inconclusive), "grace keeps Argo measuring: {seen_a:?}");
    assert_eq!(seen_a.get("watching"), Some(&Phase::Inconclusive), "watching keeps Argo measuring: {seen_a:?}");
    assert_eq!(seen_a.get("passed"), Some(&Phase::Successful), "{seen_a:?}");
    assert_eq!(seen_b.get("inconclusive"), Some(&Phase::Inconclusive), "inconclusive pauses (onInconclusive: pause): {seen_b:?}");
    let result = Value::String("inconclusive".into());
    let abort = evaluate(&result, abort_b["successCondition"].as_str(), abort_b["failureCondition"].as_str());
    assert_eq!(abort, Phase::Failed, "onInconclusive: abort fails it");
    // The metric's limits over what was measured: passed ends it Successful; inconclusive
    // measurements go on (within `count`, none of them ends it) until `count` runs out.
    assert_eq!(assess(&metric_a, &phases_a), Some(Phase::Successful), "{phases_a:?}");
    assert_eq!(assess(&metric_b, &phases_b), None, "still measuring after {} measurements: {phases_b:?}", phases_b.len());
    let mut to_count = phases_b.clone();
    while assess(&metric_b, &to_count).is_none() {
        to_count.push(Phase::Inconclusive);
    }
    let answered = to_count.iter().filter(|p| **p != Phase::Error).count() as i64;
    assert_eq!(Some(answered), metric_b["count"].as_i64(), "nothing but `count` ends it: {to_count:?}");
    assert_eq!(assess(&metric_b, &to_count), Some(Phase::Inconclusive), "count reached without a verdict: the Rollout pauses");

    // A 2.5x slower release.
    control(mock, r#"{"engine_version":"2.0.0","slowdown":2.5}"#).await;
    let (seen, phases) = watch(&metric_a, &args("2.0.0"), Duration::from_secs(60), "regressed").await;
    assert_eq!(seen.get("regressed"), Some(&Phase::Failed), "{seen:?}");
    assert_eq!(assess(&metric_a, &phases), Some(Phase::Failed), "the first regressed measurement aborts: {phases:?}");
    // A wrong token is an Error measurement, never a verdict.
    let wrong = BTreeMap::from([("target", "t"), ("version", "2.0.0"), ("llmprobe-read-token", "wrong")]);
    assert_eq!(measure(&reqwest::Client::new(), &metric_a, &wrong).await, None);
    shutdown.cancel();
    a.wait().await.unwrap();
    b.wait().await.unwrap();
    std::fs::remove_dir_all(&dir).ok();
}

#[test]
fn the_evaluator_follows_argo() {
    let passed = Value::String("passed".into());
    assert_eq!(evaluate(&passed, Some(r#"result == "passed""#), Some(r#"result == "regressed""#)), Phase::Successful);
    assert_eq!(evaluate(&passed, Some(r#"result == "x""#), Some(r#"result == "y""#)), Phase::Inconclusive);
    assert_eq!(evaluate(&passed, Some(r#"result == "passed""#), Some(r#"result == "passed""#)), Phase::Failed, "failure wins");
    assert_eq!(evaluate(&passed, Some(r#"result == "x""#), None), Phase::Failed, "without a failure condition, not success is failure");
    assert_eq!(evaluate(&passed, None, Some(r#"result == "x""#)), Phase::Successful, "without a success condition, not failure is success");
    assert_eq!(evaluate(&passed, None, Some(r#"(result != "passed") || result == "passed" && result == "x""#)), Phase::Successful, "&& binds tighter");
    assert_eq!(json_path("{$.state}", &serde_json::json!({"state": "grace", "x": 1})), &Value::String("grace".into()));
}
