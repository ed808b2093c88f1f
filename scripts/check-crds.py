#!/usr/bin/env python3
"""Validates Kubernetes manifests of custom resources against their CRDs' openAPIV3Schema.

    scripts/check-crds.py --crds CRD.yaml... --manifests FILE... [--require KIND...]
    scripts/check-crds.py --self-test

A manifest file may hold several YAML documents, or be Markdown (`*.md`), whose ```yaml blocks
are read. Every document whose apiVersion's group is one of the CRDs' is validated against the
served version's schema of its kind; other documents are skipped. The schema is made strict the
way the API server's strict field validation is: an object schema with `properties` and neither
`additionalProperties` nor `x-kubernetes-preserve-unknown-fields` refuses unknown fields;
`x-kubernetes-int-or-string` takes an integer or a string. `--require KIND` fails when no document
of that kind was validated (so a template that stopped rendering is noticed). Exit 1 on any
problem, each printed with its file, document and path.
"""
import argparse
import copy
import re
import sys

import jsonschema
import yaml


def strict(schema):
    """A copy of an openAPIV3Schema as a JSON Schema with the API server's field strictness."""
    s = copy.deepcopy(schema)

    def walk(node):
        if isinstance(node, list):
            for n in node:
                walk(n)
            return
        if not isinstance(node, dict):
            return
        if node.pop("x-kubernetes-int-or-string", False):
            node.pop("type", None)
            node.setdefault("anyOf", [{"type": "integer"}, {"type": "string"}])
        preserve = node.get("x-kubernetes-preserve-unknown-fields", False)
        if "properties" in node and "additionalProperties" not in node and not preserve:
            node["additionalProperties"] = False
        for key, value in node.items():
            if key == "properties":
                for prop in value.values():
                    walk(prop)
            elif key in ("items", "additionalProperties", "not"):
                walk(value)
            elif key in ("allOf", "anyOf", "oneOf"):
                walk(value)
    walk(s)
    return s


def load_crds(paths):
    """{(group, version, kind): validator} for every served version of every CRD."""
    schemas = {}
    for path in paths:
        for doc in yaml.safe_load_all(open(path)):
            if not doc or doc.get("kind") != "CustomResourceDefinition":
                continue
            spec = doc["spec"]
            for v in spec["versions"]:
                if v.get("served", True):
                    schema = strict(v["schema"]["openAPIV3Schema"])
                    schemas[(spec["group"], v["name"], spec["names"]["kind"])] = jsonschema.Draft7Validator(schema)
    return schemas


def documents(path):
    text = open(path).read()
    if path.endswith(".md"):
        blocks = re.findall(r"^```ya?ml\n(.*?)^```", text, re.M | re.S)
        for i, block in enumerate(blocks):
            for j, doc in enumerate(yaml.safe_load_all(block)):
                yield f"{path} yaml block {i + 1} document {j + 1}", doc
    else:
        for j, doc in enumerate(yaml.safe_load_all(text)):
            yield f"{path} document {j + 1}", doc


def validate(schemas, paths):
    """(problems, {kind: count validated})."""
    groups = {g for g, _, _ in schemas}
    problems, seen = [], {}
    for path in paths:
        for where, doc in documents(path):
            if not isinstance(doc, dict) or "/" not in str(doc.get("apiVersion", "")):
                continue
            group, version = doc["apiVersion"].split("/", 1)
            if group not in groups:
                continue
            kind = doc.get("kind")
            validator = schemas.get((group, version, kind))
            if validator is None:
                problems.append(f"{where}: no CRD serves {kind} in {doc['apiVersion']}")
                continue
            if not (doc.get("metadata") or {}).get("name"):
                problems.append(f"{where}: {kind} without metadata.name")
            for e in sorted(validator.iter_errors(doc), key=lambda e: list(e.path)):
                problems.append(f"{where}: {kind} at {'.'.join(map(str, e.path)) or '(root)'}: {e.message[:300]}")
            seen[kind] = seen.get(kind, 0) + 1
    return problems, seen


def self_test():
    """The strictness works: a good AnalysisTemplate passes, a typo, a wrong type and an int-or-string pass or fail as the API server would."""
    crd = {"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
           "spec": {"group": "argoproj.io", "names": {"kind": "AnalysisTemplate"}, "versions": [{"name": "v1alpha1", "served": True, "schema": {"openAPIV3Schema": {
               "type": "object", "properties": {"apiVersion": {"type": "string"}, "kind": {"type": "string"}, "metadata": {"type": "object"},
                   "spec": {"type": "object", "properties": {"metrics": {"type": "array", "items": {"type": "object", "required": ["name"], "properties": {
                       "name": {"type": "string"}, "count": {"x-kubernetes-int-or-string": True, "anyOf": [{"type": "integer"}, {"type": "string"}]},
                       "jsonBody": {"type": "object", "x-kubernetes-preserve-unknown-fields": True}}}}}}}}}}]}}
    import tempfile, os
    d = tempfile.mkdtemp()
    crd_path, good, bad = (os.path.join(d, n) for n in ("crd.yaml", "good.yaml", "bad.yaml"))
    yaml.safe_dump(crd, open(crd_path, "w"))
    base = {"apiVersion": "argoproj.io/v1alpha1", "kind": "AnalysisTemplate", "metadata": {"name": "t"},
            "spec": {"metrics": [{"name": "m", "count": 3, "jsonBody": {"any": {"thing": 1}}}]}}
    yaml.safe_dump_all([base, dict(base, spec={"metrics": [{"name": "m", "count": "3"}]})], open(good, "w"))
    yaml.safe_dump_all([dict(base, spec={"metrics": [{"name": "m", "cuont": 3}]}), dict(base, spec={"metrics": [{"name": 1}]}),
                        dict(base, kind="Rollout"), dict(base, metadata={})], open(bad, "w"))
    schemas = load_crds([crd_path])
    problems, seen = validate(schemas, [good])
    assert not problems and seen == {"AnalysisTemplate": 2}, (problems, seen)
    problems, _ = validate(schemas, [bad])
    want = ["'cuont' was unexpected", "1 is not of type 'string'", "no CRD serves Rollout", "without metadata.name"]
    missing = [w for w in want if not any(w in p for p in problems)]
    assert not missing, (missing, problems)
    print(f"self-test: good manifests pass, {len(problems)} problems found in the broken ones")


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--crds", nargs="+", default=[])
    ap.add_argument("--manifests", nargs="+", default=[])
    ap.add_argument("--require", nargs="*", default=[])
    ap.add_argument("--self-test", action="store_true")
    args = ap.parse_args()
    if args.self_test:
        self_test()
        return 0
    schemas = load_crds(args.crds)
    problems, seen = validate(schemas, args.manifests)
    for kind in args.require:
        if not seen.get(kind):
            problems.append(f"no {kind} found in {' '.join(args.manifests)}")
    for p in problems:
        print(p)
    print(f"validated: {', '.join(f'{n} {k}' for k, n in sorted(seen.items())) or 'nothing'} against {len(schemas)} CRD versions")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
