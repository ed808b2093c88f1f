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
    let mut series: Vec<(String, Vec<&str>)> = Vec::new();
    for line in block.drain(..) {
        let key = series_key(line);
        match series.last_mut() {
            Some((last, lines)) if *last == key => lines.push(line),
            _ => series.push((key, vec![line])),
        }
    }
    // Stable: a series' lines keep their order; equal keys cannot occur within one family.
    series.sort_by(|a, b| a.0.cmp(&b.0));
    for (_, lines) in series {
        for line in lines {
            push_line(out, line);
        }
    }
}

/// The label set of a sample line without its `le` label, e.g. `target="a",scenario="b"`.
fn series_key(line: &str) -> String {
    split_labels(label_text(line)).into_iter().filter(|pair| !pair.starts_with("le=\"")).collect::<Vec<_>>().join(",")
}

/// The text between `{` and its matching `}` of a sample line, or `""` without labels.
fn label_text(line: &str) -> &str {
    let name_end = line.find(['{', ' ']).unwrap_or(line.len());
    if !line[name_end..].starts_with('{') {
        return "";
    }
    let body = &line[name_end + 1..];
    let end = top_level(body, '}').unwrap_or(body.len());
    &body[..end]
}

/// `a="1",b="x,y"` -> `["a=\"1\"", "b=\"x,y\""]`, commas inside quoted values kept.
fn split_labels(mut labels: &str) -> Vec<&str> {
    let mut pairs = Vec::new();
    while !labels.is_empty() {
        let end = top_level(labels, ',').unwrap_or(labels.len());
        pairs.push(&labels[..end]);
        labels = labels.get(end + 1..).unwrap_or("");
    }
    pairs
}

/// Byte index of the first `stop` outside a quoted label value.
fn top_level(s: &str, stop: char) -> Option<usize> {
    let mut in_quote = false;
    let mut escaped = false;
    for (i, c) in s.char_indices() {
        match c {
            _ if escaped => escaped = false,
            '\\' if in_quote => escaped = true,
            '"' => in_quote = !in_quote,
            _ if c == stop && !in_quote => return Some(i),
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
    fn label_values_with_braces_commas_and_quotes() {
        assert_eq!(series_key(r#"x{t="a},\"le=\"1",le="2"} 3"#), r#"t="a},\"le=\"1""#);
        assert_eq!(series_key(r#"x{le="+Inf",t="le=\"1\"",s="b"} 3"#), r#"t="le=\"1\"",s="b""#);
        assert_eq!(series_key(r#"x{handle="h",le="1"} 3"#), r#"handle="h""#);
        assert_eq!(series_key("x 3"), "");
        assert_eq!(series_key("x{le=\"1\"} 3"), "");
    }

    #[test]
    fn le_first_buckets_stay_in_order() {
        let text = "h_sum{t=\"b\"} 1\nh_bucket{le=\"1.0\",t=\"b\"} 1\nh_bucket{le=\"+Inf\",t=\"b\"} 1\n\
            h_sum{t=\"a\"} 0\nh_bucket{le=\"1.0\",t=\"a\"} 0\nh_bucket{le=\"+Inf\",t=\"a\"} 0\n";
        let want = "h_sum{t=\"a\"} 0\nh_bucket{le=\"1.0\",t=\"a\"} 0\nh_bucket{le=\"+Inf\",t=\"a\"} 0\n\
            h_sum{t=\"b\"} 1\nh_bucket{le=\"1.0\",t=\"b\"} 1\nh_bucket{le=\"+Inf\",t=\"b\"} 1\n";
        assert_eq!(sort_series(text), want);
    }

    #[test]
    fn unlabelled_families_pass_through() {
        let text = "# TYPE g gauge\ng 1\n# EOF\n";
        assert_eq!(sort_series(text), text);
    }
}
