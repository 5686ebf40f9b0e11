//! Scores in thousandths of a point: exact sums, no floating point in `no_std`.

use core::fmt;

/// A SpamAssassin score, stored in thousandths of a point.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct Score(pub i32);

/// Why a score could not be read.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ScoreError;

impl fmt::Display for ScoreError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("not a decimal score")
    }
}

impl Score {
    /// 0 points.
    pub const ZERO: Score = Score(0);

    /// `points` whole points.
    pub const fn points(points: i32) -> Score {
        Score(points * 1000)
    }

    /// Reads a decimal such as `5`, `-0.5`, `1.234`, `+2.`; digits past the third decimal are rounded.
    pub fn parse(text: &str) -> Result<Score, ScoreError> {
        let b = text.trim().as_bytes();
        let (neg, digits) = match b.first() {
            Some(b'-') => (true, &b[1..]),
            Some(b'+') => (false, &b[1..]),
            _ => (false, b),
        };
        let mut whole: i64 = 0;
        let mut frac: i64 = 0;
        let mut frac_digits = 0;
        let mut round_up = false;
        let mut seen_dot = false;
        let mut any = false;
        for &c in digits {
            match c {
                b'0'..=b'9' => {
                    any = true;
                    let d = i64::from(c - b'0');
                    if !seen_dot {
                        whole = whole.checked_mul(10).and_then(|w| w.checked_add(d)).ok_or(ScoreError)?;
                        if whole > 2_000_000 {
                            return Err(ScoreError);
                        }
                    } else if frac_digits < 3 {
                        frac = frac * 10 + d;
                        frac_digits += 1;
                    } else if frac_digits == 3 {
                        round_up = d >= 5;
                        frac_digits += 1;
                    }
                }
                b'.' if !seen_dot => seen_dot = true,
                _ => return Err(ScoreError),
            }
        }
        if !any {
            return Err(ScoreError);
        }
        while frac_digits < 3 {
            frac *= 10;
            frac_digits += 1;
        }
        let mut milli = whole * 1000 + frac + i64::from(round_up);
        if neg {
            milli = -milli;
        }
        i32::try_from(milli).map(Score).map_err(|_| ScoreError)
    }

    /// The score as a floating-point number of points.
    pub fn as_f64(self) -> f64 {
        f64::from(self.0) / 1000.0
    }

    /// Rounded to `decimals` (0 to 3) places as Perl's `%.Nf` shows it.
    pub fn display(self, decimals: u8) -> ScoreDisplay {
        ScoreDisplay { score: self, decimals: if decimals > 3 { 3 } else { decimals } }
    }
}

impl core::ops::Add for Score {
    type Output = Score;
    fn add(self, rhs: Score) -> Score {
        Score(self.0.saturating_add(rhs.0))
    }
}

impl core::ops::AddAssign for Score {
    fn add_assign(&mut self, rhs: Score) {
        *self = *self + rhs;
    }
}

/// A [`Score`] formatted to a fixed number of decimals.
#[derive(Debug, Clone, Copy)]
pub struct ScoreDisplay {
    score: Score,
    decimals: u8,
}

impl fmt::Display for ScoreDisplay {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        // Thousandths divided by 1000 give the same double Perl parses from the rule file,
        // and core's exact decimal expansion rounds as C's printf does.
        let mut buf = heapless::String::<32>::new();
        use core::fmt::Write;
        let value = self.score.as_f64();
        let _ = write!(buf, "{value:.prec$}", prec = usize::from(self.decimals));
        f.pad(&buf)
    }
}

impl fmt::Display for Score {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.display(1).fmt(f)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use alloc::string::ToString;

    #[test]
    fn parse_table() {
        let cases: &[(&str, Option<i32>)] = &[
            ("5", Some(5000)),
            ("5.0", Some(5000)),
            ("-0.5", Some(-500)),
            ("+2.", Some(2000)),
            ("0.001", Some(1)),
            ("1.2345", Some(1235)),
            ("1000", Some(1_000_000)),
            (" 3.5 ", Some(3500)),
            ("", None),
            ("abc", None),
            ("1.2.3", None),
            ("-", None),
            ("99999999999", None),
        ];
        for (text, want) in cases {
            assert_eq!(Score::parse(text).ok().map(|s| s.0), *want, "{text:?}");
        }
    }

    #[test]
    fn display_table() {
        let cases: &[(i32, u8, &str)] = &[
            (15000, 1, "15.0"),
            (-500, 1, "-0.5"),
            (1, 1, "0.0"),
            (-1, 1, "-0.0"),
            (2450, 1, "2.5"),
            (1150, 1, "1.1"),
            (1235, 3, "1.235"),
            (-2100, 2, "-2.10"),
            (999_999, 0, "1000"),
        ];
        for (milli, dec, want) in cases {
            assert_eq!(Score(*milli).display(*dec).to_string(), *want);
        }
    }
}
