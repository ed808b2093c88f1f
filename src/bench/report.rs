//! Reports: loads one or several result directories (merging their request records exactly:
//! figures are recomputed from the pooled records), and writes `report.md` and a self-contained
//! `report.html` with inline SVG plots.

use std::collections::BTreeSet;
use std::fmt::Write;
use std::path::{Path, PathBuf};

use anyhow::Context;

use super::figure::Figure;
use super::manifest::{self, Manifest};
use super::records::{self, Phase, Record};
use super::summary::{PointSummary, SummaryFile};
use super::svg::{self, Chart, Series, esc};
use crate::config::BenchMode;

/// One or more result directories, loaded and summarised together.
pub struct ResultSet {
    pub dirs: Vec<PathBuf>,
    pub manifests: Vec<Manifest>,
    pub records: Vec<Record>,
    pub summary: SummaryFile,
}

impl ResultSet {
    pub fn mode(&self) -> BenchMode {
        if self.summary.mode == "rate" { BenchMode::Rate } else { BenchMode::Concurrency }
    }
    pub fn load_label(&self) -> &'static str {
        match self.mode() {
            BenchMode::Rate => "target rate (req/s)",
            BenchMode::Concurrency => "concurrency (workers)",
        }
    }
}

/// Loads result directories. Several are merged: same mode and points required; a point's load
/// is the sum over the runs (pods that each sent a share of the rate add up). The shards of one
/// sharded run (`bench --shard`) merge only as a complete set (see `shard::check_merge`), and
/// their points carry the configured loads.
pub fn load(dirs: &[PathBuf]) -> anyhow::Result<ResultSet> {
    anyhow::ensure!(!dirs.is_empty(), "no result directory given");
    let mut manifests = Vec::new();
    let mut all = Vec::new();
    for d in dirs {
        let m = manifest::read(d)?;
        let recs = records::read(d)?;
        manifests.push(m);
        all.extend(recs);
    }
    let sharded = dirs.len() > 1 && super::shard::check_merge(&manifests, dirs)?;
    for (i, (m, d)) in manifests.iter().zip(dirs).enumerate().skip(1) {
        check_compatible(&manifests[0], m, d)?;
        anyhow::ensure!(
            sharded || !manifests[..i].iter().any(|o| o.run_id == m.run_id),
            "{}: run {} is already included (same directory twice?)",
            d.display(),
            m.run_id
        );
    }
    let first = &manifests[0];
    let mode = if first.mode == "rate" { BenchMode::Rate } else { BenchMode::Concurrency };
    let run_ids: Vec<String> = manifests.iter().map(|m| m.run_id.clone()).collect();
    let mut summary = super::summarize::summarize(&all, &run_ids, mode, first.slo.objective);
    if sharded {
        super::shard::merged_summary(&mut summary, &first.points, first.slo.objective);
    }
    // Engine counters describe one server over one run's windows: joined for a single run only.
    if dirs.len() == 1 {
        attach_agreement(&mut summary, &super::engine::read(&dirs[0])?, &all);
    }
    Ok(ResultSet { dirs: dirs.to_vec(), manifests, records: all, summary })
}

/// Fills `engine_agreement` of each repeat that has an engine window.
fn attach_agreement(summary: &mut SummaryFile, windows: &[super::engine::Window], records: &[Record]) {
    for p in &mut summary.points {
        for r in &mut p.repeats {
            let Some(w) = windows.iter().find(|w| w.point == p.point && Some(w.repeat) == r.repeat) else { continue };
            let recs: Vec<&Record> = records.iter().filter(|x| x.point == p.point && x.repeat == r.repeat && x.run_id == w.run_id).collect();
            r.engine_agreement = super::engine::agreement(w, &recs);
        }
    }
}

fn check_compatible(a: &Manifest, b: &Manifest, dir: &Path) -> anyhow::Result<()> {
    anyhow::ensure!(a.mode == b.mode, "{}: mode {} differs from {} — only runs of one sweep can be merged", dir.display(), b.mode, a.mode);
    anyhow::ensure!(a.points.len() == b.points.len(), "{}: {} points, the first run has {}", dir.display(), b.points.len(), a.points.len());
    anyhow::ensure!(a.slo == b.slo && a.scenario_slo == b.scenario_slo, "{}: different SLO thresholds; goodput would not be comparable", dir.display());
    Ok(())
}

/// Writes the merged evidence (records and summary) into `out`, for a merge of several runs.
pub fn write_merged(rs: &ResultSet, out: &Path) -> anyhow::Result<()> {
    std::fs::create_dir_all(out).with_context(|| format!("creating {}", out.display()))?;
    anyhow::ensure!(!out.join(records::RECORDS_FILE).exists(), "{} already holds records; choose a new --output directory", out.display());
    records::append(out, &rs.records)?;
    super::json::write_json(&out.join(super::summary::SUMMARY_FILE), &rs.summary)?;
    super::json::write_json(&out.join("merged-from.json"), &rs.manifests)
}

/// Writes `report.md` and `report.html` into `out`; returns their paths.
pub fn write(rs: &ResultSet, out: &Path) -> anyhow::Result<(PathBuf, PathBuf)> {
    std::fs::create_dir_all(out).with_context(|| format!("creating {}", out.display()))?;
    let (md, html) = (out.join("report.md"), out.join("report.html"));
    std::fs::write(&md, markdown(rs)).with_context(|| format!("writing {}", md.display()))?;
    std::fs::write(&html, html_page(rs)).with_context(|| format!("writing {}", html.display()))?;
    Ok((md, html))
}

fn opt(v: Option<f64>, digits: usize) -> String {
    v.map_or("–".into(), |v| format!("{v:.digits$}"))
}

/// `median (min–max, cv x%)` of a figure across repeats.
fn spread_cell(p: &PointSummary, figure: Figure, digits: usize) -> String {
    match p.spread_of(figure) {
        Some(s) if s.n > 1 => {
            format!("{:.d$} ({:.d$}–{:.d$}{})", s.median, s.min, s.max, s.cv.map_or(String::new(), |cv| format!(", cv {:.1}%", cv * 100.0)), d = digits)
        }
        Some(s) => format!("{:.digits$}", s.median),
        None => "–".into(),
    }
}

fn about(rs: &ResultSet) -> String {
    let m = &rs.manifests[0];
    let mut s = String::new();
    let t = &m.target;
    let _ = writeln!(
        s,
        "- target: `{}` at {} ({}), model `{}`, engine `{}` {}",
        t.name,
        t.base_url,
        t.api,
        t.model.as_deref().unwrap_or("?"),
        t.engine.as_deref().unwrap_or("?"),
        t.engine_version.as_deref().unwrap_or("")
    );
    if let Some(p) = &m.mock_profile {
        let _ = writeln!(s, "- engine: the built-in mock engine, profile `{p}` (simulated, not a measurement of real hardware)");
    }
    let _ = writeln!(
        s,
        "- mode: {} sweep over {:?}; {} repeat(s) per point after {} warm-up request(s); stop per repeat: {}{}",
        m.mode,
        m.points,
        m.repeats,
        m.warmup_requests,
        m.requests_per_repeat.map_or(String::new(), |n| format!("{n} requests ")),
        m.duration_per_repeat_s.map_or(String::new(), |d| format!("{d} s"))
    );
    let _ = writeln!(
        s,
        "- SLO: ttft {} ms, tpot {} ms, e2e {} ms; goodput objective {}",
        opt(m.slo.ttft_ms, 0),
        opt(m.slo.tpot_ms, 1),
        opt(m.slo.e2e_ms, 0),
        m.slo.objective
    );
    for m in &rs.manifests {
        let _ = writeln!(
            s,
            "- run `{}`{}: llmprobe {} ({}), config `{}` sha256 `{}`, {} → {}, machine {} ({} CPUs, {} GiB)",
            m.run_id,
            m.shard.as_ref().map_or(String::new(), |sh| format!(" shard {}/{}", sh.index, sh.count)),
            m.tool_version,
            m.tool_revision,
            m.config_file,
            m.config_sha256,
            m.started_at,
            m.ended_at.as_deref().unwrap_or("(unfinished)"),
            m.machine.cpu_model.as_deref().unwrap_or("?"),
            m.machine.available_parallelism,
            m.machine.memory_total_bytes.map_or("?".into(), |b| format!("{:.1}", b as f64 / (1u64 << 30) as f64))
        );
        for f in &m.side_samples {
            let _ = writeln!(s, "  - side samples `{}`: {}", f.file, f.description);
        }
    }
    s
}

const DEFINITIONS: &str = "Figures are medians across repeats (min–max and coefficient of variation in brackets). \
Percentiles are nearest-rank over the successful requests of a repeat (ITL over every frame gap); throughput = \
successes (or tokens) / (first intended send → last request end); goodput ratio = requests that succeeded and met \
every SLO threshold / all requests of the repeat, failures and drops included. Warm-up requests are excluded.";

/// The Markdown report.
pub fn markdown(rs: &ResultSet) -> String {
    let s = &rs.summary;
    let mut md = format!("# llmprobe benchmark report\n\n{}\n{DEFINITIONS}\n\n", about(rs));
    let _ = writeln!(
        md,
        "| {} | ok / total | failed | dropped | req/s | output tok/s | goodput | ttft p50 ms | ttft p95 ms | ttft p99 ms | tpot p95 ms | itl p99 ms | e2e p95 ms |",
        s.mode
    );
    md.push_str("|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n");
    for p in &s.points {
        let _ = writeln!(
            md,
            "| {} | {}/{} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} |",
            super::knee::fmt(p.load),
            p.pooled.success,
            p.pooled.requests,
            p.pooled.failed,
            p.pooled.dropped,
            spread_cell(p, Figure::RequestThroughput, 2),
            spread_cell(p, Figure::OutputTokenThroughput, 0),
            spread_cell(p, Figure::GoodputRatio, 3),
            spread_cell(p, Figure::TtftP50, 1),
            spread_cell(p, Figure::TtftP95, 1),
            spread_cell(p, Figure::TtftP99, 1),
            spread_cell(p, Figure::TpotP95, 2),
            spread_cell(p, Figure::ItlP99, 2),
            spread_cell(p, Figure::E2eP95, 0)
        );
    }
    let _ = write!(
        md,
        "\n**Candidate knee:** {} — {}\n\n**Saturation:** {} — {}\n",
        s.knee.candidate.map_or("none".into(), super::knee::fmt),
        s.knee.candidate_reason,
        s.knee.saturation.map_or("none".into(), super::knee::fmt),
        s.knee.saturation_reason
    );
    if rs.mode() == BenchMode::Rate {
        md.push_str("\n| target rate | offered rate | achieved send rate | schedule lag p99 ms |\n|---:|---:|---:|---:|\n");
        for p in &s.points {
            let _ = writeln!(
                md,
                "| {} | {} | {} | {} |",
                super::knee::fmt(p.load),
                opt(p.pooled.offered_rate_rps, 2),
                opt(p.pooled.achieved_rate_rps, 2),
                opt(p.pooled.schedule_lag_p99_ms, 3)
            );
        }
    }
    let errors: BTreeSet<&String> = s.points.iter().flat_map(|p| p.pooled.errors.keys()).collect();
    if !errors.is_empty() {
        md.push_str("\n## Failures by class\n\n");
        for p in &s.points {
            let list: Vec<String> = p.pooled.errors.iter().map(|(k, v)| format!("{k} {v}")).collect();
            let _ = writeln!(md, "- load {}: {}", super::knee::fmt(p.load), if list.is_empty() { "none".into() } else { list.join(", ") });
        }
    }
    md.push_str(&agreement_section(s));
    md.push_str("\nPlots: see `report.html`.\n");
    md
}

/// The engine-agreement table, when any repeat has one.
fn agreement_section(s: &SummaryFile) -> String {
    let rows: Vec<(f64, u32, &super::engine::Agreement)> =
        s.points.iter().flat_map(|p| p.repeats.iter().filter_map(move |r| Some((p.load, r.repeat?, r.engine_agreement.as_ref()?)))).collect();
    if rows.is_empty() {
        return String::new();
    }
    let mut md = format!(
        "\n## Engine agreement\n\nThe engine's own counters (TTFT histogram `_sum`/`_count`, generated tokens) read just before and just after each repeat, against the prober's figures for the same repeat. \
The engine counts every request it served in the window: warm-up runs before the window opens, and the comparison is only valid when nothing else used the server during the run (engine requests = client requests shows it did not). \
The engine times TTFT from the request's arrival in the engine, the prober from its send, so the prober's mean is expected to be higher by the HTTP and tokenisation overhead; tolerance: |delta| ≤ {} ms + {:.0}% of the engine mean.\n\n",
        super::engine::TTFT_TOLERANCE_MS,
        super::engine::TTFT_TOLERANCE_REL * 100.0
    );
    md.push_str("| load | repeat | client ttft mean ms | engine ttft mean ms | delta ms | within tolerance | client / engine requests | client output tokens | engine generation tokens | tokens equal |\n|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n");
    for (load, repeat, a) in rows {
        let yes = |b: bool| if b { "yes" } else { "**no**" };
        let _ = writeln!(
            md,
            "| {} | {} | {} | {} | {} | {} | {} / {} | {} | {} | {} |",
            super::knee::fmt(load),
            repeat,
            opt(a.client_ttft_mean_ms, 1),
            opt(a.engine_ttft_mean_ms, 1),
            opt(a.delta_ms, 1),
            a.ttft_within_tolerance.map_or("–", yes),
            a.client_requests,
            a.engine_requests,
            a.client_output_tokens,
            a.engine_generation_tokens,
            yes(a.tokens_equal)
        );
    }
    md
}

fn by_load(s: &SummaryFile, figure: Figure) -> Vec<(f64, f64)> {
    s.points.iter().filter_map(|p| Some((p.load, p.median(figure)?))).collect()
}

fn series(s: &SummaryFile, figures: &[(&str, Figure)]) -> Vec<Series> {
    figures.iter().map(|(label, figure)| Series { name: (*label).into(), points: by_load(s, *figure) }).collect()
}

/// The plots, in report order.
fn charts(rs: &ResultSet) -> Vec<Chart> {
    let s = &rs.summary;
    let x = rs.load_label().to_owned();
    let chart = |title: &str, y: &str, series: Vec<Series>| Chart { title: title.into(), x_label: x.clone(), y_label: y.into(), series, step: false };
    let mut out = vec![
        chart("Requests per second vs load", "req/s", series(s, &[("throughput", Figure::RequestThroughput), ("goodput", Figure::RequestGoodput)])),
        chart(
            "Output tokens per second vs load",
            "tokens/s",
            series(s, &[("output tok/s", Figure::OutputTokenThroughput), ("total tok/s", Figure::TotalTokenThroughput)]),
        ),
        chart("Goodput ratio vs load", "ratio", series(s, &[("goodput ratio", Figure::GoodputRatio)])),
        chart("TTFT vs load", "ms", series(s, &[("p50", Figure::TtftP50), ("p95", Figure::TtftP95), ("p99", Figure::TtftP99)])),
        chart("TPOT vs load", "ms", series(s, &[("p50", Figure::TpotP50), ("p95", Figure::TpotP95), ("p99", Figure::TpotP99)])),
        Chart {
            title: "TTFT CDF per point (all repeats)".into(),
            x_label: "TTFT (ms)".into(),
            y_label: "fraction of requests".into(),
            series: ttft_cdfs(rs),
            step: true,
        },
    ];
    let engine = engine_samples(rs);
    let over_time = |title: &str, y: &str, fields: &[(&str, &str, f64)]| {
        let series = fields.iter().map(|(label, key, scale)| Series {
            name: (*label).into(),
            points: engine.iter().filter_map(|l| Some((l.get("t_s")?.as_f64()?, l.get(*key)?.as_f64()? * scale))).collect(),
        });
        // Steps without markers: a gauge holds its value until the next sample, and a sample a
        // second gives too many points for markers.
        Chart {
            title: title.into(),
            x_label: "time since the run started (s)".into(),
            y_label: y.into(),
            series: series.filter(|s| !s.points.is_empty()).collect(),
            step: true,
        }
    };
    for c in [
        over_time("Engine queue over time", "requests", &[("running", "requests_running", 1.0), ("waiting", "requests_waiting", 1.0)]),
        over_time("Engine KV cache usage over time", "% of KV cache", &[("KV usage", "kv_cache_usage", 100.0)]),
    ] {
        if !c.series.is_empty() {
            out.push(c);
        }
    }
    out
}

/// Side-sample lines with engine fields (the `engine` file or a `sources:` engine entry) of the
/// first result directory: one run's timeline.
fn engine_samples(rs: &ResultSet) -> Vec<serde_json::Map<String, serde_json::Value>> {
    let (Some(dir), Some(m)) = (rs.dirs.first(), rs.manifests.first()) else { return Vec::new() };
    let mut out = Vec::new();
    for f in &m.side_samples {
        let Ok(text) = std::fs::read_to_string(dir.join(&f.file)) else { continue };
        let lines = text.lines().filter_map(|l| serde_json::from_str::<serde_json::Map<String, serde_json::Value>>(l).ok());
        let engine: Vec<_> = lines.filter(|l| l.contains_key("requests_running") || l.contains_key("kv_cache_usage")).collect();
        if !engine.is_empty() {
            out = engine;
            break;
        }
    }
    out
}

fn ttft_cdfs(rs: &ResultSet) -> Vec<Series> {
    rs.summary
        .points
        .iter()
        .map(|p| {
            let mut v: Vec<f64> = rs.records.iter().filter(|r| r.point == p.point && r.phase == Phase::Measure).filter_map(|r| r.ttft_ms).collect();
            crate::util::stats::sort_f64(&mut v);
            let n = v.len() as f64;
            let points = v.iter().enumerate().map(|(i, &t)| (t, (i + 1) as f64 / n)).collect();
            Series { name: format!("load {}", super::knee::fmt(p.load)), points }
        })
        .collect()
}

/// The self-contained HTML page.
fn html_page(rs: &ResultSet) -> String {
    let md = markdown(rs);
    let mut h = String::from(
        "<!doctype html><html lang=\"en\"><head><meta charset=\"utf-8\"><title>llmprobe benchmark report</title><style>body{font-family:sans-serif;max-width:1200px;margin:2em auto;padding:0 1em;color:#222}table{border-collapse:collapse;font-size:13px}td,th{border:1px solid #ccc;padding:3px 6px;text-align:right}th{background:#f4f4f4}code{background:#f4f4f4;padding:0 3px}svg{display:block;margin:1em 0}.plots{display:grid;grid-template-columns:1fr 1fr;gap:0 1em}.plots svg{width:100%;height:auto}</style></head><body>\n",
    );
    for block in md.split("\n\n") {
        h.push_str(&md_block(block));
    }
    h.push_str("<h2>Plots</h2>\n<div class=\"plots\">\n");
    for c in charts(rs) {
        h.push_str(&svg::render(&c));
        h.push('\n');
    }
    h.push_str("</div>\n</body></html>\n");
    h
}

/// The few Markdown constructs the report uses, as HTML.
fn md_block(block: &str) -> String {
    let block = block.trim();
    if block.is_empty() || block.starts_with("Plots:") {
        return String::new();
    }
    if let Some(t) = block.strip_prefix("# ") {
        return format!("<h1>{}</h1>\n", esc(t));
    }
    if let Some(t) = block.strip_prefix("## ") {
        return format!("<h2>{}</h2>\n", esc(t));
    }
    let lines: Vec<&str> = block.lines().collect();
    if lines[0].starts_with('|') {
        let mut t = String::from("<table>");
        for (i, l) in lines.iter().enumerate().filter(|(i, _)| *i != 1) {
            let tag = if i == 0 { "th" } else { "td" };
            t.push_str("<tr>");
            for cell in l.trim_matches('|').split('|') {
                let _ = write!(t, "<{tag}>{}</{tag}>", inline(cell.trim()));
            }
            t.push_str("</tr>");
        }
        return t + "</table>\n";
    }
    let mut out = String::new();
    let mut in_list = false;
    for l in lines {
        if let Some(item) = l.trim_start().strip_prefix("- ") {
            if !in_list {
                out.push_str("<ul>");
                in_list = true;
            }
            let _ = write!(out, "<li>{}</li>", inline(item));
        } else {
            if in_list {
                out.push_str("</ul>");
                in_list = false;
            }
            let _ = write!(out, "<p>{}</p>", inline(l));
        }
    }
    if in_list {
        out.push_str("</ul>");
    }
    out + "\n"
}

/// `code` and **bold** spans.
fn inline(s: &str) -> String {
    let mut out = String::new();
    for (i, part) in esc(s).split('`').enumerate() {
        if i % 2 == 1 {
            let _ = write!(out, "<code>{part}</code>");
        } else {
            let mut bold = false;
            for (j, seg) in part.split("**").enumerate() {
                if j > 0 {
                    out.push_str(if bold { "</b>" } else { "<b>" });
                    bold = !bold;
                }
                out.push_str(seg);
            }
            if bold {
                out.push_str("</b>");
            }
        }
    }
    out
}
