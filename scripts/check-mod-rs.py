#!/usr/bin/env python3
"""Fails when a `mod.rs` holds more than the face of its folder.

A folder's `mod.rs` declares its files (`mod x;`, `pub mod x;`) and re-exports what the crate
reads from them (`pub use x::Y;`), with docs and attributes; every definition (a type, a
function, a constant, an impl, an inline `mod tests { .. }`, a private `use`) lives in a named
file, so a folder reads from its file names and its faces cannot form cycles with its files.
Usage: scripts/check-mod-rs.py [src]   (or --self-test: the checker on made-up files)
"""
import os, re, sys

import self_test

# mod.rs files whose definitions are still to be moved into named files, relative to the root.
NOT_YET_SPLIT: set = set()

if sys.argv[1:] == ["--self-test"]:
    cases = {
        # (mod.rs text, should fail)
        "declarations and re-exports": ("//! Docs.\n\nmod a;\npub mod b;\n#[cfg(test)]\nmod tests;\npub use a::{X,\n    Y};\npub(crate) use b::*;", False),
        "attributes": ("#![allow(dead_code)]\n#[cfg(feature = \"x\")]\npub mod a;", False),
        "a function": ("mod a;\npub fn f() {}", True),
        "a constant": ("mod a;\npub const X: u8 = 1;", True),
        "an inline test module": ("mod a;\n#[cfg(test)]\nmod tests {\n    #[test]\n    fn t() {}\n}", True),
        "a private use": ("mod a;\nuse std::sync::Arc;", True),
        "a struct": ("pub struct S;", True),
    }
    self_test.run(__file__, {name: ({"p/mod.rs": text}, should_fail) for name, (text, should_fail) in cases.items()})

ROOT = sys.argv[1] if len(sys.argv) > 1 else "src"

ALLOWED = re.compile(r"(?:pub(?:\([^)]*\))?\s+)?mod\s+[A-Za-z_][A-Za-z0-9_]*|pub(?:\([^)]*\))?\s+use\s+[^;]+", re.S)


def blank(match):
    """Keeps a removed span's newlines, so offsets still give line numbers."""
    return re.sub(r"[^\n]", " ", match.group(0))


def strip(text):
    """Blanks comments and attributes (`#[..]`, `#![..]`, brackets balanced)."""
    text = re.sub(r"//[^\n]*", blank, text)
    text = re.sub(r"/\*.*?\*/", blank, text, flags=re.S)
    out, i = [], 0
    for m in re.finditer(r"#!?\[", text):
        if m.start() < i:
            continue
        depth, j = 1, m.end()
        while j < len(text) and depth:
            depth += {"[": 1, "]": -1}.get(text[j], 0)
            j += 1
        out.append(text[i:m.start()])
        out.append(re.sub(r"[^\n]", " ", text[m.start():j]))
        i = j
    out.append(text[i:])
    return "".join(out)


def offenders(text):
    """(line, first words) of each statement that is neither a declaration nor a re-export."""
    text = strip(text)
    found, start = [], 0
    for m in re.finditer(r";|\{", text):
        stmt = text[start:m.start()]
        if m.group(0) == "{" and not re.match(r"\s*pub(?:\([^)]*\))?\s+use\b", stmt):
            # A block: an item with a body (a `use` list is the one allowed brace).
            line = text.count("\n", 0, start + len(stmt) - len(stmt.lstrip())) + 1
            found.append((line, " ".join(stmt.split())[:60]))
            return found
        if m.group(0) == "{":
            continue
        if stmt.strip() and not ALLOWED.fullmatch(stmt.strip()):
            line = text.count("\n", 0, start + len(stmt) - len(stmt.lstrip())) + 1
            found.append((line, " ".join(stmt.split())[:60]))
        start = m.end()
    if text[start:].strip():
        line = text.count("\n", 0, start + len(text[start:]) - len(text[start:].lstrip())) + 1
        found.append((line, " ".join(text[start:].split())[:60]))
    return found


failures, checked = [], 0
for dirpath, _, files in os.walk(ROOT):
    if "mod.rs" not in files:
        continue
    path = os.path.join(dirpath, "mod.rs")
    rel = os.path.relpath(path, ROOT)
    checked += 1
    found = offenders(open(path, encoding="utf-8").read())
    if rel in NOT_YET_SPLIT:
        if not found:
            failures.append(f"{path}: holds no definitions now: remove it from NOT_YET_SPLIT in {__file__}")
        continue
    for line, words in found:
        failures.append(f"{path}:{line}: a mod.rs only declares and re-exports its files; move `{words}` into a named file")

for f in failures:
    print(f)
print(f"mod.rs faces: {checked} checked, {len(NOT_YET_SPLIT)} not yet split, {len(failures)} problems")
sys.exit(1 if failures else 0)
