//! The built-in rule files, embedded in the binary and parsed by the same `parse_rules` a
//! user's file goes through.

use super::{parse_rules, Rule, RuleError};

/// Every built-in rule file: set name, path (for error messages) and text.
pub const BUILTIN_FILES: &[(&str, &str, &str)] = &[
    (
        "algebra",
        "rewrite/rules/algebra.rules",
        include_str!("../../rules/algebra.rules"),
    ),
    (
        "precision",
        "rewrite/rules/precision.rules",
        include_str!("../../rules/precision.rules"),
    ),
    (
        "integer",
        "rewrite/rules/integer.rules",
        include_str!("../../rules/integer.rules"),
    ),
    (
        "fold",
        "rewrite/rules/fold.rules",
        include_str!("../../rules/fold.rules"),
    ),
    (
        "fusion",
        "rewrite/rules/fusion.rules",
        include_str!("../../rules/fusion.rules"),
    ),
    (
        "layout",
        "rewrite/rules/layout.rules",
        include_str!("../../rules/layout.rules"),
    ),
    (
        "packing",
        "rewrite/rules/packing.rules",
        include_str!("../../rules/packing.rules"),
    ),
    (
        "attention",
        "rewrite/rules/attention.rules",
        include_str!("../../rules/attention.rules"),
    ),
    (
        "winograd",
        "rewrite/rules/winograd.rules",
        include_str!("../../rules/winograd.rules"),
    ),
];

/// The rules of built-in set `name` (`None` for an unknown set).
pub fn builtin_rules(name: &str) -> Option<Result<Vec<Rule>, RuleError>> {
    BUILTIN_FILES
        .iter()
        .find(|(set, _, _)| *set == name)
        .map(|(_, path, text)| parse_rules(text, path))
}
