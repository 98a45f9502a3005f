//! A host step's attributes in an `.mxr` file (docs/mxr.md, *items*): a u64 count, then each
//! attribute's name and a u32 tag with its value: `0` an i64, `1` an f64, `2` i64s, `3` f64s
//! (each a u64 count and the values), `4` a string, `5` an element type by name. Tensors,
//! graphs and symbolic sizes are no host step's (`Program::validate` refuses them); one written
//! anyway has tag `255`, which reading refuses.

use super::{Reader, Writer};
use mxc_dialects::{Attr, Attrs, DType};

pub(super) fn write_attrs(w: &mut Writer, attrs: &Attrs) {
    w.u64(attrs.0.len() as u64);
    for (name, a) in &attrs.0 {
        w.str(name);
        match a {
            Attr::Int(v) => {
                w.u32(0);
                w.u64(*v as u64);
            }
            Attr::Float(v) => {
                w.u32(1);
                w.u64(v.to_bits());
            }
            Attr::Ints(v) => {
                w.u32(2);
                w.u64(v.len() as u64);
                v.iter().for_each(|&x| w.u64(x as u64));
            }
            Attr::Floats(v) => {
                w.u32(3);
                w.u64(v.len() as u64);
                v.iter().for_each(|x| w.u64(x.to_bits()));
            }
            Attr::Str(s) => {
                w.u32(4);
                w.str(s);
            }
            Attr::DType(d) => {
                w.u32(5);
                w.str(d.name());
            }
            Attr::Tensor(_) | Attr::Graph(_) | Attr::Sizes(_) => w.u32(255),
        }
    }
}

pub(super) fn read_attrs(r: &mut Reader) -> Result<Attrs, String> {
    let mut attrs = Attrs::new();
    for _ in 0..r.count()? {
        let name = r.str()?;
        let value = match r.u32()? {
            0 => Attr::Int(r.u64()? as i64),
            1 => Attr::Float(f64::from_bits(r.u64()?)),
            2 => Attr::Ints(
                (0..r.count()?)
                    .map(|_| r.u64().map(|x| x as i64))
                    .collect::<Result<_, _>>()?,
            ),
            3 => Attr::Floats(
                (0..r.count()?)
                    .map(|_| r.u64().map(f64::from_bits))
                    .collect::<Result<_, _>>()?,
            ),
            4 => Attr::Str(r.str()?),
            5 => {
                let d = r.str()?;
                Attr::DType(
                    DType::from_name(&d).ok_or_else(|| format!("attribute `{name}`: unknown element type `{d}`"))?,
                )
            }
            tag => return Err(format!("attribute `{name}` has unknown kind {tag}")),
        };
        attrs.set(&name, value);
    }
    Ok(attrs)
}
