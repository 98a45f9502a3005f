//! Checks of an AMDGPU code object (an HSA ELF shared object, code object version 5) against
//! the plan that launches it: the ELF header (64-bit little-endian, machine AMDGPU, the HSA
//! OS ABI, version 5, the chip's machine number where it is one we know), no undefined
//! dynamic symbols, and the metadata note (`amdhsa.kernels`, MessagePack): the target names
//! the chip; each kernel the plan launches is there with its descriptor symbol, the explicit
//! arguments the launch packs (one 8-byte pointer per buffer, then `lo` and `hi`). Registers
//! a kernel spills are reported (slow, not wrong): vector registers to scratch memory, scalar
//! registers (into vector registers' lanes).

use super::msgpack::{self, Value};
use super::KernelExpect;
use crate::library::{CLASS_64, ELF_MAGIC, LITTLE_ENDIAN, SHARED_OBJECT};

const MACHINE_AMDGPU: u16 = 224;
const OSABI_AMDGPU_HSA: u8 = 64;
/// `EI_ABIVERSION` of code object version 5.
const ABI_VERSION_V5: u8 = 3;
const NOTE_AMDGPU_METADATA: u32 = 32;
const SECTION_NOTE: u32 = 7;
const SECTION_DYNSYM: u32 = 11;

/// `EF_AMDGPU_MACH` of the chips mxc compiles for by default and their neighbours.
const MACHINES: [(&str, u32); 12] = [
    ("gfx906", 0x02f),
    ("gfx908", 0x030),
    ("gfx90a", 0x03f),
    ("gfx1030", 0x036),
    ("gfx940", 0x040),
    ("gfx1100", 0x041),
    ("gfx1101", 0x046),
    ("gfx1102", 0x047),
    ("gfx1200", 0x048),
    ("gfx942", 0x04c),
    ("gfx1201", 0x04e),
    ("gfx950", 0x04f),
];

/// What an object holds, as far as the checks read it.
#[derive(Clone, Debug, PartialEq)]
pub struct HsacoSummary {
    pub kernels: usize,
    /// The largest fixed scratch (private segment) a kernel uses, in bytes.
    pub max_scratch: u64,
    /// Each kernel that spills vector registers to scratch memory, with how many
    /// (`k3_attention_kernel: 2 VGPRs`).
    pub spills: Vec<String>,
    /// Each kernel that spills scalar registers, with how many: the back end keeps them in
    /// lanes of vector registers (`v_writelane`), and in scratch only when those run out.
    pub sgpr_spills: Vec<String>,
}

/// Checks `bytes`, a code object for `chip`, against the kernels a plan launches.
pub fn check(bytes: &[u8], chip: &str, expected: &[KernelExpect]) -> Result<HsacoSummary, String> {
    let elf = Elf::new(bytes)?;
    if bytes[7] != OSABI_AMDGPU_HSA || bytes[8] != ABI_VERSION_V5 {
        return Err(format!(
            "OS ABI {} version {}, not AMDGPU HSA ({OSABI_AMDGPU_HSA}) code object version 5 ({ABI_VERSION_V5})",
            bytes[7], bytes[8]
        ));
    }
    if elf.u16(18) != MACHINE_AMDGPU {
        return Err(format!("ELF machine {}, not AMDGPU ({MACHINE_AMDGPU})", elf.u16(18)));
    }
    let mach = elf.u32(48) & 0xff;
    if let Some(&(_, want)) = MACHINES.iter().find(|(c, _)| *c == chip) {
        if mach != want {
            return Err(format!("machine number {mach:#x}, not {chip}'s ({want:#x})"));
        }
    }
    let sections = elf.sections()?;
    let mut symbols = Vec::new();
    for s in sections.iter().filter(|s| s.kind == SECTION_DYNSYM) {
        let names = sections
            .get(s.link as usize)
            .ok_or("the symbol table names no string table")?;
        for (name, defined) in elf.symbols(s, names)? {
            if !defined {
                return Err(format!("undefined symbol `{name}`"));
            }
            symbols.push(name);
        }
    }
    let metadata = sections
        .iter()
        .filter(|s| s.kind == SECTION_NOTE)
        .map(|s| elf.metadata_note(s))
        .find_map(Result::transpose)
        .ok_or("no AMDGPU metadata note")??;
    let target = metadata.get("amdhsa.target").and_then(Value::as_str).unwrap_or("");
    // `amdgcn-amd-amdhsa--gfx90a`, with `:feature+` settings after the chip
    if target.rsplit("--").next().and_then(|t| t.split(':').next()) != Some(chip) {
        return Err(format!("the metadata's target is `{target}`, not {chip}"));
    }
    let kernels = metadata
        .get("amdhsa.kernels")
        .and_then(Value::as_array)
        .ok_or("no amdhsa.kernels")?;
    let (mut max_scratch, mut spills, mut sgpr_spills) = (0, Vec::new(), Vec::new());
    for want in expected {
        let k = kernels
            .iter()
            .find(|k| k.get(".name").and_then(Value::as_str) == Some(want.name.as_str()))
            .ok_or_else(|| format!("kernel `{}` is missing", want.name))?;
        let descriptor = format!("{}.kd", want.name);
        if !symbols.contains(&descriptor) {
            return Err(format!(
                "kernel `{}` has no descriptor symbol `{descriptor}`",
                want.name
            ));
        }
        check_kernel(k, want)?;
        max_scratch = max_scratch.max(int(k, ".private_segment_fixed_size").unwrap_or(0) as u64);
        if let Some(n) = int(k, ".vgpr_spill_count").filter(|&n| n > 0) {
            spills.push(format!("{}: {n} VGPRs", want.name));
        }
        if let Some(n) = int(k, ".sgpr_spill_count").filter(|&n| n > 0) {
            sgpr_spills.push(format!("{}: {n} SGPRs", want.name));
        }
    }
    Ok(HsacoSummary {
        kernels: kernels.len(),
        max_scratch,
        spills,
        sgpr_spills,
    })
}

fn int(k: &Value, key: &str) -> Option<i128> {
    k.get(key).and_then(Value::as_int)
}

/// A kernel's metadata against the launch: its explicit arguments.
fn check_kernel(k: &Value, want: &KernelExpect) -> Result<(), String> {
    let at = |m: String| format!("kernel `{}`: {m}", want.name);
    let args = k
        .get(".args")
        .and_then(Value::as_array)
        .ok_or_else(|| at("no .args".into()))?;
    let explicit: Vec<&Value> = args
        .iter()
        .filter(|a| {
            !a.get(".value_kind")
                .and_then(Value::as_str)
                .unwrap_or("")
                .starts_with("hidden_")
        })
        .collect();
    let count = want.buffers + 2;
    if explicit.len() != count {
        return Err(at(format!(
            "{} explicit arguments, the launch packs {count}",
            explicit.len()
        )));
    }
    for (i, a) in explicit.iter().enumerate() {
        let (size, offset) = (int(a, ".size"), int(a, ".offset"));
        if size != Some(8) || offset != Some(8 * i as i128) {
            return Err(at(format!(
                "argument {i} is {size:?} bytes at {offset:?}, not 8 at {}",
                8 * i
            )));
        }
    }
    if int(k, ".kernarg_segment_size").is_none_or(|n| n < 8 * count as i128) {
        return Err(at("its kernel arguments are smaller than the launch packs".into()));
    }
    Ok(())
}

struct Section {
    kind: u32,
    offset: usize,
    size: usize,
    link: u32,
    entry: usize,
}

/// A 64-bit little-endian ELF file whose header is in range.
struct Elf<'a> {
    bytes: &'a [u8],
}

impl<'a> Elf<'a> {
    fn new(bytes: &'a [u8]) -> Result<Elf<'a>, String> {
        if bytes.len() < 64 || &bytes[..4] != ELF_MAGIC || bytes[4] != CLASS_64 || bytes[5] != LITTLE_ENDIAN {
            return Err("not a 64-bit little-endian ELF file".into());
        }
        let kind = u16::from_le_bytes([bytes[16], bytes[17]]);
        if kind != SHARED_OBJECT {
            return Err(format!("ELF type {kind}, not a shared object"));
        }
        Ok(Elf { bytes })
    }

    fn slice(&self, at: usize, len: usize) -> Result<&'a [u8], String> {
        at.checked_add(len)
            .and_then(|end| self.bytes.get(at..end))
            .ok_or_else(|| format!("{len} bytes at {at} lie outside the file"))
    }

    fn u16(&self, at: usize) -> u16 {
        u16::from_le_bytes([self.bytes[at], self.bytes[at + 1]])
    }

    fn u32(&self, at: usize) -> u32 {
        u32::from_le_bytes(self.bytes[at..at + 4].try_into().expect("4 bytes"))
    }

    fn u64(&self, at: usize) -> u64 {
        u64::from_le_bytes(self.bytes[at..at + 8].try_into().expect("8 bytes"))
    }

    fn sections(&self) -> Result<Vec<Section>, String> {
        let (offset, size, count) = (self.u64(40) as usize, self.u16(58) as usize, self.u16(60) as usize);
        if count > 0 && size != 64 {
            return Err(format!("section headers of {size} bytes, not 64"));
        }
        let table = self.slice(offset, size * count)?;
        Ok(table
            .chunks_exact(64)
            .map(|h| {
                let u32_at = |at: usize| u32::from_le_bytes(h[at..at + 4].try_into().expect("4 bytes"));
                let u64_at = |at: usize| u64::from_le_bytes(h[at..at + 8].try_into().expect("8 bytes")) as usize;
                Section {
                    kind: u32_at(4),
                    offset: u64_at(24),
                    size: u64_at(32),
                    link: u32_at(40),
                    entry: u64_at(56),
                }
            })
            .collect())
    }

    /// Each symbol of a symbol table (but the null one) and whether it is defined.
    fn symbols(&self, table: &Section, names: &Section) -> Result<Vec<(String, bool)>, String> {
        if table.entry != 24 {
            return Err(format!("symbols of {} bytes, not 24", table.entry));
        }
        let (data, strings) = (
            self.slice(table.offset, table.size)?,
            self.slice(names.offset, names.size)?,
        );
        data.chunks_exact(24)
            .skip(1)
            .map(|s| {
                let name_at = u32::from_le_bytes(s[0..4].try_into().expect("4 bytes")) as usize;
                let section = u16::from_le_bytes([s[6], s[7]]);
                let name = strings
                    .get(name_at..)
                    .and_then(|rest| rest.split(|&b| b == 0).next())
                    .ok_or("a symbol's name lies outside its string table")?;
                Ok((String::from_utf8_lossy(name).into_owned(), section != 0))
            })
            .collect()
    }

    /// The AMDGPU metadata of a note section, if it holds it.
    fn metadata_note(&self, s: &Section) -> Result<Option<Value>, String> {
        let data = self.slice(s.offset, s.size)?;
        let mut at = 0;
        let aligned = |n: usize| n.div_ceil(4) * 4;
        while at + 12 <= data.len() {
            let word = |i: usize| u32::from_le_bytes(data[at + 4 * i..at + 4 * i + 4].try_into().expect("4 bytes"));
            let (name_len, desc_len, kind) = (word(0) as usize, word(1) as usize, word(2));
            let name_at = at + 12;
            let desc_at = name_at + aligned(name_len);
            let desc = data
                .get(desc_at..desc_at + desc_len)
                .ok_or("a note runs past its section")?;
            let name = &data[name_at..name_at + name_len.min(data.len() - name_at)];
            if kind == NOTE_AMDGPU_METADATA && name.starts_with(b"AMDGPU") {
                return msgpack::decode(desc)
                    .map(Some)
                    .map_err(|e| format!("the metadata note: {e}"));
            }
            at = desc_at + aligned(desc_len);
        }
        Ok(None)
    }
}
