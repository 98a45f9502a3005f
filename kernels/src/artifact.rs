//! The compiled-program file written by `mxc compile`: a simple, checked container for the
//! plan and the kernels' shared object (the versioned MXR format with memory plan and
//! mappable weights replaces it later).
//!
//! Layout, little-endian: magic `MXCA`, u32 version, target name, the program (buffers with
//! types and kinds, steps, input and output bindings), the shared object; strings and byte
//! blobs are u64-length-prefixed, and a u64 FNV-1a checksum of everything before it ends the file.

use crate::RunError;
use mxc_dialects::program::{Binding, Buffer, BufferKind, Program, Step};
use mxc_dialects::{DType, Tensor, TensorType};

const MAGIC: &[u8; 4] = b"MXCA";
const VERSION: u32 = 1;

/// A program and its kernels, as stored.
pub struct Artifact {
    pub target: String,
    pub program: Program,
    pub library: Vec<u8>,
}

pub fn encode(a: &Artifact) -> Vec<u8> {
    let mut w = Writer(Vec::new());
    w.0.extend(MAGIC);
    w.u32(VERSION);
    w.str(&a.target);
    let p = &a.program;
    w.u64(p.buffers.len() as u64);
    for b in &p.buffers {
        w.ty(&b.ty);
        match &b.kind {
            BufferKind::Input(n) => {
                w.u32(0);
                w.u64(*n as u64);
            }
            BufferKind::Constant(t) => {
                w.u32(1);
                w.bytes(t.bytes());
            }
            BufferKind::Temp => w.u32(2),
        }
    }
    w.u64(p.steps.len() as u64);
    for s in &p.steps {
        w.str(&s.symbol);
        w.indices(&s.args);
    }
    for bindings in [&p.inputs, &p.outputs] {
        w.u64(bindings.len() as u64);
        for b in bindings {
            w.str(&b.name);
            w.u64(b.buffer as u64);
        }
    }
    w.bytes(&a.library);
    let sum = fnv1a(&w.0);
    w.u64(sum);
    w.0
}

pub fn decode(bytes: &[u8], what: &str) -> Result<Artifact, RunError> {
    let bad = |m: String| RunError::Load(format!("{what}: {m}"));
    if bytes.len() < 16 || &bytes[..4] != MAGIC {
        return Err(bad("not an mxc compiled program (bad magic)".into()));
    }
    let (body, sum) = bytes.split_at(bytes.len() - 8);
    if fnv1a(body) != u64::from_le_bytes(sum.try_into().expect("8 bytes")) {
        return Err(bad("checksum mismatch: the file is corrupt or truncated".into()));
    }
    let mut r = Reader { bytes: body, pos: 4 };
    let version = r.u32().map_err(&bad)?;
    if version != VERSION {
        return Err(bad(format!(
            "format version {version}, this mxc reads version {VERSION}"
        )));
    }
    read_body(&mut r).map_err(bad)
}

fn read_body(r: &mut Reader) -> Result<Artifact, String> {
    let target = r.str()?;
    let mut buffers = Vec::new();
    for _ in 0..r.u64()? {
        let ty = r.ty()?;
        let kind = match r.u32()? {
            0 => BufferKind::Input(r.u64()? as usize),
            1 => BufferKind::Constant(
                Tensor::from_bytes(ty.clone(), r.bytes()?.to_vec()).ok_or("constant size mismatch")?,
            ),
            2 => BufferKind::Temp,
            k => return Err(format!("unknown buffer kind {k}")),
        };
        buffers.push(Buffer { ty, kind });
    }
    let mut steps = Vec::new();
    for _ in 0..r.u64()? {
        let symbol = r.str()?;
        let args = r.indices()?;
        if let Some(bad) = args.iter().find(|&&a| a >= buffers.len()) {
            return Err(format!("step `{symbol}` names buffer {bad} of {}", buffers.len()));
        }
        steps.push(Step { symbol, args });
    }
    let mut bindings = [Vec::new(), Vec::new()];
    for list in &mut bindings {
        for _ in 0..r.u64()? {
            let name = r.str()?;
            let buffer = r.u64()? as usize;
            if buffer >= buffers.len() {
                return Err(format!("`{name}` names buffer {buffer} of {}", buffers.len()));
            }
            list.push(Binding { name, buffer });
        }
    }
    let library = r.bytes()?.to_vec();
    let [inputs, outputs] = bindings;
    Ok(Artifact {
        target,
        program: Program {
            buffers,
            steps,
            inputs,
            outputs,
        },
        library,
    })
}

fn fnv1a(bytes: &[u8]) -> u64 {
    bytes.iter().fold(0xcbf2_9ce4_8422_2325, |h, &b| {
        (h ^ b as u64).wrapping_mul(0x100_0000_01b3)
    })
}

struct Writer(Vec<u8>);

impl Writer {
    fn u32(&mut self, v: u32) {
        self.0.extend(v.to_le_bytes());
    }
    fn u64(&mut self, v: u64) {
        self.0.extend(v.to_le_bytes());
    }
    fn bytes(&mut self, b: &[u8]) {
        self.u64(b.len() as u64);
        self.0.extend(b);
    }
    fn str(&mut self, s: &str) {
        self.bytes(s.as_bytes());
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
            .ok_or("truncated")?;
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
    fn bytes(&mut self) -> Result<&[u8], String> {
        let n = self.u64()? as usize;
        self.take(n)
    }
    fn str(&mut self) -> Result<String, String> {
        String::from_utf8(self.bytes()?.to_vec()).map_err(|_| "a name is not UTF-8".to_string())
    }
    fn indices(&mut self) -> Result<Vec<usize>, String> {
        let n = self.u64()? as usize;
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

    fn sample() -> Artifact {
        let ty = TensorType::new(DType::F32, vec![2]);
        Artifact {
            target: "cpu".into(),
            program: Program {
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
                }],
                inputs: vec![Binding {
                    name: "x".into(),
                    buffer: 0,
                }],
                outputs: vec![Binding {
                    name: "y".into(),
                    buffer: 2,
                }],
            },
            library: vec![1, 2, 3],
        }
    }

    #[test]
    fn round_trips() {
        let bytes = encode(&sample());
        let back = decode(&bytes, "a.mxr").unwrap();
        assert_eq!(back.program, sample().program);
        assert_eq!((back.target.as_str(), back.library), ("cpu", vec![1, 2, 3]));
    }

    #[test]
    fn rejects_corruption_and_truncation() {
        let mut bytes = encode(&sample());
        let truncated = decode(&bytes[..bytes.len() - 5], "a.mxr").err().unwrap().to_string();
        assert!(
            truncated.contains("a.mxr") && truncated.contains("checksum"),
            "{truncated}"
        );
        bytes[20] ^= 0xff;
        assert!(decode(&bytes, "a.mxr").err().unwrap().to_string().contains("checksum"));
        assert!(decode(b"not a program at all", "b.mxr")
            .err()
            .unwrap()
            .to_string()
            .contains("bad magic"));
    }
}
