//! The body, MIME, HTML and image eval tests end to end: crafted messages whose
//! hits SpamAssassin 4.0.1 gave (its verdicts are the expected values), and a proof
//! that a warm scan with these tests allocates nothing.

use sift_core::rules::{cf, RuleSet};
use sift_core::scan::Scratch;

mod support;
use support::corpus_messages;

/// One rule per eval function (several per function where arguments matter).
const RULES: &str = "\
body T_HTML eval:html_test('html')
body T_HTML_ONLY eval:check_for_mime_html_only()
body T_MIME_HTML eval:check_for_mime_html()
body T_MOSTLY eval:check_mime_multipart_ratio('0.00','0.01')
rawbody T_B64 eval:check_for_mime('mime_base64_count')
rawbody T_QP eval:check_for_mime('mime_qp_count')
rawbody T_B64TEXT eval:check_for_mime('mime_base64_encoded_text')
rawbody T_QPLONG eval:check_for_mime('mime_qp_long_line')
body T_BADISO eval:check_for_mime('mime_bad_iso_charset')
rawbody T_ATTACH eval:check_for_mime('mime_attachment')
body T_LIMIT eval:check_for_mime('mimepart_limit_exceeded')
body T_B64LEN_79 eval:check_base64_length('79')
body T_B64LEN_78 eval:check_base64_length('78','79')
body T_MA_NONTEXT eval:check_ma_non_text()
body T_ASCII eval:check_for_ascii_text_illegal()
body T_UNICODE eval:check_abundant_unicode_ratio(0.02)
header T_HB_SEP eval:check_msg_parse_flags('missing_head_body_separator')
body T_MIME_HB_SEP eval:check_msg_parse_flags('missing_mime_head_body_separator')
body T_NO_HEADERS eval:check_msg_parse_flags('missing_mime_headers')
body T_EPI eval:check_msg_parse_flags('mime_epilogue_exists')
body T_UPPER eval:check_for_uppercase('50','100')
body T_LEN eval:check_body_length('100')
body T_BLANK eval:check_blank_line_ratio('40','100','4')
body T_VERT eval:tvd_vertical_words('0','10')
body T_STOCK eval:check_stock_info('2')
body T_MADIFF eval:multipart_alternative_difference('99','100')
body T_MADIFF_C eval:multipart_alternative_difference_count('3','1')
body T_GIF1 eval:image_count('gif','1','1')
body T_PNG1 eval:image_count('png','1','1')
body T_JPEG1 eval:image_count('jpeg',1,1)
body T_IMG2 eval:image_count('all','2')
body T_GIFAREA eval:pixel_coverage('gif','10000','475000')
body T_IMGRATIO eval:image_to_text_ratio('all','0.000','0.015')
body T_SIZE eval:image_size_exact('png','200','300')
body T_URI_TRUNC eval:check_uri_truncated()
";

/// (name, message, the `T_` rules SpamAssassin 4.0.1 hits on it).
const CASES: &[(&str, &[u8], &[&str])] = &[
    (
        "alt_count",
        b"Subject: alt\nContent-Type: multipart/alternative; boundary=\"b\"\n\n--b\nContent-Type: text/plain\n\none two three four five six seven eight nine ten\n--b\nContent-Type: text/html\n\n<p>one two</p>\n--b--\n",
        &["T_HTML", "T_MADIFF_C", "T_MIME_HTML"],
    ),
    (
        "alt_gif",
        b"Subject: gif\nContent-Type: multipart/alternative; boundary=\"b\"\n\n--b\nContent-Type: text/plain\n\nsee the picture\n--b\nContent-Type: image/gif\nContent-Transfer-Encoding: base64\nContent-Disposition: attachment; filename=\"a.gif\"\n\nR0lGODlhLAHIAIAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA==\n--b--\n",
        &["T_ATTACH", "T_B64", "T_GIF1", "T_GIFAREA", "T_IMGRATIO", "T_MA_NONTEXT"],
    ),
    (
        "alt_mostly",
        b"Subject: alt\nContent-Type: multipart/alternative; boundary=\"b\"\n\n--b\nContent-Type: text/plain\n\nx\n--b\nContent-Type: text/html\n\n<html><body><p>word0 other0</p> <p>word1 other1</p> <p>word2 other2</p> <p>word3 other3</p> <p>word4 other4</p> <p>word5 other5</p> <p>word6 other6</p> <p>word7 other7</p> <p>word8 other8</p> <p>word9 other9</p> <p>word10 other10</p> <p>word11 other11</p></body></html>\n--b--\n",
        &["T_HTML", "T_MADIFF", "T_MIME_HTML", "T_MOSTLY", "T_VERT"],
    ),
    (
        "ascii_illegal",
        b"Subject: 8bit\nContent-Type: text/plain\n\ncaf\xe9 au lait\n",
        &["T_ASCII", "T_LEN"],
    ),
    (
        "b64_78",
        b"Subject: b64\nContent-Type: text/plain; charset=utf-8\nContent-Transfer-Encoding: base64\n\ncGxhaW4gdGV4dCBzZW50IGluIGJhc2U2NCwgbG9uZyBlbm91Z2ggdG8gZmlsbCBsaW5lcyBwbGFpb\niB0ZXh0IHNlbnQgaW4gYmFzZTY0LCBsb25nIGVub3VnaCB0byBmaWxsIGxpbmVzIHBsYWluIHRleH\nQgc2VudCBpbiBiYXNlNjQsIGxvbmcgZW5vdWdoIHRvIGZpbGwgbGluZXMgcGxhaW4gdGV4dCBzZW5\n0IGluIGJhc2U2NCwgbG9uZyBlbm91Z2ggdG8gZmlsbCBsaW5lcyBwbGFpbiB0ZXh0IHNlbnQgaW4g\nYmFzZTY0LCBsb25nIGVub3VnaCB0byBmaWxsIGxpbmVzIHBsYWluIHRleHQgc2VudCBpbiBiYXNlN\njQsIGxvbmcgZW5vdWdoIHRvIGZpbGwgbGluZXMg\n",
        &["T_B64", "T_B64LEN_78"],
    ),
    (
        "b64_text",
        b"Subject: b64\nContent-Type: text/plain; charset=us-ascii\nContent-Transfer-Encoding: base64\n\ncGxhaW4gdGV4dCBzZW50IGluIGJhc2U2NCwgbG9uZyBlbm91Z2ggdG8gZmlsbCBsaW5lcyBwbGFpbi\nB0ZXh0IHNlbnQgaW4gYmFzZTY0LCBsb25nIGVub3VnaCB0byBmaWxsIGxpbmVzIHBsYWluIHRleHQg\nc2VudCBpbiBiYXNlNjQsIGxvbmcgZW5vdWdoIHRvIGZpbGwgbGluZXMgcGxhaW4gdGV4dCBzZW50IG\nluIGJhc2U2NCwgbG9uZyBlbm91Z2ggdG8gZmlsbCBsaW5lcyBwbGFpbiB0ZXh0IHNlbnQgaW4gYmFz\nZTY0LCBsb25nIGVub3VnaCB0byBmaWxsIGxpbmVzIHBsYWluIHRleHQgc2VudCBpbiBiYXNlNjQsIG\nxvbmcgZW5vdWdoIHRvIGZpbGwgbGluZXMg\n",
        &["T_B64", "T_B64LEN_78", "T_B64LEN_79", "T_B64TEXT"],
    ),
    (
        "bad_iso",
        b"Subject: iso\nContent-Type: text/plain; charset=iso-8859-123\n\nhello\n",
        &["T_BADISO", "T_LEN"],
    ),
    (
        "blank_lines",
        b"Subject: blanks\n\nfirst\n\n\n\nsecond\n\n\n\nthird words here\n",
        &["T_BLANK", "T_LEN"],
    ),
    (
        "html_only",
        b"Subject: hi\nContent-Type: text/html\n\n<html><body><p>Hello there</p></body></html>\n",
        &["T_HTML", "T_HTML_ONLY", "T_LEN", "T_MIME_HTML", "T_VERT"],
    ),
    (
        "images",
        b"Subject: pics\nContent-Type: multipart/mixed; boundary=\"b\"\n\n--b\nContent-Type: text/plain\n\npictures\n--b\nContent-Type: image/png\nContent-Transfer-Encoding: base64\n\niVBORw0KGgoAAAANSUhEUgAAASwAAADICAIAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA==\n--b\nContent-Type: image/jpeg\nContent-Transfer-Encoding: base64\n\n/9j/4AAQSkZJRgABAQAAAQABAAD/wAARCAAyACgDASIAAAAAAAAAAAAAAAAAAAAAAAAAAAA=\n--b--\n",
        &["T_B64", "T_IMG2", "T_IMGRATIO", "T_JPEG1", "T_PNG1", "T_SIZE", "T_VERT"],
    ),
    (
        "mime_no_blank",
        b"Subject: x\nContent-Type: multipart/mixed; boundary=\"b\"\n\n--b\nContent-Type: text/plain\nbody text right after the headers\n--b--\n",
        &["T_LEN", "T_MIME_HB_SEP"],
    ),
    (
        "no_headers_epilogue",
        b"Subject: x\nContent-Type: multipart/mixed; boundary=\"b\"\n\n--b\n\nbody without headers\n--b--\nepilogue text\n",
        &["T_EPI", "T_LEN", "T_NO_HEADERS"],
    ),
    (
        "no_separator",
        b"Subject: x\nFrom: a@example.com\n",
        &["T_HB_SEP", "T_LEN"],
    ),
    (
        "qp_long",
        b"Subject: qp\nContent-Type: text/plain\nContent-Transfer-Encoding: quoted-printable\n\n=41aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa\nshort=20\n",
        &["T_QP", "T_QPLONG", "T_VERT"],
    ),
    (
        "shouting",
        b"Subject: LOUD\n\nTHIS MESSAGE IS WRITTEN IN CAPITAL LETTERS ALL THE WAY THROUGH\nTHIS MESSAGE IS WRITTEN IN CAPITAL LETTERS ALL THE WAY THROUGH\nTHIS MESSAGE IS WRITTEN IN CAPITAL LETTERS ALL THE WAY THROUGH\nTHIS MESSAGE IS WRITTEN IN CAPITAL LETTERS ALL THE WAY THROUGH\nTHIS MESSAGE IS WRITTEN IN CAPITAL LETTERS ALL THE WAY THROUGH\n",
        &["T_UPPER"],
    ),
    (
        "stock",
        b"Subject: hot tip\n\nCompany: Example Corp\nSymbol: EXMP\nTarget Price: $5.00\nRating: strong buy\n",
        &["T_LEN", "T_STOCK"],
    ),
    (
        "unicode",
        b"Subject: uni\nContent-Type: text/plain\n\n&#x00E9;&#x00E9;&#x00E9;&#x00E9;&#x00E9; text\n",
        &["T_LEN", "T_UNICODE", "T_VERT"],
    ),
];

fn rules() -> RuleSet {
    let mut text = String::from(RULES);
    for line in RULES.lines() {
        if let Some(name) = line.split_whitespace().nth(1) {
            text.push_str(&format!("score {name} 1\n"));
        }
    }
    let config = cf::parse_str("evals.cf", &text).expect("rules parse");
    let rules = RuleSet::compile(&config).expect("rules compile");
    assert!(rules.disabled().is_empty(), "disabled: {:?}", rules.disabled());
    rules
}

fn hits(rules: &RuleSet, scratch: &mut Scratch, message: &[u8]) -> Vec<String> {
    let verdict = rules.scan(message, scratch);
    let mut names: Vec<String> = verdict.hits().map(|h| h.name.to_string()).collect();
    names.sort();
    names
}

#[test]
fn crafted_messages_hit_as_in_spamassassin() {
    let rules = rules();
    let mut scratch = Scratch::new(&rules);
    for (name, message, want) in CASES {
        assert_eq!(hits(&rules, &mut scratch, message), *want, "{name}");
    }
    // A 9000-byte URI in plain text: SpamAssassin cuts body lines at 2048 bytes
    // first, so no URI is truncated and the test does not hit.
    let long_uri = format!("Subject: uri\n\nvisit http://example.com/{} now\n", "a".repeat(9000));
    assert!(!hits(&rules, &mut scratch, long_uri.as_bytes()).contains(&String::from("T_URI_TRUNC")));
    // The same messages again, in reverse order: no fact leaks from one message to the next.
    for (name, message, want) in CASES.iter().rev() {
        assert_eq!(hits(&rules, &mut scratch, message), *want, "{name} (second pass)");
    }
}

#[test]
fn warm_eval_scans_allocate_nothing() {
    let Some(mut messages) = corpus_messages(300) else {
        eprintln!("SKIP: ../shared/corpus/spamassassin-public not found");
        return;
    };
    messages.extend(CASES.iter().map(|(_, m, _)| m.to_vec()));
    let rules = rules();
    let mut scratch = Scratch::new(&rules);
    let first: Vec<u32> = messages.iter().map(|m| rules.scan(m, &mut scratch).score.0 as u32).collect();
    let info = allocation_counter::measure(|| {
        for (m, want) in messages.iter().zip(&first) {
            assert_eq!(rules.scan(m, &mut scratch).score.0 as u32, *want, "a second pass gives the same scores");
        }
    });
    assert_eq!(info.count_total, 0, "allocations during {} warm scans: {info:?}", messages.len());
}
