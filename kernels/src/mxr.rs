//! The `.mxr` file: a compiled program that the runtime loads and runs without LLVM, MLIR or
//! the model (the format is described in docs/mxr.md).
//!
//! Little-endian. A fixed head (magic, format version, the file's length), the metadata
//! (producer, target, the host CPU and the features the code needs, the plan with the memory
//! plan, the inputs and outputs, where the kernels and each weight lie in the file), padding
//! to 64 bytes, the data (the kernels' shared object, then every weight, each at a 64-byte
//! aligned offset, so a loader can map them), and a FNV-1a checksum of everything before it.
//! Loading checks, in this order: magic, version, length (truncation), checksum, then every
//! offset and index, the target asked for, and that this CPU has the features.

use crate::RunError;
use mxc_dialects::program::{Binding, Buffer, BufferKind, MemoryPlan, Program, Step, ALIGN};
use mxc_dialects::{DType, SharedBytes, Tensor, TensorType};
use std::sync::Arc;

const MAGIC: &[u8; 4] = b"MXR\0";
/// The format version this runtime reads and writes (1 was the unversioned `MXCA` container;
/// 2 had no parallel ranges in its steps).
pub const VERSION: u32 = 4;
/// Magic, version and length.
const HEAD: usize = 16;

/// A compiled program as stored.
#[derive(Clone, Debug, PartialEq)]
pub struct Mxr {
    /// `mxc` and its version.
    pub producer: String,
    pub target: String,
    /// The CPU the kernels were tuned for (informational) and the x86 features they use.
    pub cpu: String,
    pub features: Vec<String>,
    pub program: Program,
    pub memory: MemoryPlan,
    /// The kernels: a shared object.
    pub library: Vec<u8>,
}

impl Mxr {
    /// A program compiled for `target` by this mxc, for a CPU LLVM calls `cpu` with the LLVM
    /// feature string `llvm_features`; its memory plan is the program's own.
    pub fn new(target: &str, cpu: &str, llvm_features: &str, program: Program, library: Vec<u8>) -> Mxr {
        Mxr {
            producer: format!("mxc {}", env!("CARGO_PKG_VERSION")),
            target: target.to_string(),
            cpu: cpu.to_string(),
            features: required_features(llvm_features),
            memory: program.memory_plan(),
            program,
            library,
        }
    }
}

/// The file's bytes; the same `Mxr` always gives the same bytes.
pub fn encode(m: &Mxr) -> Vec<u8> {
    let mut out = Vec::new();
    write(m, &mut out).expect("writing to memory does not fail");
    out
}

/// Writes the file's bytes (`encode`'s) to `out` as they are laid out, the checksum computed on
/// the way: the weights go from their buffers to `out` without a copy of the whole file.
pub fn write(m: &Mxr, out: &mut dyn std::io::Write) -> std::io::Result<()> {
    // offsets are fixed-width, so the metadata's length does not depend on their values
    let meta_len = metadata(m, &vec![0; m.program.buffers.len()], 0).len();
    let data_start = align(HEAD + meta_len);
    let mut at = align(data_start + m.library.len());
    let mut weights = vec![0; m.program.buffers.len()];
    for (i, b) in m.program.buffers.iter().enumerate() {
        if let BufferKind::Constant(t) = &b.kind {
            weights[i] = at as u64;
            at = align(at + t.bytes().len());
        }
    }
    let meta = metadata(m, &weights, data_start as u64);
    let total = at + 8;
    let mut w = Checksummed {
        out,
        hash: FNV_OFFSET,
        written: 0,
    };
    w.put(MAGIC)?;
    w.put(&VERSION.to_le_bytes())?;
    w.put(&(total as u64).to_le_bytes())?;
    w.put(&meta)?;
    w.pad_to(data_start)?;
    w.put(&m.library)?;
    for b in &m.program.buffers {
        if let BufferKind::Constant(t) = &b.kind {
            w.pad_to(align(w.written))?;
            w.put(t.bytes())?;
        }
    }
    w.pad_to(at)?;
    let sum = w.hash;
    w.out.write_all(&sum.to_le_bytes())
}

/// A writer that keeps the FNV-1a hash of what went through it, and its length.
struct Checksummed<'w> {
    out: &'w mut dyn std::io::Write,
    hash: u64,
    written: usize,
}

impl Checksummed<'_> {
    fn put(&mut self, bytes: &[u8]) -> std::io::Result<()> {
        self.out.write_all(bytes)?;
        self.hash = fnv1a_from(self.hash, bytes);
        self.written += bytes.len();
        Ok(())
    }

    /// Zeros up to offset `at`.
    fn pad_to(&mut self, at: usize) -> std::io::Result<()> {
        let zeros = [0u8; ALIGN];
        while self.written < at {
            let n = (at - self.written).min(zeros.len());
            self.put(&zeros[..n])?;
        }
        Ok(())
    }
}

/// Reads the `.mxr` file at `path` (see `decode`). The file is memory-mapped and the weights
/// stay in the mapping, shared with the page cache rather than copied; the file must not
/// change while the program is loaded.
pub fn read(path: &std::path::Path, target: Option<&str>) -> Result<Mxr, RunError> {
    let io = |e: std::io::Error| RunError::Io(format!("{}: {e}", path.display()));
    let file = std::fs::File::open(path).map_err(io)?;
    // SAFETY: the mapping is read-only and the docs ask that the file not change while mapped
    // (another process truncating it would fault, as with any mapped file).
    let map = unsafe { memmap2::Mmap::map(&file) }.map_err(io)?;
    decode_shared(Arc::new(map), &path.display().to_string(), target)
}

/// Reads an `.mxr` file's bytes (`what` names it in errors); with `target`, the file must be
/// for that target. Every check of the module comment is a clear error.
pub fn decode(bytes: &[u8], what: &str, target: Option<&str>) -> Result<Mxr, RunError> {
    decode_shared(Arc::new(bytes.to_vec()), what, target)
}

/// `decode` of a file's bytes that the weights then share.
fn decode_shared(file: SharedBytes, what: &str, target: Option<&str>) -> Result<Mxr, RunError> {
    let bytes = (*file).as_ref();
    let bad = |m: String| RunError::Load(format!("{what}: {m}"));
    if bytes.len() < 4 || &bytes[..4] != MAGIC {
        return Err(bad("not an .mxr file (bad magic)".into()));
    }
    if bytes.len() < HEAD + 8 {
        return Err(bad(format!("truncated: {} bytes", bytes.len())));
    }
    let version = u32::from_le_bytes(bytes[4..8].try_into().expect("4 bytes"));
    if version != VERSION {
        return Err(bad(format!(
            "format version {version}; this mxc reads version {VERSION} (compile the model again)"
        )));
    }
    let total = u64::from_le_bytes(bytes[8..16].try_into().expect("8 bytes"));
    if total != bytes.len() as u64 {
        return Err(bad(format!(
            "truncated or extended: {} bytes, the file says {total}",
            bytes.len()
        )));
    }
    let (body, sum) = bytes.split_at(bytes.len() - 8);
    if fnv1a(body) != u64::from_le_bytes(sum.try_into().expect("8 bytes")) {
        return Err(bad("checksum mismatch: the file is corrupt".into()));
    }
    let mut r = Reader { bytes: body, pos: HEAD };
    let m = read_metadata(&mut r, &file).map_err(&bad)?;
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

/// The metadata, with each weight's file offset from `weights` and the kernels at `library_at`.
fn metadata(m: &Mxr, weights: &[u64], library_at: u64) -> Vec<u8> {
    let mut w = Writer(Vec::new());
    for s in [&m.producer, &m.target, &m.cpu] {
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
            BufferKind::Constant(_) => {
                w.u32(1);
                w.u64(weights[i]);
            }
            BufferKind::Temp => {
                w.u32(2);
                w.u64(m.memory.offsets[i].unwrap_or(0) as u64);
            }
        }
    }
    w.u64(m.memory.size as u64);
    w.u64(p.steps.len() as u64);
    for s in &p.steps {
        w.str(&s.symbol);
        w.indices(&s.args);
        w.u64(s.range);
        w.u32(s.splittable as u32);
        w.u64(s.work);
        w.u64(s.flops);
    }
    for bindings in [&p.inputs, &p.outputs] {
        w.u64(bindings.len() as u64);
        for b in bindings {
            w.str(&b.name);
            w.u64(b.buffer as u64);
        }
    }
    w.u64(library_at);
    w.u64(m.library.len() as u64);
    w.0
}

fn read_metadata(r: &mut Reader, shared: &SharedBytes) -> Result<Mxr, String> {
    let file = &(**shared).as_ref()[..r.bytes.len()];
    let (producer, target, cpu) = (r.str()?, r.str()?, r.str()?);
    let features = (0..r.count()?).map(|_| r.str()).collect::<Result<Vec<_>, _>>()?;
    let mut buffers = Vec::new();
    let mut offsets = Vec::new();
    for _ in 0..r.count()? {
        let ty = r.ty()?;
        let (kind, offset) = match r.u32()? {
            0 => (BufferKind::Input(r.u64()? as usize), None),
            1 => {
                let at = r.u64()? as usize;
                // inside the body: a weight never overlaps the checksum
                let t = slice(file, at, ty.num_bytes())
                    .and_then(|_| Tensor::view(ty.clone(), shared.clone(), at))
                    .ok_or("a weight lies outside the file")?;
                (BufferKind::Constant(t), None)
            }
            2 => (BufferKind::Temp, Some(r.u64()? as usize)),
            k => return Err(format!("unknown buffer kind {k}")),
        };
        buffers.push(Buffer { ty, kind });
        offsets.push(offset);
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
        let splittable = match r.u32()? {
            0 => false,
            1 => true,
            k => return Err(format!("step `{symbol}`: splittable is {k}, not 0 or 1")),
        };
        let work = r.u64()?;
        let flops = r.u64()?;
        steps.push(Step {
            symbol,
            args,
            range,
            splittable,
            work,
            flops,
        });
    }
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
    let (at, len) = (r.u64()? as usize, r.u64()? as usize);
    let library = slice(file, at, len).ok_or("the kernels lie outside the file")?.to_vec();
    let [inputs, outputs] = bindings;
    Ok(Mxr {
        producer,
        target,
        cpu,
        features,
        program: Program {
            buffers,
            steps,
            inputs,
            outputs,
        },
        memory,
        library,
    })
}

fn slice(file: &[u8], at: usize, len: usize) -> Option<&[u8]> {
    file.get(at..at.checked_add(len)?)
}

/// FNV-1a's offset basis: the hash of nothing.
const FNV_OFFSET: u64 = 0xcbf2_9ce4_8422_2325;

fn fnv1a(bytes: &[u8]) -> u64 {
    fnv1a_from(FNV_OFFSET, bytes)
}

/// FNV-1a continued over `bytes` from the hash `h` of what came before.
fn fnv1a_from(h: u64, bytes: &[u8]) -> u64 {
    bytes
        .iter()
        .fold(h, |h, &b| (h ^ b as u64).wrapping_mul(0x100_0000_01b3))
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
    fn ty(&mut self, t: &TensorType) {
        self.str(t.dtype.name());
        self.indices(&t.shape);
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
        Ok(TensorType::new(dtype, self.indices()?))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample() -> Mxr {
        let ty = TensorType::new(DType::F32, vec![2]);
        let program = Program {
            buffers: vec![
                Buffer {
                    ty: ty.clone(),
                    kind: BufferKind::Input(0),
                },
                Buffer {
                    ty: ty.clone(),
                    kind: BufferKind::Constant(Tensor::from_f32s(vec![2], &[1.0, 2.0])),
                },
                Buffer {
                    ty,
                    kind: BufferKind::Temp,
                },
            ],
            steps: vec![Step {
                symbol: "k0_add_entry".into(),
                args: vec![0, 1, 2],
                range: 2,
                splittable: true,
                work: 8,
                flops: 4,
            }],
            inputs: vec![Binding {
                name: "x".into(),
                buffer: 0,
            }],
            outputs: vec![Binding {
                name: "y".into(),
                buffer: 2,
            }],
        };
        Mxr {
            producer: "mxc 0.1.0".into(),
            target: "cpu".into(),
            cpu: "test".into(),
            features: vec!["sse3".into()],
            memory: program.memory_plan(),
            program,
            library: vec![1, 2, 3],
        }
    }

    #[test]
    fn round_trips_with_weights_aligned() {
        let bytes = encode(&sample());
        assert_eq!(bytes.len() % 8, 0);
        let back = decode(&bytes, "a.mxr", Some("cpu")).unwrap();
        assert_eq!(back, sample());
        // the weight [1.0, 2.0] starts at a 64-byte boundary of the file
        let weight: Vec<u8> = [1.0f32, 2.0].iter().flat_map(|v| v.to_le_bytes()).collect();
        let at = bytes.windows(8).position(|w| w == weight.as_slice()).unwrap();
        assert_eq!(at % ALIGN, 0);
        assert_eq!(encode(&back), bytes, "deterministic");
    }

    #[test]
    fn a_read_file_keeps_its_weights_in_the_mapping() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("a.mxr");
        std::fs::write(&path, encode(&sample())).unwrap();
        let back = read(&path, None).unwrap();
        assert_eq!(back, sample());
        let BufferKind::Constant(weight) = &back.program.buffers[1].kind else {
            panic!("buffer 1 is the weight");
        };
        // the mapping starts at a page boundary, so the weight keeps its 64-byte file alignment
        assert_eq!(weight.bytes().as_ptr() as usize % ALIGN, 0);
    }

    #[test]
    fn damage_of_every_kind_is_a_clear_error() {
        let bytes = encode(&sample());
        let err = |b: &[u8], target: Option<&str>| decode(b, "a.mxr", target).unwrap_err().to_string();
        assert!(err(&bytes[..bytes.len() - 1], None).contains("truncated"));
        assert!(err(&bytes[..10], None).contains("truncated"));
        let mut flipped = bytes.clone();
        flipped[HEAD + 3] ^= 1;
        assert!(err(&flipped, None).contains("checksum mismatch"));
        let mut foreign = bytes.clone();
        foreign[4] = 9;
        assert!(err(&foreign, None).contains(&format!("format version 9; this mxc reads version {VERSION}")));
        assert!(err(b"MXCA....", None).contains("bad magic"));
        assert!(err(&bytes, Some("ref")).contains("compiled for target cpu, not ref"));
        for cut in (0..bytes.len()).step_by(7) {
            assert!(decode(&bytes[..cut], "a.mxr", None).is_err(), "cut at {cut}");
        }
    }

    #[test]
    fn features_the_cpu_lacks_are_named() {
        let features = vec!["avx2".to_string(), "avx512f".to_string(), "fma".to_string()];
        assert_eq!(missing(&features, |f| f != "avx512f"), ["avx512f"]);
        assert!(missing(&features, |_| true).is_empty());
    }

    #[test]
    fn required_features_are_the_enabled_known_ones() {
        let f = required_features("+sse2,+avx2,-avx512f,+fma,+cx16,+avx2");
        assert_eq!(f, ["avx2", "fma"]);
    }
}
