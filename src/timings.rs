//! `mxc compile --timings`: the time each phase of a compile took (import, saturation,
//! extraction, fusion, lowering, codegen, writing the file), summed over the programs a file
//! holds, with the process's peak resident memory at the end of each phase, as a table on
//! stderr like `mxc perf`'s. The phases are the compiler's stages (`StageHook`); a phase ends
//! where the next begins.

use std::sync::Mutex;
use std::time::Instant;

/// The phases seen so far and the one running.
pub struct Timings {
    state: Mutex<State>,
}

struct State {
    /// Each phase in order of first appearance: (name, seconds, peak bytes at its last end).
    phases: Vec<(&'static str, f64, Option<u64>)>,
    running: Option<(&'static str, Instant)>,
    /// The highest peak read so far (the kernel's count is approximate, and can read lower
    /// later: the table shows the peak so far).
    highest: Option<u64>,
}

impl Timings {
    pub fn new() -> Timings {
        Timings {
            state: Mutex::new(State {
                phases: Vec::new(),
                running: None,
                highest: None,
            }),
        }
    }

    /// Phase `stage` begins (the running one, if another, ends).
    pub fn mark(&self, stage: &'static str) {
        let mut state = self.state.lock().unwrap_or_else(|e| e.into_inner());
        if state.running.is_some_and(|(name, _)| name == stage) {
            return;
        }
        state.end_running();
        state.running = Some((stage, Instant::now()));
    }

    /// Ends the running phase and prints the table.
    pub fn print(&self) {
        let mut state = self.state.lock().unwrap_or_else(|e| e.into_inner());
        state.end_running();
        let total: f64 = state.phases.iter().map(|p| p.1).sum();
        eprintln!("{:<12} {:>9} {:>7} {:>12}", "phase", "seconds", "share", "peak memory");
        for (name, seconds, peak) in &state.phases {
            let share = if total > 0.0 { 100.0 * seconds / total } else { 0.0 };
            eprintln!("{name:<12} {seconds:>9.3} {share:>6.1}% {:>12}", peak_text(*peak));
        }
        let peak = state.phases.iter().filter_map(|p| p.2).max();
        eprintln!("{:<12} {total:>9.3} {:>6.1}% {:>12}", "total", 100.0, peak_text(peak));
    }
}

impl State {
    fn end_running(&mut self) {
        let Some((name, start)) = self.running.take() else {
            return;
        };
        let seconds = start.elapsed().as_secs_f64();
        self.highest = self.highest.max(peak_resident_bytes());
        let peak = self.highest;
        match self.phases.iter_mut().find(|p| p.0 == name) {
            Some(p) => {
                p.1 += seconds;
                p.2 = peak.max(p.2);
            }
            None => self.phases.push((name, seconds, peak)),
        }
    }
}

fn peak_text(bytes: Option<u64>) -> String {
    bytes.map_or_else(|| "-".to_string(), |b| format!("{:.1} MB", b as f64 / 1e6))
}

/// The process's peak resident memory so far (`VmHWM` of /proc/self/status), where the system
/// says it.
fn peak_resident_bytes() -> Option<u64> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    let line = status.lines().find(|l| l.starts_with("VmHWM:"))?;
    let kb: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kb * 1024)
}
