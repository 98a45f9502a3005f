//! What runs a file's inputs: its one program, the program a file of programs by size holds
//! for the inputs' sizes, or a batch run in parts. A size no program is compiled for, of a
//! symbol that counts items the model treats independently (`mxc_dialects::items`), runs as
//! consecutive parts through programs compiled for smaller sizes; each part's inputs are the
//! batch's items sliced along their item axes, and the outputs are the parts' outputs joined
//! along theirs.

use crate::executable::{Executable, Outputs};
use crate::mxr::{Contents, Parts, Selected};
use crate::threads::Parallelism;
use crate::RunError;
use mxc_dialects::dim::{self, Sizes};
use mxc_dialects::eval::layout::{concat, slice};
use mxc_dialects::Tensor;
use std::collections::HashMap;

/// A loaded program, or programs that run a batch in parts.
pub enum Runnable {
    One(Box<Executable>),
    Parts(Box<PartsRun>),
}

impl Runnable {
    /// The program of `contents` for the inputs' shapes `shape_of` says (a file of programs
    /// by size: `SizedMxr::select`), loaded, and the sizes it runs (none for a one-program
    /// file).
    pub fn load(
        contents: Contents,
        shape_of: &dyn Fn(&str) -> Option<Vec<usize>>,
    ) -> Result<(Runnable, Option<Sizes>), RunError> {
        Ok(match contents {
            Contents::One(m) => (Runnable::One(Box::new(Executable::load_mxr(*m)?)), None),
            Contents::BySize(s) => match s.select(shape_of)? {
                Selected::One(sizes, m) => (Runnable::One(Box::new(Executable::load_mxr(*m)?)), Some(sizes)),
                Selected::Parts(parts) => {
                    let sizes = parts.sizes.clone();
                    (Runnable::Parts(Box::new(PartsRun::load(parts)?)), Some(sizes))
                }
            },
        })
    }

    /// The program, or the first part's (every part has the same inputs and outputs, by name).
    pub fn executable(&self) -> &Executable {
        match self {
            Runnable::One(exe) => exe,
            Runnable::Parts(run) => &run.programs[0],
        }
    }

    pub fn set_parallelism(&mut self, parallelism: Parallelism) -> Result<(), RunError> {
        match self {
            Runnable::One(exe) => exe.set_parallelism(parallelism),
            Runnable::Parts(run) => run.programs.iter_mut().try_for_each(|p| p.set_parallelism(parallelism)),
        }
    }

    pub fn run(&self, inputs: &HashMap<String, Tensor>) -> Result<Outputs, RunError> {
        match self {
            Runnable::One(exe) => exe.run(inputs),
            Runnable::Parts(run) => run.run(inputs),
        }
    }

    /// The inputs' shapes where they are not the program's own: a batch in parts takes the
    /// whole batch.
    pub fn input_shapes(&self) -> HashMap<String, Vec<usize>> {
        match self {
            Runnable::One(_) => HashMap::new(),
            Runnable::Parts(run) => run.shapes.iter().cloned().collect(),
        }
    }
}

/// The loaded programs of `Parts` and which runs which items.
pub struct PartsRun {
    sizes: Sizes,
    shapes: Vec<(String, Vec<usize>)>,
    programs: Vec<Executable>,
    /// How many items each program takes.
    capacity: Vec<usize>,
    runs: Vec<(usize, usize, usize)>,
    inputs: HashMap<String, usize>,
    outputs: HashMap<String, usize>,
}

impl PartsRun {
    /// Loads each program of `parts` (as `Executable::load_mxr`).
    pub fn load(parts: Parts) -> Result<PartsRun, RunError> {
        let symbol = &parts.items.symbol;
        let capacity = parts.programs.iter().map(|(sizes, _)| sizes[symbol] as usize).collect();
        let programs = parts
            .programs
            .into_iter()
            .map(|(_, mxr)| Executable::load_mxr(mxr))
            .collect::<Result<_, _>>()?;
        Ok(PartsRun {
            sizes: parts.sizes,
            shapes: parts.shapes,
            programs,
            capacity,
            runs: parts.runs,
            inputs: parts.items.inputs.into_iter().collect(),
            outputs: parts.items.outputs.into_iter().collect(),
        })
    }

    /// The memory of its programs: the weights of all of them, and the largest arena (one
    /// part runs at a time).
    pub fn memory_use(&self) -> crate::MemoryUse {
        let each: Vec<crate::MemoryUse> = self.programs.iter().map(Executable::memory_use).collect();
        crate::MemoryUse {
            weights: each.iter().map(|m| m.weights).sum(),
            weights_copied: each.iter().map(|m| m.weights_copied).sum(),
            arena: each.iter().map(|m| m.arena).max().unwrap_or(0),
        }
    }

    /// The sizes and the parts: `n=17 in parts of 8 + 8 + 1`, a part filled up to its
    /// program's size as `7 (as 8)`.
    pub fn describe(&self) -> String {
        let counts: Vec<String> = (self.runs.iter())
            .map(|&(program, _, count)| match self.capacity[program] {
                size if size > count => format!("{count} (as {size})"),
                _ => count.to_string(),
            })
            .collect();
        format!("{} in parts of {}", dim::show_sizes(&self.sizes), counts.join(" + "))
    }

    /// Runs every part on its items of `inputs` (a part with fewer items than its program
    /// takes filled up with its last item, whose copies' outputs are dropped) and joins the
    /// outputs.
    pub fn run(&self, inputs: &HashMap<String, Tensor>) -> Result<Outputs, RunError> {
        let mut pieces: Vec<Outputs> = Vec::with_capacity(self.runs.len());
        for &(program, start, count) in &self.runs {
            let size = self.capacity[program];
            let part: HashMap<String, Tensor> = inputs
                .iter()
                .map(|(name, t)| match self.inputs.get(name) {
                    Some(&axis) => Ok((name.clone(), filled(t, axis, start, count, size)?)),
                    None => Ok((name.clone(), t.clone())),
                })
                .collect::<Result<_, RunError>>()?;
            let mut outputs = self.programs[program].run(&part)?;
            if count < size {
                for (name, value) in &mut outputs {
                    *value = items_of(value, self.outputs[name.as_str()], 0, count)?;
                }
            }
            pieces.push(outputs);
        }
        let names: Vec<String> = pieces[0].iter().map(|(n, _)| n.clone()).collect();
        names
            .into_iter()
            .enumerate()
            .map(|(i, name)| {
                let axis = self.outputs[&name];
                let parts: Vec<&Tensor> = pieces.iter().map(|p| &p[i].1).collect();
                let mut shape = parts[0].shape().to_vec();
                shape[axis] = parts.iter().map(|t| t.shape()[axis]).sum();
                let ty = parts[0].ty.with_shape(shape);
                let joined = concat(&parts, axis, &ty).map_err(|e| RunError::Run(format!("output `{name}`: {e}")))?;
                Ok((name, joined))
            })
            .collect()
    }
}

/// Items `start..start + count` of `t` along `axis`, then its last item again up to `size`.
fn filled(t: &Tensor, axis: usize, start: usize, count: usize, size: usize) -> Result<Tensor, RunError> {
    let items = items_of(t, axis, start, count)?;
    if count >= size || count == 0 {
        return Ok(items);
    }
    let last = items_of(t, axis, start + count - 1, 1)?;
    let mut parts = vec![&items];
    parts.extend(std::iter::repeat_n(&last, size - count));
    let mut shape = items.shape().to_vec();
    shape[axis] = size;
    concat(&parts, axis, &items.ty.with_shape(shape)).map_err(RunError::Run)
}

/// Items `start..start + count` of `t` along `axis`.
fn items_of(t: &Tensor, axis: usize, start: usize, count: usize) -> Result<Tensor, RunError> {
    let shape = t.shape();
    if axis >= shape.len() || start + count > shape[axis] {
        return Err(RunError::Run(format!(
            "items {start}..{} of axis {axis} of a value of shape {shape:?}",
            start + count
        )));
    }
    let mut starts = vec![0; shape.len()];
    starts[axis] = start as i64;
    let mut out = shape.to_vec();
    out[axis] = count;
    Ok(slice(t, &starts, &vec![1; shape.len()], &t.ty.with_shape(out)))
}
