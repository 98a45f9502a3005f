//! `explain(program, target)`: why each kernel is what it is, as data (a dict), from the same
//! explanation `mxc explain` prints (`mxc_driver::explain`).

use crate::errors::{raise, refuse};
use crate::program::{Program, Target};
use mxc_driver::explain::explain as explain_graph;
use pyo3::prelude::*;
use pyo3::types::PyDict;

/// The target's rewrite of `p` (not compiled yet, in the precision asked for), kernel by
/// kernel: a dict with the graph's name, the target, `kernels`, `bytes` and `cost` before and
/// after, `rewriting` (iterations, why saturation stopped, e-nodes, e-classes; None for `ref`)
/// and `kernel_list`, one dict per kernel (`op`, `ops`, `on_host`, `cost`, `bytes`, `flops`,
/// `origin`, `rules`, `replaces`, `rejected`, `algorithms`, `library`).
#[pyfunction]
#[pyo3(signature = (p, target = None))]
pub fn explain<'py>(py: Python<'py>, p: &Program, target: Option<&Target>) -> PyResult<Bound<'py, PyDict>> {
    let graph = p.graph_to_compile()?.ok_or_else(|| {
        refuse("explain: a program is explained before it is compiled, from its graph (a compiled program keeps none; one with symbolic inputs has a graph per size)")
    })?;
    let target = target.map_or(mxc_codegen::Target::Cpu, |t| t.0);
    let options = mxc_driver::default_options();
    let e = py
        .detach(|| explain_graph(&graph, target, &options, &graph.name))
        .map_err(raise)?;
    let summary = e.summary();
    let out = PyDict::new(py);
    out.set_item("graph", &graph.name)?;
    out.set_item("target", target.name())?;
    out.set_item("kernels", summary.kernels)?;
    out.set_item("bytes", summary.bytes)?;
    out.set_item("cost", summary.cost)?;
    let rewriting = summary.rewriting.map(|(iterations, stop, enodes, eclasses)| {
        let d = PyDict::new(py);
        d.set_item("iterations", iterations)?;
        d.set_item("stop_reason", stop)?;
        d.set_item("enodes", enodes)?;
        d.set_item("eclasses", eclasses)?;
        Ok::<_, PyErr>(d)
    });
    out.set_item("rewriting", rewriting.transpose()?)?;
    let mut kernels = Vec::new();
    for k in e.kernels() {
        let d = PyDict::new(py);
        d.set_item("op", k.op)?;
        d.set_item("ops", k.ops)?;
        d.set_item("on_host", k.on_host)?;
        d.set_item("cost", k.cost)?;
        d.set_item("bytes", k.bytes)?;
        d.set_item("flops", k.flops)?;
        d.set_item("origin", k.origin)?;
        d.set_item("rules", k.rules)?;
        d.set_item("replaces", k.replaces)?;
        let rejected = k.rejected.map(|(form, cost, program_cost)| {
            let r = PyDict::new(py);
            r.set_item("form", form)?;
            r.set_item("cost", cost)?;
            r.set_item("program_cost", program_cost)?;
            Ok::<_, PyErr>(r)
        });
        d.set_item("rejected", rejected.transpose()?)?;
        let mut algorithms = Vec::new();
        for algorithm in k.algorithms {
            let a = PyDict::new(py);
            a.set_item("chosen", algorithm.chosen)?;
            a.set_item("cost", algorithm.cost)?;
            a.set_item("rejected", algorithm.rejected)?;
            algorithms.push(a);
        }
        d.set_item("algorithms", algorithms)?;
        let library = k.library.map(|l| {
            let lib = PyDict::new(py);
            lib.set_item("callee", l.callee)?;
            lib.set_item("libraries", l.libraries)?;
            lib.set_item("called", l.called)?;
            lib.set_item("call_cost", l.call_cost)?;
            lib.set_item("generated", l.generated)?;
            Ok::<_, PyErr>(lib)
        });
        d.set_item("library", library.transpose()?)?;
        kernels.push(d);
    }
    out.set_item("kernel_list", kernels)?;
    Ok(out)
}
