//! A tolerant parser for the Prometheus text format (0.0.4) and the OpenMetrics text format:
//! sample lines with escaped label values, `NaN`/`+Inf`/`-Inf`, optional timestamps and exemplars,
//! comments, and `# EOF`. It never panics; a line it cannot read is counted and skipped so one bad
//! line does not lose a whole scrape. Values equal to dcgm-exporter's "blank" sentinel are dropped.

/// dcgm-exporter writes this (`DCGM_FT_INT64_BLANK`) when a field has no value.
pub const DCGM_BLANK: f64 = 9_223_372_036_854_775_794.0;

/// One sample line.
#[derive(Debug, Clone, PartialEq)]
pub struct SampleLine {
    pub name: String,
    /// Label pairs in page order, values unescaped.
    pub labels: Vec<(String, String)>,
    pub value: f64,
    /// Milliseconds (Prometheus text) or seconds (OpenMetrics), as written; unused by llmprobe.
    pub timestamp: Option<f64>,
}

impl SampleLine {
    pub fn label(&self, name: &str) -> Option<&str> {
        self.labels.iter().find(|(k, _)| k == name).map(|(_, v)| v.as_str())
    }
}

/// A parsed page.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Page {
    pub samples: Vec<SampleLine>,
    /// Lines that were neither comments nor readable samples.
    pub bad_lines: usize,
    /// Samples dropped because they carried the DCGM blank sentinel.
    pub blank_values: usize,
}

impl Page {
    /// Every sample of a metric name.
    pub fn all<'a>(&'a self, name: &'a str) -> impl Iterator<Item = &'a SampleLine> + 'a {
        self.samples.iter().filter(move |s| s.name == name)
    }

    /// Sum of a metric's samples, `None` when the page has none.
    pub fn sum(&self, name: &str) -> Option<f64> {
        let mut found = false;
        let total = self.all(name).inspect(|_| found = true).map(|s| s.value).sum();
        found.then_some(total)
    }

    pub fn has(&self, name: &str) -> bool {
        self.all(name).next().is_some()
    }
}

/// Parses a whole page. Stops at `# EOF` (anything after it is ignored, as OpenMetrics says).
pub fn parse(text: &str) -> Page {
    match parse_limited(text, usize::MAX) {
        Ok(page) => page,
        Err(_) => unreachable!("no page has usize::MAX series"),
    }
}

/// Like [`parse`], but refuses a page with more than `max_series` sample lines (blank DCGM
/// values included), as soon as it sees one more: the page is not held as parsed samples.
pub fn parse_limited(text: &str, max_series: usize) -> Result<Page, String> {
    let mut page = Page::default();
    for raw in text.lines() {
        let line = raw.trim_matches(|c: char| c == ' ' || c == '\t' || c == '\r');
        if line.is_empty() {
            continue;
        }
        if line.starts_with('#') {
            if line == "# EOF" {
                break;
            }
            continue;
        }
        match parse_line(line) {
            Some(_) if page.samples.len() + page.blank_values >= max_series => {
                return Err(format!("page has more than {max_series} series"));
            }
            Some(s) if s.value == DCGM_BLANK => page.blank_values += 1,
            Some(s) => page.samples.push(s),
            None => page.bad_lines += 1,
        }
    }
    Ok(page)
}

/// `name{labels} value [timestamp] [# exemplar]`.
fn parse_line(line: &str) -> Option<SampleLine> {
    let name_end = line.find(['{', ' ', '\t']).unwrap_or(line.len());
    let name = &line[..name_end];
    if !valid_name(name) {
        return None;
    }
    let mut rest = &line[name_end..];
    let mut labels = Vec::new();
    if let Some(body) = rest.strip_prefix('{') {
        let (parsed, after) = parse_labels(body)?;
        labels = parsed;
        rest = after;
    }
    // An exemplar (`# {...} v ts`) follows the sample in OpenMetrics; it is not part of the value.
    let rest = rest.split(" # ").next().unwrap_or("");
    let mut fields = rest.split_ascii_whitespace();
    let value = parse_value(fields.next()?)?;
    let timestamp = match fields.next() {
        Some(t) => Some(t.parse::<f64>().ok().filter(|t| t.is_finite())?),
        None => None,
    };
    if fields.next().is_some() {
        return None;
    }
    Some(SampleLine { name: name.to_owned(), labels, value, timestamp })
}

fn valid_name(name: &str) -> bool {
    let mut chars = name.chars();
    matches!(chars.next(), Some(c) if c.is_ascii_alphabetic() || c == '_' || c == ':') && chars.all(|c| c.is_ascii_alphanumeric() || c == '_' || c == ':')
}

/// Go-style float text plus the spellings both formats allow for the special values.
fn parse_value(text: &str) -> Option<f64> {
    match text {
        "NaN" | "nan" => Some(f64::NAN),
        "+Inf" | "Inf" | "+inf" | "inf" => Some(f64::INFINITY),
        "-Inf" | "-inf" => Some(f64::NEG_INFINITY),
        _ => text.parse::<f64>().ok(),
    }
}

/// Parses `a="x",b="y"}` (after the `{`); returns the pairs and the text after `}`.
fn parse_labels(mut s: &str) -> Option<(Vec<(String, String)>, &str)> {
    let mut labels = Vec::new();
    loop {
        s = s.trim_start();
        if let Some(after) = s.strip_prefix('}') {
            return Some((labels, after));
        }
        let eq = s.find('=')?;
        let key = s[..eq].trim();
        if !valid_name(key) || key.contains(':') {
            return None;
        }
        let (value, after) = parse_quoted(s[eq + 1..].trim_start())?;
        labels.push((key.to_owned(), value));
        s = after.trim_start();
        if let Some(after) = s.strip_prefix(',') {
            s = after;
        } else if !s.starts_with('}') {
            return None;
        }
    }
}

/// Reads `"..."` with `\\`, `\"` and `\n` escapes; returns the value and the text after it.
fn parse_quoted(s: &str) -> Option<(String, &str)> {
    let body = s.strip_prefix('"')?;
    let mut value = String::new();
    let mut chars = body.char_indices();
    while let Some((i, c)) = chars.next() {
        match c {
            '"' => return Some((value, &body[i + 1..])),
            '\\' => match chars.next()?.1 {
                'n' => value.push('\n'),
                '\\' => value.push('\\'),
                '"' => value.push('"'),
                // Prometheus keeps unknown escapes as written.
                other => {
                    value.push('\\');
                    value.push(other);
                }
            },
            _ => value.push(c),
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn plain_and_labelled_samples() {
        let page = parse("# HELP a x\n# TYPE a gauge\na 1\nb{x=\"1\",y=\"two\"} 2.5e3\n");
        assert_eq!(page.samples.len(), 2);
        assert_eq!(page.samples[1].label("y"), Some("two"));
        assert_eq!(page.samples[1].value, 2500.0);
        assert_eq!(page.bad_lines, 0);
    }

    #[test]
    fn escapes_in_label_values() {
        let page = parse(r#"m{path="C:\\dir",q="say \"hi\"",nl="a\nb",brace="}",comma="a,b"} 1"#);
        let s = &page.samples[0];
        assert_eq!(s.label("path"), Some(r"C:\dir"));
        assert_eq!(s.label("q"), Some("say \"hi\""));
        assert_eq!(s.label("nl"), Some("a\nb"));
        assert_eq!(s.label("brace"), Some("}"));
        assert_eq!(s.label("comma"), Some("a,b"));
    }

    #[test]
    fn special_values_timestamps_exemplars_and_eof() {
        let text = "a NaN\nb +Inf 1700000000000\nc -Inf\nd{le=\"1\"} 3 # {trace_id=\"ab\"} 0.5 1700000000.1\n# EOF\ne 1\n";
        let page = parse(text);
        assert_eq!(page.samples.len(), 4, "{page:?}");
        assert!(page.samples[0].value.is_nan());
        assert_eq!(page.samples[1].value, f64::INFINITY);
        assert_eq!(page.samples[1].timestamp, Some(1.7e12));
        assert_eq!(page.samples[2].value, f64::NEG_INFINITY);
        assert_eq!(page.samples[3].value, 3.0);
    }

    #[test]
    fn dcgm_blank_sentinel_is_dropped() {
        let page = parse("DCGM_FI_DEV_GPU_UTIL{gpu=\"0\"} 9223372036854775794\nDCGM_FI_DEV_GPU_UTIL{gpu=\"1\"} 7\n");
        assert_eq!(page.samples.len(), 1);
        assert_eq!(page.blank_values, 1);
        assert_eq!(page.sum("DCGM_FI_DEV_GPU_UTIL"), Some(7.0));
    }

    #[test]
    fn a_page_over_the_series_cap_is_refused() {
        let page = "a 1\nb{x=\"1\"} 2\nc 3\n";
        assert_eq!(parse_limited(page, 3).unwrap().samples.len(), 3);
        assert_eq!(parse_limited(page, 2).unwrap_err(), "page has more than 2 series");
    }

    #[test]
    fn bad_lines_are_counted_not_fatal() {
        let page = parse("ok 1\n9bad 1\nnovalue\nunterminated{a=\"x 1\nextra 1 2 3\nx{a=b} 1\nfine{a=\"1\",} 2\n");
        assert_eq!(page.samples.iter().map(|s| s.name.as_str()).collect::<Vec<_>>(), ["ok", "fine"]);
        assert_eq!(page.bad_lines, 5);
    }
}
