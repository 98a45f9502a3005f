//! The ONNX backend test data (onnx 1.22.0's `backend/test/data`) run through `mxc run` on
//! the ref and cpu targets: the node suite (`node`, one op per case) and the model sets
//! `simple`, `pytorch-converted` and `pytorch-operator`. A case passes on a target when its
//! outputs match the data's; on cpu (rewritten by the rewrite engine, its kernels split across
//! threads) they must also match ref's, the unrewritten oracle on one thread, closely. Prints a
//! scoreboard per target and fails when a case listed in `tests/node_expected_pass.txt` (the
//! node suite) or `tests/model_sets_expected_pass.txt` (the model sets: every case onnxruntime
//! passes, `scripts/ort_backend_sets.py`) does not pass on both targets.
//! `MXC_NODE_CASES=gather,nllloss` runs only the cases whose names contain one of the
//! comma-separated words (while working on an op; the report then covers only those).
//! A model that draws random values (`RANDOM_OPS`, training-mode `Dropout`) cannot give the
//! data's values (numpy's draws): when only its values differ, the case is skipped.

use crate::common::{cache_dir, expected_outputs, mismatch, repo, run_case, type_mismatch};
use mxc_dialects::Tensor;
use std::collections::BTreeSet;
use std::path::Path;
use std::sync::Mutex;

const TARGETS: [&str; 2] = ["ref", "cpu"];
/// How each target runs: ref on one thread; cpu with every kernel that can be split split
/// across three threads, so that the comparison with ref also checks the splitting.
const RUN_ARGS: [&[&str]; 2] = [&["--threads", "1"], &["--threads", "3", "--split-work", "0"]];
/// The backend suite's own tolerances.
const RTOL: f64 = 1e-3;
const ATOL: f64 = 1e-7;
/// How close the rewritten program (cpu) must stay to the unrewritten one (ref).
const REWRITE_RTOL: f64 = 1e-4;
const REWRITE_ATOL: f64 = 1e-5;
/// The ops that draw random values (at import, so ref and cpu draw the same ones).
const RANDOM_OPS: [&str; 6] = [
    "RandomUniform",
    "RandomNormal",
    "RandomUniformLike",
    "RandomNormalLike",
    "Bernoulli",
    "Multinomial",
];
const RANDOM_REASON: &str = "draws random values: its values cannot match the reference \
    (distributions are tested in onnx/src/ops/random.rs)";

#[derive(Clone, Debug, PartialEq)]
enum Outcome {
    Passed,
    Unsupported(String),
    Failed(String),
}

fn run_one(case: &Path) -> [Outcome; 2] {
    let set = case.join("test_data_set_0");
    let runs = [0, 1].map(|t| {
        let out_dir = tempfile_dir();
        run_case(&case.join("model.onnx"), &set, TARGETS[t], RUN_ARGS[t], out_dir.path())
    });
    let model = case.join("model.onnx");
    let random = draws_random(&model);
    let expected = expected_outputs(&model, &set);
    let mut outcomes = runs.clone().map(|run| judge(run, &expected, random));
    if let (Ok(plain), Ok(rewritten), Outcome::Passed) = (&runs[0], &runs[1], &outcomes[1]) {
        for (i, (r, p)) in rewritten.iter().zip(plain).enumerate() {
            if let Some(why) = mismatch(r, p, REWRITE_RTOL, REWRITE_ATOL) {
                outcomes[1] = Outcome::Failed(format!("output {i} differs from ref's: {why}"));
            }
        }
    }
    outcomes
}

/// Whether the model draws random values: a node of `RANDOM_OPS`, or a `Dropout` given a
/// `training_mode` input.
fn draws_random(model: &Path) -> bool {
    use prost::Message;
    let model = std::fs::read(model)
        .ok()
        .and_then(|b| mxc_onnx::proto::ModelProto::decode(b.as_slice()).ok());
    model.and_then(|m| m.graph).is_some_and(|g| {
        g.node.iter().any(|n| {
            RANDOM_OPS.contains(&n.op_type())
                || (n.op_type() == "Dropout" && n.input.get(2).is_some_and(|t| !t.is_empty()))
        })
    })
}

/// A run's outcome against the suite's expected outputs (for a model that draws random
/// values, differing values alone skip the case).
fn judge(run: Result<Vec<Tensor>, String>, expected: &Result<Vec<(String, Tensor)>, String>, random: bool) -> Outcome {
    match (run, expected) {
        (Err(e), _) if e.contains("no parser for this op") || e.contains("not supported") => Outcome::Unsupported(e),
        (Err(e), _) => Outcome::Failed(e),
        (Ok(_), Err(e)) => Outcome::Failed(e.clone()),
        (Ok(actual), Ok(expected)) if actual.len() != expected.len() => Outcome::Failed(format!(
            "{} output tensors instead of {} (a sequence's length or an optional's emptiness differs)",
            actual.len(),
            expected.len()
        )),
        (Ok(actual), Ok(expected)) => {
            let mut values_differ = false;
            for (a, (name, expected)) in actual.iter().zip(expected) {
                if let Some(why) = mismatch(a, expected, RTOL, ATOL) {
                    if random && type_mismatch(a, expected).is_none() {
                        values_differ = true;
                        continue;
                    }
                    return Outcome::Failed(format!("output `{name}`: {why}"));
                }
            }
            if values_differ {
                Outcome::Unsupported(RANDOM_REASON.into())
            } else {
                Outcome::Passed
            }
        }
    }
}

/// Prints a scoreboard line even while the test harness captures output (it captures the
/// print macros, not direct writes), so that every test run shows the scoreboard.
fn show(line: &str) {
    use std::io::Write;
    let _ = writeln!(std::io::stdout().lock(), "{line}");
}

fn tempfile_dir() -> tempfile::TempDir {
    tempfile::tempdir().expect("a temporary folder")
}

#[test]
fn onnx_node_suite() {
    run_suite(&["node"], "tests/node_expected_pass.txt", "node-suite-report.txt");
}

#[test]
fn onnx_model_sets() {
    run_suite(
        &["simple", "pytorch-converted", "pytorch-operator"],
        "tests/model_sets_expected_pass.txt",
        "model-sets-report.txt",
    );
}

/// Every case of the backend-data folders `sets` (named `case` for one folder, `set/case` for
/// several), on both targets: prints the scoreboard, writes every case that did not pass with
/// its reason to `target/<report>`, and fails if a case of the `expected` list does not pass.
fn run_suite(sets: &[&str], expected_file: &str, report_file: &str) {
    let name_of = |set: &str, case: &Path| {
        let case = case.file_name().unwrap().to_string_lossy();
        if sets.len() == 1 {
            case.into_owned()
        } else {
            format!("{set}/{case}")
        }
    };
    let mut cases: Vec<(String, std::path::PathBuf)> = Vec::new();
    for set in sets {
        let root = cache_dir(&format!("onnx-backend-tests/{set}"));
        let entries = std::fs::read_dir(&root).unwrap_or_else(|e| panic!("{}: {e}", root.display()));
        for path in entries.flatten().map(|e| e.path()) {
            if path.join("model.onnx").is_file() {
                cases.push((name_of(set, &path), path));
            }
        }
    }
    cases.sort();
    let only = std::env::var("MXC_NODE_CASES").ok();
    let chosen = |name: &str| only.as_deref().is_none_or(|w| w.split(',').any(|w| name.contains(w)));
    cases.retain(|(name, _)| chosen(name));
    let expected_text =
        std::fs::read_to_string(repo().join(expected_file)).unwrap_or_else(|e| panic!("{expected_file}: {e}"));
    let expected: BTreeSet<&str> = expected_text
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty() && !l.starts_with('#'))
        .filter(|l| chosen(l))
        .collect();

    let results: Mutex<Vec<(String, [Outcome; 2])>> = Mutex::new(Vec::new());
    let next = Mutex::new(0usize);
    std::thread::scope(|s| {
        for _ in 0..2 {
            s.spawn(|| loop {
                let i = {
                    let mut n = next.lock().unwrap();
                    *n += 1;
                    *n - 1
                };
                let Some((name, case)) = cases.get(i) else { break };
                let outcomes = run_one(case);
                results.lock().unwrap().push((name.clone(), outcomes));
            });
        }
    });
    let mut results = results.into_inner().unwrap();
    results.sort_by(|a, b| a.0.cmp(&b.0));

    let mut regressions = Vec::new();
    let mut passing_both = Vec::new();
    let mut report = String::new();
    show(&format!(
        "{} ({} cases; unsupported ops and element types count as skipped):",
        sets.join(", "),
        results.len()
    ));
    for (t, target) in TARGETS.iter().enumerate() {
        let count = |f: fn(&Outcome) -> bool| results.iter().filter(|r| f(&r.1[t])).count();
        let passed = count(|o| *o == Outcome::Passed);
        let unsupported = count(|o| matches!(o, Outcome::Unsupported(_)));
        let failed = count(|o| matches!(o, Outcome::Failed(_)));
        show(&format!(
            "{target}: {passed} passed, {failed} failed, {unsupported} skipped"
        ));
    }
    for (name, outcomes) in &results {
        if outcomes.iter().all(|o| *o == Outcome::Passed) {
            passing_both.push(name.clone());
        }
        for (o, target) in outcomes.iter().zip(TARGETS) {
            let (status, why) = match o {
                Outcome::Passed => continue,
                Outcome::Failed(why) => ("failed", why),
                Outcome::Unsupported(why) => ("skipped", why),
            };
            let line = format!("{name} [{target}] {status}: {}", why.lines().next().unwrap_or_default());
            if expected.contains(name.as_str()) {
                regressions.push(line.clone());
            }
            report.push_str(&line);
            report.push('\n');
        }
    }
    let report_path = repo().join("target").join(report_file);
    if std::fs::write(&report_path, &report).is_ok() {
        show(&format!(
            "every case that did not pass, with its reason: {}",
            report_path.display()
        ));
    }
    let listed: BTreeSet<&str> = passing_both.iter().map(String::as_str).collect();
    let new: Vec<&&str> = listed.difference(&expected).collect();
    if !new.is_empty() {
        show(&format!(
            "{} cases pass on both targets but are not in {expected_file}",
            new.len()
        ));
        for n in &new {
            println!("  {n}");
        }
    }
    let missing: Vec<&&str> = expected
        .iter()
        .filter(|e| !results.iter().any(|r| r.0 == **e))
        .collect();
    assert!(
        missing.is_empty(),
        "expected-pass cases missing from the suite: {missing:?}"
    );
    assert!(
        regressions.is_empty(),
        "{} expected-pass cases fail:\n{}",
        regressions.len(),
        regressions.join("\n")
    );
}
