//! The plan's items in an `.mxr` file (docs/mxr.md, *items*): a block is a u64 count of items
//! and its outputs (a list of indices); an item is a u32 tag, then `0` a call (u64 step), `1`
//! an if (u64 condition, the then block, the else block, the results), `2` a loop (its label,
//! u64 trip count, u64 condition, the initial values, u64 iteration number, u64 body
//! condition, the carried inputs, the body block, u64 iterations or `u64::MAX` when not
//! known, the results), `3` a host step (the op's name, its attributes (`attrs.rs`), the
//! operands, the results).

use super::attrs::{read_attrs, write_attrs};
use super::{Reader, Writer};
use mxc_dialects::program::{Block, HostStep, IfStep, Item, LoopStep, MAX_DEPTH};
use mxc_dialects::OpKind;

pub(super) fn write_items(w: &mut Writer, items: &[Item]) {
    w.u64(items.len() as u64);
    for item in items {
        match item {
            Item::Call(n) => {
                w.u32(0);
                w.u64(*n as u64);
            }
            Item::If(s) => {
                w.u32(1);
                w.u64(s.cond as u64);
                write_block(w, &s.then);
                write_block(w, &s.otherwise);
                w.indices(&s.results);
            }
            Item::Loop(s) => {
                w.u32(2);
                w.str(&s.label);
                w.u64(s.max_trips as u64);
                w.u64(s.cond as u64);
                w.indices(&s.initial);
                w.u64(s.iteration as u64);
                w.u64(s.cond_in as u64);
                w.indices(&s.carried_in);
                write_block(w, &s.body);
                w.u64(s.iterations.unwrap_or(u64::MAX));
                w.indices(&s.results);
            }
            Item::Host(s) => {
                w.u32(3);
                w.str(s.kind.name());
                write_attrs(w, &s.attrs);
                w.indices(&s.operands);
                w.indices(&s.results);
            }
        }
    }
}

fn write_block(w: &mut Writer, b: &Block) {
    write_items(w, &b.items);
    w.indices(&b.outputs);
}

/// Reads a block's items; regions nested deeper than `MAX_DEPTH` are refused before they are
/// read (`Program::validate` checks the rest).
pub(super) fn read_items(r: &mut Reader, depth: usize) -> Result<Vec<Item>, String> {
    if depth > MAX_DEPTH {
        return Err(format!("the plan's regions nest deeper than {MAX_DEPTH}"));
    }
    let n = r.count()?;
    let mut items = Vec::with_capacity(n);
    for _ in 0..n {
        items.push(match r.u32()? {
            0 => Item::Call(r.u64()? as usize),
            1 => Item::If(Box::new(IfStep {
                cond: r.u64()? as usize,
                then: read_block(r, depth)?,
                otherwise: read_block(r, depth)?,
                results: r.indices()?,
            })),
            2 => Item::Loop(Box::new(LoopStep {
                label: r.str()?,
                max_trips: r.u64()? as usize,
                cond: r.u64()? as usize,
                initial: r.indices()?,
                iteration: r.u64()? as usize,
                cond_in: r.u64()? as usize,
                carried_in: r.indices()?,
                body: read_block(r, depth)?,
                iterations: match r.u64()? {
                    u64::MAX => None,
                    k => Some(k),
                },
                results: r.indices()?,
            })),
            3 => {
                let name = r.str()?;
                Item::Host(Box::new(HostStep {
                    kind: OpKind::from_name(&name).ok_or_else(|| format!("a host step runs unknown op `{name}`"))?,
                    attrs: read_attrs(r)?,
                    operands: r.indices()?,
                    results: r.indices()?,
                }))
            }
            tag => return Err(format!("unknown plan item {tag}")),
        });
    }
    Ok(items)
}

fn read_block(r: &mut Reader, depth: usize) -> Result<Block, String> {
    Ok(Block {
        items: read_items(r, depth + 1)?,
        outputs: r.indices()?,
    })
}
