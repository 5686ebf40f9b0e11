//! SpamAssassin's HTMLEval (and `check_uri_truncated` of URIEval): tests on the
//! results `HTML.pm` gives for each HTML part (`html_all`), read from the
//! statistics the parser recorded ([`crate::msg::HtmlPart`]).

use alloc::boxed::Box;
use alloc::string::String;
use alloc::vec::Vec;

use regex_automata::dfa::{dense, Automaton, StartKind};
use regex_automata::nfa::thompson;
use regex_automata::util::syntax;
use regex_automata::{Input, MatchKind};

use super::{bad, number, Comparison};
use crate::msg::{tag_hash, HtmlStats, Message};
use crate::rules::eval::{Args, EvalError};
use crate::rules::perl;

/// Largest DFA an `html_text_match` pattern may compile to.
const PATTERN_LIMIT: usize = 1 << 20;

/// SpamAssassin's `MAX_URI_LENGTH`.
const MAX_URI: usize = 8192;

/// Stock patterns with lookaround, and equivalents without it.
const REWRITES: &[(&str, &str)] = &[(r"<!(?!-).{0,6}>", r"<!(?:>|[^\-\n].{0,5}>)")];

/// A value of an HTML part's results, by SpamAssassin's key.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum HtmlKey {
    /// `html`: set for every HTML part.
    Html,
    /// `length`.
    Length,
    /// `html_length`.
    HtmlLength,
    /// `non_space_len`.
    NonSpaceLen,
    /// `image_area`.
    ImageArea,
    /// `min_size`.
    MinSize,
    /// `max_size`.
    MaxSize,
    /// `closed_extra_ratio`.
    ClosedExtraRatio,
    /// `bad_tag_ratio`.
    BadTagRatio,
    /// `non_element_ratio`.
    NonElementRatio,
    /// `obfuscation_ratio`.
    ObfuscationRatio,
    /// `font_low_contrast`.
    FontLowContrast,
    /// `font_invalid_color`.
    FontInvalidColor,
    /// `font_face_bad`.
    FontFaceBad,
    /// `form_action_mailto`.
    FormActionMailto,
    /// `embeds`.
    Embeds,
    /// `uri_truncated`.
    UriTruncated,
}

impl HtmlKey {
    fn parse(function: &str, key: &str) -> Result<HtmlKey, EvalError> {
        Ok(match key {
            "html" => HtmlKey::Html,
            "length" => HtmlKey::Length,
            "html_length" => HtmlKey::HtmlLength,
            "non_space_len" => HtmlKey::NonSpaceLen,
            "image_area" => HtmlKey::ImageArea,
            "min_size" => HtmlKey::MinSize,
            "max_size" => HtmlKey::MaxSize,
            "closed_extra_ratio" => HtmlKey::ClosedExtraRatio,
            "bad_tag_ratio" => HtmlKey::BadTagRatio,
            "non_element_ratio" => HtmlKey::NonElementRatio,
            "obfuscation_ratio" => HtmlKey::ObfuscationRatio,
            "font_low_contrast" => HtmlKey::FontLowContrast,
            "font_invalid_color" => HtmlKey::FontInvalidColor,
            "font_face_bad" => HtmlKey::FontFaceBad,
            "form_action_mailto" => HtmlKey::FormActionMailto,
            "embeds" => HtmlKey::Embeds,
            "uri_truncated" => HtmlKey::UriTruncated,
            _ => return Err(bad(function, "HTML result not recorded by sift")),
        })
    }

    /// The value, `None` where SpamAssassin leaves it undefined.
    fn value(self, s: &HtmlStats) -> Option<f64> {
        let flag = |b: bool| b.then_some(1.0);
        match self {
            HtmlKey::Html => Some(1.0),
            HtmlKey::Length => Some(s.length as f64),
            HtmlKey::HtmlLength => Some(s.html_length as f64),
            HtmlKey::NonSpaceLen => Some(s.non_space_len as f64),
            HtmlKey::ImageArea => Some(s.image_area),
            HtmlKey::MinSize => Some(s.min_size as f64),
            HtmlKey::MaxSize => Some(s.max_size as f64),
            HtmlKey::ClosedExtraRatio => s.closed_extra_ratio(),
            HtmlKey::BadTagRatio => s.bad_tag_ratio(),
            HtmlKey::NonElementRatio => s.non_element_ratio(),
            HtmlKey::ObfuscationRatio => s.obfuscation_ratio(),
            HtmlKey::FontLowContrast => flag(s.font_low_contrast),
            HtmlKey::FontInvalidColor => flag(s.font_invalid_color),
            HtmlKey::FontFaceBad => flag(s.font_face_bad),
            HtmlKey::FormActionMailto => flag(s.form_action_mailto),
            HtmlKey::Embeds => flag(s.embeds),
            HtmlKey::UriTruncated => flag(s.uri_truncated),
        }
    }
}

/// A text list of an HTML part.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum HtmlList {
    /// `comment`: comments with their delimiters.
    Comment,
    /// `anchor`: anchor texts.
    Anchor,
    /// `title`: titles.
    Title,
}

/// A compiled `html_text_match` pattern.
#[derive(Debug, Clone)]
pub struct TextPattern(Box<dense::DFA<Vec<u32>>>);

impl TextPattern {
    fn compile(function: &str, perl_re: &str) -> Result<TextPattern, EvalError> {
        let body = REWRITES.iter().find(|(from, _)| *from == perl_re).map_or(perl_re, |(_, to)| to);
        let translated = perl::translate_body(body, "").map_err(|e| bad(function, &alloc::format!("regex: {e}")))?;
        let nfa = thompson::Compiler::new()
            .syntax(syntax::Config::new().unicode(false).utf8(false))
            .configure(thompson::Config::new().utf8(false))
            .build(&translated)
            .map_err(|e| bad(function, &alloc::format!("regex: {e}")))?;
        let dfa = dense::Builder::new()
            .configure(
                dense::Config::new()
                    .start_kind(StartKind::Unanchored)
                    .match_kind(MatchKind::LeftmostFirst)
                    .dfa_size_limit(Some(PATTERN_LIMIT))
                    .determinize_size_limit(Some(PATTERN_LIMIT)),
            )
            .build_from_nfa(&nfa)
            .map_err(|e| bad(function, &alloc::format!("regex: {e}")))?;
        Ok(TextPattern(Box::new(dfa)))
    }

    fn is_match(&self, text: &[u8]) -> bool {
        matches!(self.0.try_search_fwd(&Input::new(text).earliest(true)), Ok(Some(_)))
    }
}

/// One HTMLEval test with its arguments.
#[derive(Debug, Clone)]
enum Test {
    /// `html_test(key)`: the value is true in some part.
    Flag(HtmlKey),
    /// `html_range(key, min, max)`: `min < value <= max` in some part (`max` may be `inf`).
    Range { key: HtmlKey, min: f64, max: f64 },
    /// `html_eval(key, expr)`.
    Eval { key: HtmlKey, cmp: Comparison },
    /// `html_tag_exists(tag)`.
    TagExists(u64),
    /// `html_tag_balance(tag, expr)` on the tag's open count.
    TagBalance { tag: u64, cmp: Comparison },
    /// `html_image_only(min, max)`: images and `min < length <= max`.
    ImageOnly { min: f64, max: f64 },
    /// `html_image_ratio(min, max)`: `min < non_space_len / image_area <= max`.
    ImageRatio { min: f64, max: f64 },
    /// `html_text_match(list, regex)`.
    TextMatch { list: HtmlList, pattern: TextPattern },
    /// `html_title_subject_ratio(ratio)`: a title longer than `ratio` times the Subject.
    TitleSubjectRatio(f64),
    /// `html_charset_faraway()`: never with `ok_locales all`.
    CharsetFaraway,
    /// `check_iframe_src()`.
    IframeSrc,
    /// `check_uri_truncated()`: a URI longer than SpamAssassin keeps.
    UriTruncated,
}

/// One such test with its arguments, ready to run.
#[derive(Debug, Clone)]
pub struct HtmlEval(Test);

impl HtmlEval {
    /// The test for `function(args)`; `None` when `function` is not one of these.
    pub fn parse(function: &str, args: &Args) -> Option<Result<HtmlEval, EvalError>> {
        let arg = |i: usize| args.get(i).map(String::as_str).ok_or_else(|| bad(function, "missing argument"));
        let t = || -> Result<Test, EvalError> {
            Ok(match function {
                "html_test" => Test::Flag(HtmlKey::parse(function, arg(0)?)?),
                "html_range" => {
                    let key = HtmlKey::parse(function, arg(0)?)?;
                    let min = number(function, args, 1)?;
                    let max = match args.get(2).map(String::as_str) {
                        None | Some("inf") => f64::INFINITY,
                        Some(_) => number(function, args, 2)?,
                    };
                    Test::Range { key, min, max }
                }
                "html_eval" => Test::Eval { key: HtmlKey::parse(function, arg(0)?)?, cmp: Comparison::parse(function, arg(1)?)? },
                "html_tag_exists" => Test::TagExists(tag_hash(arg(0)?.as_bytes())),
                "html_tag_balance" => {
                    let tag = arg(0)?;
                    if tag.is_empty() || !tag.bytes().all(|b| b.is_ascii_alphanumeric()) {
                        return Err(bad(function, "tag must be alphanumeric"));
                    }
                    Test::TagBalance { tag: tag_hash(tag.as_bytes()), cmp: Comparison::parse(function, arg(1)?)? }
                }
                "html_image_only" => Test::ImageOnly { min: number(function, args, 0)?, max: number(function, args, 1)? },
                "html_image_ratio" => Test::ImageRatio { min: number(function, args, 0)?, max: number(function, args, 1)? },
                "html_text_match" => {
                    let list = match arg(0)? {
                        "comment" => HtmlList::Comment,
                        "anchor" => HtmlList::Anchor,
                        "title" => HtmlList::Title,
                        _ => return Err(bad(function, "HTML text list not recorded by sift")),
                    };
                    Test::TextMatch { list, pattern: TextPattern::compile(function, arg(1)?)? }
                }
                "html_title_subject_ratio" => Test::TitleSubjectRatio(number(function, args, 0)?),
                "html_charset_faraway" => Test::CharsetFaraway,
                "check_iframe_src" => Test::IframeSrc,
                "check_uri_truncated" => Test::UriTruncated,
                _ => return Err(bad(function, "")),
            })
        };
        match function {
            "html_test" | "html_range" | "html_eval" | "html_tag_exists" | "html_tag_balance" | "html_image_only"
            | "html_image_ratio" | "html_text_match" | "html_title_subject_ratio" | "html_charset_faraway"
            | "check_iframe_src" | "check_uri_truncated" => Some(t().map(HtmlEval)),
            _ => None,
        }
    }

    /// Whether the test hits on `m`.
    pub fn run(&self, m: &Message<'_>) -> bool {
        match &self.0 {
            Test::Flag(key) => m.html_parts().any(|p| key.value(p.stats()).is_some_and(|v| v != 0.0)),
            Test::Range { key, min, max } => m.html_parts().any(|p| match key.value(p.stats()) {
                Some(v) => v > *min && v <= *max,
                None => false,
            }),
            Test::Eval { key, cmp } => m.html_parts().any(|p| key.value(p.stats()).is_some_and(|v| cmp.holds(v))),
            Test::TagExists(tag) => m.html_parts().any(|p| p.inside(*tag).is_some()),
            Test::TagBalance { tag, cmp } => m.html_parts().any(|p| p.inside(*tag).is_some_and(|n| cmp.holds(n as f64))),
            Test::ImageOnly { min, max } => m.html_parts().any(|p| {
                let len = p.stats().length as f64;
                p.inside(tag_hash(b"img")).is_some() && len > *min && len <= *max
            }),
            Test::ImageRatio { min, max } => m.html_parts().any(|p| {
                let s = p.stats();
                if s.image_area <= 0.0 {
                    return false;
                }
                let ratio = s.non_space_len as f64 / s.image_area;
                ratio > *min && ratio <= *max
            }),
            Test::TextMatch { list, pattern } => m.html_parts().any(|p| match list {
                HtmlList::Comment => p.comments().any(|t| pattern.is_match(t)),
                HtmlList::Anchor => p.anchors().any(|t| pattern.is_match(t)),
                HtmlList::Title => p.titles().any(|t| pattern.is_match(t)),
            }),
            Test::TitleSubjectRatio(ratio) => title_subject_ratio(m, *ratio),
            Test::CharsetFaraway => false,
            Test::IframeSrc => m.html_parts().any(|p| p.stats().iframe_src),
            Test::UriTruncated => {
                m.html_parts().any(|p| p.stats().uri_truncated)
                    || (m.uri_count() > 0 && m.uris().split(|&b| b == b'\n').any(|u| u.len() >= MAX_URI))
            }
        }
    }
}

/// Characters of UTF-8 text.
fn chars(s: &[u8]) -> usize {
    s.iter().filter(|&&b| (b as i8) >= -0x40).count()
}

/// `html_title_subject_ratio`: some part's longest title is more than `ratio` times
/// as long as the Subject.
fn title_subject_ratio(m: &Message<'_>, ratio: f64) -> bool {
    // `$pms->get('Subject')`: every Subject field, each with its line end.
    let subject: usize = m.headers_named(b"subject").map(|h| chars(h.decoded) + 1).sum();
    if subject == 0 {
        return false;
    }
    m.html_parts().any(|p| {
        let longest = p.titles().filter(|t| !t.is_empty() && *t != b"0").map(|t| chars(t) as f64 / subject as f64).fold(0.0, f64::max);
        longest > ratio
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::msg::{Limits, MessageBuffers};

    fn html_message(html: &str) -> Vec<u8> {
        alloc::format!("Subject: a subject\nContent-Type: text/html\n\n{html}").into_bytes()
    }

    fn test(function: &str, args: &[&str]) -> HtmlEval {
        let args: Vec<String> = args.iter().map(|s| String::from(*s)).collect();
        match HtmlEval::parse(function, &args) {
            Some(Ok(t)) => t,
            other => panic!("{function}: {other:?}"),
        }
    }

    /// (test, arguments, HTML, SpamAssassin 4.0.1's verdict)
    #[test]
    fn html_eval_table() {
        let cases: &[(&str, &[&str], &str, bool)] = &[
            ("html_test", &["html"], "<p>x</p>", true),
            ("html_test", &["font_face_bad"], "<font face=\"x%\">t</font>", true),
            ("html_test", &["font_face_bad"], "<font face=\"Arial, Helvetica\">t</font>", false),
            ("html_test", &["font_low_contrast"], "<font color=white>hidden</font>", true),
            ("html_test", &["font_low_contrast"], "<font color=white> </font>", false),
            ("html_test", &["font_invalid_color"], "<font color=\"#zzqq\">t</font>", true),
            ("html_test", &["font_invalid_color"], "<font color=\"#00f\">t</font>", false),
            ("html_test", &["font_invalid_color"], "<font color=\"nocolor\">t</font>", true),
            ("html_test", &["form_action_mailto"], "<form action=\"MAILTO:a@b\">", true),
            ("html_test", &["embeds"], "<embed src=x>", true),
            ("html_test", &["embeds"], "<p>x</p>", false),
            ("html_range", &["max_size", "5", "6"], "<font size=6>x</font>", true),
            ("html_range", &["max_size", "6", "inf"], "<font size=6>x</font>", false),
            ("html_range", &["max_size", "6", "inf"], "<font size=+4>x</font>", true),
            ("html_range", &["max_size", "5", "6"], "<big><big><big>x</big></big></big>", false),
            ("html_range", &["closed_extra_ratio", "0.09", "inf"], "</p></p>x<p>", true),
            ("html_range", &["closed_extra_ratio", "0.09", "inf"], "<p>x</p>", false),
            ("html_range", &["obfuscation_ratio", ".5", ".6"], "<p>a<b>b</b>c</p>", false),
            ("html_range", &["obfuscation_ratio", ".3", ".4"], "<p>a<b>b</b>c</p>", false),
            ("html_range", &["obfuscation_ratio", ".4", ".5"], "<p>a<b>b</b>c</p>", true),
            ("html_range", &["bad_tag_ratio", "0.40", "0.50"], "<p><foo>x</foo></p>", true),
            ("html_range", &["bad_tag_ratio", "0.90", "1.00"], "<foo>x</foo>", false),
            ("html_range", &["non_element_ratio", "0.40", "0.50"], "<p><foo>x</foo></p>", true),
            ("html_range", &["length", "0", "1024"], "<p>x</p>", true),
            ("html_eval", &["length", "< 384"], "<p>x</p>", true),
            ("html_eval", &["length", "< 5"], "<p>x</p>", false),
            ("html_tag_exists", &["center"], "<CENTER>x", true),
            ("html_tag_exists", &["head"], "<p>x", false),
            ("html_tag_balance", &["body", "!= 0"], "<body>x", true),
            ("html_tag_balance", &["body", "!= 0"], "<body>x</body>", false),
            ("html_tag_balance", &["head", "!= 0"], "</head>x", false),
            ("html_image_only", &["0000", "0400"], "<img src=x.gif>", true),
            ("html_image_only", &["0000", "0400"], "<p>no image</p>", false),
            ("html_image_ratio", &["0.000", "0.002"], "<img width=100 height=100>x", true),
            ("html_image_ratio", &["0.000", "0.002"], "<img width=10 height=10>x", false),
            ("html_text_match", &["comment", "<!-- saved from url=\\(\\d{4}\\)"], "<!-- saved from url=(0022)http://x -->", true),
            ("html_text_match", &["comment", "<!(?!-).{0,6}>"], "<!x>a", true),
            ("html_text_match", &["comment", "<!(?!-).{0,6}>"], "<!-- x -->a", false),
            ("html_text_match", &["comment", "<!.*?>"], "<!-- x -->a", true),
            ("html_text_match", &["anchor", "<img>"], "<a href=x><img src=y></a>", true),
            ("html_text_match", &["anchor", "<img>"], "<a href=x>t</a><img src=y>", false),
            ("html_text_match", &["title", ".{12}"], "<title>a long title here</title>", true),
            ("html_text_match", &["title", ".{12}"], "<title>short</title>", false),
            ("html_title_subject_ratio", &["3.5"], "<title>a title that is much longer than the subject</title>", true),
            ("html_title_subject_ratio", &["3.5"], "<title>a title</title>", false),
            ("check_iframe_src", &[], "<iframe src=\"http://x/\"></iframe>", true),
            ("check_iframe_src", &[], "<iframe src=\" \"></iframe>", false),
        ];
        let mut bufs = MessageBuffers::new(Limits::default());
        for (function, args, html, want) in cases {
            let raw = html_message(html);
            let m = Message::parse(&raw, &mut bufs);
            assert_eq!(test(function, args).run(&m), *want, "{function}{args:?} on {html}");
        }
    }

    #[test]
    fn plain_text_has_no_html_results() {
        let mut bufs = MessageBuffers::new(Limits::default());
        let raw = b"Subject: s\n\n<p>not html</p>\n";
        let m = Message::parse(raw, &mut bufs);
        assert!(!test("html_test", &["html"]).run(&m));
        assert!(!test("html_eval", &["length", "< 384"]).run(&m));
    }

    #[test]
    fn argument_errors() {
        let args = |v: &[&str]| v.iter().map(|s| String::from(*s)).collect::<Vec<_>>();
        for (f, a) in [
            ("html_test", args(&["backhair_count"])),
            ("html_range", args(&["length"])),
            ("html_eval", args(&["length", "512"])),
            ("html_tag_balance", args(&["a-b", "!= 0"])),
            ("html_text_match", args(&["script", "x"])),
            ("html_text_match", args(&["comment", "(?<=x)y"])),
        ] {
            assert!(matches!(HtmlEval::parse(f, &a), Some(Err(_))), "{f} {a:?}");
        }
        assert!(HtmlEval::parse("check_for_mime", &args(&[])).is_none());
    }
}
