//! The execution plan of a graph: one buffer per value (a region's captured inputs share the
//! buffers of the values captured), one step per kernel, and the items that run them: calls
//! in op order, a control step per `mx.if` or `mx.loop` holding its regions' items, and a
//! host step per op on strings (`runs_on_host`: the runtime evaluates it).

use mxc_dialects::dim::Dim;
use mxc_dialects::mx::call::{recognise, Callee, LibraryCall};
use mxc_dialects::program::{
    symbols_in_order, Binding, Block, Buffer, BufferKind, HostStep, IfStep, Item, KernelSignature, KernelSizes,
    LoopStep, Program, Step,
};
use mxc_dialects::{Graph, Op, OpKind, ValueId};
use mxc_lowering::loops::{runs_on_host, KernelSpec};
use std::collections::HashMap;

/// The plan of `g` whose kernels are `kernels`, each step calling the symbol `symbol` makes
/// of its kernel's (`llvm_entry_name` on the host, a GPU launcher's on `gpu`).
pub fn plan(g: &Graph, kernels: &[KernelSpec], symbol: fn(&str) -> String) -> Program {
    let graphs = g.with_regions();
    let mut planner = Planner {
        buffers: Vec::new(),
        kernel_of: kernels.iter().enumerate().map(|(n, k)| ((k.region, k.op), n)).collect(),
        args: vec![Vec::new(); kernels.len()],
        next_region: 1,
    };
    let inputs: Vec<Option<usize>> = vec![None; g.inputs.len()];
    let (buffer_of, main) = planner.graph(g, 0, &inputs);
    let Planner { buffers, args, .. } = planner;
    let region_graph = |k: &KernelSpec| graphs[k.region];
    // what each kernel is compiled for, recorded apart from its step for the loader to check
    let signatures = kernels
        .iter()
        .map(|k| KernelSignature {
            symbol: symbol(&k.symbol),
            arg_bytes: k
                .args
                .iter()
                .map(|&v| region_graph(k).ty(v).num_bytes() as u64)
                .collect(),
            results: region_graph(k).ops[k.op].results.len(),
            range: k.parallel.range,
            sizes: kernel_sizes(region_graph(k), k),
        })
        .collect();
    let steps = kernels
        .iter()
        .zip(args)
        .map(|(k, args)| Step {
            symbol: symbol(&k.symbol),
            args,
            range: k.parallel.range,
            splittable: k.parallel.splittable,
            per_block: k.parallel.per_block,
            work: k.parallel.work,
            flops: kernel_flops(region_graph(k), k.op) as u64,
            call: library_call(&region_graph(k).ops[k.op]),
        })
        .collect();
    let bind = |p: &mxc_dialects::Port| Binding {
        name: p.name.clone(),
        buffer: buffer_of[p.value.index()],
    };
    Program {
        buffers,
        kernels: signatures,
        steps,
        main,
        inputs: g.inputs.iter().map(bind).collect(),
        outputs: g.outputs.iter().map(bind).collect(),
        // the imported graph's, set by `compile`
        interface: Default::default(),
        symbols: symbols_in_order(g.symbols().into_values()),
    }
}

/// What a size-generic kernel takes, as expressions (`None` for a kernel of fixed sizes).
fn kernel_sizes(g: &Graph, k: &KernelSpec) -> Option<KernelSizes> {
    if !k.takes_sizes {
        return None;
    }
    let arg_bytes = k
        .args
        .iter()
        .map(|&v| KernelSizes::bytes_of(g.ty(v)).expect("size-generic kernels take buffers of whole bytes"));
    Some(KernelSizes {
        range: k.range_dim.clone().unwrap_or_else(|| Dim::constant(k.parallel.range)),
        arg_bytes: arg_bytes.collect(),
    })
}

struct Planner {
    buffers: Vec<Buffer>,
    /// The kernel of each (region, op).
    kernel_of: HashMap<(usize, usize), usize>,
    /// Each kernel's buffers, operands then results.
    args: Vec<Vec<usize>>,
    /// The number the next region met gets (`Graph::with_regions`' order).
    next_region: usize,
}

impl Planner {
    fn add(&mut self, buffer: Buffer) -> usize {
        self.buffers.push(buffer);
        self.buffers.len() - 1
    }

    /// Buffers for the values of graph number `region` and its items; input `i` is bound to
    /// buffer `bound[i]` where that is given, else it gets its own (a graph input of the
    /// program for region 0, a temporary a control step writes for a region).
    fn graph(&mut self, g: &Graph, region: usize, bound: &[Option<usize>]) -> (Vec<usize>, Vec<Item>) {
        let mut buffer_of = vec![usize::MAX; g.num_values()];
        for (n, (p, b)) in g.inputs.iter().zip(bound).enumerate() {
            let kind = if region == 0 {
                BufferKind::Input(n)
            } else {
                BufferKind::Temp
            };
            buffer_of[p.value.index()] = b.unwrap_or_else(|| {
                self.add(Buffer {
                    ty: g.ty(p.value).clone(),
                    kind,
                })
            });
        }
        let mut items = Vec::new();
        for (index, op) in g.ops.iter().enumerate() {
            for &r in &op.results {
                let kind = match g.constant_value(r) {
                    Some(t) => BufferKind::Constant(t.clone()),
                    None => BufferKind::Temp,
                };
                buffer_of[r.index()] = self.add(Buffer {
                    ty: g.ty(r).clone(),
                    kind,
                });
            }
            let buffers = |vs: &[ValueId]| vs.iter().map(|v| buffer_of[v.index()]).collect::<Vec<_>>();
            let (operands, results) = (buffers(&op.operands), buffers(&op.results));
            match op.kind {
                OpKind::Constant => {}
                OpKind::If => items.push(self.if_step(op, &operands, results)),
                OpKind::Loop => items.push(self.loop_step(g, index, op, &operands, results)),
                _ if runs_on_host(g, op) => items.push(Item::Host(Box::new(HostStep {
                    kind: op.kind,
                    attrs: op.attrs.clone(),
                    operands,
                    results,
                }))),
                _ => {
                    let k = self.kernel_of[&(region, index)];
                    self.args[k] = operands.into_iter().chain(results).collect();
                    items.push(Item::Call(k));
                }
            }
        }
        (buffer_of, items)
    }

    /// A region's block, its inputs bound as `bound` says.
    fn region(&mut self, g: &Graph, bound: &[Option<usize>]) -> (Vec<usize>, Block) {
        let region = self.next_region;
        self.next_region += 1;
        let (buffer_of, items) = self.graph(g, region, bound);
        let outputs = g.outputs.iter().map(|p| buffer_of[p.value.index()]).collect();
        let inputs = g.inputs.iter().map(|p| buffer_of[p.value.index()]).collect();
        (inputs, Block { items, outputs })
    }

    /// The regions of `op` in `Graph::with_regions`' order (by attribute name).
    fn regions(op: &Op) -> Vec<&Graph> {
        op.attrs.regions().map(|(_, g)| g.as_ref()).collect()
    }

    fn if_step(&mut self, op: &Op, operands: &[usize], results: Vec<usize>) -> Item {
        let captured: Vec<Option<usize>> = operands[1..].iter().map(|&b| Some(b)).collect();
        // `else_branch` sorts before `then_branch`
        let [otherwise, then] = Self::regions(op)[..] else {
            unreachable!("a verified mx.if has two regions")
        };
        let (_, otherwise) = self.region(otherwise, &captured);
        let (_, then) = self.region(then, &captured);
        Item::If(Box::new(IfStep {
            cond: operands[0],
            then,
            otherwise,
            results,
        }))
    }

    fn loop_step(&mut self, g: &Graph, index: usize, op: &Op, operands: &[usize], results: Vec<usize>) -> Item {
        let carried = op.attrs.int("carried").expect("a verified mx.loop") as usize;
        let iterations = op.attrs.int("iterations").expect("a verified mx.loop");
        let [body] = Self::regions(op)[..] else {
            unreachable!("a verified mx.loop has one region")
        };
        // the body's own inputs (iteration, condition, carried values) get buffers; the
        // captured ones are the captured values'
        let bound: Vec<Option<usize>> = (0..2 + carried)
            .map(|_| None)
            .chain(operands[2 + carried..].iter().map(|&b| Some(b)))
            .collect();
        let (inputs, body) = self.region(body, &bound);
        Item::Loop(Box::new(LoopStep {
            label: format!("mx.loop (op #{index} of graph \"{}\")", g.name),
            max_trips: operands[0],
            cond: operands[1],
            initial: operands[2..2 + carried].to_vec(),
            iteration: inputs[0],
            cond_in: inputs[1],
            carried_in: inputs[2..2 + carried].to_vec(),
            body,
            iterations: u64::try_from(iterations).ok(),
            results,
        }))
    }
}

/// The arithmetic of the kernel computing op `op` of `g` (a fused op's: its body's).
fn kernel_flops(g: &Graph, op: usize) -> f64 {
    let op = &g.ops[op];
    match &op.body {
        Some(body) => mxc_rewrite::cost::kernel_flops(body),
        None => mxc_rewrite::cost::with_site(g, op, mxc_rewrite::cost::flops),
    }
}

/// The parameters of the library call an `mx.call` op makes (`None` for any other op).
fn library_call(op: &Op) -> Option<LibraryCall> {
    (op.kind == OpKind::Call).then_some(())?;
    let callee = Callee::from_name(op.attrs.str("callee").ok()?)?;
    let call = recognise(callee, op.body.as_deref()?);
    Some(call.expect("a verified mx.call's callee computes its body"))
}

/// The exported symbol that calls kernel `symbol` with an array of buffer pointers.
pub fn llvm_entry_name(symbol: &str) -> String {
    format!("{symbol}_entry")
}
