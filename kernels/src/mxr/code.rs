//! The code for GPUs in an `.mxr` file (docs/mxr.md, *GPU code*): a u64 count, then per code
//! object its architecture's name (a string: `gfx90a`, `sm_90`), a u32 format (`0` an AMDGPU
//! code object, `1` PTX) and the u64 offset and length of its bytes in the data.

use super::{slice, Reader, Writer};
use mxc_dialects::program::{CodeFormat, CodeObject, GpuArch};

pub(super) fn write_code_objects(w: &mut Writer, objects: &[CodeObject], offsets: &[u64]) {
    w.u64(objects.len() as u64);
    for (o, &at) in objects.iter().zip(offsets) {
        w.str(o.arch.name());
        w.u32(match o.format {
            CodeFormat::Hsaco => 0,
            CodeFormat::Ptx => 1,
        });
        w.u64(at);
        w.u64(o.bytes.len() as u64);
    }
}

pub(super) fn read_code_objects(r: &mut Reader, file: &[u8]) -> Result<Vec<CodeObject>, String> {
    (0..r.count()?)
        .map(|_| {
            let arch: GpuArch = r.str()?.parse()?;
            let format = match r.u32()? {
                0 => CodeFormat::Hsaco,
                1 => CodeFormat::Ptx,
                k => return Err(format!("the code for {arch} has unknown format {k}")),
            };
            let (at, len) = (r.u64()? as usize, r.u64()? as usize);
            let bytes = slice(file, at, len)
                .ok_or_else(|| format!("the code for {arch} lies outside the file"))?
                .to_vec();
            Ok(CodeObject { arch, format, bytes })
        })
        .collect()
}
