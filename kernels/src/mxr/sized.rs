//! An `.mxr` file holding one program for each combination of sizes it was specialised for:
//! a model whose inputs have symbolic dimensions (`n[1..16]{1, 8}`), compiled once per point
//! of optimal sizes, and where the model allows one, a generic program whose kernels take the
//! sizes at run time. A run binds the symbols from its inputs' shapes and takes the program
//! compiled for those sizes, else the generic program, else runs a batch in parts
//! (`crate::chunked`).
//!
//! Layout (little-endian; docs/mxr.md): magic `MXRS`, layout version, the file's length; the
//! metadata (the producer and target, each input's dimensions in the `dim` notation, for each
//! program its sizes and where its bytes lie, the symbols that count independent items, where
//! the generic program lies, if there is one); each
//! weight two programs hold alike, once; each program as a whole `.mxr` file
//! (`super::write_sharing`, unsigned, its shared weights pointing into this file), every part at
//! a 64-byte aligned offset so that weights stay aligned in a mapping; then the same trailer as
//! a one-program file (BLAKE3 digest of everything before it, signer's key and signature). The
//! digest covers the programs, which are not hashed again when they are read.

use super::{align, decode_part, open_frame, Digesting, Mxr, Reader, Writer, HEAD, TRAILER};
use crate::signing::{SecretKey, TrustPolicy};
use crate::RunError;
use mxc_dialects::dim::{self, Dim, InputDims, Sizes};
use mxc_dialects::program::BufferKind;
use mxc_dialects::{SharedBytes, Tensor, TensorType};
use std::collections::HashMap;

pub(super) const MAGIC: &[u8; 4] = b"MXRS";
/// The version of this layout (1 had no generic program; 2 had a SHA-256 digest).
const VERSION: u32 = 3;

/// Programs compiled for a model with symbolic input dimensions, one per point of sizes.
#[derive(Clone, Debug, PartialEq)]
pub struct SizedMxr {
    pub dims: InputDims,
    pub variants: Vec<Variant>,
    /// The symbols whose sizes run in parts: those that count independent items.
    pub items: Vec<Items>,
    /// The program for every size in range (`Program::is_sized`), for the sizes no variant is
    /// compiled for.
    pub generic: Option<Box<Mxr>>,
}

/// A symbol that counts items the model treats independently (`mxc_dialects::items`): a size
/// no program is compiled for runs as parts of sizes that are, along these axes.
#[derive(Clone, Debug, PartialEq)]
pub struct Items {
    pub symbol: String,
    /// The axis of the items in each input that has them, and in each output.
    pub inputs: Vec<(String, usize)>,
    pub outputs: Vec<(String, usize)>,
}

/// What runs a size: the program compiled for it, or parts of it through programs compiled for
/// other sizes of an item symbol.
#[derive(Debug)]
pub enum Selected {
    One(Sizes, Box<Mxr>),
    Parts(Parts),
}

/// A batch run in parts: `runs` says which of `programs` runs which items (start, count; a
/// count below the program's size is filled up by repeating the last item).
#[derive(Debug)]
pub struct Parts {
    pub sizes: Sizes,
    /// The whole batch's input shapes.
    pub shapes: Vec<(String, Vec<usize>)>,
    pub items: Items,
    pub programs: Vec<(Sizes, Mxr)>,
    pub runs: Vec<(usize, usize, usize)>,
}

/// The program compiled for one point: each symbol's size.
#[derive(Clone, Debug, PartialEq)]
pub struct Variant {
    pub sizes: Sizes,
    pub mxr: Mxr,
}

impl SizedMxr {
    /// Whether a variant is compiled for the sizes the shapes `shape_of` gives (else the
    /// generic program, or parts, run them).
    pub fn compiled_for(&self, shape_of: &dyn Fn(&str) -> Option<Vec<usize>>) -> bool {
        let Ok(sizes) = self.dims.bind(shape_of) else {
            return false;
        };
        (self.variants.iter()).any(|v| sizes.iter().all(|(name, size)| v.sizes.get(name) == Some(size)))
    }

    /// Every program: the variants', then the generic one.
    fn programs(&self) -> Vec<&Mxr> {
        let variants = self.variants.iter().map(|v| &v.mxr);
        variants.chain(self.generic.as_deref()).collect()
    }

    /// The target its programs are compiled for.
    pub fn target(&self) -> &str {
        self.variants.first().map_or("", |v| v.mxr.target.as_str())
    }

    /// The program for the sizes that the shapes `shape_of` gives (of some inputs) say,
    /// checked against the inputs' dimensions and ranges; a symbol no given shape says takes
    /// its size in the first program. A size no program is compiled for runs in parts when its
    /// symbol counts independent items (`split`); else it is refused, naming the sizes there is
    /// code for.
    pub fn select(self, shape_of: &dyn Fn(&str) -> Option<Vec<usize>>) -> Result<Selected, RunError> {
        let sizes = self.dims.bind(shape_of).map_err(|e| RunError::Size(e.to_string()))?;
        let agrees = |v: &Variant, except: &str| {
            sizes
                .iter()
                .all(|(name, size)| name == except || v.sizes.get(name) == Some(size))
        };
        if let Some(i) = self.variants.iter().position(|v| agrees(v, "")) {
            let v = self.variants.into_iter().nth(i).expect("found above");
            return Ok(Selected::One(v.sizes, Box::new(v.mxr)));
        }
        if let Some(generic) = self.generic {
            return Ok(Selected::One(sizes, generic));
        }
        let mut no_sum = None;
        for items in &self.items {
            let Some(&total) = sizes.get(&items.symbol) else {
                continue;
            };
            let candidates: Vec<usize> = (0..self.variants.len())
                .filter(|&i| agrees(&self.variants[i], &items.symbol))
                .collect();
            let counts: Vec<u64> = candidates
                .iter()
                .map(|&i| self.variants[i].sizes[&items.symbol])
                .collect();
            let Some(runs) = split(total, &counts) else {
                no_sum = Some(format!("{}={total}", items.symbol));
                continue;
            };
            let mut order: Vec<usize> = Vec::new();
            let runs = runs
                .into_iter()
                .map(|(part, start, count)| {
                    let variant = candidates[part];
                    let at = order.iter().position(|&v| v == variant).unwrap_or_else(|| {
                        order.push(variant);
                        order.len() - 1
                    });
                    (at, start, count)
                })
                .collect();
            let items = items.clone();
            // a symbol no input said takes the first part's size
            let mut sizes = sizes.clone();
            for (name, &size) in &self.variants[order[0]].sizes {
                sizes.entry(name.clone()).or_insert(size);
            }
            let shapes = self.dims.shapes_at(&sizes).map_err(|e| RunError::Size(e.to_string()))?;
            let mut variants: Vec<Option<Variant>> = self.variants.into_iter().map(Some).collect();
            let programs = order
                .iter()
                .map(|&i| {
                    let v = variants[i].take().expect("each program once");
                    (v.sizes, v.mxr)
                })
                .collect();
            return Ok(Selected::Parts(Parts {
                sizes,
                shapes,
                items,
                programs,
                runs,
            }));
        }
        let points: Vec<String> = self
            .variants
            .iter()
            .map(|v| format!("({})", dim::show_sizes(&v.sizes)))
            .collect();
        Err(RunError::Size(format!(
            "no program in this file runs {}: it holds programs for {}{}",
            dim::show_sizes(&sizes),
            points.join(", "),
            match no_sum {
                None => " and no program for every size (`mxc compile` said why): compile with this size among the optimal ones".to_string(),
                Some(total) => format!(", none of them for the other sizes given, to run {total} in parts"),
            }
        )))
    }
}

/// `total` items as runs of programs taking `sizes` items each: (program, first item, count).
/// The fewest items filled in first, then the fewest runs: a run takes as many items as its
/// program's size, but where no sum of the sizes makes `total` the last run takes fewer, its
/// program run on them with the last item repeated to fill it (the items are independent, so
/// the filling changes nothing and its outputs are dropped). Runs of larger programs come
/// first. Any total of at least one item can be made from any program.
pub(super) fn split(total: u64, sizes: &[u64]) -> Option<Vec<(usize, usize, usize)>> {
    let total = usize::try_from(total).ok().filter(|&t| t > 0)?;
    // best[t]: the (items filled in, runs) that run t items at the least, and the last run's program
    let mut best: Vec<Option<((usize, usize), usize)>> = vec![None; total + 1];
    best[0] = Some(((0, 0), usize::MAX));
    for t in 1..=total {
        best[t] = (0..sizes.len())
            .filter(|&i| sizes[i] > 0)
            .filter_map(|i| {
                let size = sizes[i] as usize;
                let ((filled, runs), _) = best[t.saturating_sub(size)]?;
                Some(((filled + size.saturating_sub(t), runs + 1), i))
            })
            .min();
    }
    let mut programs = Vec::new();
    let mut t = total;
    while t > 0 {
        let (_, i) = best[t]?;
        programs.push(i);
        t = t.saturating_sub(sizes[i] as usize);
    }
    // larger programs first, so that the one run that may take fewer items is last
    programs.sort_unstable_by_key(|&i| std::cmp::Reverse(sizes[i]));
    let mut start = 0;
    Some(
        programs
            .into_iter()
            .map(|i| {
                let count = (sizes[i] as usize).min(total - start);
                start += count;
                (i, start - count, count)
            })
            .collect(),
    )
}

/// Writes `m` (`super::write`'s layout for each program inside), signed with `key` if given.
pub fn write(m: &SizedMxr, key: Option<&SecretKey>, out: &mut dyn std::io::Write) -> std::io::Result<()> {
    // offsets are fixed-width, so neither the metadata's length nor a program's depends on them
    let count = m.programs().len();
    let lengths: Vec<Vec<u8>> = vec![Vec::new(); count];
    let meta_len = metadata(m, &vec![0; count], &lengths).len();
    let mut at = align(HEAD + meta_len);
    // each weight two programs hold alike is stored once, before the programs
    let (distinct, placed) = shared_weights(m);
    let mut shared_at = Vec::with_capacity(distinct.len());
    for t in &distinct {
        shared_at.push(at as u64);
        at = align(at + t.num_bytes());
    }
    let programs: Vec<Vec<u8>> = (m.programs().into_iter().zip(&placed))
        .map(|(mxr, placed)| {
            let shared: HashMap<usize, u64> = placed.iter().map(|(&buffer, &d)| (buffer, shared_at[d])).collect();
            let mut bytes = Vec::new();
            super::write_sharing(mxr, None, &shared, &mut bytes).expect("writing to memory does not fail");
            bytes
        })
        .collect();
    let mut offsets = Vec::with_capacity(programs.len());
    for p in &programs {
        offsets.push(at as u64);
        at = align(at + p.len());
    }
    let total = at + TRAILER;
    let mut w = Digesting::new(out);
    w.put(MAGIC)?;
    w.put(&VERSION.to_le_bytes())?;
    w.put(&(total as u64).to_le_bytes())?;
    w.put(&metadata(m, &offsets, &programs))?;
    w.put_weights(distinct)?;
    for p in &programs {
        w.pad_to(align(w.written))?;
        w.put(p)?;
    }
    w.pad_to(at)?;
    w.finish(key)
}

/// A weight by its type and the BLAKE3 digest of its bytes.
type WeightKey<'a> = (&'a TensorType, [u8; 32]);

/// The weights held by more than one program, alike (type and bytes), each once; and for each
/// program, which of its buffers is which of them.
fn shared_weights(m: &SizedMxr) -> (Vec<&Tensor>, Vec<HashMap<usize, usize>>) {
    // the first program and buffer holding a weight, and how many other programs hold it
    let mut seen: HashMap<WeightKey, (usize, usize, usize)> = HashMap::new();
    let mut all: Vec<Vec<(usize, WeightKey)>> = Vec::new();
    let none = HashMap::new();
    let programs = m.programs();
    for (program, mxr) in programs.iter().enumerate() {
        let mut mine = Vec::new();
        for (buffer, t) in super::weights_in_data(&mxr.program, &none) {
            let key = (&t.ty, super::digest(t.materialized().bytes()));
            let entry = seen.entry(key).or_insert((program, buffer, 0));
            if entry.0 != program {
                entry.2 += 1;
            }
            mine.push((buffer, key));
        }
        all.push(mine);
    }
    let mut distinct = Vec::new();
    let mut index: HashMap<WeightKey, usize> = HashMap::new();
    let placed = all
        .into_iter()
        .map(|mine| {
            mine.into_iter()
                .filter(|(_, key)| seen[key].2 > 0)
                .map(|(buffer, key)| {
                    let d = *index.entry(key).or_insert_with(|| {
                        let (program, first, _) = seen[&key];
                        let BufferKind::Constant(t) = &programs[program].program.buffers[first].kind else {
                            unreachable!("weights_in_data gives constants")
                        };
                        distinct.push(t);
                        distinct.len() - 1
                    });
                    (buffer, d)
                })
                .collect()
        })
        .collect();
    (distinct, placed)
}

fn metadata(m: &SizedMxr, offsets: &[u64], programs: &[Vec<u8>]) -> Vec<u8> {
    let mut w = Writer(Vec::new());
    w.str(m.variants.first().map_or("", |v| v.mxr.producer.as_str()));
    w.str(m.target());
    w.u64(m.dims.inputs().len() as u64);
    for (name, dims) in m.dims.inputs() {
        w.str(name);
        w.u64(dims.len() as u64);
        dims.iter().for_each(|d| w.str(&d.to_string()));
    }
    w.u64(m.variants.len() as u64);
    for ((v, &at), bytes) in m.variants.iter().zip(offsets).zip(programs.iter()) {
        w.u64(v.sizes.len() as u64);
        for (name, &size) in &v.sizes {
            w.str(name);
            w.u64(size);
        }
        w.u64(at);
        w.u64(bytes.len() as u64);
    }
    w.u64(m.items.len() as u64);
    for items in &m.items {
        w.str(&items.symbol);
        for axes in [&items.inputs, &items.outputs] {
            w.u64(axes.len() as u64);
            for (name, axis) in axes {
                w.str(name);
                w.u64(*axis as u64);
            }
        }
    }
    // the generic program, after the variants'
    match m.generic.is_some() {
        true => {
            let last = m.variants.len();
            w.u64(1);
            w.u64(offsets[last]);
            w.u64(programs[last].len() as u64);
        }
        false => w.u64(0),
    }
    w.0
}

/// Reads a file of `MAGIC` (`super::decode_shared` has checked the magic): its head, digest
/// and signature, then each program (`what` names the file in errors).
pub(super) fn decode(
    file: SharedBytes,
    what: &str,
    target: Option<&str>,
    trust: &TrustPolicy,
) -> Result<SizedMxr, RunError> {
    let bytes = (*file).as_ref();
    let bad = |m: String| RunError::Load(format!("{what}: {m}"));
    let (body, signer) = open_frame(bytes, VERSION, "programs-by-size format", true, trust).map_err(&bad)?;
    let mut r = Reader { bytes: body, pos: HEAD };
    let (sized, parts, generic) = read_metadata(&mut r).map_err(&bad)?;
    let part = |at: usize, len: usize, which: &str| {
        if !at.is_multiple_of(super::ALIGN) || at.checked_add(len).is_none_or(|end| end > body.len()) {
            return Err(bad(format!("{which} lies outside the file")));
        }
        let mut mxr = decode_part(file.clone(), at, len, &format!("{what} ({which})"), target)?;
        mxr.signer = signer;
        Ok(mxr)
    };
    let mut variants = Vec::with_capacity(parts.len());
    for (sizes, at, len) in parts {
        let mxr = part(at, len, &format!("the program for {}", dim::show_sizes(&sizes)))?;
        variants.push(Variant { sizes, mxr });
    }
    let generic = match generic {
        Some((at, len)) => Some(Box::new(part(at, len, "the program for every size")?)),
        None => None,
    };
    let sized = SizedMxr {
        variants,
        generic,
        ..sized
    };
    check_variants(&sized).map_err(&bad)?;
    Ok(sized)
}

/// The metadata: the inputs' dimensions (the variants left empty) and where each program lies.
type Placed = Vec<(Sizes, usize, usize)>;

/// Where a program lies in the file: its offset and length.
type Span = (usize, usize);

fn read_metadata(r: &mut Reader) -> Result<(SizedMxr, Placed, Option<Span>), String> {
    let (_producer, _target) = (r.str()?, r.str()?);
    let mut inputs = Vec::new();
    for _ in 0..r.count()? {
        let name = r.str()?;
        let dims = (0..r.count()?)
            .map(|_| dim::parse(&r.str()?).map_err(|e| format!("input `{name}`: {e}")))
            .collect::<Result<Vec<Dim>, String>>()?;
        inputs.push((name, dims));
    }
    let dims = InputDims::new(inputs).map_err(|e| e.to_string())?;
    let mut parts = Vec::new();
    for _ in 0..r.count()? {
        let mut sizes = Sizes::new();
        for _ in 0..r.count()? {
            let name = r.str()?;
            sizes.insert(name, r.u64()?);
        }
        parts.push((sizes, r.u64()? as usize, r.u64()? as usize));
    }
    let mut items = Vec::new();
    for _ in 0..r.count()? {
        let symbol = r.str()?;
        let mut axes = [Vec::new(), Vec::new()];
        for list in &mut axes {
            for _ in 0..r.count()? {
                let name = r.str()?;
                list.push((name, r.u64()? as usize));
            }
        }
        let [inputs, outputs] = axes;
        items.push(Items {
            symbol,
            inputs,
            outputs,
        });
    }
    let generic = match r.u64()? {
        0 => None,
        1 => Some((r.u64()? as usize, r.u64()? as usize)),
        k => return Err(format!("the generic program's flag is {k}, not 0 or 1")),
    };
    let sized = SizedMxr {
        dims,
        variants: Vec::new(),
        items,
        generic: None,
    };
    Ok((sized, parts, generic))
}

/// Each program against the dimensions: one size for every symbol, its inputs' shapes those
/// the dimensions give at its sizes, one target for all.
fn check_variants(m: &SizedMxr) -> Result<(), String> {
    if m.variants.is_empty() {
        return Err("it holds no program".into());
    }
    if let Some(g) = &m.generic {
        let p = &g.program;
        let mut symbols: Vec<&str> = p.symbols.iter().map(|s| s.name.as_str()).collect();
        let mut expected: Vec<&str> = m.dims.symbols().iter().map(|s| s.name.as_str()).collect();
        symbols.sort_unstable();
        expected.sort_unstable();
        if !p.is_sized() || symbols != expected || g.target != m.target() {
            return Err(format!(
                "the program for every size is over {symbols:?} for target {}, the file's over {expected:?} for {}",
                g.target,
                m.target()
            ));
        }
    }
    for v in &m.variants {
        let at = dim::show_sizes(&v.sizes);
        let names: Vec<&String> = v.sizes.keys().collect();
        let symbols: Vec<&String> = m.dims.symbols().iter().map(|s| &s.name).collect();
        let mut sorted = symbols.clone();
        sorted.sort();
        if names != sorted {
            return Err(format!(
                "the program for {at} does not give a size for each of {symbols:?}"
            ));
        }
        let shapes = m
            .dims
            .shapes_at(&v.sizes)
            .map_err(|e| format!("the program for {at}: {e}"))?;
        for (name, shape) in shapes {
            let binding = v.mxr.program.inputs.iter().find(|b| b.name == name);
            let ty = binding.map(|b| &v.mxr.program.buffers[b.buffer].ty);
            if ty.is_none_or(|t| t.shape != shape) {
                return Err(format!(
                    "the program for {at} does not take input `{name}` of shape {shape:?}"
                ));
            }
        }
        if v.mxr.target != m.target() {
            return Err(format!(
                "the program for {at} is for target {}, another for {}",
                v.mxr.target,
                m.target()
            ));
        }
        for items in &m.items {
            let size = v
                .sizes
                .get(&items.symbol)
                .ok_or_else(|| format!("items of an unknown symbol {}", items.symbol))?;
            let p = &v.mxr.program;
            for (bindings, axes) in [(&p.inputs, &items.inputs), (&p.outputs, &items.outputs)] {
                for (name, axis) in axes {
                    let shape = bindings
                        .iter()
                        .find(|b| &b.name == name)
                        .map(|b| &p.buffers[b.buffer].ty.shape);
                    if shape.and_then(|s| s.get(*axis)).is_none_or(|&d| d as u64 != *size) {
                        return Err(format!(
                            "the program for {at} has no `{name}` with {size} items on axis {axis}"
                        ));
                    }
                }
            }
        }
    }
    Ok(())
}
