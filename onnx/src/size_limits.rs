//! Limits a model puts on its symbolic sizes. A model exported with a dynamic sequence may
//! still read at most so many rows of a fixed table (BERT's 512 position embeddings: a `Slice`
//! of them to the sequence's length); past that its shapes stop agreeing and its import over
//! a wider range fails. The importer notes where a slice of a fixed axis is clamped by a
//! symbol's range (`SizeLimit`); a caller whose import failed may narrow each noted symbol to
//! its limit (`narrowed`) and import again: what it gives up are sizes the model cannot run.

use super::ImportOptions;
use mxc_dialects::dim::{Dim, Symbol};

/// A symbol the model reads at most `most` of, at node `node`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SizeLimit {
    pub symbol: String,
    pub most: u64,
    pub node: String,
}

impl std::fmt::Display for SizeLimit {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "node {} reads at most {} along {}",
            self.node, self.most, self.symbol
        )
    }
}

/// `opts` with each symbol of `limits` narrowed to at most its limit in every input dimension
/// that is that symbol alone (its optimal sizes past it dropped); `None` where none narrows.
pub fn narrowed(opts: &ImportOptions, limits: &[SizeLimit]) -> Option<ImportOptions> {
    let mut out = opts.clone();
    let mut changed = false;
    for dims in out.symbolic_shapes.values_mut() {
        for d in dims.iter_mut() {
            let Some(s) = d.as_symbol() else { continue };
            let Some(limit) = limits.iter().filter(|l| l.symbol == s.name).map(|l| l.most).min() else {
                continue;
            };
            let (lo, hi) = s.bounds();
            if hi <= limit || lo > limit {
                continue;
            }
            let optimals = s.optimals.iter().copied().filter(|&n| n <= limit).collect();
            if let Ok(narrow) = Symbol::new(&s.name, vec![(lo, limit)], optimals) {
                *d = Dim::symbol(narrow);
                changed = true;
            }
        }
    }
    changed.then_some(out)
}
