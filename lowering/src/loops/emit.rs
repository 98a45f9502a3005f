//! A small writer of MLIR text for one kernel function: fresh SSA names, indentation,
//! constants hoisted to the function entry, nested `scf.for` loops (with or without
//! loop-carried values), `scf.if`, and index arithmetic that folds what is known statically.
//!
//! The first loop nest a kernel opens at its top level (without carried values) is its
//! *parallel loop*: its leading dimensions are collapsed into one loop over `%lo..%hi`, the
//! two `index` arguments every kernel takes, so the runtime can give parts of the range to
//! different threads (`Parallel`). While writing, the emitter also counts the kernel's work:
//! every line it writes, times the trip counts of the loops around it.
//!
//! Scalar arithmetic on typed values lives in `scalar.rs`, memory access in `buffer.rs`.

use super::sizes::{Extent, SizeArgs};
use super::vector::VectorIsa;
use mxc_dialects::dim::Dim;
use std::collections::HashMap;
use std::fmt::Write;

/// The MLIR scalar types kernels compute with. Integers are signless in MLIR; the signedness
/// kept here picks the signed or unsigned variant of division, comparison and conversion.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Ty {
    Index,
    I1,
    Int {
        bits: u32,
        signed: bool,
    },
    F16,
    BF16,
    F32,
    F64,
    /// An AMX tile of `rows` rows of `columns` elements: `amx.rs`'s values, which only its ops
    /// take.
    Tile {
        rows: u8,
        columns: u8,
        elem: TileElem,
    },
}

/// What an AMX tile holds: bf16 or bytes (operands), f32 or i32 (sums).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum TileElem {
    BF16,
    F32,
    I8,
    I32,
}

impl TileElem {
    fn mlir(self) -> &'static str {
        match self {
            TileElem::BF16 => "bf16",
            TileElem::F32 => "f32",
            TileElem::I8 => "i8",
            TileElem::I32 => "i32",
        }
    }

    fn bits(self) -> u32 {
        match self {
            TileElem::BF16 => 16,
            TileElem::I8 => 8,
            TileElem::F32 | TileElem::I32 => 32,
        }
    }
}

impl Ty {
    /// The type as MLIR spells it.
    pub fn mlir(self) -> String {
        match self {
            Ty::Index => "index".into(),
            Ty::I1 => "i1".into(),
            Ty::Int { bits, .. } => format!("i{bits}"),
            Ty::F16 => "f16".into(),
            Ty::BF16 => "bf16".into(),
            Ty::F32 => "f32".into(),
            Ty::F64 => "f64".into(),
            Ty::Tile { rows, columns, elem } => format!("!amx.tile<{rows}x{columns}x{}>", elem.mlir()),
        }
    }

    pub fn is_float(self) -> bool {
        matches!(self, Ty::F16 | Ty::BF16 | Ty::F32 | Ty::F64)
    }

    pub fn is_signed(self) -> bool {
        matches!(self, Ty::Int { signed: true, .. } | Ty::Index)
    }

    /// Bit width (`index` counts as 64).
    pub fn bits(self) -> u32 {
        match self {
            Ty::Index => 64,
            Ty::I1 => 1,
            Ty::Int { bits, .. } => bits,
            Ty::F16 | Ty::BF16 => 16,
            Ty::F32 => 32,
            Ty::F64 => 64,
            Ty::Tile { rows, columns, elem } => rows as u32 * columns as u32 * elem.bits(),
        }
    }
}

/// A typed SSA value (or a constant the emitter knows the value of): a scalar, or a vector of
/// `lanes` elements of type `ty` (`vector<8xf32>`).
#[derive(Clone, Debug, PartialEq)]
pub struct V {
    pub name: String,
    pub ty: Ty,
    /// The value of an `index` or integer constant, kept for folding.
    pub known: Option<i64>,
    /// 1 for a scalar.
    pub lanes: usize,
}

impl V {
    /// A scalar value named `name`.
    pub fn scalar(name: impl Into<String>, ty: Ty) -> V {
        V::vector(name, ty, 1)
    }

    /// A value named `name` of `lanes` elements of type `ty` (a scalar for 1).
    pub fn vector(name: impl Into<String>, ty: Ty, lanes: usize) -> V {
        V {
            name: name.into(),
            ty,
            known: None,
            lanes,
        }
    }

    /// A value named `name` of the type and lanes of `self`.
    pub fn renamed(&self, name: impl Into<String>) -> V {
        V::vector(name, self.ty, self.lanes)
    }

    /// The value's MLIR type: `f32`, or `vector<8xf32>`.
    pub fn mlir_ty(&self) -> String {
        type_with_lanes(self.ty, self.lanes)
    }

    pub fn is_vector(&self) -> bool {
        self.lanes > 1
    }
}

/// `ty`, or a vector of `lanes` of it.
pub fn type_with_lanes(ty: Ty, lanes: usize) -> String {
    if lanes > 1 {
        format!("vector<{lanes}x{}>", ty.mlir())
    } else {
        ty.mlir()
    }
}

impl std::fmt::Display for V {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.name)
    }
}

/// How a kernel may be split across threads: calling it with `lo..hi` for consecutive parts
/// of `0..range` computes the whole result when `splittable`; otherwise (its parallel loop is
/// not the only thing it does at its top level) it must be called once with `0..range`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Parallel {
    /// The trip count of the parallel loop (0 when the kernel has none).
    pub range: u64,
    pub splittable: bool,
    /// On a GPU, a block of threads computes each iteration together (a row kernel,
    /// `gpu_rows.rs`; a tile of a product, `gpu_gemm.rs`); else a thread computes each.
    pub per_block: bool,
    /// Operations the kernel executes, estimated from its text and its loops' trip counts.
    pub work: u64,
}

/// The fewest iterations the parallel loop should have: leading dimensions are collapsed
/// until their product reaches this (or all of them are), so that a batch of 1 or a few
/// channels still leaves parts for every thread.
const PARALLEL_ITERATIONS: usize = 64;

/// An open `scf.for` whose body is being written.
pub struct OpenFor {
    results: Vec<V>,
    /// The loop-carried values as seen inside the body.
    pub carried: Vec<V>,
    pub iv: V,
}

/// Writes the body of one function.
#[derive(Default)]
pub struct Emitter {
    body: String,
    indent: usize,
    next: usize,
    constants: String,
    constant_names: HashMap<(String, String), String>,
    /// The literal of each hoisted scalar constant, by name (to splat it).
    constant_literals: HashMap<String, String>,
    /// Hoisted ops other than scalar constants (splats, masks), by their text.
    hoisted_ops: HashMap<String, String>,
    /// The vector unit the kernel is written for; `None`: scalar code (the `ref` target).
    pub isa: Option<VectorIsa>,
    /// The lane mask vector loads and stores are under (the partial vector at a row's end).
    pub mask: Option<V>,
    /// Trip-count products of the open regions, innermost last (each line costs the last).
    trips: Vec<u64>,
    work: u64,
    /// Regions (loops, branches) opened at the top level, and stores written there.
    top_regions: usize,
    top_stores: usize,
    /// The parallel loop's trip count, once it is written (at the cost point where it is
    /// known only at run time).
    parallel_range: Option<u64>,
    /// The parallel loop's trip count as a dimension, where it is known only at run time.
    parallel_dim: Option<Dim>,
    /// Where the symbols' values are in the sizes argument (`sizes.rs`), for a kernel over
    /// symbolic types.
    pub(super) sizes: SizeArgs,
    /// Writing a preamble (`Emitter::preamble`): code that fills the kernel's own stack
    /// buffers, which every part of a split kernel runs for itself.
    in_preamble: bool,
}

impl Emitter {
    /// An emitter of scalar code.
    pub fn new() -> Emitter {
        Emitter {
            indent: 1,
            ..Emitter::default()
        }
    }

    /// An emitter of code for the vector unit `isa` (scalar code without one).
    pub fn with_isa(isa: Option<VectorIsa>) -> Emitter {
        Emitter { isa, ..Emitter::new() }
    }

    /// A name not used before in this function, built from `hint`.
    pub fn fresh(&mut self, hint: &str) -> String {
        let n = self.next;
        self.next += 1;
        format!("%{hint}{n}")
    }

    /// Writes one line at the current indentation.
    pub fn line(&mut self, text: &str) {
        self.work = self.work.saturating_add(self.trips.last().copied().unwrap_or(1));
        for _ in 0..self.indent {
            self.body.push_str("  ");
        }
        self.body.push_str(text);
        self.body.push('\n');
    }

    /// Writes a line that stores to memory (which, at the top level, makes the kernel
    /// unsplittable: every part would write it).
    pub fn store_line(&mut self, text: &str) {
        if self.indent == 1 && !self.in_preamble {
            self.top_stores += 1;
        }
        self.line(text);
    }

    /// Writes `%name = rhs` and returns the new scalar value of type `ty`.
    pub fn op(&mut self, hint: &str, ty: Ty, rhs: &str) -> V {
        self.op_lanes(hint, ty, 1, rhs)
    }

    /// Writes `%name = rhs` and returns the new value: `lanes` elements of type `ty`.
    pub fn op_lanes(&mut self, hint: &str, ty: Ty, lanes: usize, rhs: &str) -> V {
        let name = self.fresh(hint);
        self.line(&format!("{name} = {rhs}"));
        V::vector(name, ty, lanes)
    }

    /// A constant of type `ty` written as `literal`, defined once at the function entry and
    /// named `name` (or a fresh name).
    fn hoisted(&mut self, literal: String, ty: Ty, name: Option<String>, known: Option<i64>) -> V {
        let key = (literal, ty.mlir());
        if let Some(name) = self.constant_names.get(&key) {
            return V {
                known,
                ..V::scalar(name.clone(), ty)
            };
        }
        let name = name.unwrap_or_else(|| self.fresh("cst"));
        // `true` and `false` carry their type (`i1`) themselves
        let suffix = if ty == Ty::I1 {
            String::new()
        } else {
            format!(" : {}", key.1)
        };
        let _ = writeln!(self.constants, "  {name} = arith.constant {}{suffix}", key.0);
        self.constant_literals.insert(name.clone(), key.0.clone());
        self.constant_names.insert(key, name.clone());
        V {
            known,
            ..V::scalar(name, ty)
        }
    }

    /// The literal of a hoisted scalar constant named `name`.
    pub(super) fn literal_of(&self, name: &str) -> Option<String> {
        self.constant_literals.get(name).cloned()
    }

    /// A splat constant: every one of `lanes` lanes `literal` (of type `ty`), hoisted.
    pub(super) fn hoisted_splat(&mut self, literal: &str, ty: Ty, lanes: usize) -> V {
        let vty = type_with_lanes(ty, lanes);
        self.hoisted_op(&format!("arith.constant dense<{literal}> : {vty}"), ty, lanes)
    }

    /// The value of `rhs` (an op without operands), computed once at the function entry.
    pub(super) fn hoisted_op(&mut self, rhs: &str, ty: Ty, lanes: usize) -> V {
        let name = match self.hoisted_ops.get(rhs) {
            Some(name) => name.clone(),
            None => {
                let name = self.fresh("cst");
                let _ = writeln!(self.constants, "  {name} = {rhs}");
                self.hoisted_ops.insert(rhs.to_string(), name.clone());
                name
            }
        };
        V::vector(name, ty, lanes)
    }

    /// An `index` constant.
    pub fn idx(&mut self, value: i64) -> V {
        // unique per value, so the name can say it: %c4, %c_neg1
        let name = if value < 0 {
            format!("%c_neg{}", -value)
        } else {
            format!("%c{value}")
        };
        self.hoisted(value.to_string(), Ty::Index, Some(name), Some(value))
    }

    /// An integer (or `i1`) constant, wrapped to the type's width.
    pub fn int(&mut self, ty: Ty, value: i64) -> V {
        if ty == Ty::Index {
            return self.idx(value);
        }
        let bits = ty.bits();
        let wrapped = if bits >= 64 {
            value
        } else {
            (value << (64 - bits)) >> (64 - bits)
        };
        let literal = if ty == Ty::I1 {
            (if value & 1 != 0 { "true" } else { "false" }).to_string()
        } else {
            wrapped.to_string()
        };
        self.hoisted(literal, ty, None, Some(wrapped))
    }

    /// A floating-point constant of type `ty` (infinities and NaN included).
    pub fn float(&mut self, ty: Ty, value: f64) -> V {
        let literal = float_literal(ty, value);
        self.hoisted(literal, ty, None, None)
    }

    /// Opens `scf.for %iv = lo to hi step step` carrying `inits` through the iterations.
    pub fn begin_for(&mut self, lo: i64, hi: i64, step: i64, inits: &[V]) -> OpenFor {
        let trips = ((hi - lo).max(0) as u64).div_ceil(step.max(1) as u64);
        let (lo, hi, step) = (self.idx(lo), self.idx(hi), self.idx(step));
        self.begin_for_between(&lo, &hi, &step, trips, inits, None)
    }

    /// `begin_for` with bounds that are values; `trips` is the loop's trip count as far as the
    /// work estimate is concerned, `note` a comment for the loop's first line.
    fn begin_for_between(&mut self, lo: &V, hi: &V, step: &V, trips: u64, inits: &[V], note: Option<&str>) -> OpenFor {
        let iv = V::scalar(self.fresh("i"), Ty::Index);
        let mut head = String::new();
        let mut results = Vec::new();
        if !inits.is_empty() {
            let r = self.fresh("r");
            results = result_names(&r, inits);
            head = if inits.len() == 1 {
                format!("{r} = ")
            } else {
                format!("{r}:{} = ", inits.len())
            };
        }
        let mut text = format!("{head}scf.for {iv} = {lo} to {hi} step {step}");
        let mut carried = Vec::new();
        if !inits.is_empty() {
            let pairs: Vec<String> = inits
                .iter()
                .map(|init| {
                    let name = self.fresh("acc");
                    carried.push(init.renamed(name.clone()));
                    format!("{name} = {init}")
                })
                .collect();
            let _ = write!(text, " iter_args({}) -> ({})", pairs.join(", "), type_list(inits));
        }
        text.push_str(" {");
        if let Some(note) = note {
            let _ = write!(text, "  // {note}");
        }
        self.line(&text);
        self.open_region(trips);
        OpenFor { results, carried, iv }
    }

    /// Starts writing a region's body whose ops run `trips` times per run of the enclosing one.
    fn open_region(&mut self, trips: u64) {
        if self.indent == 1 && !self.in_preamble {
            self.top_regions += 1;
        }
        let outer = self.trips.last().copied().unwrap_or(1);
        self.trips.push(outer.saturating_mul(trips));
        self.indent += 1;
    }

    fn close_region(&mut self) {
        self.trips.pop();
        self.indent -= 1;
    }

    /// Closes a loop opened by `begin_for`, yielding `yields` (one per carried value), and
    /// returns the loop's results.
    pub fn end_for(&mut self, open: OpenFor, yields: &[V]) -> Vec<V> {
        self.end_for_with(open, yields, "")
    }

    /// `end_for` giving the loop the attributes `attributes` (`{name = value}`, or nothing).
    pub fn end_for_with(&mut self, open: OpenFor, yields: &[V], attributes: &str) -> Vec<V> {
        if !yields.is_empty() {
            self.line(&format!("scf.yield {} : {}", name_list(yields), type_list(yields)));
        }
        self.close_region();
        self.line(&format!("}}{attributes}"));
        open.results
    }

    /// A loop over `lo..hi` (values; `trips` is its trip count for the work estimate) carrying
    /// `inits`: `body` gets the index and the carried values and returns their next values.
    /// Returns the final values.
    pub fn for_between(
        &mut self,
        lo: &V,
        hi: &V,
        trips: u64,
        inits: &[V],
        body: impl FnOnce(&mut Emitter, &V, &[V]) -> Vec<V>,
    ) -> Vec<V> {
        let one = self.idx(1);
        let open = self.begin_for_between(lo, hi, &one, trips, inits, None);
        let (iv, carried) = (open.iv.clone(), open.carried.clone());
        let values = body(self, &iv, &carried);
        self.end_for(open, &values)
    }

    /// The smaller of two `index` values.
    pub fn min_idx(&mut self, a: &V, b: &V) -> V {
        match (a.known, b.known) {
            (Some(x), Some(y)) => self.idx(x.min(y)),
            _ => self.op("t", Ty::Index, &format!("arith.minsi {a}, {b} : index")),
        }
    }

    /// A loop over `0..n` without carried values (the parallel loop if it is the first).
    pub fn for_each(&mut self, n: impl Into<Extent>, body: impl FnOnce(&mut Emitter, V)) {
        self.nest_over(&[n.into()], |e, idx| body(e, idx[0].clone()));
    }

    /// A loop nest over every index of `shape` (row-major, outermost first). The kernel's
    /// first nest at its top level is its parallel loop.
    pub fn nest(&mut self, shape: &[usize], body: impl FnOnce(&mut Emitter, &[V])) {
        self.nest_over(&fixed(shape), body);
    }

    /// `nest` over extents, some of which may be known only at run time.
    pub fn nest_over(&mut self, shape: &[Extent], body: impl FnOnce(&mut Emitter, &[V])) {
        if self.indent == 1 && self.top_regions == 0 && !self.in_preamble && !shape.is_empty() {
            return self.parallel_nest(shape, body);
        }
        self.nest_acc_over(shape, &[], |e, idx, _| {
            body(e, idx);
            Vec::new()
        });
    }

    /// The parallel loop: the leading dimensions of `shape` (until `PARALLEL_ITERATIONS` at
    /// their least sizes) as one loop over `%lo..%hi` whose index is split back into theirs, then the
    /// other dimensions as plain loops.
    fn parallel_nest(&mut self, shape: &[Extent], body: impl FnOnce(&mut Emitter, &[V])) {
        // a size only the run knows counts as its least, so that a batch of 1 still leaves
        // parts for every thread
        let mut lead = 0;
        let mut least = 1usize;
        let mut range = 1usize;
        while lead < shape.len() && (lead == 0 || least < PARALLEL_ITERATIONS) {
            least = least.saturating_mul(shape[lead].least());
            range = range.saturating_mul(shape[lead].at_cost_point());
            lead += 1;
        }
        self.parallel_range = Some(range as u64);
        let collapsed = self.extent_product(&shape[..lead]);
        if let Extent::Run { dim, .. } = &collapsed {
            self.parallel_dim = Some(dim.clone());
        }
        let bound = |name: &str| V::scalar(name, Ty::Index);
        let one = self.idx(1);
        let dims: Vec<String> = shape.iter().map(extent_text).collect();
        let note = format!(
            "the parallel loop over {} of {}",
            dims[..lead].join("x"),
            dims.join("x")
        );
        let open = self.begin_for_between(&bound("%lo"), &bound("%hi"), &one, range as u64, &[], Some(&note));
        let mut idx = Vec::with_capacity(shape.len());
        for d in 0..lead {
            let stride = self.extent_product(&shape[d + 1..lead]);
            let i = match (d, &shape[d]) {
                (_, Extent::Fixed(1)) => self.idx(0),
                (0, _) => self.div_extent(&open.iv, &stride),
                (_, n) => {
                    let quotient = self.div_extent(&open.iv, &stride);
                    self.rem_extent(&quotient, n)
                }
            };
            idx.push(i);
        }
        self.nest_acc_over(&shape[lead..], &[], |e, inner, _| {
            idx.extend_from_slice(inner);
            body(e, &idx);
            Vec::new()
        });
        self.end_for(open, &[]);
    }

    /// `a / n` over `index` for a positive extent `n` (signed, truncating).
    pub fn div_extent(&mut self, a: &V, n: &Extent) -> V {
        match n {
            Extent::Fixed(k) => self.div_idx(a, *k as i64),
            Extent::Run { value, .. } => self.op("t", Ty::Index, &format!("arith.divsi {a}, {value} : index")),
        }
    }

    /// `a % n` over `index` for a positive extent `n`.
    pub fn rem_extent(&mut self, a: &V, n: &Extent) -> V {
        match n {
            Extent::Fixed(k) => self.rem_idx(a, *k as i64),
            Extent::Run { value, .. } => self.op("t", Ty::Index, &format!("arith.remsi {a}, {value} : index")),
        }
    }

    /// Writes `f`'s code as a preamble: loops and stores that fill buffers of the kernel's own
    /// (a table on the stack) before its parallel loop. It is neither the parallel loop nor
    /// a reason not to split the kernel: each part of a split kernel computes it again.
    pub fn preamble<T>(&mut self, f: impl FnOnce(&mut Emitter) -> T) -> T {
        let outer = std::mem::replace(&mut self.in_preamble, true);
        let result = f(self);
        self.in_preamble = outer;
        result
    }

    /// How the kernel written so far may be split across threads.
    pub fn parallel(&self) -> Parallel {
        let range = self.parallel_range.unwrap_or(0);
        Parallel {
            range,
            splittable: self.parallel_range.is_some() && self.top_regions == 1 && self.top_stores == 0,
            per_block: false,
            work: self.work,
        }
    }

    /// The parallel loop's trip count as a dimension, where only the run knows it.
    pub fn parallel_dim(&self) -> Option<&Dim> {
        self.parallel_dim.as_ref()
    }

    /// A loop nest over `shape` carrying `inits` through every iteration; `body` gets the
    /// indices and the current carried values and returns their next values. Returns the
    /// final values (the inits themselves when the shape has no loops).
    pub fn nest_acc(
        &mut self,
        shape: &[usize],
        inits: &[V],
        body: impl FnOnce(&mut Emitter, &[V], &[V]) -> Vec<V>,
    ) -> Vec<V> {
        self.nest_acc_over(&fixed(shape), inits, body)
    }

    /// `nest_acc` over extents, some of which may be known only at run time.
    pub fn nest_acc_over(
        &mut self,
        shape: &[Extent],
        inits: &[V],
        body: impl FnOnce(&mut Emitter, &[V], &[V]) -> Vec<V>,
    ) -> Vec<V> {
        let mut open = Vec::with_capacity(shape.len());
        let mut carried = inits.to_vec();
        for n in shape {
            let f = match n {
                Extent::Fixed(n) => self.begin_for(0, *n as i64, 1, &carried),
                Extent::Run { value, .. } => {
                    let (zero, one) = (self.idx(0), self.idx(1));
                    self.begin_for_between(&zero, value, &one, n.at_cost_point() as u64, &carried, None)
                }
            };
            carried = f.carried.clone();
            open.push(f);
        }
        let idx: Vec<V> = open.iter().map(|f| f.iv.clone()).collect();
        let mut values = body(self, &idx, &carried);
        while let Some(f) = open.pop() {
            values = self.end_for(f, &values);
        }
        values
    }

    /// `scf.if` with results of the types (and lanes) of `like`.
    pub fn if_else_like(
        &mut self,
        cond: &V,
        like: &[V],
        then: impl FnOnce(&mut Emitter) -> Vec<V>,
        otherwise: impl FnOnce(&mut Emitter) -> Vec<V>,
    ) -> Vec<V> {
        let r = self.fresh("r");
        let results = result_names(&r, like);
        let head = match like.len() {
            0 => String::new(),
            1 => format!("{r} = "),
            n => format!("{r}:{n} = "),
        };
        let types = if like.is_empty() {
            String::new()
        } else {
            format!(" -> ({})", type_list(like))
        };
        self.line(&format!("{head}scf.if {cond}{types} {{"));
        self.open_region(1);
        let yields = then(self);
        self.yield_values(&yields);
        self.close_region();
        self.line("} else {");
        self.open_region(1);
        let yields = otherwise(self);
        self.yield_values(&yields);
        self.close_region();
        self.line("}");
        results
    }

    /// `scf.if` without results or an else branch.
    pub fn if_then(&mut self, cond: &V, then: impl FnOnce(&mut Emitter)) {
        self.line(&format!("scf.if {cond} {{"));
        self.open_region(1);
        then(self);
        self.close_region();
        self.line("}");
    }

    fn yield_values(&mut self, values: &[V]) {
        if !values.is_empty() {
            self.line(&format!("scf.yield {} : {}", name_list(values), type_list(values)));
        }
    }

    /// `scf.while` carrying `inits`: runs `body` while `cond` (given the current values) holds;
    /// returns the values at exit.
    pub fn while_loop(
        &mut self,
        inits: &[V],
        cond: impl FnOnce(&mut Emitter, &[V]) -> V,
        body: impl FnOnce(&mut Emitter, &[V]) -> Vec<V>,
    ) -> Vec<V> {
        let r = self.fresh("w");
        let results = result_names(&r, inits);
        let head = if inits.len() == 1 {
            format!("{r} = ")
        } else {
            format!("{r}:{} = ", inits.len())
        };
        let fresh_args = |e: &mut Emitter| -> Vec<V> { inits.iter().map(|v| v.renamed(e.fresh("arg"))).collect() };
        let before = fresh_args(self);
        let pairs: Vec<String> = before.iter().zip(inits).map(|(a, i)| format!("{a} = {i}")).collect();
        let types = type_list(inits);
        self.line(&format!(
            "{head}scf.while ({}) : ({types}) -> ({types}) {{",
            pairs.join(", ")
        ));
        self.open_region(1);
        let c = cond(self, &before);
        self.line(&format!("scf.condition({c}) {} : {types}", name_list(&before)));
        self.close_region();
        self.line("} do {");
        let after = fresh_args(self);
        let args: Vec<String> = after.iter().map(|a| format!("{a}: {}", a.ty.mlir())).collect();
        self.line(&format!("^bb0({}):", args.join(", ")));
        self.open_region(1);
        let next = body(self, &after);
        self.line(&format!("scf.yield {} : {}", name_list(&next), type_list(&next)));
        self.close_region();
        self.line("}");
        results
    }

    /// The values `then` computes when all of `conds` hold, else `otherwise` (no `scf.if`
    /// when there are no conditions).
    pub fn when(&mut self, conds: &[V], otherwise: &[V], then: impl FnOnce(&mut Emitter) -> Vec<V>) -> Vec<V> {
        if conds.is_empty() {
            return then(self);
        }
        let cond = self.all(conds);
        self.if_else_like(&cond, otherwise, then, |_| otherwise.to_vec())
    }

    /// `sum(coef * value) + constant` over `index` values, folding zero and unit terms.
    pub fn lin(&mut self, terms: &[(&V, i64)], constant: i64) -> V {
        let mut acc: Option<V> = None;
        let mut constant = constant;
        for &(v, coef) in terms {
            if coef == 0 {
                continue;
            }
            if let Some(k) = v.known {
                constant += k * coef;
                continue;
            }
            let term = if coef == 1 {
                v.clone()
            } else {
                let c = self.idx(coef);
                self.op("t", Ty::Index, &format!("arith.muli {v}, {c} : index"))
            };
            acc = Some(match acc {
                None => term,
                Some(a) => self.op("t", Ty::Index, &format!("arith.addi {a}, {term} : index")),
            });
        }
        match acc {
            None => self.idx(constant),
            Some(a) if constant == 0 => a,
            Some(a) => {
                let c = self.idx(constant);
                self.op("t", Ty::Index, &format!("arith.addi {a}, {c} : index"))
            }
        }
    }

    /// `a / k` over `index` (signed, truncating), for a positive constant `k`.
    pub fn div_idx(&mut self, a: &V, k: i64) -> V {
        let k = k.max(1);
        match a.known {
            Some(v) => self.idx(v / k),
            None if k == 1 => a.clone(),
            None => {
                let c = self.idx(k);
                self.op("t", Ty::Index, &format!("arith.divsi {a}, {c} : index"))
            }
        }
    }

    /// `a % k` over `index` (signed: takes the sign of `a`), for a positive constant `k`.
    pub fn rem_idx(&mut self, a: &V, k: i64) -> V {
        let k = k.max(1);
        match a.known {
            Some(v) => self.idx(v % k),
            None if k == 1 => self.idx(0),
            None => {
                let c = self.idx(k);
                self.op("t", Ty::Index, &format!("arith.remsi {a}, {c} : index"))
            }
        }
    }

    /// Compares two `index` values (`slt`, `sge`, `eq`, ...), giving an `i1`.
    pub fn cmp_idx(&mut self, pred: &str, a: &V, b: &V) -> V {
        self.op("p", Ty::I1, &format!("arith.cmpi {pred}, {a}, {b} : index"))
    }

    /// The conjunction of `i1` values (`true` when there are none).
    pub fn all(&mut self, conds: &[V]) -> V {
        let mut it = conds.iter();
        let Some(first) = it.next() else {
            return self.int(Ty::I1, 1);
        };
        let mut acc = first.clone();
        for c in it {
            acc = self.op("p", Ty::I1, &format!("arith.andi {acc}, {c} : i1"));
        }
        acc
    }

    /// The finished function text.
    pub fn finish(self, signature: &str) -> String {
        format!("{signature} {{\n{}{}  return\n}}\n", self.constants, self.body)
    }
}

/// Fixed extents of `shape`.
pub fn fixed(shape: &[usize]) -> Vec<Extent> {
    shape.iter().map(|&n| Extent::Fixed(n)).collect()
}

/// How a loop's comment writes an extent: its size, or its expression.
fn extent_text(n: &Extent) -> String {
    match n {
        Extent::Fixed(n) => n.to_string(),
        Extent::Run { dim, .. } => format!("({})", dim.expression()),
    }
}

fn result_names(r: &str, inits: &[V]) -> Vec<V> {
    if inits.len() == 1 {
        return vec![inits[0].renamed(r)];
    }
    inits
        .iter()
        .enumerate()
        .map(|(i, v)| v.renamed(format!("{r}#{i}")))
        .collect()
}

fn name_list(vs: &[V]) -> String {
    vs.iter().map(|v| v.name.as_str()).collect::<Vec<_>>().join(", ")
}

fn type_list(vs: &[V]) -> String {
    vs.iter().map(V::mlir_ty).collect::<Vec<_>>().join(", ")
}

/// A float literal MLIR parses back to `value` in type `ty`: decimal for finite values,
/// the bit pattern for infinities and NaN.
fn float_literal(ty: Ty, value: f64) -> String {
    let narrow = value as f32;
    if ty == Ty::F64 && value.is_finite() || ty != Ty::F64 && narrow.is_finite() {
        let s = if ty == Ty::F64 {
            format!("{value:e}")
        } else {
            format!("{narrow:e}")
        };
        return match s.split_once('e') {
            Some((mantissa, exp)) if !mantissa.contains('.') => format!("{mantissa}.0e{exp}"),
            _ => s,
        };
    }
    let bits: u64 = match ty {
        Ty::F64 => value.to_bits(),
        Ty::F32 => (value as f32).to_bits() as u64,
        Ty::F16 => match (value.is_nan(), value > 0.0) {
            (true, _) => 0x7e00,
            (false, true) => 0x7c00,
            (false, false) => 0xfc00,
        },
        _ => match (value.is_nan(), value > 0.0) {
            (true, _) => 0x7fc0,
            (false, true) => 0x7f80,
            (false, false) => 0xff80,
        },
    };
    format!("0x{bits:X}")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn float_literals_parse_as_mlir_floats() {
        assert_eq!(float_literal(Ty::F32, 1.0), "1.0e0");
        assert_eq!(float_literal(Ty::F32, -0.25), "-2.5e-1");
        assert_eq!(float_literal(Ty::F32, f64::INFINITY), "0x7F800000");
        assert_eq!(float_literal(Ty::F64, f64::NEG_INFINITY), "0xFFF0000000000000");
    }

    #[test]
    fn constants_are_hoisted_once_and_index_arithmetic_folds() {
        let mut e = Emitter::new();
        let a = e.idx(3);
        let b = e.idx(3);
        assert_eq!(a.name, b.name);
        let i = e.begin_for(0, 4, 1, &[]);
        let iv = i.iv.clone();
        let same = e.lin(&[(&iv, 1), (&a, 0)], 0);
        assert_eq!(same.name, iv.name);
        let folded = e.lin(&[(&a, 2)], 1);
        assert_eq!(folded.known, Some(7));
        e.end_for(i, &[]);
        let text = e.finish("func.func @f()");
        assert_eq!(text.matches("arith.constant 3 : index").count(), 1);
        assert!(text.contains("scf.for %i"), "{text}");
    }
}
