//! Table test over invalid configs: each `tests/fixtures/config/bad/NAME.yaml` must fail to
//! load with exactly the lines in `NAME.expected` (`path: message (file:line)`).
//!
//! After an intended message change, run with `BLESS=1` to rewrite the `.expected` files, then
//! review the diff.

use std::fs;
use std::path::Path;

const DIR: &str = "tests/fixtures/config/bad";

/// Values planted in fixtures that must never appear in any message.
const SECRETS: [&str; 2] = ["hunter2", "sk-do-not-print-me"];

#[test]
fn every_bad_fixture_reports_exactly_the_expected_issues() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let bless = std::env::var_os("BLESS").is_some();
    let mut names: Vec<String> = fs::read_dir(root.join(DIR))
        .expect("fixture dir")
        .map(|e| e.expect("dir entry").file_name().into_string().expect("utf-8 name"))
        .filter_map(|n| n.strip_suffix(".yaml").map(str::to_owned))
        .collect();
    names.sort();
    assert!(names.len() >= 15, "fixtures missing: found {names:?}");

    let mut failures = Vec::new();
    for name in &names {
        let file = format!("{DIR}/{name}.yaml");
        let text = fs::read_to_string(root.join(&file)).expect("fixture");
        let actual = match llmprobe::app::loader::parse(&text, &file) {
            Ok(_) => "(loaded without error)\n".to_owned(),
            Err(e) => format!("{e}\n"),
        };
        for secret in SECRETS {
            assert!(!actual.contains(secret), "{file}: message leaks a secret:\n{actual}");
        }
        let expected_path = root.join(DIR).join(format!("{name}.expected"));
        if bless {
            fs::write(&expected_path, &actual).expect("write expected");
            continue;
        }
        let expected = fs::read_to_string(&expected_path).unwrap_or_else(|_| panic!("{name}.expected is missing (run with BLESS=1)"));
        if actual != expected {
            failures.push(format!("--- {name}.expected\n{expected}+++ actual\n{actual}"));
        }
    }
    assert!(failures.is_empty(), "{} fixture(s) differ:\n{}", failures.len(), failures.join("\n"));
}

#[test]
fn every_expected_file_has_a_fixture() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join(DIR);
    for entry in fs::read_dir(&root).expect("fixture dir") {
        let path = entry.expect("dir entry").path();
        if path.extension().is_some_and(|e| e == "expected") {
            assert!(path.with_extension("yaml").exists(), "{} has no .yaml", path.display());
        }
    }
}

#[test]
fn a_missing_file_is_reported_as_an_issue() {
    let err = llmprobe::app::loader::load(Path::new("tests/fixtures/config/no-such-file.yaml")).expect_err("missing file");
    assert_eq!(err.issues.len(), 1);
    assert_eq!(err.issues[0].path, "");
    assert_eq!(err.issues[0].line, None);
    let text = err.to_string();
    assert!(text.starts_with("cannot read config file: ") && text.ends_with("(tests/fixtures/config/no-such-file.yaml)"), "{text}");
}
