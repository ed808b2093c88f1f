"""Grafana dashboard helpers shared by the ops scripts: walk every panel (rows nest them) and
replace template variables so a panel's expression becomes plain PromQL."""
import re

VARIABLE = re.compile(r"\$\{([A-Za-z0-9_:]+)\}|\$([A-Za-z_][A-Za-z0-9_]*)|\[\[([A-Za-z0-9_:]+)\]\]")


def panels(ps):
    """Every panel, including those nested in rows."""
    for p in ps:
        yield p
        yield from panels(p.get("panels", []))


def substitute(expr, values, default):
    """`$var`, `${var}`, `${var:fmt}` and `[[var]]` replaced by `values[var]`, else `default`."""
    def one(m):
        name = (m.group(1) or m.group(2) or m.group(3)).split(":")[0]
        return values.get(name, default)
    return VARIABLE.sub(one, expr)
