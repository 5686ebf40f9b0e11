//! Eval tests on the body, MIME structure, HTML and URIs (SpamAssassin's BodyEval,
//! MIMEEval, HTMLEval, ImageInfo, URIEval and HTTPSMismatch).
//!
//! [`html`] reads the statistics the parser gathered on each HTML part, [`mime`] the
//! MIME tree and its raw part bodies, [`text`] the rendered body lines, [`image`]
//! the image attachments. Facts several tests share (the MIME summary, the image
//! sizes) are computed once per message into [`BodyScratch`], in fixed-size fields.

use alloc::string::String;

use super::{Args, EvalContext, EvalError};
use crate::rules::{Config, EvalOn};

pub mod html;
pub mod image;
pub mod mime;
pub mod text;

/// A native body eval test.
#[derive(Debug, Clone)]
pub enum BodyEval {
    /// HTMLEval, URIEval and HTTPSMismatch tests.
    Html(html::HtmlEval),
    /// MIMEEval tests on the MIME tree and parse flags.
    Mime(mime::MimeEval),
    /// BodyEval tests and others on the rendered text.
    Text(text::TextEval),
    /// ImageInfo tests.
    Image(image::ImageEval),
}

impl BodyEval {
    /// The test for `function(args)`; `None` when the function is not a body test.
    pub fn parse(on: EvalOn, function: &str, args: &Args, data: &BodyData) -> Option<Result<BodyEval, EvalError>> {
        let _ = data;
        if let Some(t) = html::HtmlEval::parse(function, args) {
            return Some(t.map(BodyEval::Html));
        }
        if let Some(t) = mime::MimeEval::parse(function, args) {
            return Some(t.map(BodyEval::Mime));
        }
        if let Some(t) = text::TextEval::parse(function, args) {
            return Some(t.map(BodyEval::Text));
        }
        if let Some(t) = image::ImageEval::parse(on, function, args) {
            return Some(t.map(BodyEval::Image));
        }
        None
    }

    /// Hits of this test on the message in `cx`.
    pub fn run(&self, cx: &EvalContext<'_, '_>, scratch: &mut BodyScratch) -> u32 {
        scratch.for_message(cx.message.serial());
        let hit = match self {
            BodyEval::Html(t) => t.run(cx.message),
            BodyEval::Mime(t) => t.run(cx.message, scratch),
            BodyEval::Text(t) => t.run(cx.message, scratch),
            BodyEval::Image(t) => t.run(cx.message, scratch),
        };
        u32::from(hit)
    }
}

/// What body tests read from the rule files.
///
/// `ok_locales` is left at SpamAssassin's default, `all`, so the "faraway charset"
/// tests never hit.
#[derive(Debug, Clone, Default)]
pub struct BodyData {}

impl BodyData {
    /// Prepares body-test data from `config`.
    pub fn new(config: &Config) -> BodyData {
        let _ = config;
        BodyData {}
    }
}

/// Body tests' per-worker buffers: facts shared by several tests, computed on first
/// use for each message. Fixed size; nothing here allocates.
#[derive(Debug, Default)]
pub struct BodyScratch {
    /// The message the cached facts belong to.
    serial: Option<u64>,
    pub(crate) mime: Option<mime::MimeFacts>,
    pub(crate) images: Option<image::ImageFacts>,
    pub(crate) text: text::TextCache,
}

impl BodyScratch {
    /// Forgets the facts of an earlier message.
    fn for_message(&mut self, serial: u64) {
        if self.serial != Some(serial) {
            self.serial = Some(serial);
            self.mime = None;
            self.images = None;
            self.text.clear();
        }
    }
}

/// An argument error for `function`.
pub(crate) fn bad(function: &str, why: &str) -> EvalError {
    EvalError::BadArguments { function: String::from(function), why: String::from(why) }
}

/// Argument `i` as Perl reads a number: leading white space, a decimal number, or
/// `inf`/`infinity` (any case).
pub(crate) fn number(function: &str, args: &Args, i: usize) -> Result<f64, EvalError> {
    let text = args.get(i).ok_or_else(|| bad(function, "missing argument"))?;
    perl_number(text).ok_or_else(|| bad(function, "argument is not a number"))
}

/// Optional argument `i` as a number; `None` when absent.
pub(crate) fn opt_number(function: &str, args: &Args, i: usize) -> Result<Option<f64>, EvalError> {
    if args.get(i).is_none() {
        return Ok(None);
    }
    number(function, args, i).map(Some)
}

/// The numeric value Perl gives `text`, if it starts with a number.
pub(crate) fn perl_number(text: &str) -> Option<f64> {
    let t = text.trim_start();
    let lower = t.trim_end().to_ascii_lowercase();
    match lower.trim_start_matches('+') {
        "inf" | "infinity" => return Some(f64::INFINITY),
        _ => {}
    }
    if lower == "-inf" || lower == "-infinity" {
        return Some(f64::NEG_INFINITY);
    }
    let b = t.as_bytes();
    let mut end = 0;
    if matches!(b.first(), Some(b'+' | b'-')) {
        end = 1;
    }
    let int = b.get(end..).unwrap_or(&[]).iter().take_while(|c| c.is_ascii_digit()).count();
    end += int;
    let mut frac = 0;
    if b.get(end) == Some(&b'.') {
        frac = b.get(end + 1..).unwrap_or(&[]).iter().take_while(|c| c.is_ascii_digit()).count();
        if int + frac > 0 {
            end += 1 + frac;
        }
    }
    if int + frac == 0 {
        return None;
    }
    if matches!(b.get(end), Some(b'e' | b'E')) {
        let mut e = end + 1;
        if matches!(b.get(e), Some(b'+' | b'-')) {
            e += 1;
        }
        let digits = b.get(e..).unwrap_or(&[]).iter().take_while(|c| c.is_ascii_digit()).count();
        if digits > 0 {
            end = e + digits;
        }
    }
    t.get(..end)?.parse::<f64>().ok()
}

/// A comparison written in a rule argument: `< 512`, `!= 0`, `>= 3`.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) struct Comparison {
    op: CmpOp,
    value: f64,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum CmpOp {
    Lt,
    Le,
    Gt,
    Ge,
    Eq,
    Ne,
}

impl Comparison {
    /// Parses `op number`, the only forms SpamAssassin's `[<>=!\-+ 0-9]+` expressions take in practice.
    pub fn parse(function: &str, expr: &str) -> Result<Comparison, EvalError> {
        let e = expr.trim();
        let (op, rest) = [("<=", CmpOp::Le), (">=", CmpOp::Ge), ("==", CmpOp::Eq), ("!=", CmpOp::Ne), ("<", CmpOp::Lt), (">", CmpOp::Gt)]
            .iter()
            .find_map(|(p, op)| e.strip_prefix(p).map(|r| (*op, r)))
            .ok_or_else(|| bad(function, "expression must be a comparison with a number"))?;
        let rest = rest.trim();
        let ok = !rest.is_empty()
            && rest.bytes().enumerate().all(|(i, c)| c.is_ascii_digit() || (i == 0 && (c == b'-' || c == b'+')));
        if !ok {
            return Err(bad(function, "expression must be a comparison with a number"));
        }
        let value = perl_number(rest).ok_or_else(|| bad(function, "expression must be a comparison with a number"))?;
        Ok(Comparison { op, value })
    }

    /// Whether `v` satisfies the comparison.
    pub fn holds(&self, v: f64) -> bool {
        match self.op {
            CmpOp::Lt => v < self.value,
            CmpOp::Le => v <= self.value,
            CmpOp::Gt => v > self.value,
            CmpOp::Ge => v >= self.value,
            CmpOp::Eq => v == self.value,
            CmpOp::Ne => v != self.value,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn perl_numbers_table() {
        let cases: &[(&str, Option<f64>)] = &[
            ("0400", Some(400.0)),
            (".05", Some(0.05)),
            ("1.0", Some(1.0)),
            ("inf", Some(f64::INFINITY)),
            (" 12", Some(12.0)),
            ("3x", Some(3.0)),
            ("-2", Some(-2.0)),
            ("1e3", Some(1000.0)),
            ("x", None),
            ("", None),
            (".", None),
        ];
        for (text, want) in cases {
            assert_eq!(perl_number(text), *want, "{text}");
        }
    }

    #[test]
    fn comparisons_table() {
        let cases: &[(&str, f64, bool)] = &[
            ("< 512", 511.0, true),
            ("< 512", 512.0, false),
            ("!= 0", 1.0, true),
            ("!= 0", 0.0, false),
            ("== 0", 0.0, true),
            (">= -1", -1.0, true),
            (">3", 3.0, false),
        ];
        for (expr, v, want) in cases {
            let c = Comparison::parse("f", expr);
            assert_eq!(c.map(|c| c.holds(*v)), Ok(*want), "{expr} {v}");
        }
        for bad_expr in ["512", "< x", "=< 3", "< 5 6", ""] {
            assert!(Comparison::parse("f", bad_expr).is_err(), "{bad_expr}");
        }
    }
}
