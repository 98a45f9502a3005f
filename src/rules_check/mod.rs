//! `mxc rules check FILE...`: type-checks rule files (loading does) and tests each rule's
//! soundness. Instances of the rule's left side are drawn (`instance`, from the generators in
//! `generate`), the engine applies the rule alone to each (`oracle`), and every instance the
//! rule changed is run against its rewritten graph on the `ref` target with seeded inputs
//! (`check`), and a few of them again with a size made symbolic (`symbolic`). Each rule gets a line (`report`): ok, never fired (a warning), or UNSOUND with a
//! counterexample. Everything is seeded, so the output is the same on every run.

mod check;
mod generate;
mod instance;
mod oracle;
mod report;
mod show;
mod symbolic;

use anyhow::Result;
use mxc_rewrite::rules::load_rules;
use std::path::PathBuf;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Mutex;

/// Checks every rule of `files`, prints a report and returns how many rules are unsound. A
/// file that does not load (syntax, types) is an error before any rule is tested.
pub fn run(files: &[PathBuf]) -> Result<usize> {
    let loaded = files
        .iter()
        .map(|f| Ok((f, load_rules(f)?)))
        .collect::<Result<Vec<_>>>()?;
    let (mut sound, mut never, mut unsound) = (0, 0, 0);
    for (file, rules) in loaded {
        println!("{}:", file.display());
        for (rule, checked) in rules.iter().zip(in_parallel(&rules, check::check_rule)) {
            let checked = checked?;
            match checked.verdict {
                check::Verdict::Sound { .. } => sound += 1,
                check::Verdict::NeverFired { .. } => never += 1,
                check::Verdict::Unsound(_) => unsound += 1,
            }
            print!("{}", report::render(rule, &checked));
        }
    }
    let total = sound + never + unsound;
    let plural = if total == 1 { "" } else { "s" };
    println!("{total} rule{plural}: {sound} ok, {never} never fired, {unsound} unsound");
    Ok(unsound)
}

/// `f` of every item, in order, computed on as many threads as there are cores (each rule's
/// check is seeded by its name, so the results do not depend on the order of the work).
fn in_parallel<T: Sync, R: Send>(items: &[T], f: impl Fn(&T) -> R + Sync) -> Vec<R> {
    let next = AtomicUsize::new(0);
    let results: Mutex<Vec<Option<R>>> = Mutex::new(items.iter().map(|_| None).collect());
    let threads = std::thread::available_parallelism()
        .map_or(1, |n| n.get())
        .min(items.len());
    std::thread::scope(|s| {
        for _ in 0..threads {
            s.spawn(|| loop {
                let i = next.fetch_add(1, Ordering::Relaxed);
                let Some(item) = items.get(i) else { break };
                let r = f(item);
                results.lock().expect("no worker panicked")[i] = Some(r);
            });
        }
    });
    let results = results.into_inner().expect("no worker panicked");
    results.into_iter().map(|r| r.expect("every item was done")).collect()
}
