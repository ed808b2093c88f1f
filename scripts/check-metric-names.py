#!/usr/bin/env python3
"""Check that every metric name read by the dashboards and alert rules exists.

Usage: scripts/check-metric-names.py METRICS_FILE [--known FILE] [--rules FILE ...] [--dashboards FILE ...]
                                      [--after-event NAME ...]

METRICS_FILE is llmprobe's /metrics (OpenMetrics or Prometheus text). A referenced name is accepted if
  * it is a sample name in METRICS_FILE, or a family name there with a matching suffix
    (counter: _total/_created, histogram: _bucket/_sum/_count/_created, summary: _sum/_count, info: _info);
  * it is listed in the known-names file (engine, GPU and Prometheus names; default
    alerts/known-external-metrics.txt);
  * it is recorded by a `record:` rule in the rule files;
  * it is named with --after-event: llmprobe exports it only once something has happened (a release
    marker), so a freshly started prober may lack it (scripts/check-demo-metrics.sh).
Exits 1 and lists the unknown names (with where they are used) otherwise. Python 3 stdlib only.
"""
import argparse
import glob
import json
import os
import re
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from grafana_exprs import panels  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

KEYWORDS = {
    # aggregations and modifiers
    "sum", "min", "max", "avg", "group", "stddev", "stdvar", "count", "count_values", "bottomk", "topk",
    "quantile", "limitk", "limit_ratio", "by", "without", "on", "ignoring", "group_left", "group_right",
    "offset", "bool", "and", "or", "unless", "atan2", "start", "end",
    # literals
    "inf", "nan", "Inf", "NaN", "INF", "NAN",
}
IDENT = re.compile(r"[A-Za-z_:][A-Za-z0-9_:]*")


def strip_strings(expr):
    return re.sub(r'"(?:[^"\\]|\\.)*"|\'(?:[^\'\\]|\\.)*\'|`[^`]*`', '""', expr)


def strip_balanced(expr, open_ch, close_ch):
    out, depth = [], 0
    for ch in expr:
        if ch == open_ch:
            depth += 1
            out.append(open_ch)
        elif ch == close_ch and depth:
            depth -= 1
            out.append(close_ch)
        elif depth == 0:
            out.append(ch)
    return "".join(out)


def metric_names(expr):
    """Metric names referenced by a PromQL expression (no full parser; good for rule/dashboard PromQL)."""
    e = re.sub(r"#[^\n]*", "", expr)
    lv = re.fullmatch(r"\s*label_values\((.*),\s*[A-Za-z_][A-Za-z0-9_]*\s*\)\s*", e, re.S)
    if lv:
        e = lv.group(1)
    elif re.fullmatch(r"\s*label_values\(\s*[A-Za-z_][A-Za-z0-9_]*\s*\)\s*", e):
        return set()
    e = strip_strings(e)
    e = strip_balanced(e, "{", "}")          # label matchers
    e = strip_balanced(e, "[", "]")          # ranges, subqueries
    # label lists after grouping modifiers
    e = re.sub(r"\b(by|without|on|ignoring|group_left|group_right)\s*\([^)]*\)", " ", e)
    e = re.sub(r"\boffset\s+-?[0-9a-zA-Z_$]+", " ", e)
    e = re.sub(r"\$\{?[A-Za-z_][A-Za-z0-9_]*\}?", " ", e)   # leftover Grafana variables
    names = set()
    for m in IDENT.finditer(e):
        name = m.group(0)
        start, end = m.span()
        if start > 0 and (e[start - 1].isdigit() or e[start - 1] == "."):
            continue                          # part of a number like 1e9 or 0x1
        if name in KEYWORDS:
            continue
        rest = e[end:].lstrip()
        if rest.startswith("("):
            continue                          # function call
        names.add(name)
    return names


def parse_exposition(path):
    samples, families = set(), {}
    with open(path, encoding="utf-8") as f:
        for line in f:
            line = line.strip()
            if not line:
                continue
            if line.startswith("#"):
                parts = line.split(None, 3)
                if len(parts) >= 4 and parts[1] == "TYPE":
                    families[parts[2]] = parts[3].strip()
                continue
            m = IDENT.match(line)
            if m:
                samples.add(m.group(0))
    return samples, families


SUFFIXES = {
    "counter": ["_total", "_created"],
    "histogram": ["_bucket", "_sum", "_count", "_created"],
    "gaugehistogram": ["_bucket", "_gsum", "_gcount"],
    "summary": ["_sum", "_count", "_created"],
    "info": ["_info"],
}


def exported(name, samples, families):
    if name in samples:
        return True
    if name in families and families[name] not in ("counter", "info"):
        return True
    for fam, typ in families.items():
        for suf in SUFFIXES.get(typ, []):
            if name == fam + suf:
                return True
    return False


def read_known(path):
    known = set()
    with open(path, encoding="utf-8") as f:
        for line in f:
            line = line.split("#", 1)[0].strip()
            if line:
                known.add(line)
    return known


def rule_exprs(path):
    """(where, expr) for every expr in a Prometheus rule file, and the set of recorded names.

    A small reader for the block-scalar and single-line `expr:` forms used in this repository's rule
    files (the stdlib has no YAML parser)."""
    lines = open(path, encoding="utf-8").read().splitlines()
    exprs, records, i, current = [], set(), 0, "?"
    while i < len(lines):
        line = lines[i]
        m = re.match(r"^\s*-?\s*(alert|record):\s*(\S+)", line)
        if m:
            current = m.group(2)
            if m.group(1) == "record":
                records.add(current)
        m = re.match(r"^(\s*)-?\s*expr:\s*(.*)$", line)
        if m:
            indent, value = len(m.group(1)), m.group(2).strip()
            if value and value[0] in "|>":
                block = []
                i += 1
                while i < len(lines) and (not lines[i].strip() or len(lines[i]) - len(lines[i].lstrip()) > indent):
                    block.append(lines[i])
                    i += 1
                exprs.append((f"{os.path.relpath(path, ROOT)}:{current}", "\n".join(block)))
                continue
            if value[:1] in "'\"":
                value = value[1:-1]
            exprs.append((f"{os.path.relpath(path, ROOT)}:{current}", value))
        i += 1
    return exprs, records


def dashboard_exprs(path):
    """(where, expr) for panel targets, annotations and query variables of a Grafana dashboard."""
    d = json.load(open(path, encoding="utf-8"))
    rel = os.path.relpath(path, ROOT)
    out = []
    for p in panels(d.get("panels", [])):
        for t in p.get("targets", []):
            if t.get("expr"):
                out.append((f"{rel}: panel {p.get('id')} '{p.get('title')}' {t.get('refId')}", t["expr"]))
    for a in d.get("annotations", {}).get("list", []):
        if a.get("expr"):
            out.append((f"{rel}: annotation '{a.get('name')}'", a["expr"]))
    for v in d.get("templating", {}).get("list", []):
        if v.get("type") == "query":
            q = v.get("query")
            q = q.get("query") if isinstance(q, dict) else q
            if q:
                out.append((f"{rel}: variable '{v.get('name')}'", q))
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("metrics_file")
    ap.add_argument("--known", default=os.path.join(ROOT, "alerts", "known-external-metrics.txt"))
    ap.add_argument("--rules", nargs="*", default=None, help="rule files (default alerts/*.yml)")
    ap.add_argument("--dashboards", nargs="*", default=None, help="dashboards (default grafana/*.json)")
    ap.add_argument("--after-event", nargs="*", default=[],
                    help="names exported only after an event (release marker); accepted when absent")
    args = ap.parse_args()

    rules = args.rules if args.rules is not None else sorted(glob.glob(os.path.join(ROOT, "alerts", "*.yml")))
    dashboards = args.dashboards if args.dashboards is not None else sorted(glob.glob(os.path.join(ROOT, "grafana", "*.json")))
    samples, families = parse_exposition(args.metrics_file)
    if not samples:
        print(f"check-metric-names: no samples in {args.metrics_file}", file=sys.stderr)
        return 1
    known = read_known(args.known)

    uses, recorded = [], set()
    for r in rules:
        exprs, recs = rule_exprs(r)
        uses += exprs
        recorded |= recs
    for dpath in dashboards:
        uses += dashboard_exprs(dpath)

    where = {}
    for loc, expr in uses:
        for name in metric_names(expr):
            where.setdefault(name, []).append(loc)

    unknown = {}
    counts = {"exported": 0, "recorded": 0, "known": 0, "after event": 0}
    for name in sorted(where):
        if exported(name, samples, families):
            counts["exported"] += 1
        elif name in recorded:
            counts["recorded"] += 1
        elif name in known:
            counts["known"] += 1
        elif name in args.after_event:
            counts["after event"] += 1
        else:
            unknown[name] = where[name]

    print(f"check-metric-names: {len(uses)} expressions in {len(rules)} rule file(s) and {len(dashboards)} dashboard(s); "
          f"{len(where)} names: {counts['exported']} exported by llmprobe, {counts['recorded']} recording rules, "
          f"{counts['known']} known external, {counts['after event']} absent until an event (--after-event)")
    if unknown:
        for name, locs in unknown.items():
            print(f"  UNKNOWN {name}  (used in: {'; '.join(sorted(set(locs)))})", file=sys.stderr)
        print(f"check-metric-names: {len(unknown)} name(s) neither in {args.metrics_file} nor in {args.known}",
              file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
