//! The op-parser registry: parsers keyed by (domain, op type), each valid for a range of opset
//! versions, looked up with the version the model imports for the node's domain.

use super::ctx::Ctx;
use mxc_dialects::ValueId;
use std::collections::HashMap;
use std::sync::OnceLock;

/// A parser: builds the node into the graph and returns its outputs in order (a parser may
/// return fewer values than the node declares; asking for a missing one is an error).
pub type ParseFn = fn(&mut Ctx) -> Result<Vec<ValueId>, String>;

/// The highest opset version there is, as the end of an open range.
pub const LATEST: i64 = i64::MAX;

/// The newest opset of the default domain whose operators the parsers were written against
/// (onnx 1.23's): a model importing a newer one is refused, since a newer version of an
/// operator may add an attribute or a meaning that a parser would not see.
pub const NEWEST_OPSET: i64 = 28;

struct Entry {
    domain: &'static str,
    since: i64,
    until: i64,
    parse: ParseFn,
}

/// Parsers by op type, then domain (the default domain is `""`) and opset range.
#[derive(Default)]
pub struct Registry {
    parsers: HashMap<&'static str, Vec<Entry>>,
}

impl Registry {
    /// The parsers of every op mxc imports.
    pub fn standard() -> &'static Registry {
        static STANDARD: OnceLock<Registry> = OnceLock::new();
        STANDARD.get_or_init(|| {
            let mut r = Registry::default();
            super::ops::register(&mut r);
            r
        })
    }

    /// Registers `parse` for `op` of `domain` at opset versions `since..=until`.
    pub fn add(&mut self, domain: &'static str, op: &'static str, since: i64, until: i64, parse: ParseFn) {
        self.parsers.entry(op).or_default().push(Entry {
            domain,
            since,
            until,
            parse,
        });
    }

    /// Registers `parse` for `op` of the default domain at every opset version.
    pub fn add_all(&mut self, op: &'static str, parse: ParseFn) {
        self.add("", op, 1, LATEST, parse);
    }

    /// The parser of `op` in `domain` at `opset`.
    pub fn find(&self, domain: &str, op: &str, opset: i64) -> Option<ParseFn> {
        let entries = self.parsers.get(op)?;
        entries
            .iter()
            .find(|e| e.domain == domain && (e.since..=e.until).contains(&opset))
            .map(|e| e.parse)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn none(_: &mut Ctx) -> Result<Vec<ValueId>, String> {
        Ok(vec![])
    }

    #[test]
    fn lookup_honours_opset_ranges() {
        let mut r = Registry::default();
        r.add("", "Foo", 1, 12, none);
        r.add("", "Foo", 13, LATEST, none);
        assert!(r.find("", "Foo", 11).is_some());
        assert!(r.find("", "Foo", 21).is_some());
        assert!(r.find("", "Foo", 0).is_none());
        assert!(r.find("com.example", "Foo", 13).is_none());
        assert!(Registry::standard().find("", "Conv", 17).is_some());
    }
}
