//! The rule tests in `tests/rules/`: each file an mx program, the arguments of `mxc opt` for it
//! (`// RUN:`) and what the rewritten program must show (`// CHECK:` lines, `filecheck.rs`),
//! at least one file per built-in rule file, named after it. With `MXC_BLESS=1` the test
//! rewrites each file's CHECK and CHECK-NEXT lines from `mxc opt`'s output instead of checking
//! them (docs/rules.md, "Testing a rule").

use crate::common::{integer_kernels_pay, mxc, repo, stderr};
use crate::filecheck;
use std::path::{Path, PathBuf};

/// The environment variable that turns checking into blessing, when it is `1`.
const BLESS: &str = "MXC_BLESS";

/// The `.mx` files of `tests/rules/`, in name order.
fn test_files() -> Vec<PathBuf> {
    let dir = repo().join("tests/rules");
    let mut files: Vec<PathBuf> = std::fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
        .map(|entry| entry.expect("a readable directory entry").path())
        .filter(|p| p.extension().is_some_and(|e| e == "mx"))
        .collect();
    files.sort();
    files
}

/// What running a test file did.
enum Ran {
    Checked,
    Blessed,
    /// Not checked: the machine lacks this feature the expected output depends on.
    Lacks(String),
}

/// Runs one test file: checks `mxc opt`'s output against its CHECK lines, or blesses it.
fn run(file: &Path, name: &str, bless: bool) -> Result<Ran, String> {
    let text = std::fs::read_to_string(file).map_err(|e| e.to_string())?;
    let test = filecheck::parse(&text)?;
    // the cost model makes quantised products integer kernels only where VNNI makes them pay
    if test.requires.iter().any(|f| f == "vnni") && !integer_kernels_pay() {
        return Ok(Ran::Lacks("vnni".into()));
    }
    let mut args = vec!["opt", file.to_str().expect("a UTF-8 path")];
    args.extend(test.args.iter().map(String::as_str));
    let command = format!("mxc opt {name} {}", test.args.join(" "));
    let out = mxc(&args);
    if !out.status.success() {
        return Err(format!("`{command}` failed: {}", stderr(&out).trim_end()));
    }
    let output = String::from_utf8(out.stdout).map_err(|e| format!("`{command}` printed {e}"))?;
    if bless {
        let blessed = filecheck::bless(&text, &output);
        if blessed == text {
            return Ok(Ran::Checked);
        }
        std::fs::write(file, &blessed).map_err(|e| e.to_string())?;
        return Ok(Ran::Blessed);
    }
    filecheck::check(&test.directives, &output).map_err(|e| format!("{e}(the output of `{command}`)"))?;
    Ok(Ran::Checked)
}

#[test]
fn rule_test_files_show_what_their_rules_do() {
    let bless = std::env::var_os(BLESS).is_some_and(|v| v == "1");
    let files = test_files();
    let mut failures = Vec::new();
    for file in &files {
        let name = file.strip_prefix(repo()).unwrap_or(file).display().to_string();
        match run(file, &name, bless) {
            Ok(Ran::Blessed) => eprintln!("blessed {name}"),
            Ok(Ran::Checked) => {}
            Ok(Ran::Lacks(feature)) => eprintln!("not checked: {name} (this machine has no {feature})"),
            Err(e) => failures.push(format!("{name}, {e}")),
        }
    }
    assert!(
        failures.is_empty(),
        "{} of {} rule test files failed ({BLESS}=1 rewrites their CHECK lines from the output):\n\n{}",
        failures.len(),
        files.len(),
        failures.join("\n\n")
    );
}

#[test]
fn every_built_in_rule_file_has_a_rule_test() {
    let names: Vec<String> = test_files()
        .iter()
        .map(|f| f.file_stem().expect("a file name").to_string_lossy().into_owned())
        .collect();
    for (set, path, _) in mxc_rewrite::rules::BUILTIN_FILES {
        assert!(
            names.iter().any(|n| n == set || n.starts_with(&format!("{set}-"))),
            "{path} has no test in tests/rules/ ({set}.mx or {set}-*.mx)"
        );
    }
}
