//! A small self-contained SVG line chart (axes, ticks, polylines, legend), enough for the
//! report's plots without a plotting dependency or any network asset.

use std::fmt::Write;

/// One line of a chart.
#[derive(Debug, Clone)]
pub struct Series {
    pub name: String,
    pub points: Vec<(f64, f64)>,
}

/// A chart to draw.
#[derive(Debug, Clone)]
pub struct Chart {
    pub title: String,
    pub x_label: String,
    pub y_label: String,
    pub series: Vec<Series>,
    /// Draw as steps (for CDFs) instead of straight segments with markers.
    pub step: bool,
}

const W: f64 = 640.0;
const H: f64 = 360.0;
const LEFT: f64 = 70.0;
const RIGHT: f64 = 150.0;
const TOP: f64 = 36.0;
const BOTTOM: f64 = 50.0;
const COLORS: [&str; 8] = ["#1f77b4", "#d62728", "#2ca02c", "#ff7f0e", "#9467bd", "#8c564b", "#e377c2", "#17becf"];

/// Escapes text for SVG/HTML.
pub fn esc(s: &str) -> String {
    s.replace('&', "&amp;").replace('<', "&lt;").replace('>', "&gt;").replace('"', "&quot;")
}

/// "Nice" tick values covering [lo, hi] (1, 2, 5 × 10^k steps).
pub fn ticks(lo: f64, hi: f64, want: usize) -> Vec<f64> {
    if hi.partial_cmp(&lo) != Some(std::cmp::Ordering::Greater) || !lo.is_finite() || !hi.is_finite() {
        return vec![lo];
    }
    let raw = (hi - lo) / want.max(1) as f64;
    let mag = 10f64.powf(raw.log10().floor());
    let step = [1.0, 2.0, 5.0, 10.0].iter().map(|m| m * mag).find(|s| *s >= raw).unwrap_or(10.0 * mag);
    let mut t = (lo / step).ceil() * step;
    let mut out = Vec::new();
    while t <= hi + step * 1e-9 {
        out.push(if t.abs() < step * 1e-9 { 0.0 } else { t });
        t += step;
    }
    out
}

fn label(v: f64) -> String {
    if v == 0.0 {
        "0".into()
    } else if v.abs() >= 100.0 || v.fract() == 0.0 {
        format!("{v:.0}")
    } else if v.abs() >= 1.0 {
        format!("{v:.1}")
    } else {
        format!("{v:.3}").trim_end_matches('0').to_owned()
    }
}

/// Renders the chart as an `<svg>` element.
pub fn render(c: &Chart) -> String {
    let all: Vec<(f64, f64)> = c.series.iter().flat_map(|s| s.points.iter().copied()).filter(|(x, y)| x.is_finite() && y.is_finite()).collect();
    let mut svg = String::new();
    let _ = write!(
        svg,
        r#"<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 {W} {H}" width="{W}" height="{H}" font-family="sans-serif" font-size="11" role="img"><title>{}</title>"#,
        esc(&c.title)
    );
    let _ = write!(
        svg,
        r##"<rect width="{W}" height="{H}" fill="#fff"/><text x="{}" y="20" font-size="14" text-anchor="middle">{}</text>"##,
        (LEFT + W - RIGHT) / 2.0,
        esc(&c.title)
    );
    if all.is_empty() {
        let _ = write!(svg, r#"<text x="{}" y="{}" text-anchor="middle">no data</text></svg>"#, W / 2.0, H / 2.0);
        return svg;
    }
    let (mut x0, mut x1) = all.iter().fold((f64::INFINITY, f64::NEG_INFINITY), |(a, b), p| (a.min(p.0), b.max(p.0)));
    let y1 = all.iter().fold(f64::NEG_INFINITY, |a, p| a.max(p.1));
    let y0 = all.iter().fold(0.0f64, |a, p| a.min(p.1));
    if x1 <= x0 {
        x0 -= 1.0;
        x1 += 1.0;
    }
    let y1 = if y1 <= y0 { y0 + 1.0 } else { y1 * 1.05 };
    let (pw, ph) = (W - LEFT - RIGHT, H - TOP - BOTTOM);
    let sx = |x: f64| LEFT + (x - x0) / (x1 - x0) * pw;
    let sy = |y: f64| TOP + ph - (y - y0) / (y1 - y0) * ph;
    axes(&mut svg, c, (x0, x1, y0, y1), &sx, &sy);
    for (i, s) in c.series.iter().enumerate() {
        let color = COLORS[i % COLORS.len()];
        let mut pts = String::new();
        let mut prev: Option<(f64, f64)> = None;
        for &(x, y) in s.points.iter().filter(|(x, y)| x.is_finite() && y.is_finite()) {
            if c.step {
                if let Some((_, py)) = prev {
                    let _ = write!(pts, "{:.1},{:.1} ", sx(x), sy(py));
                }
            }
            let _ = write!(pts, "{:.1},{:.1} ", sx(x), sy(y));
            prev = Some((x, y));
        }
        let _ = write!(svg, r#"<polyline fill="none" stroke="{color}" stroke-width="1.8" points="{}"/>"#, pts.trim_end());
        if !c.step {
            for &(x, y) in &s.points {
                let _ = write!(
                    svg,
                    r#"<circle cx="{:.1}" cy="{:.1}" r="2.8" fill="{color}"><title>{}: ({}, {})</title></circle>"#,
                    sx(x),
                    sy(y),
                    esc(&s.name),
                    label(x),
                    label(y)
                );
            }
        }
        let ly = TOP + 10.0 + i as f64 * 16.0;
        let _ = write!(
            svg,
            r#"<line x1="{}" y1="{ly}" x2="{}" y2="{ly}" stroke="{color}" stroke-width="2.5"/><text x="{}" y="{}">{}</text>"#,
            W - RIGHT + 12.0,
            W - RIGHT + 30.0,
            W - RIGHT + 35.0,
            ly + 4.0,
            esc(&s.name)
        );
    }
    svg.push_str("</svg>");
    svg
}

fn axes(svg: &mut String, c: &Chart, (x0, x1, y0, y1): (f64, f64, f64, f64), sx: &dyn Fn(f64) -> f64, sy: &dyn Fn(f64) -> f64) {
    let (bottom, right) = (H - BOTTOM, W - RIGHT);
    for t in ticks(y0, y1, 5) {
        let y = sy(t);
        let _ = write!(
            svg,
            r##"<line x1="{LEFT}" y1="{y:.1}" x2="{right}" y2="{y:.1}" stroke="#e5e5e5"/><text x="{}" y="{:.1}" text-anchor="end">{}</text>"##,
            LEFT - 6.0,
            y + 4.0,
            label(t)
        );
    }
    for t in ticks(x0, x1, 6) {
        let x = sx(t);
        let _ = write!(
            svg,
            r##"<line x1="{x:.1}" y1="{bottom}" x2="{x:.1}" y2="{}" stroke="#333"/><text x="{x:.1}" y="{}" text-anchor="middle">{}</text>"##,
            bottom + 5.0,
            bottom + 18.0,
            label(t)
        );
    }
    let _ = write!(
        svg,
        r##"<line x1="{LEFT}" y1="{bottom}" x2="{right}" y2="{bottom}" stroke="#333"/><line x1="{LEFT}" y1="{TOP}" x2="{LEFT}" y2="{bottom}" stroke="#333"/>"##
    );
    let _ = write!(svg, r#"<text x="{}" y="{}" text-anchor="middle">{}</text>"#, (LEFT + right) / 2.0, H - 10.0, esc(&c.x_label));
    let _ = write!(svg, r#"<text transform="translate(16 {}) rotate(-90)" text-anchor="middle">{}</text>"#, (TOP + bottom) / 2.0, esc(&c.y_label));
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nice_ticks() {
        assert_eq!(ticks(0.0, 10.0, 5), vec![0.0, 2.0, 4.0, 6.0, 8.0, 10.0]);
        assert_eq!(ticks(1.0, 16.0, 6), vec![5.0, 10.0, 15.0]);
    }

    #[test]
    fn renders_lines_legend_and_escapes() {
        let c = Chart {
            title: "a < b".into(),
            x_label: "x".into(),
            y_label: "y".into(),
            series: vec![Series { name: "p95".into(), points: vec![(1.0, 2.0), (2.0, 4.0)] }],
            step: false,
        };
        let s = render(&c);
        assert!(s.starts_with("<svg") && s.ends_with("</svg>"));
        assert!(s.contains("<polyline") && s.contains("a &lt; b") && s.contains(">p95</text>"));
        let empty = Chart { series: vec![], ..c };
        assert!(render(&empty).contains("no data"));
    }
}
