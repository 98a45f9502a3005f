//! The `.mxr` file: a compiled program that the runtime loads and runs without LLVM, MLIR or
//! the model (the format is described in docs/mxr.md).
//!
//! Little-endian. A fixed head (magic, format version, the file's length), the metadata
//! (producer, target, the host CPU and the features the code needs, the kernels' signatures,
//! the plan with the memory plan, the inputs and outputs and the model's interface (sequences
//! and optionals, `interface.rs`), where the kernels and each weight lie
//! in the file), padding to 64 bytes, the data (the kernels' shared object, then every weight,
//! each at a 64-byte aligned offset, so a loader can map them), then the trailer: the BLAKE3
//! digest of everything before it, and a signer's public key and Ed25519 signature of the
//! digest (zeros when unsigned).
//!
//! Loading checks, in this order: magic, version, length (truncation), digest, signature and
//! trust policy (before anything in the file is interpreted), then every offset and index, the
//! plan against its kernels (`Program::validate`), the shared object's ELF header, the target
//! asked for, and that this CPU has the features. A fuzzing build (`cfg(fuzzing)`) skips the
//! digest so that a fuzzer's files reach the checks after it.

mod attrs;
mod code;
mod digesting;
mod interface;
mod items;
mod sized;

pub use sized::{Items, Parts, Selected, SizedMxr, Variant};

use crate::library::check_elf;
use crate::signing::{PublicKey, SecretKey, TrustPolicy, KEY_BYTES, SIGNATURE_BYTES};
use crate::RunError;
use digesting::{digest, Digesting};
use mxc_dialects::dim::{self, Dim};
use mxc_dialects::mx::call::{Callee, LibraryCall};
use mxc_dialects::program::{
    Binding, Buffer, BufferKind, CodeObject, KernelSignature, KernelSizes, MemoryPlan, Program, Step, ALIGN,
};
use mxc_dialects::{DType, SharedBytes, Tensor, TensorType};
use std::collections::HashMap;
use std::sync::Arc;

const MAGIC: &[u8; 4] = b"MXR\0";
/// The format version this runtime reads and writes (1 was the unversioned `MXCA` container;
/// 2 had no parallel ranges in its steps; 4 had a FNV-1a checksum and no kernel signatures;
/// 5 had no items: its steps ran in order; 6 had no interface; 7 had no host steps and no
/// string weights; 8 had no GPU code; 9 had no library calls; 10 had no precision; 11 had no
/// symbolic sizes; 12 had a SHA-256 digest).
pub const VERSION: u32 = 13;
/// Magic, version and length.
const HEAD: usize = 16;
/// Bytes of the BLAKE3 digest, and of the trailer: the digest, the signer's key, the signature.
const DIGEST: usize = 32;
const TRAILER: usize = DIGEST + KEY_BYTES + SIGNATURE_BYTES;

/// A compiled program as stored.
#[derive(Clone, Debug, PartialEq)]
pub struct Mxr {
    /// `mxc` and its version.
    pub producer: String,
    pub target: String,
    /// How the program's precision was changed when it was compiled (`--fp16 (conv)`,
    /// `--bf16`, `--half-as-f32`: `mxc_rewrite::precision::Precision::describe`); empty when it
    /// computes in the model's own types.
    pub precision: String,
    /// The CPU the kernels were tuned for (informational) and the x86 features they use.
    pub cpu: String,
    pub features: Vec<String>,
    pub program: Program,
    pub memory: MemoryPlan,
    /// The kernels: a shared object (empty for the `gpu` target).
    pub library: Vec<u8>,
    /// The kernels' code for each GPU (the `gpu` target's).
    pub code_objects: Vec<CodeObject>,
    /// The key whose signature the file carries (set when a file is read).
    pub signer: Option<PublicKey>,
}

impl Mxr {
    /// A program compiled for `target` by this mxc, for a CPU LLVM calls `cpu` with the LLVM
    /// feature string `llvm_features`; its memory plan is the program's own.
    pub fn new(target: &str, cpu: &str, llvm_features: &str, program: Program, library: Vec<u8>) -> Mxr {
        Mxr {
            producer: format!("mxc {}", env!("CARGO_PKG_VERSION")),
            target: target.to_string(),
            precision: String::new(),
            cpu: cpu.to_string(),
            features: required_features(llvm_features),
            memory: program.memory_plan(),
            program,
            library,
            code_objects: Vec::new(),
            signer: None,
        }
    }

    /// The same, with the kernels' code for GPUs.
    pub fn with_code_objects(self, code_objects: Vec<CodeObject>) -> Mxr {
        Mxr { code_objects, ..self }
    }

    /// The same, compiled in the precision `precision` describes.
    pub fn with_precision(self, precision: String) -> Mxr {
        Mxr { precision, ..self }
    }
}

/// The file's bytes, signed with `key` if given; the same `Mxr` and key always give the same
/// bytes.
pub fn encode(m: &Mxr, key: Option<&SecretKey>) -> Vec<u8> {
    let mut out = Vec::new();
    write(m, key, &mut out).expect("writing to memory does not fail");
    out
}

/// Writes the file's bytes (`encode`'s) to `out` as they are laid out, the digest computed on
/// the way (the weights go from their buffers to `out` without a copy of the whole file), then
/// signed with `key` if given.
pub fn write(m: &Mxr, key: Option<&SecretKey>, out: &mut dyn std::io::Write) -> std::io::Result<()> {
    write_sharing(m, key, &HashMap::new(), out)
}

/// `write`, the weights of the buffers `shared` names left out of the file's data: they lie at
/// the offsets it gives in the file of programs by size this one goes into (buffer kind 4).
fn write_sharing(
    m: &Mxr,
    key: Option<&SecretKey>,
    shared: &HashMap<usize, u64>,
    out: &mut dyn std::io::Write,
) -> std::io::Result<()> {
    // offsets are fixed-width, so the metadata's length does not depend on their values
    let code_at = vec![0; m.code_objects.len()];
    let meta_len = metadata(m, &vec![0; m.program.buffers.len()], shared, 0, &code_at).len();
    let data_start = align(HEAD + meta_len);
    let mut at = align(data_start + m.library.len());
    let mut code_at = Vec::with_capacity(m.code_objects.len());
    for o in &m.code_objects {
        code_at.push(at as u64);
        at = align(at + o.bytes.len());
    }
    let mut weights = vec![0; m.program.buffers.len()];
    for (i, t) in weights_in_data(&m.program, shared) {
        weights[i] = at as u64;
        at = align(at + t.num_bytes());
    }
    let meta = metadata(m, &weights, shared, data_start as u64, &code_at);
    let total = at + TRAILER;
    let mut w = Digesting::new(out);
    w.put(MAGIC)?;
    w.put(&VERSION.to_le_bytes())?;
    w.put(&(total as u64).to_le_bytes())?;
    w.put(&meta)?;
    w.pad_to(data_start)?;
    w.put(&m.library)?;
    for o in &m.code_objects {
        w.pad_to(align(w.written))?;
        w.put(&o.bytes)?;
    }
    w.put_weights(weights_in_data(&m.program, shared).map(|(_, t)| t).collect())?;
    w.pad_to(at)?;
    w.finish(key)
}

/// The weights that lie in the data (not string constants: the metadata holds their
/// strings; not those `shared` places elsewhere), with their buffers.
fn weights_in_data<'p>(p: &'p Program, shared: &'p HashMap<usize, u64>) -> impl Iterator<Item = (usize, &'p Tensor)> {
    p.buffers.iter().enumerate().filter_map(|(i, b)| match &b.kind {
        BufferKind::Constant(t) if t.strings().is_none() && !shared.contains_key(&i) => Some((i, t)),
        _ => None,
    })
}

/// What an `.mxr` file holds: one program, or programs for the sizes of symbolic dimensions.
#[derive(Clone, Debug, PartialEq)]
pub enum Contents {
    One(Box<Mxr>),
    BySize(SizedMxr),
}

/// Writes `contents` as `write` and `sized::write` do.
pub fn write_contents(
    contents: &Contents,
    key: Option<&SecretKey>,
    out: &mut dyn std::io::Write,
) -> std::io::Result<()> {
    match contents {
        Contents::One(m) => write(m, key, out),
        Contents::BySize(s) => sized::write(s, key, out),
    }
}

/// Reads the `.mxr` file at `path`, of either kind (see `decode`). The file is memory-mapped
/// and the weights stay in the mapping, shared with the page cache rather than copied; the
/// file must not change while the program is loaded.
pub fn read_contents(path: &std::path::Path, target: Option<&str>, trust: &TrustPolicy) -> Result<Contents, RunError> {
    let io = |e: std::io::Error| RunError::Io(format!("{}: {e}", path.display()));
    let file = std::fs::File::open(path).map_err(io)?;
    // SAFETY: the mapping is read-only and the docs ask that the file not change while mapped
    // (another process truncating it would fault, as with any mapped file).
    let map = unsafe { memmap2::Mmap::map(&file) }.map_err(io)?;
    decode_contents(Arc::new(map), &path.display().to_string(), target, trust)
}

/// Reads the `.mxr` file of one program at `path` (`read_contents`); a file of programs by
/// size is refused, naming its dimensions.
pub fn read(path: &std::path::Path, target: Option<&str>, trust: &TrustPolicy) -> Result<Mxr, RunError> {
    one(read_contents(path, target, trust)?, &path.display().to_string())
}

/// Reads an `.mxr` file's bytes (`what` names it in errors); with `target`, the file must be
/// for that target; `trust` says whose signatures it must carry. Every check of the module
/// comment is a clear error.
pub fn decode(bytes: &[u8], what: &str, target: Option<&str>, trust: &TrustPolicy) -> Result<Mxr, RunError> {
    one(decode_contents(Arc::new(bytes.to_vec()), what, target, trust)?, what)
}

/// `decode` of a file of either kind.
pub fn decode_any(bytes: &[u8], what: &str, target: Option<&str>, trust: &TrustPolicy) -> Result<Contents, RunError> {
    decode_contents(Arc::new(bytes.to_vec()), what, target, trust)
}

fn one(contents: Contents, what: &str) -> Result<Mxr, RunError> {
    match contents {
        Contents::One(m) => Ok(*m),
        Contents::BySize(s) => {
            let inputs: Vec<String> = s
                .dims
                .inputs()
                .iter()
                .map(|(n, d)| format!("{n} {}", mxc_dialects::dim::show(d)))
                .collect();
            Err(RunError::Load(format!(
                "{what}: holds programs for symbolic sizes ({}); this needs a file of one program",
                inputs.join(", ")
            )))
        }
    }
}

/// The file's kind by its magic, then `decode_shared` or `sized::decode`.
fn decode_contents(
    file: SharedBytes,
    what: &str,
    target: Option<&str>,
    trust: &TrustPolicy,
) -> Result<Contents, RunError> {
    let magic = (*file).as_ref().get(..4);
    if magic == Some(sized::MAGIC) {
        return sized::decode(file, what, target, trust).map(Contents::BySize);
    }
    decode_shared(file, what, target, trust, None).map(|m| Contents::One(Box::new(m)))
}

/// A range of a file's bytes, as bytes a program's weights can share.
struct Part {
    whole: SharedBytes,
    range: std::ops::Range<usize>,
}

impl AsRef<[u8]> for Part {
    fn as_ref(&self) -> &[u8] {
        &(*self.whole).as_ref()[self.range.clone()]
    }
}

/// The one-program file at `at..at + len` of `whole`, whose digest covered it: not hashed or
/// signature-checked again.
fn decode_part(whole: SharedBytes, at: usize, len: usize, what: &str, target: Option<&str>) -> Result<Mxr, RunError> {
    let part: SharedBytes = Arc::new(Part {
        whole: whole.clone(),
        range: at..at + len,
    });
    decode_shared(part, what, target, &TrustPolicy::AnyIntact, Some(&whole))
}

/// Reads a one-program file's bytes that the weights then share; `outer` is the file of
/// programs by size it lies in, if it does: its digest covers this program (not hashed
/// again), and its weights shared between programs lie there (buffer kind 4).
fn decode_shared(
    file: SharedBytes,
    what: &str,
    target: Option<&str>,
    trust: &TrustPolicy,
    outer: Option<&SharedBytes>,
) -> Result<Mxr, RunError> {
    let bytes = (*file).as_ref();
    let bad = |m: String| RunError::Load(format!("{what}: {m}"));
    if bytes.len() < 4 || &bytes[..4] != MAGIC {
        return Err(bad("not an .mxr file (bad magic)".into()));
    }
    let (body, signer) = open_frame(bytes, VERSION, "format", outer.is_none(), trust).map_err(&bad)?;
    let mut r = Reader { bytes: body, pos: HEAD };
    let mut m = read_metadata(&mut r, &file, outer).map_err(&bad)?;
    m.signer = signer;
    m.program.validate(&m.memory).map_err(|e| bad(e.to_string()))?;
    check_code(&m).map_err(|e| bad(format!("the kernels: {e}")))?;
    if let Some(t) = target.filter(|t| *t != m.target) {
        return Err(bad(format!("compiled for target {}, not {t}", m.target)));
    }
    let missing = missing(&m.features, host_has);
    if !missing.is_empty() {
        return Err(bad(format!(
            "compiled for a CPU with {}, which this CPU lacks (compile it here)",
            missing.join(", ")
        )));
    }
    Ok(m)
}

/// The kernels against the plan: a host program's shared object (an ELF for this machine), a
/// `gpu` program's code for at least one GPU, each holding the kernels the plan launches.
fn check_code(m: &Mxr) -> Result<(), String> {
    if m.target != GPU_TARGET {
        if !m.code_objects.is_empty() {
            return Err(format!("a program for {} with code for GPUs", m.target));
        }
        return check_elf(&m.library);
    }
    if !m.library.is_empty() || m.code_objects.is_empty() {
        return Err("a gpu program must hold code for GPUs and no host kernels".into());
    }
    for o in &m.code_objects {
        crate::gpu::check(o, &m.program)?;
    }
    Ok(())
}

/// A file's frame, checked after its magic: length, `version` (of the layout `kind` names),
/// length again against the head, the digest of the body (when `verify_digest`), the signature
/// against `trust`. Returns the body (the file before its trailer) and the signer.
fn open_frame<'b>(
    bytes: &'b [u8],
    version: u32,
    kind: &str,
    verify_digest: bool,
    trust: &TrustPolicy,
) -> Result<(&'b [u8], Option<PublicKey>), String> {
    if bytes.len() < HEAD + TRAILER {
        return Err(format!("truncated: {} bytes", bytes.len()));
    }
    let found = u32::from_le_bytes(bytes[4..8].try_into().expect("4 bytes"));
    if found != version {
        return Err(format!(
            "{kind} version {found}; this mxc reads version {version} (compile the model again)"
        ));
    }
    let total = u64::from_le_bytes(bytes[8..16].try_into().expect("8 bytes"));
    if total != bytes.len() as u64 {
        return Err(format!(
            "truncated or extended: {} bytes, the file says {total}",
            bytes.len()
        ));
    }
    let (body, trailer) = bytes.split_at(bytes.len() - TRAILER);
    let expected: [u8; DIGEST] = trailer[..DIGEST].try_into().expect("32 bytes");
    if verify_digest && !cfg!(fuzzing) && digest(body) != expected {
        return Err("digest mismatch: the file is corrupt".into());
    }
    let signer = check_signature(&expected, &trailer[DIGEST..], trust)?;
    Ok((body, signer))
}

/// The target whose kernels run on GPUs.
pub const GPU_TARGET: &str = "gpu";

/// The signer of a file with `digest` whose trailer after the digest is `signed` (key, then
/// signature; zeros for none), if it passes `trust`. A signature that does not verify is refused
/// under any policy.
fn check_signature(digest: &[u8; DIGEST], signed: &[u8], trust: &TrustPolicy) -> Result<Option<PublicKey>, String> {
    let (key, signature) = signed.split_at(KEY_BYTES);
    let signature: &[u8; SIGNATURE_BYTES] = signature.try_into().expect("64 bytes");
    let signer = match signed.iter().all(|&b| b == 0) {
        true => None,
        false => {
            let key = PublicKey::from_bytes(key.try_into().expect("32 bytes"))
                .map_err(|m| format!("the signer's key: {m}"))?;
            if !key.verifies(digest, signature) {
                return Err(format!(
                    "the signature by key {} does not match the file: it was changed after signing",
                    key.fingerprint()
                ));
            }
            Some(key)
        }
    };
    match (trust, signer) {
        (TrustPolicy::AnyIntact, _) => Ok(signer),
        (TrustPolicy::SignedBy(_), None) => Err("not signed, and the trust policy asks for a trusted signature".into()),
        (TrustPolicy::SignedBy(keys), Some(key)) if keys.contains(&key) => Ok(signer),
        (TrustPolicy::SignedBy(_), Some(key)) => Err(format!(
            "signed by key {}, which the trust policy does not trust",
            key.fingerprint()
        )),
    }
}

/// The features of `features` that `has` says the CPU lacks.
fn missing(features: &[String], has: impl Fn(&str) -> bool) -> Vec<&str> {
    features.iter().map(String::as_str).filter(|f| !has(f)).collect()
}

/// The x86 features of an LLVM feature string (`+avx2,-avx512f,...`) that code compiled with it
/// may use and that the runtime can check: those enabled, of the ones `host_has` knows.
pub fn required_features(llvm_features: &str) -> Vec<String> {
    let mut out: Vec<String> = llvm_features
        .split(',')
        .filter_map(|f| f.strip_prefix('+'))
        .filter(|f| KNOWN.contains(f))
        .map(str::to_string)
        .collect();
    out.sort();
    out.dedup();
    out
}

/// The features `host_has` can check, by LLVM's names.
const KNOWN: &[&str] = &[
    "sse3",
    "ssse3",
    "sse4.1",
    "sse4.2",
    "popcnt",
    "avx",
    "avx2",
    "fma",
    "f16c",
    "bmi",
    "bmi2",
    "lzcnt",
    "movbe",
    "avx512f",
    "avx512bw",
    "avx512cd",
    "avx512dq",
    "avx512vl",
    "avx512vnni",
    "avx512bf16",
    "avx512fp16",
    "amx-tile",
    "amx-bf16",
];

/// Whether this CPU has feature `f` (LLVM's name); true for names not in `KNOWN`, which are
/// never written.
fn host_has(f: &str) -> bool {
    #[cfg(target_arch = "x86_64")]
    {
        use std::arch::is_x86_feature_detected as has;
        match f {
            "sse3" => has!("sse3"),
            "ssse3" => has!("ssse3"),
            "sse4.1" => has!("sse4.1"),
            "sse4.2" => has!("sse4.2"),
            "popcnt" => has!("popcnt"),
            "avx" => has!("avx"),
            "avx2" => has!("avx2"),
            "fma" => has!("fma"),
            "f16c" => has!("f16c"),
            "bmi" => has!("bmi1"),
            "bmi2" => has!("bmi2"),
            "lzcnt" => has!("lzcnt"),
            "movbe" => has!("movbe"),
            "avx512f" => has!("avx512f"),
            "avx512bw" => has!("avx512bw"),
            "avx512cd" => has!("avx512cd"),
            "avx512dq" => has!("avx512dq"),
            "avx512vl" => has!("avx512vl"),
            "avx512vnni" => has!("avx512vnni"),
            "avx512bf16" => has!("avx512bf16"),
            "avx512fp16" => has!("avx512fp16"),
            "amx-tile" | "amx-bf16" => crate::amx::tiles_usable(),
            _ => true,
        }
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        !KNOWN.contains(&f)
    }
}

fn align(n: usize) -> usize {
    n.div_ceil(ALIGN) * ALIGN
}

/// The metadata, with each weight's file offset from `weights`, the kernels at `library_at`
/// and each GPU code object at `code_at`.
fn metadata(m: &Mxr, weights: &[u64], shared: &HashMap<usize, u64>, library_at: u64, code_at: &[u64]) -> Vec<u8> {
    let mut w = Writer(Vec::new());
    for s in [&m.producer, &m.target, &m.precision, &m.cpu] {
        w.str(s);
    }
    w.u64(m.features.len() as u64);
    m.features.iter().for_each(|f| w.str(f));
    let p = &m.program;
    w.u64(p.buffers.len() as u64);
    for (i, b) in p.buffers.iter().enumerate() {
        w.ty(&b.ty);
        match &b.kind {
            BufferKind::Input(n) => {
                w.u32(0);
                w.u64(*n as u64);
            }
            BufferKind::Constant(t) => match t.strings() {
                Some(strings) => {
                    w.u32(3);
                    w.u64(strings.len() as u64);
                    strings.iter().for_each(|s| w.str(s));
                }
                None => match shared.get(&i) {
                    Some(&at) => {
                        w.u32(4);
                        w.u64(at);
                    }
                    None => {
                        w.u32(1);
                        w.u64(weights[i]);
                    }
                },
            },
            BufferKind::Temp => {
                w.u32(2);
                w.u64(m.memory.offsets[i].unwrap_or(0) as u64);
            }
        }
    }
    w.u64(p.kernels.len() as u64);
    for k in &p.kernels {
        w.str(&k.symbol);
        w.u64(k.arg_bytes.len() as u64);
        k.arg_bytes.iter().for_each(|&b| w.u64(b));
        w.u64(k.results as u64);
        w.u64(k.range);
        match &k.sizes {
            None => w.u32(0),
            Some(sizes) => {
                w.u32(1);
                w.dim(&sizes.range);
                w.u64(sizes.arg_bytes.len() as u64);
                sizes.arg_bytes.iter().for_each(|d| w.dim(d));
            }
        }
    }
    w.u64(m.memory.size as u64);
    w.u64(p.steps.len() as u64);
    for s in &p.steps {
        w.str(&s.symbol);
        w.indices(&s.args);
        w.u64(s.range);
        // 0: one call, 1: split, 2: split, a GPU block per iteration
        w.u32(s.splittable as u32 + s.per_block as u32);
        w.u64(s.work);
        w.u64(s.flops);
        match &s.call {
            None => w.str(""),
            Some(call) => {
                w.str(call.callee().name());
                let params = call.encode();
                w.u64(params.len() as u64);
                params.iter().for_each(|&v| w.u64(v));
            }
        }
    }
    items::write_items(&mut w, &p.main);
    for bindings in [&p.inputs, &p.outputs] {
        w.u64(bindings.len() as u64);
        for b in bindings {
            w.str(&b.name);
            w.u64(b.buffer as u64);
        }
    }
    interface::write_interface(&mut w, &p.interface);
    w.u64(p.symbols.len() as u64);
    for s in &p.symbols {
        w.dim(&Dim::symbol(s.clone()));
    }
    code::write_code_objects(&mut w, &m.code_objects, code_at);
    w.u64(library_at);
    w.u64(m.library.len() as u64);
    w.0
}

fn read_metadata(r: &mut Reader, shared: &SharedBytes, outer: Option<&SharedBytes>) -> Result<Mxr, String> {
    let file = &(**shared).as_ref()[..r.bytes.len()];
    let (producer, target, precision, cpu) = (r.str()?, r.str()?, r.str()?, r.str()?);
    let features = (0..r.count()?).map(|_| r.str()).collect::<Result<Vec<_>, _>>()?;
    let mut buffers = Vec::new();
    let mut offsets = Vec::new();
    for _ in 0..r.count()? {
        let ty = r.ty()?;
        let (kind, offset) = match r.u32()? {
            0 => (BufferKind::Input(r.u64()? as usize), None),
            1 => {
                let at = r.u64()? as usize;
                // inside the body: a weight never overlaps the trailer
                let t = ty
                    .checked_num_bytes()
                    .and_then(|n| slice(file, at, n))
                    .and_then(|_| Tensor::view(ty.clone(), shared.clone(), at))
                    .ok_or("a weight lies outside the file")?;
                (BufferKind::Constant(t), None)
            }
            2 => (BufferKind::Temp, Some(r.u64()? as usize)),
            3 => {
                let strings = (0..r.count()?).map(|_| r.str()).collect::<Result<Vec<_>, _>>()?;
                if ty.dtype != DType::Str || ty.checked_num_bytes() != strings.len().checked_mul(8) {
                    return Err(format!("{} strings for a weight of {ty}", strings.len()));
                }
                (
                    BufferKind::Constant(Tensor::from_strings(ty.shape.clone(), strings)),
                    None,
                )
            }
            4 => {
                let at = r.u64()? as usize;
                let outer = outer.ok_or("a weight shared between programs, in a file of one program")?;
                // inside the outer file's body: a weight never overlaps its trailer
                let body = &(**outer).as_ref()[..(**outer).as_ref().len() - TRAILER];
                let t = ty
                    .checked_num_bytes()
                    .and_then(|n| slice(body, at, n))
                    .and_then(|_| Tensor::view(ty.clone(), outer.clone(), at))
                    .ok_or("a shared weight lies outside the file")?;
                (BufferKind::Constant(t), None)
            }
            k => return Err(format!("unknown buffer kind {k}")),
        };
        buffers.push(Buffer { ty, kind });
        offsets.push(offset);
    }
    let mut kernels = Vec::new();
    for _ in 0..r.count()? {
        let symbol = r.str()?;
        let arg_bytes = (0..r.count()?).map(|_| r.u64()).collect::<Result<_, _>>()?;
        let results = r.u64()? as usize;
        let range = r.u64()?;
        let sizes = match r.u32()? {
            0 => None,
            1 => {
                let range = r.dim()?;
                let arg_bytes = (0..r.count()?).map(|_| r.dim()).collect::<Result<_, _>>()?;
                Some(KernelSizes { range, arg_bytes })
            }
            k => return Err(format!("kernel `{symbol}`: sizes flag {k}, not 0 or 1")),
        };
        kernels.push(KernelSignature {
            symbol,
            arg_bytes,
            results,
            range,
            sizes,
        });
    }
    let memory = MemoryPlan {
        offsets,
        size: r.u64()? as usize,
    };
    let mut steps = Vec::new();
    for _ in 0..r.count()? {
        let symbol = r.str()?;
        let args = r.indices()?;
        if let Some(bad) = args.iter().find(|&&a| a >= buffers.len()) {
            return Err(format!("step `{symbol}` names buffer {bad} of {}", buffers.len()));
        }
        let range = r.u64()?;
        let (splittable, per_block) = match r.u32()? {
            0 => (false, false),
            1 => (true, false),
            2 => (true, true),
            k => return Err(format!("step `{symbol}`: splittable is {k}, not 0, 1 or 2")),
        };
        let work = r.u64()?;
        let flops = r.u64()?;
        let call = match r.str()?.as_str() {
            "" => None,
            name => {
                let callee = Callee::from_name(name)
                    .ok_or_else(|| format!("step `{symbol}` calls `{name}`, which this runtime does not know"))?;
                let mut params = Vec::new();
                for _ in 0..r.count()? {
                    params.push(r.u64()?);
                }
                Some(LibraryCall::decode(callee, &params).map_err(|e| format!("step `{symbol}`: {e}"))?)
            }
        };
        steps.push(Step {
            symbol,
            args,
            range,
            splittable,
            per_block,
            work,
            flops,
            call,
        });
    }
    let main = items::read_items(r, 0)?;
    let mut bindings = [Vec::new(), Vec::new()];
    for list in &mut bindings {
        for _ in 0..r.count()? {
            let name = r.str()?;
            let buffer = r.u64()? as usize;
            if buffer >= buffers.len() {
                return Err(format!("`{name}` names buffer {buffer} of {}", buffers.len()));
            }
            list.push(Binding { name, buffer });
        }
    }
    let interface = interface::read_interface(r, bindings[0].len() + bindings[1].len())?;
    let mut symbols = Vec::new();
    for _ in 0..r.count()? {
        let d = r.dim()?;
        let s = d.as_symbol().ok_or_else(|| format!("`{d}` is not a symbol"))?;
        symbols.push(s.clone());
    }
    let code_objects = code::read_code_objects(r, file)?;
    let (at, len) = (r.u64()? as usize, r.u64()? as usize);
    let library = slice(file, at, len).ok_or("the kernels lie outside the file")?.to_vec();
    let [inputs, outputs] = bindings;
    Ok(Mxr {
        producer,
        target,
        precision,
        cpu,
        features,
        program: Program {
            buffers,
            kernels,
            steps,
            main,
            inputs,
            outputs,
            interface,
            symbols,
        },
        memory,
        library,
        code_objects,
        signer: None,
    })
}

fn slice(file: &[u8], at: usize, len: usize) -> Option<&[u8]> {
    file.get(at..at.checked_add(len)?)
}

struct Writer(Vec<u8>);

impl Writer {
    fn u32(&mut self, v: u32) {
        self.0.extend(v.to_le_bytes());
    }
    fn u64(&mut self, v: u64) {
        self.0.extend(v.to_le_bytes());
    }
    fn str(&mut self, s: &str) {
        self.u64(s.len() as u64);
        self.0.extend(s.as_bytes());
    }
    fn indices(&mut self, v: &[usize]) {
        self.u64(v.len() as u64);
        v.iter().for_each(|&i| self.u64(i as u64));
    }
    /// The element type, the sizes, and the dimensions where they are symbolic (none where
    /// they are not).
    fn ty(&mut self, t: &TensorType) {
        self.str(t.dtype.name());
        self.indices(&t.shape);
        let dims = t.symbolic.as_deref().unwrap_or_default();
        self.u64(dims.len() as u64);
        dims.iter().for_each(|d| self.dim(d));
    }
    /// A dimension as its self-contained text (`n[1..8] * 3 + 1`).
    fn dim(&mut self, d: &Dim) {
        self.str(&d.to_string());
    }
}

struct Reader<'a> {
    bytes: &'a [u8],
    pos: usize,
}

impl Reader<'_> {
    fn take(&mut self, n: usize) -> Result<&[u8], String> {
        let end = self
            .pos
            .checked_add(n)
            .filter(|&e| e <= self.bytes.len())
            .ok_or("the metadata runs past the end of the file")?;
        let s = &self.bytes[self.pos..end];
        self.pos = end;
        Ok(s)
    }
    fn u32(&mut self) -> Result<u32, String> {
        Ok(u32::from_le_bytes(self.take(4)?.try_into().expect("4 bytes")))
    }
    fn u64(&mut self) -> Result<u64, String> {
        Ok(u64::from_le_bytes(self.take(8)?.try_into().expect("8 bytes")))
    }
    /// A count of items that each take at least a byte (so a corrupt count fails fast).
    fn count(&mut self) -> Result<usize, String> {
        let n = self.u64()?;
        match n <= (self.bytes.len() - self.pos) as u64 {
            true => Ok(n as usize),
            false => Err(format!("a count of {n} is larger than the file")),
        }
    }
    fn str(&mut self) -> Result<String, String> {
        let n = self.count()?;
        String::from_utf8(self.take(n)?.to_vec()).map_err(|_| "a name is not UTF-8".to_string())
    }
    fn indices(&mut self) -> Result<Vec<usize>, String> {
        let n = self.count()?;
        (0..n).map(|_| self.u64().map(|v| v as usize)).collect()
    }
    fn ty(&mut self) -> Result<TensorType, String> {
        let name = self.str()?;
        let dtype = DType::from_name(&name).ok_or_else(|| format!("unknown element type `{name}`"))?;
        let shape = self.indices()?;
        let dims = (0..self.count()?).map(|_| self.dim()).collect::<Result<Vec<_>, _>>()?;
        if dims.is_empty() {
            return Ok(TensorType::new(dtype, shape));
        }
        let ty = TensorType::of_dims(dtype, dims);
        match ty.shape == shape {
            true => Ok(ty),
            false => Err(format!("a type of sizes {shape:?} is {ty}, whose sizes differ")),
        }
    }
    fn dim(&mut self) -> Result<Dim, String> {
        let text = self.str()?;
        dim::parse(&text).map_err(|e| format!("dimension `{text}`: {e}"))
    }
}

#[cfg(test)]
mod tests;
