//! The shape of a plan: blocks of kernel calls, the control steps that run regions (`mx.if`,
//! `mx.loop`) on the host, and the host steps that run ops on strings (`host.rs`). A
//! control-free program without strings is one block of calls.
//!
//! A region's values have buffers of their own in the program's one buffer table, except its
//! captured inputs, which are the buffers of the values the op captures. A control step moves
//! data only by whole-buffer copies: a branch's outputs into the `if`'s results, a loop's
//! initial values into its results (which hold the carried values between iterations), the
//! results into the body's carried inputs before each iteration, the body's outputs back
//! into the results after it, and each scan output into its slot of the stacked result.

use super::host::HostStep;
use super::{BufferKind, PlanError, Program};
use crate::DType;

/// What a block runs, in order.
#[derive(Clone, Debug, PartialEq)]
pub enum Item {
    /// Kernel call `Program::steps[n]`.
    Call(usize),
    If(Box<IfStep>),
    Loop(Box<LoopStep>),
    Host(Box<HostStep>),
}

/// A region's items and the buffers that hold its outputs once they have run.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Block {
    pub items: Vec<Item>,
    pub outputs: Vec<usize>,
}

/// Runs `then` if the one-element `bool` buffer `cond` holds true, else `otherwise`, and copies
/// the branch's outputs into `results`.
#[derive(Clone, Debug, PartialEq)]
pub struct IfStep {
    pub cond: usize,
    pub then: Block,
    pub otherwise: Block,
    pub results: Vec<usize>,
}

/// Runs `body` while the iteration number is below the `i64` in `max_trips` and the condition
/// holds (first `cond`'s, then the body's first output's).
#[derive(Clone, Debug, PartialEq)]
pub struct LoopStep {
    /// What errors call the loop (`mx.loop (op #3 of "main")`).
    pub label: String,
    pub max_trips: usize,
    pub cond: usize,
    /// The carried values' initial values.
    pub initial: Vec<usize>,
    /// The body's inputs: the iteration number (`i64`), the condition, the carried values.
    pub iteration: usize,
    pub cond_in: usize,
    pub carried_in: Vec<usize>,
    /// Its outputs: the next condition, the next carried values, the scan outputs.
    pub body: Block,
    /// How many times the loop runs, where the scan results are sized for it.
    pub iterations: Option<u64>,
    /// The carried values' final values, then the stacked scan outputs.
    pub results: Vec<usize>,
}

impl LoopStep {
    /// The body's scan outputs and the results they are stacked into.
    pub fn scans(&self) -> impl Iterator<Item = (usize, usize)> + '_ {
        let carried = self.carried_in.len();
        self.body.outputs[1 + carried..]
            .iter()
            .copied()
            .zip(self.results[carried..].iter().copied())
    }
}

/// The deepest nesting of regions a plan may have (a file's plan is read recursively).
pub const MAX_DEPTH: usize = 64;

/// The top-level block of a program with no control flow: each step once, in order.
pub fn straight(steps: usize) -> Vec<Item> {
    (0..steps).map(Item::Call).collect()
}

impl Program {
    /// Checks the items: each step called exactly once, every buffer named in range, the
    /// control buffers of the right types, every copy between buffers of equal types, and
    /// what a control step writes a temporary.
    pub(super) fn validate_items(&self) -> Result<(), PlanError> {
        let mut calls = vec![0usize; self.steps.len()];
        self.validate_block(&self.main, &mut calls, 0)?;
        if let Some(s) = calls.iter().position(|&c| c != 1) {
            return Err(PlanError(format!("step {s} is called {} times, not once", calls[s])));
        }
        Ok(())
    }

    fn validate_block(&self, items: &[Item], calls: &mut [usize], depth: usize) -> Result<(), PlanError> {
        if depth > MAX_DEPTH {
            return Err(PlanError(format!("regions nest deeper than {MAX_DEPTH}")));
        }
        for item in items {
            match item {
                Item::Call(n) => match calls.get_mut(*n) {
                    Some(c) => *c += 1,
                    None => return Err(PlanError(format!("a call names step {n} of {}", self.steps.len()))),
                },
                Item::If(s) => {
                    self.scalar(s.cond, DType::Bool, "an if's condition")?;
                    for branch in [&s.then, &s.otherwise] {
                        self.validate_block(&branch.items, calls, depth + 1)?;
                        self.copies(&branch.outputs, &s.results, "a branch's outputs and the if's results")?;
                    }
                    self.temps(&s.results, "an if's result")?;
                }
                Item::Loop(s) => self.validate_loop(s, calls, depth)?,
                Item::Host(s) => self.validate_host(s)?,
            }
        }
        Ok(())
    }

    fn validate_loop(&self, s: &LoopStep, calls: &mut [usize], depth: usize) -> Result<(), PlanError> {
        let at = |m: String| PlanError(format!("{}: {m}", s.label));
        self.scalar(s.max_trips, DType::I64, "the trip count")?;
        self.scalar(s.cond, DType::Bool, "the condition")?;
        self.scalar(s.iteration, DType::I64, "the iteration number")?;
        self.scalar(s.cond_in, DType::Bool, "the body's condition")?;
        let carried = s.initial.len();
        if s.carried_in.len() != carried || s.body.outputs.len() < 1 + carried || s.results.len() < carried {
            return Err(at(format!(
                "{carried} initial values, {} carried inputs, {} body outputs, {} results",
                s.carried_in.len(),
                s.body.outputs.len(),
                s.results.len()
            )));
        }
        if s.body.outputs.len() - 1 != s.results.len() {
            return Err(at(format!(
                "the body gives {} values after its condition for {} results",
                s.body.outputs.len() - 1,
                s.results.len()
            )));
        }
        self.scalar(s.body.outputs[0], DType::Bool, "the body's next condition")?;
        self.copies(&s.initial, &s.results[..carried], "initial values and results")?;
        self.copies(&s.carried_in, &s.results[..carried], "carried inputs and results")?;
        self.copies(
            &s.body.outputs[1..=carried],
            &s.results[..carried],
            "the body's outputs and results",
        )?;
        for (out, result) in s.scans() {
            let (Some(out), Some(result)) = (self.buffers.get(out), self.buffers.get(result)) else {
                return Err(at("a scan output names no buffer".into()));
            };
            let stacked = s.iterations.and_then(|n| (out.ty.num_bytes() as u64).checked_mul(n));
            if stacked != Some(result.ty.num_bytes() as u64) || out.ty.dtype != result.ty.dtype {
                return Err(at(format!(
                    "scan output {} stacked {:?} times is not its result {}",
                    out.ty, s.iterations, result.ty
                )));
            }
        }
        self.temps(&s.results, "a loop's result")?;
        self.temps(&s.carried_in, "a loop's carried input")?;
        self.temps(&[s.iteration, s.cond_in], "a loop's body input")?;
        self.validate_block(&s.body.items, calls, depth + 1)
    }

    /// Whether each step is called inside a loop's body (so maybe many times in a run).
    pub fn steps_in_loops(&self) -> Vec<bool> {
        fn mark(items: &[Item], in_loop: bool, marks: &mut [bool]) {
            for item in items {
                match item {
                    Item::Call(n) => {
                        if let Some(m) = marks.get_mut(*n) {
                            *m = in_loop;
                        }
                    }
                    Item::If(s) => {
                        mark(&s.then.items, in_loop, marks);
                        mark(&s.otherwise.items, in_loop, marks);
                    }
                    Item::Loop(s) => mark(&s.body.items, true, marks),
                    Item::Host(_) => {}
                }
            }
        }
        let mut marks = vec![false; self.steps.len()];
        mark(&self.main, false, &mut marks);
        marks
    }

    pub(super) fn buffer(&self, b: usize) -> Result<&super::Buffer, PlanError> {
        self.buffers
            .get(b)
            .ok_or_else(|| PlanError(format!("a control step names buffer {b} of {}", self.buffers.len())))
    }

    fn scalar(&self, b: usize, dtype: DType, what: &str) -> Result<(), PlanError> {
        let ty = &self.buffer(b)?.ty;
        match ty.dtype == dtype && ty.num_elements() == 1 {
            true => Ok(()),
            false => Err(PlanError(format!("{what} is buffer {b} of {ty}, not one {dtype}"))),
        }
    }

    fn copies(&self, from: &[usize], to: &[usize], what: &str) -> Result<(), PlanError> {
        if from.len() != to.len() {
            return Err(PlanError(format!("{what}: {} copied to {}", from.len(), to.len())));
        }
        for (&a, &b) in from.iter().zip(to) {
            let (ta, tb) = (&self.buffer(a)?.ty, &self.buffer(b)?.ty);
            if ta != tb {
                return Err(PlanError(format!(
                    "{what}: buffer {a} ({ta}) copied to buffer {b} ({tb})"
                )));
            }
        }
        Ok(())
    }

    pub(super) fn temps(&self, buffers: &[usize], what: &str) -> Result<(), PlanError> {
        for &b in buffers {
            if self.buffer(b)?.kind != BufferKind::Temp {
                return Err(PlanError(format!("{what} is buffer {b}, which is not a temporary")));
            }
        }
        Ok(())
    }

    /// Each buffer's lifetime as the positions of its first and last use in the items laid out
    /// in order (`usize::MAX` first: never used). Whatever is live when a loop starts and used
    /// inside it stays live to its end: each iteration reads it again.
    pub(super) fn lifetimes(&self) -> (Vec<usize>, Vec<usize>) {
        let n = self.buffers.len();
        let mut life = Lifetimes {
            first: vec![usize::MAX; n],
            last: vec![0; n],
            pos: 0,
        };
        life.block(self, &self.main);
        for o in &self.outputs {
            life.last[o.buffer] = usize::MAX;
        }
        (life.first, life.last)
    }
}

struct Lifetimes {
    first: Vec<usize>,
    last: Vec<usize>,
    pos: usize,
}

impl Lifetimes {
    /// Marks `buffers` used at the current position (names out of range are `validate`'s to
    /// refuse, skipped here).
    fn touch(&mut self, buffers: &[usize]) {
        let n = self.first.len();
        for &b in buffers.iter().filter(|&&b| b < n) {
            self.first[b] = self.first[b].min(self.pos);
            self.last[b] = self.last[b].max(self.pos);
        }
    }

    fn next(&mut self, buffers: &[usize]) {
        self.pos += 1;
        self.touch(buffers);
    }

    fn block(&mut self, p: &Program, items: &[Item]) {
        for item in items {
            match item {
                Item::Call(n) => self.next(p.steps.get(*n).map_or(&[][..], |s| &s.args)),
                Item::Host(s) => self.next(&[&s.operands[..], &s.results[..]].concat()),
                Item::If(s) => {
                    self.next(&[s.cond]);
                    self.touch(&s.results);
                    for branch in [&s.then, &s.otherwise] {
                        self.block(p, &branch.items);
                        self.next(&branch.outputs);
                        self.touch(&s.results);
                    }
                }
                Item::Loop(s) => {
                    self.next(&[s.max_trips, s.cond, s.iteration, s.cond_in]);
                    let start = self.pos;
                    for list in [&s.initial, &s.carried_in, &s.results] {
                        self.touch(list);
                    }
                    self.block(p, &s.body.items);
                    self.next(&s.body.outputs);
                    for list in [&s.carried_in, &s.results, &vec![s.iteration, s.cond_in]] {
                        self.touch(list);
                    }
                    let end = self.pos;
                    for b in 0..self.first.len() {
                        if self.first[b] < start && (start..end).contains(&self.last[b]) {
                            self.last[b] = end;
                        }
                    }
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::super::{Binding, Buffer, Step};
    use super::*;
    use crate::TensorType;

    fn buffer(dtype: DType, kind: BufferKind) -> Buffer {
        Buffer {
            ty: TensorType::new(dtype, Vec::new()),
            kind,
        }
    }

    fn call(args: Vec<usize>) -> Step {
        Step {
            symbol: "k".into(),
            args,
            range: 1,
            splittable: false,
            per_block: false,
            work: 1,
            flops: 0,
            call: None,
        }
    }

    /// x -> t (step 0); a loop whose body reads t each iteration (steps 1, 2) and scans the
    /// second step's result into y.
    fn looping() -> Program {
        use BufferKind::{Constant, Input, Temp};
        let n = crate::Tensor::from_i64s(DType::I64, vec![], &[3]);
        let yes = crate::Tensor::from_i64s(DType::Bool, vec![], &[1]);
        let buffers = vec![
            buffer(DType::F32, Input(0)),       // 0 x
            buffer(DType::F32, Temp),           // 1 t
            buffer(DType::I64, Constant(n)),    // 2 max trips
            buffer(DType::Bool, Constant(yes)), // 3 cond
            buffer(DType::I64, Temp),           // 4 iteration
            buffer(DType::Bool, Temp),          // 5 cond in
            buffer(DType::F32, Temp),           // 6 body: t + 1
            buffer(DType::F32, Temp),           // 7 body: (t + 1) * 2
            Buffer {
                ty: TensorType::new(DType::F32, vec![3]),
                kind: Temp,
            }, // 8 the scan result
        ];
        Program {
            buffers,
            kernels: Vec::new(),
            steps: vec![call(vec![0, 1]), call(vec![1, 6]), call(vec![6, 7])],
            main: vec![
                Item::Call(0),
                Item::Loop(Box::new(LoopStep {
                    label: "loop".into(),
                    max_trips: 2,
                    cond: 3,
                    initial: Vec::new(),
                    iteration: 4,
                    cond_in: 5,
                    carried_in: Vec::new(),
                    body: Block {
                        items: vec![Item::Call(1), Item::Call(2)],
                        outputs: vec![5, 7],
                    },
                    iterations: Some(3),
                    results: vec![8],
                })),
            ],
            inputs: vec![Binding {
                name: "x".into(),
                buffer: 0,
            }],
            outputs: vec![Binding {
                name: "y".into(),
                buffer: 8,
            }],
            interface: Default::default(),
            symbols: Vec::new(),
        }
    }

    #[test]
    fn what_a_loop_reads_from_outside_lives_to_its_end() {
        let p = looping();
        p.validate_items().unwrap();
        let (first, last) = p.lifetimes();
        assert_eq!(p.steps_in_loops(), [false, true, true]);
        // t is read by the body's first call (position 3), but every iteration reads it: it
        // lives to the loop's end (position 5), so the body's later temporaries cannot take it
        assert_eq!((first[1], last[1]), (1, 5));
        assert_eq!((first[7], last[7]), (4, 5));
        let plan = p.memory_plan();
        assert_ne!(plan.offsets[1], plan.offsets[7]);
        assert_ne!(plan.offsets[1], plan.offsets[6]);
    }

    #[test]
    fn a_plan_whose_items_disagree_is_refused() {
        let mut p = looping();
        p.main.push(Item::Call(2));
        assert_eq!(p.validate_items().unwrap_err().0, "step 2 is called 2 times, not once");
        let mut p = looping();
        let Item::Loop(s) = &mut p.main[1] else { unreachable!() };
        s.iterations = Some(2);
        let err = p.validate_items().unwrap_err().0;
        assert_eq!(
            err,
            "loop: scan output tensor<f32> stacked Some(2) times is not its result tensor<3xf32>"
        );
        let mut p = looping();
        let Item::Loop(s) = &mut p.main[1] else { unreachable!() };
        s.cond = 2;
        let err = p.validate_items().unwrap_err().0;
        assert_eq!(err, "the condition is buffer 2 of tensor<i64>, not one bool");
    }
}
