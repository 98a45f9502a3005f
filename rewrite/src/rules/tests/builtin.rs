//! Every built-in rule file parses, type-checks and compiles to egg rewrites.

use super::analysis::TestAnalysis;
use crate::rules::{builtin_rules, rewrites, BUILTIN_FILES};

#[test]
fn every_builtin_rule_file_loads() {
    for (set, path, _) in BUILTIN_FILES {
        let rules = builtin_rules(set).expect("listed").unwrap_or_else(|e| panic!("{e}"));
        assert!(!rules.is_empty(), "{path} has no rules");
        assert!(rules.iter().all(|r| r.file == *path));
        assert_eq!(rewrites::<TestAnalysis>(&rules).len(), rules.len());
    }
    assert!(builtin_rules("no-such-set").is_none());
}
