#!/usr/bin/env python3
"""Fails when the crate's modules import each other in a cycle.

Two levels are checked: the top-level modules of `src/` (an edge A -> B when a file of A names
`crate::B`), and the files of each folder (an edge when a file names an item that a sibling file
defines, through `super::`, `self::` or `crate::folder::`; a `mod.rs` that only declares and
re-exports its children is the folder's face, not a dependency). `config` must name no other
module of the crate. Items are resolved by name from `pub` definitions, so a name defined in two
files of one folder counts as both; `#[cfg(test)] mod tests` blocks are left out.
Usage: scripts/check-module-cycles.py [src]   (or --self-test: the checker on made-up trees)
"""
import os, re, sys

import self_test

if sys.argv[1:] == ["--self-test"]:
    cases = {
        # (files, should fail)
        "top-level cycle": ({"lib.rs": "mod a; mod b;", "a.rs": "use crate::b::X;", "b.rs": "pub struct X; fn f() { crate::a::g(); }"}, True),
        "leaf names the crate": ({"lib.rs": "mod config; mod a;", "config/mod.rs": "use crate::a::Y;", "a.rs": "pub struct Y;"}, True),
        "face dispatch cycle": ({"lib.rs": "mod p;", "p/mod.rs": "mod x;\npub struct T;\nfn go() { x::run(); }", "p/x.rs": "use super::T;\npub fn run() {}"}, True),
        "layered folder": ({"lib.rs": "mod p;", "p/mod.rs": "mod t;\nmod x;\npub use t::T;\npub use x::run;", "p/t.rs": "pub struct T;", "p/x.rs": "use super::t::T;\npub fn run() {}"}, False),
        "re-export from outside": ({"lib.rs": "mod config; mod q;", "config/mod.rs": "pub struct K;", "q/mod.rs": "mod y;\npub use crate::config::K;\nfn f() { y::g(); }", "q/y.rs": "use super::K;\npub fn g() {}"}, False),
    }
    self_test.run(__file__, cases)

ROOT = sys.argv[1] if len(sys.argv) > 1 else "src"
LEAVES = {"config"}  # may name nothing else of the crate

DEF = re.compile(r"^\s*pub(?:\([^)]*\))?\s+(?:async\s+)?(?:unsafe\s+)?(?:struct|enum|fn|trait|type|const|static|mod|union)\s+([A-Za-z_][A-Za-z0-9_]*)", re.M)
MACRO_DEF = re.compile(r"macro_rules!\s*([a-z_][a-z0-9_]*)")
REEXPORT = re.compile(r"^\s*pub(?:\([^)]*\))?\s+use\s+(?:self::|super::)?([a-z_][a-z0-9_]*)::(\{[^;]*\}|[A-Za-z0-9_:*]+)\s*;", re.M)
PATH = re.compile(r"\b(crate|super|self)((?:::[A-Za-z_][A-Za-z0-9_]*)+)")
BARE = re.compile(r"(?<![A-Za-z0-9_:])([a-z_][a-z0-9_]*)((?:::[A-Za-z_][A-Za-z0-9_]*)+)")
USE = re.compile(r"\buse\s+(crate|super|self)::([^;]*);", re.S)


def strip(text):
    """Drops comments, string literals and `#[cfg(test)] mod tests { .. }`."""
    text = re.sub(r"//[^\n]*", "", text)
    text = re.sub(r"/\*.*?\*/", "", text, flags=re.S)
    text = re.sub(r'"(?:\\.|[^"\\])*"', '""', text)
    m = re.search(r"#\[cfg\(test\)\]\s*mod\s+tests\s*\{", text)
    if m:
        depth, i = 1, m.end()
        while i < len(text) and depth:
            depth += {"{": 1, "}": -1}.get(text[i], 0)
            i += 1
        text = text[: m.start()] + text[i:]
    return text


def module_of(path):
    parts = os.path.relpath(path, ROOT)[:-3].split(os.sep)
    if parts[-1] in ("mod", "lib", "main"):
        parts = parts[:-1]
    return tuple(parts)


def expand(prefix, body):
    """`a::{b, c::{d}}` -> [a::b, a::c::d] (each as a list of segments)."""
    body = body.strip()
    if body.startswith("{") and body.endswith("}"):
        out, depth, cur = [], 0, ""
        for ch in body[1:-1] + ",":
            if ch == "," and depth == 0:
                if cur.strip():
                    out += expand(prefix, cur)
                cur = ""
                continue
            depth += {"{": 1, "}": -1}.get(ch, 0)
            cur += ch
        return out
    head, sep, rest = body.partition("::")
    head = head.split(" as ")[0].strip()
    if not sep:
        return [prefix + [head]]
    return expand(prefix + [head], rest)


files = {}
for d, _, names in os.walk(ROOT):
    for n in names:
        # Test files (`tests.rs`) may use anything; they are not part of the structure.
        if n.endswith(".rs") and n != "tests.rs":
            p = os.path.join(d, n)
            files[p] = (module_of(p), strip(open(p, encoding="utf-8").read()))

# Where each module and item is defined.
modules = {mod: p for p, (mod, _) in files.items()}
defs = {}  # (folder module, item) -> {files}
for p, (mod, text) in files.items():
    folder = mod if p.endswith(("mod.rs", "lib.rs")) else mod[:-1]
    for item in DEF.findall(text) + MACRO_DEF.findall(text):
        defs.setdefault((folder, item), set()).add(p)
external = set()  # (folder module, item) re-exported from outside the folder
for p, (mod, text) in files.items():
    if p.endswith(("mod.rs", "lib.rs")):
        for body in re.findall(r"^\s*pub(?:\([^)]*\))?\s+use\s+crate::([^;]*);", text, re.M):
            for segs in expand([], body):
                external.add((mod, segs[-1]))
reexports = {}  # (folder module, item) -> child module path
for p, (mod, text) in files.items():
    if not p.endswith(("mod.rs", "lib.rs")):
        continue
    for child, body in REEXPORT.findall(text):
        for segs in expand([child], body):
            reexports[(mod, segs[-1])] = (mod + tuple(segs[:-1]))


def resolve(mod_path):
    """A module path plus an item -> the files that define it (following one re-export)."""
    *m, item = mod_path
    m = tuple(m)
    if (m, item) in external:
        return set()
    if m + (item,) in modules:
        return {modules[m + (item,)]}
    if (m, item) in reexports:
        target = reexports[(m, item)]
        return resolve(list(target) + [item]) or ({modules[target]} if target in modules else set())
    return defs.get((m, item), set()) or ({modules[m]} if m in modules else set())


def references(p, mod, text):
    """Absolute module paths (tuples, ending in an item name) that file `p` names."""
    here = mod if p.endswith(("mod.rs", "lib.rs")) else mod
    base_super = mod[:-1]
    out = []
    raw = [(kw, [s for s in rest.split("::") if s]) for kw, rest in PATH.findall(text)]
    for kw, rest in USE.findall(text):
        for segs in expand([], rest):
            raw.append((kw, segs))
    for kw, segs in raw:
        if not segs or segs[0] == "*":
            continue
        start = () if kw == "crate" else base_super if kw == "super" else here
        while segs and segs[0] == "super":
            start, segs = start[:-1], segs[1:]
        segs = [s for s in segs if s not in ("self", "*")]
        if segs:
            out.append(start + tuple(segs))
    if p.endswith(("mod.rs", "lib.rs")):
        # A folder's face names its children without a prefix (`validate::check(..)`).
        children = {m[-1] for m in modules if len(m) == len(mod) + 1 and m[: len(mod)] == mod}
        for child, rest in BARE.findall(text):
            if child in children:
                out.append(mod + (child,) + tuple(s for s in rest.split("::") if s))
    return out


def folders_of(p, mod):
    face = p.endswith(("mod.rs", "lib.rs"))
    return {mod, mod[:-1]} if face and mod else {mod} if face else {mod[:-1]}


top_edges, file_edges = {}, {}
for p, (mod, text) in files.items():
    is_face = p.endswith(("mod.rs", "lib.rs"))
    body = REEXPORT.sub("", text) if is_face else text
    for ref in references(p, mod, body):
        if mod and ref and ref[0] != mod[0] and (ref[0],) in modules:
            top_edges.setdefault(mod[0], {}).setdefault(ref[0], p)
        # Within a folder: the reference lands on another file of a folder this file is part of
        # (its own folder, and for a `mod.rs` also the folder it is the face of).
        for folder in folders_of(p, mod):
            if len(ref) > len(folder) and ref[: len(folder)] == folder:
                child = ref[: len(folder) + 1]
                for q in {modules[child]} if child in modules else resolve(list(child)):
                    if q != p and folder in folders_of(q, files[q][0]):
                        file_edges.setdefault(p, {}).setdefault(q, ref)


def cycles(graph):
    index, low, stack, on, out, n = {}, {}, [], set(), [], [0]

    def visit(v):
        index[v] = low[v] = n[0]
        n[0] += 1
        stack.append(v)
        on.add(v)
        for w in graph.get(v, {}):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                out.append(sorted(comp))

    sys.setrecursionlimit(10000)
    for v in sorted(graph):
        if v not in index:
            visit(v)
    return out


failed = False
for leaf in LEAVES:
    for dep, where in sorted(top_edges.get(leaf, {}).items()):
        print(f"{leaf} must import nothing else of the crate, but names crate::{dep} ({where})")
        failed = True
for what, graph, show in [("top-level modules", top_edges, str), ("files of one folder", file_edges, lambda ref: "names " + "::".join(ref))]:
    for comp in cycles(graph):
        failed = True
        print(f"cycle between {what}: " + " <-> ".join(comp))
        for a in comp:
            for b, why in graph.get(a, {}).items():
                if b in comp:
                    print(f"  {a} -> {b} ({show(why)})")
if failed:
    sys.exit(1)
print(f"module graph: {len(files)} files, {len(top_edges)} top-level modules with imports, no cycles")
