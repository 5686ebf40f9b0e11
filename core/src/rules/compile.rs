//! Compiles a [`Config`] into a [`RuleSet`].

use super::Config;

/// A compiled, immutable rule set.
pub struct RuleSet {
    _p: (),
}

/// A rule that was defined but will not run, and why.
#[derive(Debug, Clone)]
pub struct Disabled;

/// Per-type counts for lint output.
#[derive(Debug, Clone, Default)]
pub struct RuleSummary;

/// Why a rule set could not be built at all.
#[derive(Debug, Clone)]
pub struct CompileError;

impl RuleSet {
    /// Compiles `config`.
    pub fn compile(config: &Config) -> Result<RuleSet, CompileError> {
        let _ = config;
        todo!()
    }
}
