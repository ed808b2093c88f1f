"""The self-test of a checker script: the checker run on made-up source trees, each expected to
pass or to fail. Used by check-module-cycles.py and check-mod-rs.py (`--self-test`)."""
import os, subprocess, sys, tempfile


def run(script, cases):
    """`cases`: name -> ({path: text}, should fail). Prints each surprise and exits 1 if any."""
    bad = 0
    for name, (tree, should_fail) in cases.items():
        with tempfile.TemporaryDirectory() as d:
            for path, text in tree.items():
                os.makedirs(os.path.dirname(os.path.join(d, path)), exist_ok=True)
                open(os.path.join(d, path), "w").write(text + "\n")
            failed = subprocess.run([sys.executable, script, d], capture_output=True).returncode != 0
            if failed != should_fail:
                bad += 1
                print(f"self-test {name!r}: expected {'a failure' if should_fail else 'a pass'}")
    print(f"self-test: {len(cases) - bad}/{len(cases)} cases as expected")
    sys.exit(1 if bad else 0)
