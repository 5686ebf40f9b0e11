//! Whole-message tests: SpamAssassin golden outputs, rendering rules, extremes,
//! buffer reuse.
#![allow(clippy::type_complexity)]

use super::*;
use alloc::string::String;
use alloc::vec;
use alloc::{format, vec::Vec};

fn lines(b: &[u8]) -> Vec<String> {
    if b.is_empty() {
        return Vec::new();
    }
    b.split(|&c| c == b'\n').map(|l| String::from_utf8_lossy(l).into_owned()).collect()
}

fn sorted_uris(m: &Message<'_>) -> Vec<String> {
    let mut v = if m.uri_count() == 0 {
        Vec::new()
    } else {
        m.uris().split(|&c| c == b'\n').map(|l| String::from_utf8_lossy(l).into_owned()).collect()
    };
    v.sort();
    v
}

/// (message, body, rawbody, URIs): body and URIs as SpamAssassin 4.0.1 renders them;
/// rawbody is ours, equal to SpamAssassin's rawbody array joined, except for the line
/// break we put between parts.
const GOLDEN: &[(&[u8], &[u8], &[u8], &[&str])] = &[
    (
        b"From: \"Alice\" <alice@example.com>\nTo: bob@example.org\nSubject: =?utf-8?q?Hello_w=C3=B6rld?=\nMIME-Version: 1.0\nContent-Type: multipart/alternative; boundary=\"XYZ\"\n\npreamble text\n--XYZ\nContent-Type: text/plain; charset=iso-8859-1\nContent-Transfer-Encoding: quoted-printable\n\nCaf=E9 au lait, line one\nline two is soft=\nly broken.\n\nSecond paragraph visit www.example.com/page today.\n--XYZ\nContent-Type: text/html; charset=utf-8\nContent-Transfer-Encoding: base64\n\nPGh0bWw+PGJvZHk+PHA+Q2Fmw6kgPGI+YXU8L2I+IGxhaXQ8L3A+PHA+R28g\nPGEgaHJlZj0iaHR0cDovL2NsaWNrLmV4YW1wbGUubmV0Lz9pZD0xIj5oZXJl\nPC9hPjwvcD48L2JvZHk+PC9odG1sPg==\n--XYZ--\nepilogue\n",
        b"Hello w\xc3\xb6rld\nCaf\xc3\xa9 au lait, line one line two is softly broken.\nSecond paragraph visit www.example.com/page today.\nCaf\xc3\xa9 au lait\nGo here",
        b"Caf\xe9 au lait, line one\nline two is softly broken.\n\nSecond paragraph visit www.example.com/page today.\n<html><body><p>Caf\xc3\xa9 <b>au</b> lait</p><p>Go <a href=\"http://click.example.net/?id=1\">here</a></p></body></html>",
        &["http://click.example.net/?id=1", "http://www.example.com/page"],
    ),
    (
        b"Subject: nested\nContent-Type: multipart/mixed; boundary=outer\n\n--outer\nContent-Type: text/plain\n\nfirst part\n--outer\nContent-Type: message/rfc822\n\nFrom: inner@example.com\nSubject: inner subject\nContent-Type: multipart/alternative; boundary=inner\n\n--inner\nContent-Type: text/plain\n\ninner text\n--inner\nContent-Type: text/html\n\n<p>inner html</p>\n--inner--\n--outer\nContent-Type: image/gif\nContent-Transfer-Encoding: base64\n\nR0lGODlhAQABAAAAACw=\n--outer\nContent-Type: text/plain\n\nlast part\n--outer--\n",
        b"nested\nfirst part inner text\ninner html\nlast part",
        b"first part\ninner text\n<p>inner html</p>\nlast part",
        &[],
    ),
    (
        b"Subject: no boundary end\r\nContent-Type: multipart/mixed; boundary=\"b1\"\r\n\r\n--b1\r\nContent-Type: text/plain\r\n\r\nunterminated part\r\nwith two lines\r\n",
        b"no boundary end\nunterminated part with two lines ",
        b"unterminated part\nwith two lines\n",
        &[],
    ),
    (
        b"From: x@example.com\nSubject: plain\n\nJust a plain body.\nWith a second line.\n\n\n\nAnd a paragraph after blanks. mailto:someone@example.org\n",
        b"plain\nJust a plain body. With a second line.\nAnd a paragraph after blanks. mailto:someone@example.org ",
        b"Just a plain body.\nWith a second line.\n\n\n\nAnd a paragraph after blanks. mailto:someone@example.org\n",
        &["mailto:someone@example.org"],
    ),
    (
        b"Subject: bad b64 and qp\nContent-Type: multipart/mixed; boundary=Q\n\n--Q\nContent-Type: text/plain\nContent-Transfer-Encoding: base64\n\naGVsbG8g!!d29ybGQ=\n--Q\nContent-Type: text/plain; charset=windows-1252\nContent-Transfer-Encoding: quoted-printable\n\n=93smart quotes=94 =ZZ bad=\n--Q\nContent-Type: text/plain; charset=koi8-r\n\n\xf0\xd2\xc9\xd7\xc5\xd4\n--Q--\n",
        b"bad b64 and qp\nhello world \xe2\x80\x9csmart quotes\xe2\x80\x9d =ZZ bad= \xd0\x9f\xd1\x80\xd0\xb8\xd0\xb2\xd0\xb5\xd1\x82",
        b"hello world\n\x93smart quotes\x94 =ZZ bad=\n\xf0\xd2\xc9\xd7\xc5\xd4",
        &[],
    ),
];

#[test]
fn golden_messages() {
    let mut bufs = MessageBuffers::new(Limits::default());
    for (i, (raw, body, rawbody, uris)) in GOLDEN.iter().enumerate() {
        let m = Message::parse(raw, &mut bufs);
        assert_eq!(lines(m.body()), lines(body), "body of golden message {i}");
        assert_eq!(m.rawbody(), *rawbody, "rawbody of golden message {i}");
        let want: Vec<String> = uris.iter().map(|s| String::from(*s)).collect();
        assert_eq!(sorted_uris(&m), want, "uris of golden message {i}");
        assert_eq!(m.overflow(), Overflow::default());
    }
}

/// (HTML part, body after the Subject line, URIs) as SpamAssassin 4.0.1 gives them.
const HTML_GOLDEN: &[(&[u8], &[u8], &[&str])] = &[
    (b"<p>Hello <b>world</b></p><p>Second &amp; third</p>", b"\nHello world\nSecond & third", &[]),
    (b"a<br>b<br><br>c", b"a b\nc ", &[]),
    (b"<div>one</div><div>two</div>", b" one\ntwo ", &[]),
    (b"x<script>var a=\"<p>\";</script>y<style>p{}</style>z<!-- hidden -->w", b"xyzw ", &[]),
    (b"<table><tr><td>c1</td><td>c2</td></tr></table>", b" c1 c2 ", &[]),
    (
        b"&lt;tag&gt; &eacute;&#233;&#x41; &nbsp;sp &copy &bogus; &#8364;",
        b"<tag> \xc3\xa9\xc3\xa9A sp \xc2\xa9 &bogus; \xe2\x82\xac ",
        &[],
    ),
    (b"line1<p>para<font size=1> tiny</font> text</p>end", b"line1\npara tiny text\nend ", &[]),
    (b"<title>The Title</title><body>Body text</body>", b"\nThe Title\nBody text ", &[]),
    (
        b"<a href=\"http://example.com/path?a=1&amp;b=2\">click</a> <img src=\"/img.gif\"> <a href=\"mailto:x@example.com\">m</a>",
        b"click m ",
        &["/img.gif", "http://example.com/path?a=1&b=2", "mailto:x@example.com"],
    ),
    (
        b"<base href=\"http://base.example.org/dir/page.html\"><a href=\"rel/link.html\">r</a><a href=\"../up\">u</a><form action=\"submit.cgi\"></form>",
        b"ru ",
        &[
            "../up",
            "http://../up",
            "http:///up",
            "http://base.example.org/dir/page.html",
            "http://base.example.org/dir/rel/link.html",
            "http://base.example.org/dir/submit.cgi",
            "http://base.example.org/up",
            "http://rel/link.html",
            "http://www.rel.com/link.html",
            "rel/link.html",
        ],
    ),
    (
        b"<body background=\"bg.jpg\"><meta http-equiv=\"refresh\" content=\"0; URL=http://refresh.example.net/x\"></body>",
        b" ",
        &["bg.jpg", "http://bg.jpg", "http://refresh.example.net/x"],
    ),
    (b"multi\nline   text\twith   spaces", b"multi line text with spaces ", &[]),
    (b"<span style=\"display:none\">hidden</span> shown<br>next", b"hidden shown next ", &[]),
    (b"<ul><li>one<li>two</ul>", b" one two ", &[]),
    (b"<a name=\"anchor\">no href</a>", b"no href ", &[""]),
    (b"<h1>Head</h1>text<hr>more", b" Head text\nmore ", &[]),
    (b"<p>unclosed <b>bold", b"\nunclosed bold ", &[]),
];

#[test]
fn html_golden() {
    let mut bufs = MessageBuffers::new(Limits::default());
    for (html, body, uris) in HTML_GOLDEN {
        let mut raw = b"Subject: s\nContent-Type: text/html; charset=utf-8\n\n".to_vec();
        raw.extend_from_slice(html);
        raw.push(b'\n');
        let m = Message::parse(&raw, &mut bufs);
        let mut want = b"s\n".to_vec();
        want.extend_from_slice(body);
        assert_eq!(lines(m.body()), lines(&want), "{:?}", String::from_utf8_lossy(html));
        let want: Vec<String> = uris.iter().map(|s| String::from(*s)).collect();
        assert_eq!(sorted_uris(&m), want, "{:?}", String::from_utf8_lossy(html));
    }
}

#[test]
fn rendering_table() {
    // (message, body lines)
    let cases: &[(&[u8], &[&str])] = &[
        // The Subject is the first line; no Subject gives an empty first line.
        (b"Subject: Hi\n\nbody\n", &["Hi", "body "]),
        (b"From: a@b.c\n\nbody", &["", "body"]),
        // Paragraphs join their lines; blank lines separate them.
        (b"Subject: s\n\nline one\nline two\n\nnext para\n", &["s", "line one line two", "next para "]),
        // Trailing and leading blanks of a paragraph break stay as one space.
        (b"Subject: s\n\na  \n \n  b", &["s", "a ", " b"]),
        // Curly double quotes in HTML become straight ones.
        (
            b"Subject: s\nContent-Type: text/html; charset=utf-8\n\n<p>\xe2\x80\x9cq\xe2\x80\x9d</p>",
            &["s", "", "\"q\""],
        ),
        // An HTML entity above U+00FF makes the text characters; NBSP is then a space.
        (b"Subject: s\nContent-Type: text/html\n\na&#160;b &#8364;", &["s", "a b \u{20ac}"]),
        // Without one, a Latin-1 entity stays a single byte as in Perl.
        (b"Subject: s\nContent-Type: text/html\n\nLi&egrave;ge", &["s", "Li\u{fffd}ge"]),
        // A NUL is a line break.
        (b"Subject: s\n\na\x00b", &["s", "a", "b"]),
        // An empty message: SpamAssassin has one empty line, which joins to "".
        (b"", &[]),
    ];
    let mut bufs = MessageBuffers::new(Limits::default());
    for (raw, want) in cases {
        let m = Message::parse(raw, &mut bufs);
        let want: Vec<String> = want.iter().map(|s| String::from(*s)).collect();
        assert_eq!(lines(m.body()), want, "{:?}", String::from_utf8_lossy(raw));
    }
}

#[test]
fn long_lines_are_split() {
    let mut raw = b"Subject: s\n\n".to_vec();
    for i in 0..1000 {
        raw.extend_from_slice(format!("word{i} ").as_bytes());
    }
    let mut bufs = MessageBuffers::new(Limits::default());
    let m = Message::parse(&raw, &mut bufs);
    let body = lines(m.body());
    assert!(body.len() > 2);
    assert!(body.iter().all(|l| l.len() <= 2049), "{:?}", body.iter().map(String::len).collect::<Vec<_>>());
    // Cut after a space, so no word is broken.
    assert!(body.get(1).is_some_and(|l| l.ends_with(' ')));
}

#[test]
fn scan_sizes_cut_parts() {
    let mut raw = b"Subject: s\n\n".to_vec();
    for _ in 0..2000 {
        raw.extend_from_slice(b"0123456789 abcdefghi\n");
    }
    let limits = Limits { body_part_scan_size: 1000, rawbody_part_scan_size: 2000, ..Limits::default() };
    let mut bufs = MessageBuffers::new(limits);
    let m = Message::parse(&raw, &mut bufs);
    assert!(m.overflow().truncated);
    // Cut at the first line end after the limit, which is kept.
    assert_eq!(m.rawbody().len(), 2016);
    assert!(m.rawbody().ends_with(b"\n"));
    let text = m.body().splitn(2, |&b| b == b'\n').nth(1).unwrap_or(&[]);
    assert!(text.len() > 1000 && text.len() < 1030, "{}", text.len());
}

#[test]
fn headers_and_parts() {
    let raw = b"From: \"A\" <a@example.com>\nSubject: =?utf-8?q?caf=C3=A9?=\n folded\nContent-Type: multipart/mixed; boundary=b\n\n--b\nContent-Type: text/plain; charset=utf-8\nX-Part: one\n\nhello\n--b\nContent-Type: message/rfc822\n\nSubject: inner\nContent-Type: text/html\n\n<b>x</b>\n--b--\n";
    let mut bufs = MessageBuffers::new(Limits::default());
    let m = Message::parse(raw, &mut bufs);
    let names: Vec<&[u8]> = m.headers().map(|h| h.name).collect();
    assert_eq!(names, vec![&b"From"[..], b"Subject", b"Content-Type"]);
    let subject = m.header(b"subject").map(|h| (h.raw, h.decoded));
    assert_eq!(subject, Some((&b" =?utf-8?q?caf=C3=A9?=\n folded"[..], &b"caf\xc3\xa9 folded"[..])));
    let parts: Vec<(usize, Vec<u8>, Vec<u8>, bool, bool, usize)> = m
        .parts()
        .map(|p| (p.depth(), p.content_type().to_vec(), p.charset().to_vec(), p.is_text(), p.is_leaf(), p.headers().count()))
        .collect();
    assert_eq!(
        parts,
        vec![
            (0, b"multipart/mixed".to_vec(), b"".to_vec(), false, false, 3),
            (1, b"text/plain".to_vec(), b"utf-8".to_vec(), true, true, 2),
            (1, b"message/rfc822".to_vec(), b"".to_vec(), false, false, 1),
            (2, b"text/html".to_vec(), b"".to_vec(), true, true, 2),
        ]
    );
    let part_header = m.parts().nth(1).and_then(|p| p.headers().nth(1)).map(|h| (h.name, h.decoded));
    assert_eq!(part_header, Some((&b"X-Part"[..], &b"one"[..])));
    assert_eq!(lines(m.body()), vec!["caf\u{e9} folded", "hello x"]);
    let blank = raw.windows(2).position(|w| w == b"\n\n").unwrap_or(0);
    assert_eq!(m.header_block(), raw.get(..blank + 1).unwrap_or(&[]));
}

#[test]
fn headers_by_name_table() {
    let raw = b"Received: one\nTo: a@x\nreceived: two\nX-Empty:\nRECEIVED: three\n\nbody\n";
    let mut bufs = MessageBuffers::new(Limits::default());
    let m = Message::parse(raw, &mut bufs);
    // (name, values of the fields so named in order, the last one's value)
    let cases: &[(&[u8], &[&[u8]], Option<&[u8]>)] = &[
        (b"Received", &[b"one", b"two", b"three"], Some(b"three")),
        (b"to", &[b"a@x"], Some(b"a@x")),
        (b"x-empty", &[b""], Some(b"")),
        (b"Cc", &[], None),
        (b"Receive", &[], None),
    ];
    for (name, values, last) in cases {
        let got: Vec<&[u8]> = m.headers_named(name).map(|h| h.decoded).collect();
        assert_eq!(&got, values, "{:?}", core::str::from_utf8(name));
        assert_eq!(m.header(name).map(|h| h.decoded), *last, "{:?}", core::str::from_utf8(name));
        let part = m.parts().next().and_then(|p| p.header(name));
        assert_eq!(part, *last, "{:?}", core::str::from_utf8(name));
    }
}

#[test]
fn mime_edge_cases() {
    // (message, body lines)
    let cases: &[(&[u8], &[&str])] = &[
        // Missing final boundary: the last part runs to the end.
        (b"Subject: s\nContent-Type: multipart/mixed; boundary=b\n\n--b\n\nA\n--b\n\nB\n", &["s", "A B "]),
        // No boundary line at all: one part holding the whole body.
        (b"Subject: s\nContent-Type: multipart/mixed; boundary=b\n\nonly\ntext\n", &["s", "only text "]),
        // Multipart without a boundary parameter is text/plain.
        (b"Subject: s\nContent-Type: multipart/mixed\n\nbody\n", &["s", "body "]),
        // Preamble and epilogue are not text.
        (b"Subject: s\nContent-Type: multipart/mixed; boundary=b\n\npre\n--b\n\nA\n--b--\npost\n", &["s", "A"]),
        // A part reusing its parent's boundary (SpamAssassin bug 7358).
        (
            b"Subject: s\nContent-Type: multipart/mixed; boundary=b\n\n--b\nContent-Type: multipart/alternative; boundary=b\n\n--b\n\nIN\n--b--\n--b\n\nOUT\n--b--\n",
            &["s", "IN OUT"],
        ),
        // Non-text parts still separate their neighbours.
        (
            b"Subject: s\nContent-Type: multipart/mixed; boundary=b\n\n--b\n\nA\n--b\nContent-Type: image/png\n\nxx\n--b\n\nB\n--b--\n",
            &["s", "A", "B"],
        ),
        // Digest children default to message/rfc822.
        (
            b"Subject: s\nContent-Type: multipart/digest; boundary=b\n\n--b\n\nSubject: in\n\nbody\n--b--\n",
            &["s", "body"],
        ),
        // CRLF message.
        (b"Subject: s\r\nContent-Type: text/plain\r\n\r\nline\r\nline2\r\n", &["s", "line line2 "]),
        // Bare CR message.
        (b"Subject: s\rContent-Type: text/plain\r\rline\rline2\r", &["s", "line line2 "]),
    ];
    let mut bufs = MessageBuffers::new(Limits::default());
    for (raw, want) in cases {
        let m = Message::parse(raw, &mut bufs);
        let want: Vec<String> = want.iter().map(|s| String::from(*s)).collect();
        assert_eq!(lines(m.body()), want, "{:?}", String::from_utf8_lossy(raw));
    }
}

#[path = "../../tests/synthetic.rs"]
mod synthetic;
use synthetic::{big_body, deep_nesting, many_headers, many_parts};

#[test]
fn extremes() {
    // (name, message, headers, parts, depth overflow)
    let cases: Vec<(&str, Vec<u8>, bool, bool, bool)> = vec![
        ("10 MB body", big_body(10 * 1024 * 1024), false, false, false),
        ("10,000 headers", many_headers(10_000), true, false, false),
        ("1,000 MIME parts", many_parts(1_000), false, true, false),
        ("999 MIME parts", many_parts(999), false, false, false),
        ("nesting 100 deep", deep_nesting(100), false, false, true),
        ("nesting 19 deep", deep_nesting(19), false, false, false),
    ];
    let limits = Limits::default();
    let mut bufs = MessageBuffers::new(limits);
    let caps = bufs.capacities();
    for (name, raw, headers, parts, depth) in cases {
        let started = std::time::Instant::now();
        let m = Message::parse(&raw, &mut bufs);
        let o = m.overflow();
        assert_eq!((o.headers, o.parts, o.depth), (headers, parts, depth), "{name}: {o:?}");
        assert!(m.headers().count() <= limits.max_headers, "{name}");
        assert!(m.parts().count() <= limits.max_parts, "{name}");
        assert!(!m.body().is_empty(), "{name}: some text");
        let took = started.elapsed();
        assert!(took.as_secs() < 10, "{name}: {took:?}");
        // Fixed indexes never grow past their reservation (the URI tables, next, grow
        // to a bound of their own).
        let now = bufs.capacities();
        assert_eq!(now.get(..4), caps.get(..4), "{name}");
    }
    let parts = many_parts(1_000);
    let m = Message::parse(&parts, &mut bufs);
    assert_eq!(m.parts().count(), 1000);
    let deep = deep_nesting(100);
    let m = Message::parse(&deep, &mut bufs);
    assert_eq!(m.parts().filter(|p| !p.is_leaf()).count(), 20);
    let big = big_body(10 * 1024 * 1024);
    let m = Message::parse(&big, &mut bufs);
    assert!(m.overflow().truncated);
    assert_eq!(lines(m.uris()), vec!["http://example.com/x"]);
}

#[test]
fn many_uris_overflow() {
    let mut raw = b"Subject: s\n\n".to_vec();
    for i in 0..50 {
        raw.extend_from_slice(format!("http://host{i}.example.com/ ").as_bytes());
    }
    let mut bufs = MessageBuffers::new(Limits { max_uris: 10, ..Limits::default() });
    let m = Message::parse(&raw, &mut bufs);
    assert!(m.overflow().uris);
    assert_eq!(lines(m.uris()).len(), 10);
}

#[test]
fn reparse_does_not_grow_buffers() {
    let msgs: Vec<Vec<u8>> = vec![
        big_body(200_000),
        many_headers(2000),
        many_parts(300),
        deep_nesting(40),
        GOLDEN.iter().flat_map(|g| g.0.iter().copied()).collect(),
    ];
    let mut bufs = MessageBuffers::new(Limits::default());
    for m in msgs.iter().chain(GOLDEN.iter().map(|g| g.0).map(|g| g.to_vec()).collect::<Vec<_>>().iter()) {
        let _ = Message::parse(m, &mut bufs);
    }
    let warm = bufs.capacities();
    for m in &msgs {
        let _ = Message::parse(m, &mut bufs);
        assert_eq!(bufs.capacities(), warm);
    }
    for g in GOLDEN {
        let _ = Message::parse(g.0, &mut bufs);
        assert_eq!(bufs.capacities(), warm);
    }
}

#[test]
fn release_above_table() {
    // (message, keep): after parsing it, no buffer holds more than `keep` bytes once
    // released, and parsing again gives the same message.
    let cases: Vec<(&str, Vec<u8>, usize)> = vec![
        ("200 KB body", big_body(200_000), 16 * 1024),
        ("300 MIME parts", many_parts(300), 16 * 1024),
        ("200 KB body, keep 1 MB", big_body(200_000), 1 << 20),
        ("golden", GOLDEN[0].0.to_vec(), 16 * 1024),
    ];
    for (name, raw, keep) in cases {
        let mut bufs = MessageBuffers::new(Limits::default());
        let (body, uris) = {
            let m = Message::parse(&raw, &mut bufs);
            (m.body().to_vec(), m.uris().to_vec())
        };
        let grown: usize = bufs.capacities()[6..].iter().filter(|&&c| c > keep).sum();
        let fixed = bufs.capacities()[..6].to_vec();
        assert_eq!(bufs.release_above(keep), grown, "{name}: the bytes freed");
        assert!(bufs.capacities()[6..].iter().all(|&c| c <= keep), "{name}: {:?}", bufs.capacities());
        assert_eq!(bufs.capacities()[..6], fixed[..], "{name}: fixed indexes stay reserved");
        assert_eq!(bufs.release_above(keep), 0, "{name}: nothing left to free");
        let m = Message::parse(&raw, &mut bufs);
        assert_eq!((m.body(), m.uris()), (&body[..], &uris[..]), "{name}: parsed the same after release");
    }
}

/// Inputs built to make a careless parser quadratic finish quickly.
#[test]
fn pathological_inputs_stay_linear() {
    let mut cases: Vec<Vec<u8>> = Vec::new();
    let html = |unit: &[u8], n: usize| {
        let mut m = b"Subject: s\nContent-Type: text/html\n\n".to_vec();
        for _ in 0..n {
            m.extend_from_slice(unit);
        }
        m
    };
    cases.push(html(b"<!--x>", 200_000));
    cases.push(html(b"<title>x", 200_000));
    cases.push(html(b"<font size=1>", 200_000));
    cases.push(html(b"&amp;&#1;&bogus;", 100_000));
    cases.push(html(b"<a href=\"\xef\xbb\xbf\xef\xbb\xbf\xef\xbb\xbf", 100_000));
    let mut text = b"Subject: s\n\n".to_vec();
    for _ in 0..200_000 {
        text.extend_from_slice(b"a.a@");
    }
    cases.push(text);
    let mut hosts = b"Subject: s\n\n".to_vec();
    for _ in 0..300_000 {
        hosts.extend_from_slice(b"a.");
    }
    cases.push(hosts);
    let mut words = b"Subject: =?utf-8?q?".to_vec();
    for _ in 0..10_000 {
        words.extend_from_slice(b"=?x?q?");
    }
    words.extend_from_slice(b"\n\nbody\n");
    cases.push(words);
    let mut bufs = MessageBuffers::new(Limits::default());
    for raw in &cases {
        let started = std::time::Instant::now();
        let m = Message::parse(raw, &mut bufs);
        let _ = (m.body().len(), m.uris().len());
        let took = started.elapsed();
        std::eprintln!("{:?}: {took:?}", String::from_utf8_lossy(raw.get(36..60).unwrap_or(&[])));
        assert!(took.as_secs() < 5, "{:?}: {took:?}", String::from_utf8_lossy(raw.get(..60).unwrap_or(&[])));
    }
}

#[test]
fn hostile_inputs_do_not_panic() {
    let mut bufs = MessageBuffers::new(Limits { max_headers: 4, max_parts: 4, max_depth: 3, max_uris: 2, ..Limits::default() });
    let inputs: Vec<Vec<u8>> = vec![
        Vec::new(),
        vec![0u8; 100],
        vec![0xffu8; 1000],
        b"\r\r\r\n\n\n".to_vec(),
        b"Subject: =?utf-8?b?".to_vec(),
        b"Content-Type: multipart/mixed; boundary=\"\"\n\n--\n--\n".to_vec(),
        b"Content-Type: message/rfc822\nContent-Transfer-Encoding: base64\n\n!!!!\n".to_vec(),
        b"Content-Type: message/rfc822\n\nContent-Type: message/rfc822\n\nContent-Type: message/rfc822\n\nContent-Type: message/rfc822\n\nx".to_vec(),
        b"Content-Type: text/html\n\n<a href='".to_vec(),
        b"Content-Type: text/html\n\n<<<<>>>>&&&&#;&#x;<!--<![CDATA[<title>".to_vec(),
        b"Content-Type: text/html\n\n<base href=\"http:\"><a href=\"//\">x</a><a href=\"/../../..\">".to_vec(),
        b"Content-Type: text/plain; charset=utf-16\n\n\xff\xfe\x00".to_vec(),
        b"Content-Type: text/plain; charset=utf-7\n\n+AAAAAAAAAAAAAAAAAAAAAAAAAA-+2D3".to_vec(),
        b"Subject: a\n\nhttp://0x7f.0x0.0.1/ http://99999999999999999999/ mailto:%%%%@ www.....".to_vec(),
        b"From: \"unterminated <a@b\nTo: ((((\n\n".to_vec(),
    ];
    for raw in &inputs {
        let m = Message::parse(raw, &mut bufs);
        let _ = (m.body(), m.rawbody(), m.uris(), m.headers().count(), m.parts().count());
        for h in m.headers() {
            let _ = (first_address(h.raw), first_display_name(h.raw));
        }
    }
}
