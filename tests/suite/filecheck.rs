//! FileCheck-style test files (the rule tests in `tests/rules/`, docs/rules.md): an mx program
//! with `// RUN:` (the arguments of `mxc opt` after the file), optionally `// REQUIRES:` (what
//! the machine must have for the output to be the one the file expects: `vnni`), and
//! `// CHECK:`, `// CHECK-NEXT:` and `// CHECK-NOT:` lines, checked against what `mxc opt`
//! printed; and blessing, which rewrites a file's CHECK and CHECK-NEXT lines from that output.
//!
//! Each pattern is the text after the directive's colon, spaces trimmed, and a line matches it
//! when it contains it. In the file's order, `CHECK` matches the first line after the previous
//! match (for the first, the first line that matches at all); `CHECK-NEXT` must match the line
//! right after the previous match; `CHECK-NOT` holds when no line of the whole output contains
//! it (wherever it stands in the file).

use std::fmt::Write;

const RUN: &str = "// RUN:";
const REQUIRES: &str = "// REQUIRES:";
/// What a `REQUIRES` line may name.
pub const MACHINE_FEATURES: [&str; 1] = ["vnni"];
const CHECK_PREFIX: &str = "// CHECK";
/// How much of each output line a failure lists (the resources' hex lines are long).
const LISTED_CHARS: usize = 300;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    Check,
    Next,
    Not,
}

impl Kind {
    fn name(self) -> &'static str {
        match self {
            Kind::Check => "CHECK",
            Kind::Next => "CHECK-NEXT",
            Kind::Not => "CHECK-NOT",
        }
    }
}

/// One CHECK line: its kind, its pattern and its line in the test file (from 1).
#[derive(Debug, PartialEq, Eq)]
pub struct Directive {
    pub kind: Kind,
    pub pattern: String,
    pub line: usize,
}

/// A test file's arguments for `mxc opt` and its CHECK lines in order.
#[derive(Debug)]
pub struct TestFile {
    pub args: Vec<String>,
    /// The machine features the expected output depends on (`MACHINE_FEATURES`).
    pub requires: Vec<String>,
    pub directives: Vec<Directive>,
}

/// The directive a line of a test file holds: `Ok(None)` for a line of the program (or an
/// ordinary comment), an error for a line that starts like a CHECK but is none.
fn directive(text: &str, line: usize) -> Result<Option<Directive>, String> {
    let text = text.trim_start();
    let Some(rest) = text.strip_prefix(CHECK_PREFIX) else {
        return Ok(None);
    };
    let (kind, pattern) = if let Some(p) = rest.strip_prefix(':') {
        (Kind::Check, p)
    } else if let Some(p) = rest.strip_prefix("-NEXT:") {
        (Kind::Next, p)
    } else if let Some(p) = rest.strip_prefix("-NOT:") {
        (Kind::Not, p)
    } else {
        return Err(format!(
            "line {line}: `{text}` is no directive (CHECK:, CHECK-NEXT:, CHECK-NOT:)"
        ));
    };
    let pattern = pattern.trim().to_string();
    if pattern.is_empty() && kind != Kind::Next {
        return Err(format!("line {line}: {} with nothing to match", kind.name()));
    }
    Ok(Some(Directive { kind, pattern, line }))
}

/// The `RUN` arguments and CHECK lines of a test file; a file needs one `RUN` line and no
/// `CHECK-NEXT` before the first `CHECK`.
pub fn parse(text: &str) -> Result<TestFile, String> {
    let mut args = None;
    let mut requires = Vec::new();
    let mut directives = Vec::new();
    for (i, line) in text.lines().enumerate() {
        if let Some(names) = line.trim_start().strip_prefix(REQUIRES) {
            for name in names.split(',').map(str::trim) {
                if !MACHINE_FEATURES.contains(&name) {
                    return Err(format!(
                        "line {}: REQUIRES `{name}`, which is no machine feature (vnni)",
                        i + 1
                    ));
                }
                requires.push(name.to_string());
            }
        } else if let Some(run) = line.trim_start().strip_prefix(RUN) {
            if args.is_some() {
                return Err(format!("line {}: a second RUN line", i + 1));
            }
            args = Some(run.split_whitespace().map(str::to_string).collect());
        } else if let Some(d) = directive(line, i + 1)? {
            let first_positive = !directives.iter().any(|d: &Directive| d.kind != Kind::Not);
            if d.kind == Kind::Next && first_positive {
                return Err(format!("line {}: CHECK-NEXT before any CHECK", d.line));
            }
            directives.push(d);
        }
    }
    Ok(TestFile {
        args: args.ok_or("no `// RUN:` line (the arguments of `mxc opt` after the file)")?,
        requires,
        directives,
    })
}

/// Why `output` does not satisfy `directives` (which need a `CHECK`, or they would not look at
/// the output): the first directive that fails, what it expected and where, and the output
/// with line numbers (the line it looked at marked `>`, each cut at `LISTED_CHARS`).
pub fn check(directives: &[Directive], output: &str) -> Result<(), String> {
    if !directives.iter().any(|d| d.kind == Kind::Check) {
        return Err("no CHECK line (blessing writes them)\n".to_string());
    }
    let lines: Vec<&str> = output.lines().collect();
    let mut next = 0;
    for d in directives {
        let failed_at = match d.kind {
            Kind::Check => match (next..lines.len()).find(|&i| lines[i].contains(&d.pattern)) {
                Some(i) => {
                    next = i + 1;
                    continue;
                }
                None => (format!("not found on output line {} or after", next + 1), None),
            },
            Kind::Next => match lines.get(next) {
                Some(l) if l.contains(&d.pattern) => {
                    next += 1;
                    continue;
                }
                Some(_) => (format!("not on output line {}", next + 1), Some(next)),
                None => (format!("the output ends after line {next}"), None),
            },
            Kind::Not => match lines.iter().position(|l| l.contains(&d.pattern)) {
                None => continue,
                Some(i) => (format!("found on output line {}", i + 1), Some(i)),
            },
        };
        let (what, marked) = failed_at;
        let mut message = format!("line {}: {}: `{}`: {what}\n", d.line, d.kind.name(), d.pattern);
        for (i, l) in lines.iter().enumerate() {
            let mark = if Some(i) == marked { '>' } else { ' ' };
            let cut = match l.char_indices().nth(LISTED_CHARS) {
                Some((end, _)) => format!("{} ...", &l[..end]),
                None => l.to_string(),
            };
            let _ = writeln!(message, "{mark}{:4} | {cut}", i + 1);
        }
        return Err(message);
    }
    Ok(())
}

/// `text` with its CHECK and CHECK-NEXT lines replaced by the lines of `output` up to its
/// resources section (the weights' bytes in hex, left out): the first as `CHECK`, the rest as
/// `CHECK-NEXT`, at the end of the file. The program, the comments, `RUN` and `CHECK-NOT`
/// lines stay as they are.
pub fn bless(text: &str, output: &str) -> String {
    let mut blessed = String::new();
    for line in text.lines() {
        match directive(line, 0) {
            Ok(Some(d)) if d.kind != Kind::Not => {}
            _ => {
                blessed.push_str(line);
                blessed.push('\n');
            }
        }
    }
    while blessed.ends_with("\n\n") {
        blessed.pop();
    }
    let shown = output.lines().take_while(|l| *l != "resources {");
    for (i, line) in shown.enumerate() {
        let kind = if i == 0 { Kind::Check } else { Kind::Next };
        blessed.push_str(format!("// {}: {line}", kind.name()).trim_end());
        blessed.push('\n');
    }
    blessed
}

const OUTPUT: &str = "graph \"g\" (%arg0: tensor<2xf32> \"x\") {\n  %0 = mx.relu %arg0 : tensor<2xf32>\n  %1 = mx.neg %0 : tensor<2xf32>\n  return \"y\" = %1\n}\nresources {\n  r0 = \"0x00\"\n}\n";

fn directives(text: &str) -> Vec<Directive> {
    parse(&format!("// RUN: --target cpu\n{text}"))
        .expect("a valid test file")
        .directives
}

#[test]
fn checks_match_lines_in_order() {
    let ok = "// CHECK: graph \"g\"\n// CHECK: mx.neg\n// CHECK-NEXT: return \"y\" = %1\n// CHECK-NOT: mx.abs\n";
    assert_eq!(check(&directives(ok), OUTPUT), Ok(()));
    let err = check(&directives("// CHECK: mx.neg\n// CHECK: mx.relu\n"), OUTPUT).unwrap_err();
    assert!(
        err.starts_with("line 3: CHECK: `mx.relu`: not found on output line 4 or after\n"),
        "{err}"
    );
    let err = check(&directives("// CHECK: mx.relu\n// CHECK-NEXT: return"), OUTPUT).unwrap_err();
    assert!(
        err.starts_with("line 3: CHECK-NEXT: `return`: not on output line 3\n"),
        "{err}"
    );
    assert!(err.contains(">   3 |   %1 = mx.neg"), "{err}");
    let err = check(
        &directives("// CHECK: }\n// CHECK-NEXT: resources\n// CHECK-NEXT: r0\n// CHECK-NEXT: }\n// CHECK-NEXT: more"),
        OUTPUT,
    )
    .unwrap_err();
    assert!(
        err.starts_with("line 6: CHECK-NEXT: `more`: the output ends after line 8"),
        "{err}"
    );
    let err = check(&directives("// CHECK-NOT: mx.abs"), OUTPUT).unwrap_err();
    assert!(err.starts_with("no CHECK line"), "{err}");
    let err = check(&directives("// CHECK: return\n// CHECK-NOT: mx.relu"), OUTPUT).unwrap_err();
    assert!(
        err.starts_with("line 3: CHECK-NOT: `mx.relu`: found on output line 2\n"),
        "{err}"
    );
}

#[test]
fn malformed_test_files_are_refused() {
    let err = |text: &str| parse(text).unwrap_err();
    assert!(err("// CHECK: x\n").contains("no `// RUN:` line"));
    assert!(err("// RUN:\n// RUN:\n// CHECK: x\n").starts_with("line 2: a second RUN line"));
    assert!(err("// RUN:\n// CHECK-NXT: x\n").starts_with("line 2: `// CHECK-NXT: x` is no directive"));
    assert!(err("// RUN:\n// CHECK:   \n").starts_with("line 2: CHECK with nothing to match"));
    assert!(err("// RUN:\n// CHECK-NEXT: x\n").starts_with("line 2: CHECK-NEXT before any CHECK"));
    assert!(err("// RUN:\n// REQUIRES: avx9\n// CHECK: x\n").starts_with("line 2: REQUIRES `avx9`"));
    let file = parse("// RUN: --target cpu --no-fusion\n// REQUIRES: vnni\n// CHECK: x\n").unwrap();
    assert_eq!(file.args, ["--target", "cpu", "--no-fusion"]);
    assert_eq!(file.requires, ["vnni"]);
}

#[test]
fn blessing_rewrites_the_checks_and_keeps_the_rest() {
    let text = "// a comment\n// RUN: --target cpu\ngraph \"g\" {}\n// CHECK-NOT: mx.abs\n// CHECK: stale\n// CHECK-NEXT: stale too\n\n";
    let blessed = bless(text, OUTPUT);
    assert_eq!(
        blessed,
        "// a comment\n// RUN: --target cpu\ngraph \"g\" {}\n// CHECK-NOT: mx.abs\n\
         // CHECK: graph \"g\" (%arg0: tensor<2xf32> \"x\") {\n\
         // CHECK-NEXT:   %0 = mx.relu %arg0 : tensor<2xf32>\n\
         // CHECK-NEXT:   %1 = mx.neg %0 : tensor<2xf32>\n\
         // CHECK-NEXT:   return \"y\" = %1\n\
         // CHECK-NEXT: }\n"
    );
    assert_eq!(check(&parse(&blessed).unwrap().directives, OUTPUT), Ok(()));
    assert_eq!(bless(&blessed, OUTPUT), blessed, "blessing twice changes nothing");
}
