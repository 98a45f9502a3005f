//! Runs of a program over symbolic sizes: each run binds the symbols from its inputs' shapes
//! (a size outside its symbol's range is refused, naming the input, the symbol, its range and
//! the size), then runs the plan at those sizes with the memory placed for them. Plans are kept
//! for the sizes recent runs had, so a server that sees a few sequence lengths plans each once.

use crate::RunError;
use mxc_dialects::dim::{InputDims, Sizes};
use mxc_dialects::program::{MemoryPlan, Program};
use mxc_dialects::Tensor;
use std::collections::HashMap;
use std::sync::{Arc, Mutex};

/// How many sizes' plans are kept.
const KEPT: usize = 16;

/// The plan of one run's sizes.
pub(crate) struct AtSizes {
    pub program: Program,
    pub memory: MemoryPlan,
    /// The symbols' values in the order size-generic kernels read them.
    pub values: Vec<i64>,
}

pub(crate) struct SizedRuns {
    inputs: InputDims,
    /// Plans by sizes, the most recently used last.
    kept: Mutex<Vec<(Sizes, Arc<AtSizes>)>>,
}

impl SizedRuns {
    /// What runs of `program` need, if it is over symbolic sizes.
    pub fn of(program: &Program) -> Result<Option<SizedRuns>, RunError> {
        if !program.is_sized() {
            return Ok(None);
        }
        let inputs = program.input_dims().map_err(|e| RunError::Load(e.to_string()))?;
        Ok(Some(SizedRuns {
            inputs,
            kept: Mutex::new(Vec::new()),
        }))
    }

    /// The plan of the most recent run (`None` before the first).
    pub fn last(&self) -> Option<Arc<AtSizes>> {
        let kept = self.kept.lock().unwrap_or_else(|e| e.into_inner());
        kept.last().map(|(_, plan)| plan.clone())
    }

    /// The plan at the sizes `inputs`' shapes say.
    pub fn plan_for(&self, program: &Program, inputs: &HashMap<String, Tensor>) -> Result<Arc<AtSizes>, RunError> {
        let sizes = self
            .inputs
            .bind(&|name| inputs.get(name).map(|t| t.ty.shape.clone()))
            .map_err(|e| RunError::Size(e.to_string()))?;
        if let Some(missing) = program.symbols.iter().find(|s| !sizes.contains_key(&s.name)) {
            return Err(RunError::Size(format!(
                "no input given says the size of {}",
                missing.name
            )));
        }
        let mut kept = self.kept.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(i) = kept.iter().position(|(s, _)| *s == sizes) {
            let entry = kept.remove(i);
            let plan = entry.1.clone();
            kept.push(entry);
            return Ok(plan);
        }
        let at = program.at_sizes(&sizes).map_err(|e| RunError::Size(e.to_string()))?;
        let memory = at.memory_plan();
        // the plan was checked at the largest sizes when loaded; these sizes get their own check
        at.validate(&memory).map_err(|e| RunError::Run(e.to_string()))?;
        let plan = Arc::new(AtSizes {
            values: program.size_values(&sizes),
            program: at,
            memory,
        });
        if kept.len() == KEPT {
            kept.remove(0);
        }
        kept.push((sizes, plan.clone()));
        Ok(plan)
    }
}
