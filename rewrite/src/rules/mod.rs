//! Rewrite rules as data: the rule language (see `docs/rules.md`), its parser and checker,
//! and the compilation of each rule to an egg rewrite over [`Mx`]. Built-in rule files
//! (`rewrite/rules/*.rules`) are embedded and loaded exactly the way a user's file is.

pub mod ast;
mod builtin;
mod check;
mod compile;
mod error;
mod eval;
pub mod facts;
pub mod funcs;
mod lexer;
mod parse;
mod types;
pub mod value;

#[cfg(test)]
mod tests;

pub use builtin::{builtin_rules, BUILTIN_FILES};
pub use check::{VarKind, VarKinds};
pub use error::{Pos, RuleError};
pub use facts::ClassFacts;
pub use parse::MAX_NESTING;

use crate::lang::Mx;
use ast::{Pat, RuleDef};
use compile::{egg_var, lhs_pattern, RuleApplier, RuleCondition};
use egg::{Analysis, ConditionalApplier, Rewrite};
use std::path::Path;
use std::sync::Arc;

/// A parsed and checked rule, ready to be compiled for any analysis with [`ClassFacts`].
#[derive(Clone, Debug)]
pub struct Rule {
    /// The file it came from (as given to [`parse_rules`]).
    pub file: String,
    /// Where its name is written.
    pub pos: Pos,
    pub def: RuleDef,
    /// What each variable stands for (operand or attribute of a sort).
    pub vars: VarKinds,
}

impl Rule {
    pub fn name(&self) -> &str {
        &self.def.name
    }

    /// The egg rewrite this rule denotes.
    pub fn rewrite<N>(&self) -> Rewrite<Mx, N>
    where
        N: Analysis<Mx> + 'static,
        N::Data: ClassFacts,
    {
        let Pat::Op(lhs) = &self.def.lhs else {
            unreachable!("the checker requires an op on the left")
        };
        let vars = Arc::new(self.vars.iter().map(|(n, k)| (n.clone(), (egg_var(n), *k))).collect());
        let applier = RuleApplier {
            rhs: self.def.rhs.clone(),
            vars: Arc::clone(&vars),
        };
        let searcher = lhs_pattern(lhs);
        let rewrite = match &self.def.cond {
            Some(cond) => Rewrite::new(
                self.name(),
                searcher,
                ConditionalApplier {
                    condition: RuleCondition {
                        cond: cond.clone(),
                        vars,
                    },
                    applier,
                },
            ),
            None => Rewrite::new(self.name(), searcher, applier),
        };
        // The applier and condition declare no variables, so egg has nothing to reject; the
        // checker has already verified that every variable is bound.
        rewrite.expect("rules declare no variables to egg")
    }
}

/// The egg rewrites of `rules`, in order.
pub fn rewrites<N>(rules: &[Rule]) -> Vec<Rewrite<Mx, N>>
where
    N: Analysis<Mx> + 'static,
    N::Data: ClassFacts,
{
    rules.iter().map(Rule::rewrite).collect()
}

/// Parses and checks the rules in `text`; `file` names it in errors.
pub fn parse_rules(text: &str, file: &str) -> Result<Vec<Rule>, RuleError> {
    let defs = parse::parse_file(text).map_err(|e| e.in_file(file))?;
    let mut rules: Vec<Rule> = Vec::with_capacity(defs.len());
    for def in defs {
        if let Some(first) = rules.iter().find(|r| r.def.name == def.name) {
            return Err(RuleError::at(
                file,
                def.pos,
                format!("rule `{}` is already defined at line {}", def.name, first.pos.line),
            ));
        }
        let vars = check::check_rule(&def).map_err(|e| e.in_file(file))?;
        rules.push(Rule {
            file: file.to_string(),
            pos: def.pos,
            def,
            vars,
        });
    }
    Ok(rules)
}

/// Reads, parses and checks the rule file at `path`.
pub fn load_rules(path: impl AsRef<Path>) -> Result<Vec<Rule>, RuleError> {
    let path = path.as_ref();
    let file = path.display().to_string();
    let text = std::fs::read_to_string(path).map_err(|error| RuleError::Io {
        file: file.clone(),
        error,
    })?;
    parse_rules(&text, &file)
}
