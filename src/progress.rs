//! The progress line of `mxc compile` on a terminal: the stage it is in (import, saturation,
//! extraction, fusion, lowering, codegen) and the time so far, rewritten in place on stderr and
//! cleared at the end. Never shown when stderr is not a terminal, or with `-q`.

use mxc_rewrite::StageHook;
use std::io::{IsTerminal, Write};
use std::sync::Arc;
use std::time::Instant;

/// The stages in order, to number them.
const STAGES: &[&str] = &["import", "saturation", "extraction", "fusion", "lowering", "codegen"];

/// A progress line, or nothing when it must not be shown.
pub struct Progress(Option<Arc<Line>>);

struct Line {
    start: Instant,
}

impl Line {
    fn show(&self, stage: &str) {
        let n = STAGES.iter().position(|s| *s == stage).map_or(0, |i| i + 1);
        let done = "#".repeat(n * 3);
        let todo = ".".repeat((STAGES.len() - n) * 3);
        let mut err = std::io::stderr().lock();
        let _ = write!(
            err,
            "\r\x1b[K[{done}{todo}] {stage} ({:.1} s)",
            self.start.elapsed().as_secs_f64()
        );
        let _ = err.flush();
    }
}

impl Progress {
    /// Shown when stderr is a terminal and `quiet` is not set.
    pub fn new(quiet: bool) -> Progress {
        let shown = !quiet && std::io::stderr().is_terminal();
        Progress(shown.then(|| Arc::new(Line { start: Instant::now() })))
    }

    /// The hook the compiler calls at each of its stages.
    pub fn hook(&self) -> Option<StageHook> {
        let line = self.0.clone()?;
        Some(StageHook(Arc::new(move |stage| line.show(stage))))
    }

    /// Clears the line.
    pub fn finish(&self) {
        if self.0.is_some() {
            let _ = write!(std::io::stderr(), "\r\x1b[K");
        }
    }
}
