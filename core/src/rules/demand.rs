//! Sub-rules run on demand. A `__` rule counts only through the metas that read it:
//! once every such meta is decided by the rules already run (`A && __B` where `A`
//! missed), the scan skips it. Scored rules always run, and every scored meta comes
//! out as a full scan's; the skipped sub-rules and the sub-metas that read them may
//! not, so a rule set whose templates list sub-rules (`_SUBTESTS_`) runs them all.

use alloc::vec::Vec;

use super::compile::{eval_meta, MetaProgram, MetaReaders, MetaStep, RuleSet, RuleType};
use super::{MetaExpr, MetaOp};

/// A scan's stages, in order: each runs the checks of one rule type (every check of
/// a rule runs in its type's stage). Headers and eval tests, which decide most metas,
/// come first; the body's costly sub-rules last.
pub(crate) const STAGES: [RuleType; 7] =
    [RuleType::Header, RuleType::Eval, RuleType::MimeHeader, RuleType::Uri, RuleType::Full, RuleType::Body, RuleType::RawBody];

/// The rule types whose sub-rules run on demand: the message's text, searched late.
/// Header and eval sub-rules, decided at their early stages with the body unknown,
/// mostly had to run, and the decisions cost more than the skips saved (stock rules,
/// `bench/instructions`: 3,424,725 instructions a message with these types; 3,567,557
/// with header and eval sub-rules deferred too).
const ON_DEMAND_TYPES: [RuleType; 4] = [RuleType::Uri, RuleType::Full, RuleType::Body, RuleType::RawBody];

/// Longest chain of metas reading metas that still allows rules on demand: the
/// decision recurses along such chains.
pub(crate) const DEMAND_DEPTH: usize = 32;

/// `RulePlace::meta` of a rule that is not a running meta.
const NO_META: u32 = u32::MAX;

/// Where a rule's value comes from during a scan.
#[derive(Debug, Clone, Copy)]
struct RulePlace {
    /// Its stage in [`STAGES`]; 0 for a rule that never runs (its value, 0, is known from the start).
    stage: u8,
    /// A sub-rule the scan defers until its stage has run the rest, then runs only if needed.
    on_demand: bool,
    /// Its value is the verdict's: a rule that is not `__`.
    root: bool,
    /// Its index in the metas, when it is a meta that runs.
    meta: u32,
}

/// A meta as a decision reads it: the rules whose value alone decides it (the
/// operands of a top-level `&&` chain that are a rule or its negation: one false
/// makes the meta false; of a `||` chain: one true makes it true), then every rule
/// it reads, all of which known give its value.
#[derive(Debug, Clone, Copy, Default)]
struct MetaShape {
    /// A `&&` chain (false decides), else a `||` chain (true decides).
    all: bool,
    deciders: (u32, u32),
    reads: (u32, u32),
}

/// A rule whose value alone decides a meta, when true (or, `negated`, when false)
/// for a `||` chain, when false (or, `negated`, when true) for a `&&` chain.
#[derive(Debug, Clone, Copy)]
struct Decider {
    rule: u32,
    negated: bool,
}

/// Which rules run on demand, and what a scan needs to decide them: built with the metas.
#[derive(Debug, Default)]
pub(crate) struct DemandPlan {
    places: Vec<RulePlace>,
    /// By meta index.
    shapes: Vec<MetaShape>,
    deciders: Vec<Decider>,
    reads: Vec<u32>,
    /// The longest meta program, for the scratch's evaluation stack.
    stack: usize,
}

/// A rule as the plan sees it.
pub(crate) struct PlanRule<'a> {
    pub(crate) name: &'a str,
    pub(crate) rule_type: RuleType,
    pub(crate) active: bool,
    /// Its expression, for a meta.
    pub(crate) expr: Option<&'a MetaExpr>,
}

impl DemandPlan {
    /// The plan for `rules` (by rule id) and their running `metas` (in dependency
    /// order), names resolved by `lookup`; with `enabled` false (a template lists
    /// sub-rules) every rule runs.
    pub(crate) fn new(rules: &[PlanRule<'_>], metas: &[MetaProgram], readers: &MetaReaders, lookup: &dyn Fn(&str) -> Option<u32>, enabled: bool) -> DemandPlan {
        let places = rules
            .iter()
            .enumerate()
            .map(|(id, r)| {
                let stage = STAGES.iter().position(|&t| t == r.rule_type).filter(|_| r.active);
                let sub = r.name.starts_with("__");
                RulePlace {
                    stage: stage.map_or(0, |s| s as u8),
                    on_demand: enabled && sub && stage.is_some() && ON_DEMAND_TYPES.contains(&r.rule_type) && !readers.of(id as u32).is_empty(),
                    root: !sub,
                    meta: NO_META,
                }
            })
            .collect();
        let mut plan = DemandPlan { places, ..DemandPlan::default() };
        // Depth of each meta: 1 + the deepest meta it reads (metas come after what they read).
        let mut depth: Vec<usize> = alloc::vec![0; rules.len()];
        let mut deepest = 0;
        for (index, meta) in metas.iter().enumerate() {
            let reads_from = plan.reads.len();
            for step in &meta.steps {
                if let MetaStep::Rule(r) = *step {
                    if !plan.reads.get(reads_from..).is_some_and(|seen| seen.contains(&r)) {
                        plan.reads.push(r);
                    }
                }
            }
            let reads = plan.reads.get(reads_from..).unwrap_or_default();
            let d = reads.iter().filter_map(|&r| depth.get(r as usize)).max().copied().unwrap_or(0) + 1;
            if let Some(slot) = depth.get_mut(meta.rule as usize) {
                *slot = d;
            }
            deepest = deepest.max(d);
            if let Some(place) = plan.places.get_mut(meta.rule as usize) {
                place.meta = index as u32;
            }
            let deciders_from = plan.deciders.len();
            let all = match rules.get(meta.rule as usize).and_then(|r| r.expr) {
                Some(expr) => plan.add_deciders(expr, lookup),
                None => true,
            };
            plan.shapes.push(MetaShape {
                all,
                deciders: (deciders_from as u32, plan.deciders.len() as u32),
                reads: (reads_from as u32, plan.reads.len() as u32),
            });
        }
        if deepest > DEMAND_DEPTH {
            plan.places.iter_mut().for_each(|p| p.on_demand = false);
        }
        plan.stack = metas.iter().map(|m| m.steps.len()).max().unwrap_or(0) + 1;
        plan
    }

    /// Adds the deciders of `expr`: whether it is a `&&` chain (else a `||` chain, or neither and none added).
    fn add_deciders(&mut self, expr: &MetaExpr, lookup: &dyn Fn(&str) -> Option<u32>) -> bool {
        // `!(a || b)` is `!a && !b`, `!(a && b)` is `!a || !b`.
        let (expr, negated) = match expr {
            MetaExpr::Not(inner) if matches!(**inner, MetaExpr::Binary(MetaOp::And | MetaOp::Or, ..)) => (&**inner, true),
            e => (e, false),
        };
        let MetaExpr::Binary(op @ (MetaOp::And | MetaOp::Or), ..) = expr else { return true };
        let mut operands = Vec::new();
        chain_operands(expr, *op, &mut operands, 0);
        for operand in operands {
            let (rule, flip) = match operand {
                MetaExpr::Rule(name) => (name, false),
                MetaExpr::Not(inner) => match &**inner {
                    MetaExpr::Rule(name) => (name, true),
                    _ => continue,
                },
                _ => continue,
            };
            if let Some(rule) = lookup(rule) {
                self.deciders.push(Decider { rule, negated: flip != negated });
            }
        }
        (*op == MetaOp::And) != negated
    }

    /// Whether `rule` runs only when a scan still needs it.
    pub(crate) fn on_demand(&self, rule: u32) -> bool {
        self.places.get(rule as usize).is_some_and(|p| p.on_demand)
    }
}

/// The operands of a chain of `op` at the top of `expr`, left to right.
fn chain_operands<'e>(expr: &'e MetaExpr, op: MetaOp, out: &mut Vec<&'e MetaExpr>, depth: usize) {
    match expr {
        MetaExpr::Binary(o, a, b) if *o == op && depth < DEMAND_DEPTH => {
            chain_operands(a, op, out, depth + 1);
            chain_operands(b, op, out, depth + 1);
        }
        e => out.push(e),
    }
}

/// A scan's state of its rules on demand: which are deferred, and the values its
/// decisions found (each stamped with what the scan knew then).
pub(crate) struct DemandScratch {
    /// The stamp of what the scan knows now: it moves with each stage and each
    /// deferred rule that runs.
    epoch: u32,
    /// The first stamp of this scan: a known value stamped since stays true.
    scan_epoch: u32,
    /// The first stamp of the running stage: an unknown value stamped since stays
    /// unknown until a rule it reads runs (which clears its stamp).
    stage_epoch: u32,
    /// The stage running now: rules of later stages are unknown.
    stage: u8,
    /// By rule: `scan_epoch` while deferred (or skipped), so its count is not its value.
    unsettled: Vec<u32>,
    /// By meta: the stamp of `values`.
    value_epoch: Vec<u32>,
    values: Vec<Option<bool>>,
    /// By rule: the stamp of `needed`.
    needed_epoch: Vec<u32>,
    needed: Vec<bool>,
    stack: Vec<f64>,
}

/// One decision: the plan and the counts so far.
struct Decision<'a> {
    plan: &'a DemandPlan,
    metas: &'a [MetaProgram],
    readers: &'a MetaReaders,
    counts: &'a [u32],
    s: &'a mut DemandScratch,
}

impl DemandScratch {
    /// Scratch for `plan` over `rules` rules and `metas` metas.
    pub(crate) fn new(plan: &DemandPlan, rules: usize, metas: usize) -> DemandScratch {
        DemandScratch {
            epoch: 0,
            scan_epoch: 0,
            stage_epoch: 0,
            stage: 0,
            unsettled: alloc::vec![0; rules],
            value_epoch: alloc::vec![0; metas],
            values: alloc::vec![None; metas],
            needed_epoch: alloc::vec![0; rules],
            needed: alloc::vec![false; rules],
            stack: Vec::with_capacity(plan.stack),
        }
    }

    /// Starts a scan: every rule unknown until its stage runs.
    pub(crate) fn begin_scan(&mut self) {
        // Stamps grow by one a stage and a deferred rule run: restart well before wrapping.
        if self.epoch > u32::MAX / 2 {
            self.epoch = 0;
            for stamps in [&mut self.unsettled, &mut self.value_epoch, &mut self.needed_epoch] {
                stamps.fill(0);
            }
        }
        self.epoch += 1;
        self.scan_epoch = self.epoch;
        self.stage = 0;
    }

    /// Starts the stage of `rule_type`: its rules are known once run, the later ones not yet.
    pub(crate) fn begin_stage(&mut self, rule_type: RuleType) {
        self.stage = STAGES.iter().position(|&t| t == rule_type).unwrap_or(0) as u8;
        self.epoch += 1;
        self.stage_epoch = self.epoch;
    }

    /// `rule` is deferred: its count is not its value until it runs.
    pub(crate) fn defer(&mut self, rule: u32) {
        if let Some(u) = self.unsettled.get_mut(rule as usize) {
            *u = self.scan_epoch;
        }
    }

    /// Whether `rule`, deferred, must run: some meta reading it is still undecided and
    /// needed. A rule that must run counts as known from here on (it runs next).
    pub(crate) fn take(&mut self, rules: &RuleSet, counts: &[u32], rule: u32) -> bool {
        let mut decision = Decision { plan: &rules.demand, metas: &rules.metas, readers: &rules.meta_readers, counts, s: self };
        let needed = decision.needed(rule);
        if needed {
            if let Some(u) = decision.s.unsettled.get_mut(rule as usize) {
                *u = 0;
            }
            // The metas that read it may now be known, and what is needed may change.
            decision.forget_unknown_readers(rule);
            decision.s.epoch += 1;
        }
        needed
    }
}

impl Decision<'_> {
    /// Whether a root reads `rule` through metas whose values are still unknown.
    fn needed(&mut self, rule: u32) -> bool {
        let r = rule as usize;
        let (Some(&stamp), Some(&was)) = (self.s.needed_epoch.get(r), self.s.needed.get(r)) else { return true };
        // Not needed stays so: the values that decided it are known for good.
        if stamp == self.s.epoch || (stamp >= self.s.scan_epoch && !was) {
            return was;
        }
        let (readers, metas, plan) = (self.readers, self.metas, self.plan);
        let needed = readers.of(rule).iter().any(|&m| {
            let Some(meta) = metas.get(m as usize) else { return false };
            self.meta_value(m).is_none() && (plan.places.get(meta.rule as usize).is_none_or(|p| p.root) || self.needed(meta.rule))
        });
        if let (Some(stamp), Some(was)) = (self.s.needed_epoch.get_mut(r), self.s.needed.get_mut(r)) {
            (*stamp, *was) = (self.s.epoch, needed);
        }
        needed
    }

    /// Clears the unknown values of the metas reading `rule`, and of their readers.
    fn forget_unknown_readers(&mut self, rule: u32) {
        let (readers, metas) = (self.readers, self.metas);
        for &m in readers.of(rule) {
            let i = m as usize;
            let (Some(stamp), Some(None)) = (self.s.value_epoch.get_mut(i), self.s.values.get(i)) else { continue };
            if *stamp >= self.s.stage_epoch {
                *stamp = 0;
                if let Some(meta) = metas.get(i) {
                    self.forget_unknown_readers(meta.rule);
                }
            }
        }
    }

    /// Whether `rule` hit, if known yet.
    fn value(&mut self, rule: u32) -> Option<bool> {
        let place = *self.plan.places.get(rule as usize)?;
        if place.meta != NO_META {
            return self.meta_value(place.meta);
        }
        let known = place.stage <= self.s.stage && self.s.unsettled.get(rule as usize) != Some(&self.s.scan_epoch);
        known.then(|| self.counts.get(rule as usize).is_some_and(|&c| c != 0))
    }

    /// Whether meta `m` hits, if known yet: by a decider, else by every rule it reads.
    fn meta_value(&mut self, m: u32) -> Option<bool> {
        let i = m as usize;
        let (Some(&stamp), Some(&value)) = (self.s.value_epoch.get(i), self.s.values.get(i)) else { return None };
        let current = if value.is_some() { self.s.scan_epoch } else { self.s.stage_epoch };
        if stamp >= current {
            return value;
        }
        let plan = self.plan;
        let shape = plan.shapes.get(i).copied().unwrap_or_default();
        let deciders = plan.deciders.get(shape.deciders.0 as usize..shape.deciders.1 as usize).unwrap_or_default();
        let decided = deciders.iter().find_map(|d| {
            let hit = self.value(d.rule)? != d.negated;
            // A false operand of `&&`, a true one of `||`.
            (hit != shape.all).then_some(!shape.all)
        });
        let reads = plan.reads.get(shape.reads.0 as usize..shape.reads.1 as usize).unwrap_or_default();
        let value = match decided {
            Some(v) => Some(v),
            None if reads.iter().all(|&r| self.value(r).is_some()) => Some(self.exact(i)),
            None => None,
        };
        if let (Some(stamp), Some(slot)) = (self.s.value_epoch.get_mut(i), self.s.values.get_mut(i)) {
            (*stamp, *slot) = (self.s.epoch, value);
        }
        value
    }

    /// Whether meta `m` hits, every rule it reads being known (the metas among them found).
    fn exact(&mut self, m: usize) -> bool {
        let Some(meta) = self.metas.get(m) else { return false };
        let (plan, counts, values) = (self.plan, self.counts, &self.s.values);
        let count = |rule: u32| match plan.places.get(rule as usize) {
            Some(p) if p.meta != NO_META => u32::from(values.get(p.meta as usize).copied().flatten() == Some(true)),
            _ => counts.get(rule as usize).copied().unwrap_or(0),
        };
        eval_meta(&meta.steps, count, &mut self.s.stack) != 0.0
    }
}

#[cfg(test)]
mod tests {
    use alloc::format;
    use alloc::string::{String, ToString};
    use alloc::vec::Vec;

    use super::*;
    use crate::rules::cf::parse_str;
    use crate::rules::compile::tests::{meta_value, random_meta};
    use crate::rules::Xorshift;

    /// `expr` as a rule file writes it, every operation in parentheses, `Z` read as `z`.
    fn cf_text(expr: &MetaExpr, z: &str) -> String {
        match expr {
            MetaExpr::Rule(name) if name == "Z" => z.to_string(),
            MetaExpr::Rule(name) => name.clone(),
            MetaExpr::Number(n) => format!("{n}"),
            MetaExpr::Not(e) => format!("!({})", cf_text(e, z)),
            MetaExpr::Neg(e) => format!("-({})", cf_text(e, z)),
            MetaExpr::Binary(op, a, b) => {
                let op = match op {
                    MetaOp::And => "&&",
                    MetaOp::Or => "||",
                    MetaOp::Add => "+",
                    MetaOp::Sub => "-",
                    MetaOp::Mul => "*",
                    MetaOp::Div => "/",
                    MetaOp::Gt => ">",
                    MetaOp::Ge => ">=",
                    MetaOp::Lt => "<",
                    MetaOp::Le => "<=",
                    MetaOp::Eq => "==",
                    MetaOp::Ne => "!=",
                };
                format!("({} {op} {})", cf_text(a, z), cf_text(b, z))
            }
        }
    }

    #[test]
    fn decided_metas_hold_whatever_the_unknown_rules_generated() {
        // M1 reads A, B, C; M2 reads them and M1. Some of A..C are unknown (deferred):
        // a value the decision gives must be the meta's for every count they could have.
        let mut rng = Xorshift(0x2545_f491);
        let mut decided_with_unknowns = 0;
        for case in 0..200 {
            let (e1, e2) = (random_meta(&mut rng, 1 + case % 4), random_meta(&mut rng, 1 + case % 3));
            let cf = format!(
                "body A /a/\nbody B /b/\nbody C /c/\nmeta M1 {}\nmeta M2 {}\nscore M1 1\nscore M2 1\n",
                cf_text(&e1, "0"),
                cf_text(&e2, "M1")
            );
            let set = RuleSet::compile(&parse_str("t.cf", &cf).expect("parses")).expect("compiles");
            let ids: Vec<u32> = ["A", "B", "C", "M1", "M2"].iter().map(|n| set.rule_id(n).expect("rule")).collect();
            let unknown: Vec<bool> = (0..3).map(|_| rng.below(2) == 0).collect();
            let mut counts = alloc::vec![0u32; set.rule_count()];
            let mut s = DemandScratch::new(&set.demand, set.rule_count(), set.metas.len());
            s.begin_scan();
            s.begin_stage(RuleType::RawBody);
            for (i, &id) in ids.iter().take(3).enumerate() {
                counts[id as usize] = rng.below(3) as u32;
                if unknown[i] {
                    s.defer(id);
                }
            }
            let mut decision = Decision { plan: &set.demand, metas: &set.metas, readers: &set.meta_readers, counts: &counts, s: &mut s };
            let got: Vec<Option<bool>> = ids[3..].iter().map(|&id| decision.value(id)).collect();
            if unknown.iter().any(|&u| u) && got.iter().any(Option::is_some) {
                decided_with_unknowns += 1;
            }
            // Every count 0..2 of each unknown rule.
            for completion in 0..27usize {
                let mut c = [0.0f64; 3];
                for (i, slot) in c.iter_mut().enumerate() {
                    let own = f64::from(counts[ids[i] as usize]);
                    *slot = if unknown[i] { ((completion / 3usize.pow(i as u32)) % 3) as f64 } else { own };
                }
                let m1 = meta_value(&e1, &|n: &str| ["A", "B", "C"].iter().position(|x| *x == n).map_or(0.0, |i| c[i])) != 0.0;
                let m2 = meta_value(&e2, &|n: &str| match n {
                    "Z" => f64::from(u8::from(m1)),
                    _ => ["A", "B", "C"].iter().position(|x| *x == n).map_or(0.0, |i| c[i]),
                }) != 0.0;
                for (value, exact) in got.iter().zip([m1, m2]) {
                    assert!(value.is_none_or(|v| v == exact), "{cf}unknown {unknown:?} counts {c:?}: decided {got:?}, is {m1} {m2}");
                }
            }
        }
        assert!(decided_with_unknowns > 50, "only {decided_with_unknowns} cases decided with unknown rules");
    }
}
