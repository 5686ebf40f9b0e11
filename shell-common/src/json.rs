//! Just enough JSON output for `--json`: string escaping.

use std::fmt::Write;

/// Appends `s` to `out` as a JSON string literal; invalid UTF-8 is replaced.
pub fn push_str(out: &mut String, s: &str) {
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            c if (c as u32) < 0x20 => {
                let _ = write!(out, "\\u{:04x}", c as u32);
            }
            c => out.push(c),
        }
    }
    out.push('"');
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn escapes_table() {
        let cases = [("plain", "\"plain\""), ("a\"b", "\"a\\\"b\""), ("x\ny", "\"x\\ny\""), ("\u{1}", "\"\\u0001\""), ("é", "\"é\"")];
        for (input, want) in cases {
            let mut out = String::new();
            push_str(&mut out, input);
            assert_eq!(out, want);
        }
    }
}
