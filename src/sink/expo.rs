//! Exposition text post-processing: a stable series order within each metric family.
//!
//! prometheus-client keeps a family's series in a hash map, so its output order changes from run to
//! run. Sorting makes scrapes diffable and the golden `/metrics` file an exact contract.

/// Sorts the series of every family by label set, keeping each series' own lines (a histogram's
/// `_sum`, `_count` and buckets) together and in their original order. Comment lines (`# HELP`,
/// `# TYPE`, `# UNIT`, `# EOF`) stay where they are and delimit families.
pub(crate) fn sort_series(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut block: Vec<&str> = Vec::new();
    for line in text.lines() {
        if line.starts_with('#') {
            flush_block(&mut block, &mut out);
            push_line(&mut out, line);
        } else {
            block.push(line);
        }
    }
    flush_block(&mut block, &mut out);
    out
}

fn push_line(out: &mut String, line: &str) {
    out.push_str(line);
    out.push('\n');
}

/// Writes one family's sample lines, series sorted by their label set.
fn flush_block(block: &mut Vec<&str>, out: &mut String) {
    let mut series: Vec<(&str, Vec<&str>)> = Vec::new();
    for line in block.drain(..) {
        let key = series_key(line);
        match series.last_mut() {
            Some((last, lines)) if *last == key => lines.push(line),
            _ => series.push((key, vec![line])),
        }
    }
    // Stable: a series' lines keep their order; equal keys cannot occur within one family.
    series.sort_by(|a, b| a.0.cmp(b.0));
    for (_, lines) in series {
        for line in lines {
            push_line(out, line);
        }
    }
}

/// The label set of a sample line without a trailing `le` label, e.g. `target="a",scenario="b"`.
fn series_key(line: &str) -> &str {
    let labels = label_text(line);
    match labels.rfind("le=\"") {
        Some(i) if (i == 0 || labels[..i].ends_with(',')) && is_last_label(&labels[i..]) => {
            labels[..i].trim_end_matches(',')
        }
        _ => labels,
    }
}

/// Whether `rest` (starting at `le="`) is exactly one quoted label value with nothing after it.
fn is_last_label(rest: &str) -> bool {
    let value = &rest[4..];
    closing_quote(value) == Some(value.len() - 1)
}

/// The text between `{` and its matching `}` of a sample line, or `""` without labels.
fn label_text(line: &str) -> &str {
    let name_end = line.find(['{', ' ']).unwrap_or(line.len());
    if !line[name_end..].starts_with('{') {
        return "";
    }
    let body = &line[name_end + 1..];
    let mut in_quote = false;
    let mut escaped = false;
    for (i, c) in body.char_indices() {
        match c {
            _ if escaped => escaped = false,
            '\\' if in_quote => escaped = true,
            '"' => in_quote = !in_quote,
            '}' if !in_quote => return &body[..i],
            _ => {}
        }
    }
    body
}

/// Byte index of the first unescaped `"` in `s`.
fn closing_quote(s: &str) -> Option<usize> {
    let mut escaped = false;
    for (i, c) in s.char_indices() {
        match c {
            _ if escaped => escaped = false,
            '\\' => escaped = true,
            '"' => return Some(i),
            _ => {}
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sorts_counters_by_labels() {
        let text = "# TYPE c counter\nc_total{t=\"b\"} 1\nc_total{t=\"a\"} 2\n# EOF\n";
        assert_eq!(sort_series(text), "# TYPE c counter\nc_total{t=\"a\"} 2\nc_total{t=\"b\"} 1\n# EOF\n");
    }

    #[test]
    fn keeps_histogram_series_together() {
        let text = "# TYPE h histogram\n\
            h_sum{t=\"b\"} 1\nh_count{t=\"b\"} 1\nh_bucket{t=\"b\",le=\"0.5\"} 1\nh_bucket{t=\"b\",le=\"+Inf\"} 1\n\
            h_sum{t=\"a\"} 0\nh_count{t=\"a\"} 0\nh_bucket{t=\"a\",le=\"0.5\"} 0\nh_bucket{t=\"a\",le=\"+Inf\"} 0\n";
        let want = "# TYPE h histogram\n\
            h_sum{t=\"a\"} 0\nh_count{t=\"a\"} 0\nh_bucket{t=\"a\",le=\"0.5\"} 0\nh_bucket{t=\"a\",le=\"+Inf\"} 0\n\
            h_sum{t=\"b\"} 1\nh_count{t=\"b\"} 1\nh_bucket{t=\"b\",le=\"0.5\"} 1\nh_bucket{t=\"b\",le=\"+Inf\"} 1\n";
        assert_eq!(sort_series(text), want);
    }

    #[test]
    fn label_values_with_braces_and_quotes() {
        assert_eq!(series_key(r#"x{t="a}\"le=\"1",le="2"} 3"#), r#"t="a}\"le=\"1""#);
        assert_eq!(series_key(r#"x{t="le=\"1\""} 3"#), r#"t="le=\"1\"""#);
        assert_eq!(series_key("x 3"), "");
        assert_eq!(series_key("x{le=\"1\"} 3"), "");
    }

    #[test]
    fn unlabelled_families_pass_through() {
        let text = "# TYPE g gauge\ng 1\n# EOF\n";
        assert_eq!(sort_series(text), text);
    }
}
