use super::*;
use crate::proto::VecWriter;
use crate::rules::RuleType;
use crate::scan::Hit;
use crate::score::Score;
use alloc::string::ToString;
use alloc::boxed::Box;
use alloc::vec;

#[derive(Clone)]
struct View {
    score: i32,
    hits: Vec<Hit<'static>>,
    subtests: Vec<&'static str>,
    /// The rendered body text; `None`: what the message at hand renders to.
    body: Option<&'static [u8]>,
}

impl VerdictView for View {
    fn score(&self) -> Score {
        Score(self.score)
    }
    fn required(&self) -> Score {
        Score(5000)
    }
    fn hits(&self) -> impl Iterator<Item = Hit<'_>> + '_ {
        self.hits.iter().copied()
    }
    fn subtests(&self) -> impl Iterator<Item = &str> + '_ {
        self.subtests.iter().copied()
    }
    fn body_text(&self) -> &[u8] {
        self.body.unwrap_or_default()
    }
}

impl View {
    /// This view, its body text rendered from `message` unless given.
    fn rendering(&self, message: &[u8]) -> View {
        let body = self.body.unwrap_or_else(|| Vec::leak(crate::msg::rendered_body(message)));
        View { body: Some(body), ..self.clone() }
    }
}

fn hit(name: &'static str, score: i32) -> Hit<'static> {
    Hit { name, score: Score(score), describe: "A test", rule_type: RuleType::Body, count: 1 }
}

fn spam() -> View {
    View { score: 7300, hits: vec![hit("ZETA", 1300), hit("ALPHA", 6000)], subtests: vec!["__B", "__A"], body: None }
}

fn ham() -> View {
    View { score: -500, hits: vec![], subtests: vec![], body: None }
}

fn env() -> Environment<'static> {
    let mut e = Environment::new("mx.example.org", "Mon, 01 Jan 2024 10:00:00 +0000");
    e.version = "0.1.0";
    e.boundary_seed = [1, 2];
    e
}

fn expand_with(template: &str, view: &View, message: &[u8]) -> String {
    let settings = RewriteSettings::stock();
    let env = env();
    let msg = Split::new(message);
    let view = &view.rendering(message);
    let ctx = Ctx { view, settings: &settings, env: &env, msg: &msg };
    let (mut out, mut text, mut preview) = (Vec::new(), Vec::new(), Vec::new());
    expand(template.as_bytes(), &ctx, &mut out, &mut text, &mut preview);
    String::from_utf8(out).unwrap()
}

#[test]
fn tags_table() {
    let msg = b"Subject: hi\nX-Thing: one\n two\nX-Thing: three\n\nHello there.\n";
    let cases: &[(&str, bool, &str)] = &[
        ("_YESNO_ _YESNOCAPS_", true, "Yes YES"),
        ("_YESNO_ _YESNOCAPS_", false, "No NO"),
        ("has_YESNO(, NOT)_ x_YESNO( possible,)_.", true, "has x possible."),
        ("has_YESNO(, NOT)_ x_YESNO( possible,)_.", false, "has NOT x."),
        ("_YESNO(Y)_", false, "No"),
        ("_SCORE_/_HITS_/_REQD_", true, "7.3/7.3/5.0"),
        ("_SCORE(00)_ _SCORE(  )_ _SCORE(x)_", true, "007.3   7.3 7.3"),
        ("_SCORE(0)_", false, "-0.5"),
        ("_STARS_|_STARS(+)_|_STARS(0)_", true, "*******|+++++++|*******"),
        ("[_STARS_]", false, "[]"),
        ("_TESTS_ _TESTS(; )_", true, "ALPHA,ZETA ALPHA; ZETA"),
        ("_TESTS_", false, "none"),
        ("_TESTSSCORES_", true, "ALPHA=6,ZETA=1.3"),
        ("_SUBTESTS_ _SUBTESTSCOLLAPSED_", true, "__A,__B __A,__B"),
        ("_SUBTESTS_", false, "none"),
        ("_VERSION_ (_SUBVERSION_) on _HOSTNAME_", true, "0.1.0 (sift) on mx.example.org"),
        ("_AUTOLEARN_ _BAYES_ _DATE_", true, "disabled 0.5 Mon, 01 Jan 2024 10:00:00 +0000"),
        ("_REMOTEHOSTNAME_ _REMOTEHOSTADDR_ [_LASTEXTERNALIP_]", true, "localhost 127.0.0.1 []"),
        ("_CONTACTADDRESS_", true, "the administrator of that system"),
        ("_HEADER(X-Thing)_|_HEADER(Nope)_", true, "one two\nthree|"),
        // Unknown tags, and those SpamAssassin refuses in templates, stay as written.
        ("_NOPE_ _ADDEDHEADER_ _lower_ _A_B", true, "_NOPE_ _ADDEDHEADER_ _lower_ _A_B"),
        // The regex backtracks to a shorter name when the long one is not closed.
        ("_SCORE_X", true, "7.3X"),
        ("__SCORE__", true, "_7.3_"),
        ("_YESNO(a)b", true, "_YESNO(a)b"),
        ("_YESNO(a)(b)_", true, "a)(b"),
        ("_REPORT_", true, "\n*  1.3 ZETA BODY: A test\n*  6.0 ALPHA BODY: A test\n"),
        ("_SUMMARY_", true, " 1.3 ZETA                   BODY: A test\n 6.0 ALPHA                  BODY: A test\n"),
        ("_PREVIEW_", true, "Hello there. "),
    ];
    for (template, is_spam, want) in cases {
        let view = if *is_spam { spam() } else { ham() };
        assert_eq!(expand_with(template, &view, msg), *want, "{template}");
    }
}

#[test]
fn score_tag_never_looks_like_spam_for_ham() {
    let view = View { score: 4960, hits: vec![], subtests: vec![], body: None };
    assert_eq!(expand_with("_SCORE_ _YESNO_", &view, b"\n"), "4.9 No");
}

#[test]
fn preview_table() {
    let long = "x".repeat(250);
    let cases: Vec<(Vec<u8>, &str)> = vec![
        (b"Subject\nShort one.\nTwo.".to_vec(), "Short one. Two. "),
        (std::format!("S\n{long}").into_bytes(), Box::leak(std::format!("{}\n   [...] ", "x".repeat(200)).into_boxed_str())),
        (b"S\nThis is a multi-part message in MIME format.\nBody ---------- here".to_vec(), "Body here "),
        (b"S\nHi -----Original Message----- From: x\nafter".to_vec(), "Hi after "),
        (b"S\n1\n2\n3\n4".to_vec(), "1 2 3 "),
        (b"S".to_vec(), ""),
    ];
    for (body, want) in cases {
        let body: &'static [u8] = Vec::leak(body);
        let view = View { score: 0, hits: vec![], subtests: vec![], body: Some(body) };
        assert_eq!(expand_with("_PREVIEW_", &view, b"\n"), want, "{}", body.escape_ascii());
    }
}

#[test]
fn preview_reads_the_rendered_text_table() {
    // (message, preview): what the body rules read, whatever the body's type or encoding.
    let cases: &[(&[u8], &str)] = &[
        (b"Subject: a\n\nline one\nline two\n\n\nnext para\n", "line one line two next para "),
        (b"Content-Type: text/plain; charset=utf-8\n\nplain\n", "plain "),
        (b"Content-Type: text/html\n\n<html><body><p>Buy <b>now</b></p><p>Cheap!</p></body></html>\n", "Buy now Cheap! "),
        (b"Content-Transfer-Encoding: base64\n\naGk=\n", "hi "),
        (b"Content-Type: text/plain\nContent-Transfer-Encoding: quoted-printable\n\nso=\nft =3D hard\n", "soft = hard "),
        (
            b"Content-Type: multipart/mixed; boundary=b\n\n--b\nContent-Type: text/html\n\n<p>first</p>\n--b\nContent-Type: image/gif\n\nGIF\n--b--\n",
            "first ",
        ),
        (b"Content-Type: image/gif\n\nGIF89a\n", ""),
    ];
    for (message, want) in cases {
        assert_eq!(expand_with("_PREVIEW_", &ham(), message), *want, "{}", message.escape_ascii());
    }
}

#[test]
fn splitter_table() {
    /// (message, mbox, headers, body, crlf)
    type Case = (&'static [u8], &'static [u8], &'static [u8], &'static [u8], bool);
    let cases: &[Case] = &[
        (b"A: b\n\nbody\n", b"", b"A: b\n\n", b"body\n", false),
        (b"A: b\r\n\r\nbody\r\n", b"", b"A: b\r\n\r\n", b"body\r\n", true),
        (b"From x@y  Mon Jan 1\nA: b\n\nbody", b"From x@y  Mon Jan 1\n", b"A: b\n\n", b"body", false),
        // `From:` is a header, not an mbox line; `From  :` (two blanks) is one.
        (b"From: a\n\nb", b"", b"From: a\n\n", b"b", false),
        (b"From  :x\nA: b\n\n", b"From  :x\n", b"A: b\n\n", b"", false),
        (b"A: b\n c\n\td\n\nbody", b"", b"A: b\n c\n\td\n\n", b"body", false),
        (b"A: b\n--x\n\nbody", b"", b"A: b\n", b"--x\n\nbody", false),
        (b"bad1\nbad2\nbad3\nA: b\nbad4\n\nbody", b"", b"bad1\nbad2\nbad3\nA: b\n", b"bad4\n\nbody", false),
        (b"A: b", b"", b"A: b", b"", false),
        (b"", b"", b"\n", b"", false),
        // In an LF message a CRLF line is not the end of the head.
        (b"A: b\n\r\nC: d\n\nbody\n", b"", b"A: b\n\r\nC: d\n\n", b"body\n", false),
        (b"From\nA: b\n\nbody", b"From\n", b"A: b\n\n", b"body", false),
        // Without LF, SpamAssassin sees one line (the message parser splits at CRs).
        (b"A: b\rC: d\r\rbody", b"", b"A: b\rC: d\r\rbody", b"", false),
        // CRLF is judged after the mbox line.
        (b"From x\r\nA: b\n\nc\n", b"From x\r\n", b"A: b\n\n", b"c\n", false),
        (b"From x\nA: b\r\n\r\nc\n", b"From x\n", b"A: b\r\n\r\n", b"c\n", true),
    ];
    for (message, mbox, headers, body, crlf) in cases {
        let s = Split::new(message);
        let label = message.escape_ascii().to_string();
        assert_eq!(s.mbox, *mbox, "{label}");
        assert_eq!(s.headers.escape_ascii().to_string(), headers.escape_ascii().to_string(), "{label}");
        assert_eq!(s.body, *body, "{label}");
        assert_eq!(s.crlf, *crlf, "{label}");
    }
}

#[test]
fn pristine_header_lookup() {
    let s = Split::new(b"Subject: one\nsubject :  two\n\tfolded\nTo:\n\nSubject: body\n");
    let all: Vec<Vec<u8>> = s.pristine_all(b"Subject").map(|v| v.bytes.to_vec()).collect();
    assert_eq!(all, vec![b"one\n".to_vec(), b"two\n\tfolded\n".to_vec()]);
    assert_eq!(s.pristine(b"To").map(|v| v.bytes), Some(&b"\n"[..]));
    assert!(s.pristine(b"Cc").is_none());
    // Only field starts match, never a continuation line (as SpamAssassin's get_header(" X")).
    let s = Split::new(b" X: lead\nA: b\n X: folded\n\n");
    let all: Vec<&[u8]> = s.pristine_all(b" X").map(|v| v.bytes).collect();
    assert_eq!(all, vec![&b"lead\n"[..]]);
    let s = Split::new(b"A: b\nSubject: last");
    let v = s.pristine(b"Subject").unwrap();
    assert_eq!((v.bytes, v.unterminated), (&b"last"[..], true));
}

#[test]
fn mime_encode_table() {
    let cases: &[(&str, &str)] = &[
        ("plain ascii", "plain ascii"),
        ("\n\t* line\n", "\n\t* line\n"),
        ("\t*  0.2 UTF8_DESC BODY: Tëst ünïcode déscription", "\t*  0.2 UTF8_DESC BODY: =?UTF-8?B?VMOrc3Qgw7xuw69jb2RlIGTDqXNjcmlwdGlvbg==?="),
        ("caf\u{e9} au lait", "=?UTF-8?Q?caf=C3=A9?= au lait"),
        ("x: na\u{ef}ve done", "x: =?UTF-8?Q?na=C3=AFve?= done"),
        ("x: na\u{ef}ve_=? done", "x: =?UTF-8?B?bmHDr3ZlXz0/?= done"),
    ];
    for (text, want) in cases {
        let mut out = Vec::new();
        mime_encode_header(text.as_bytes(), &mut out);
        assert_eq!(String::from_utf8(out).unwrap(), *want, "{text:?}");
    }
}

fn rewritten(message: &[u8], view: &View, settings: &RewriteSettings) -> String {
    let mut out = Vec::new();
    rewrite(message, &view.rendering(message), settings, &env(), &mut RewriteScratch::new(), &mut VecWriter(&mut out)).unwrap();
    String::from_utf8(out).unwrap()
}

#[test]
fn ham_gets_headers_in_place() {
    let out = rewritten(b"Return-Path: <a@b>\nX-Spam-Status: Yes, forged\n\tmore\nSubject: hi\n\nbody\n", &ham(), &RewriteSettings::stock());
    assert_eq!(
        out,
        "Return-Path: <a@b>\nX-Spam-Checker-Version: SpamAssassin 0.1.0 (sift) on mx.example.org\nX-Spam-Level: \n\
         X-Spam-Status: No, score=-0.5 required=5.0 tests=none autolearn=disabled\n\tversion=0.1.0\nSubject: hi\n\nbody\n"
    );
}

#[test]
fn headers_only_spam_with_rewrites() {
    let mut settings = RewriteSettings::stock();
    settings.set_report_safe(0);
    settings.rewrite_header("Subject", "[SPAM _SCORE_]");
    settings.rewrite_header("To", "(fake)");
    let out = rewritten(b"To: you\nSubject: [SPAM 7.3] again\n\nbody\n", &spam(), &settings);
    assert_eq!(
        out,
        "X-Spam-Checker-Version: SpamAssassin 0.1.0 (sift) on mx.example.org\nX-Spam-Flag: YES\nX-Spam-Level: *******\n\
         X-Spam-Status: Yes, score=7.3 required=5.0 tests=ALPHA,ZETA autolearn=disabled\n\tversion=0.1.0\n\
         X-Spam-Report: \n\t*  1.3 ZETA BODY: A test\n\t*  6.0 ALPHA BODY: A test\n\
         To: ([fake]) you\nSubject: [SPAM 7.3] again\nX-Spam-Prev-To: you\nX-Spam-Prev-Subject: [SPAM 7.3] again\n\nbody\n"
    );
}

#[test]
fn unterminated_last_header_runs_into_the_next_as_in_spamassassin() {
    let mut settings = RewriteSettings::stock();
    settings.set_report_safe(0);
    settings.rewrite_header("Subject", "SPAM");
    let out = rewritten(b"Subject: x", &spam(), &settings);
    assert!(out.ends_with("Subject: SPAM xX-Spam-Prev-Subject: x"), "{out}");
}

#[test]
fn report_safe_comment_is_idempotent_and_keeps_crlf() {
    let mut settings = RewriteSettings::stock();
    settings.rewrite_header("To", "spam");
    let out = rewritten(b"To: you\t(spam)\r\nSubject: s\r\n\r\nbody\r\n", &spam(), &settings);
    assert!(out.contains("\r\nTo: you\t(spam)\r\nSubject: s\r\n"), "{}", out.escape_debug());
    assert!(out.ends_with("\r\n\r\nTo: you\t(spam)\r\nSubject: s\r\n\r\nbody\r\n\r\n------------=_00000001.00000002--\r\n\r\n"), "{}", out.escape_debug());
}

#[test]
fn boundary_avoids_lines_of_the_original() {
    for clash in ["----------=_00000001.00000002", "------------=_00000001.00000002--\r"] {
        let message = std::format!("A: b\n\n{clash}\n");
        let b = boundary([1, 2], &Split::new(message.as_bytes()));
        assert!(b.starts_with("----------=_00000001.00000002/"), "{b}");
        assert_eq!(b.len(), 38, "{b}");
    }
    let clean = Split::new(b"A: b\n\nbody\n");
    assert_eq!(boundary([1, 2], &clean).as_str(), "----------=_00000001.00000002");
}

#[test]
fn settings_from_config() {
    let mut config = Config { report_safe: 0, ..Config::default() };
    config.add_headers.push(crate::rules::AddHeader {
        when: AddHeaderWhen::All,
        name: String::from("Status"),
        template: String::from("_YESNO_"),
    });
    config.add_headers.push(crate::rules::AddHeader {
        when: AddHeaderWhen::Spam,
        name: String::from("Flag"),
        template: String::from("_YESNOCAPS_"),
    });
    config.remove_headers.push((AddHeaderWhen::All, String::from("checker-version")));
    config.remove_headers.push((AddHeaderWhen::All, String::from("Checker-Version")));
    config.rewrite_headers.push((String::from("subject"), String::from("*SPAM*")));
    config.rewrite_headers.push((String::from("From"), String::from("(x)")));
    config.rewrite_headers.push((String::from("X-Other"), String::from("y")));
    let s = RewriteSettings::from_config(&config);
    let names = |list: &[(String, String)]| list.iter().map(|(n, _)| n.clone()).collect::<Vec<_>>();
    // `checker-version` (any other spelling) removes it; the exact name cannot.
    assert_eq!(names(&s.headers_ham), ["Status"]);
    assert_eq!(names(&s.headers_spam), ["Status", "Flag", "Report"]);
    assert_eq!(s.report_safe, 0);
    assert_eq!(s.rewrite_subject.as_deref(), Some("*SPAM*"));
    assert_eq!(s.rewrite_from.as_deref(), Some("[x]"));
    let mut s = RewriteSettings::stock();
    s.clear_headers();
    assert_eq!(names(&s.headers_spam), ["Checker-Version"]);
    s.rewrite_header("Subject", "  ");
    assert!(s.rewrite_subject.is_none());
}

#[test]
fn warm_rewrite_allocates_nothing() {
    let mut settings = RewriteSettings::stock();
    settings.rewrite_header("Subject", "[SPAM]");
    let message = b"Return-Path: <a@b>\nSubject: hello\nContent-Type: text/html\n\n<p>Buy now</p>\n";
    let view = spam();
    let ham_view = ham();
    let env = env();
    let mut scratch = RewriteScratch::new();
    let mut out = Vec::with_capacity(1 << 16);
    let mut run = |scratch: &mut RewriteScratch, out: &mut Vec<u8>| {
        for rs in [0, 1, 2] {
            settings.set_report_safe(rs);
            for v in [&view, &ham_view] {
                out.clear();
                rewrite(message, v, &settings, &env, scratch, &mut VecWriter(out)).unwrap();
                out.clear();
                write_report(message, v, &settings, &env, scratch, &mut VecWriter(out)).unwrap();
            }
        }
    };
    run(&mut scratch, &mut out);
    let info = allocation_counter::measure(|| run(&mut scratch, &mut out));
    assert_eq!(info.count_total, 0, "{info:?}");
}

#[test]
fn preview_reads_only_the_start_of_a_large_body_table() {
    // (the rendered body text, the same with each paragraph cut one byte past 200 and
    // past the third): both preview alike, and the large one leaves the buffers small.
    let y = "y".repeat(300_000);
    let cases: Vec<(String, String)> = vec![
        (std::format!("S\n{y}\nnext\n"), std::format!("S\n{}\nnext\n", &y[..201])),
        (std::format!("S\n{}\n{y}\n", "z".repeat(200)), std::format!("S\n{}\n{}\n", "z".repeat(200), &y[..201])),
        (std::format!("S\no\nt\n{y}\nfour\n{y}\n"), std::format!("S\no\nt\n{}\n", &y[..201])),
    ];
    let settings = RewriteSettings::stock();
    let env = env();
    let msg = Split::new(b"\n");
    for (large, cut) in &cases {
        let preview_of = |text: &str, bufs: &mut (Vec<u8>, Vec<u8>, Vec<u8>)| {
            let body: &'static [u8] = Vec::leak(text.as_bytes().to_vec());
            let view = View { score: 0, hits: vec![], subtests: vec![], body: Some(body) };
            let ctx = Ctx { view: &view, settings: &settings, env: &env, msg: &msg };
            bufs.0.clear();
            expand(b"_PREVIEW_", &ctx, &mut bufs.0, &mut bufs.1, &mut bufs.2);
            String::from_utf8_lossy(&bufs.0).into_owned()
        };
        let mut bufs = (Vec::new(), Vec::new(), Vec::new());
        let got = preview_of(large, &mut bufs);
        assert!(!got.is_empty());
        assert_eq!(got, preview_of(cut, &mut (Vec::new(), Vec::new(), Vec::new())), "{:.60}", cut.escape_debug());
        assert!(bufs.1.capacity() < 4096 && bufs.2.capacity() < 4096, "{} and {} bytes kept", bufs.1.capacity(), bufs.2.capacity());
    }
}
