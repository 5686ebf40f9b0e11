//! A compiled [`Backtrack`] as bytes, for the compile cache: a warm start takes the
//! program and its relaxed regex from there instead of parsing and compiling the Perl
//! pattern again. Reading checks every index against the program it points into.

use alloc::boxed::Box;
use alloc::string::String;
use alloc::vec::Vec;

use super::{Anchor, Assert, Backtrack, ByteSet, ClassScan, Few, Inst, MarkerKind, Program, Required, Scan, NONE, NO_CLASS};

/// Instructions, classes or literal bytes in one stored program, at most.
const MAX_ITEMS: usize = 1 << 20;

impl Backtrack {
    /// Appends this compile's image to `out`.
    pub(crate) fn write_image(&self, out: &mut Vec<u8>) {
        let mut w = Writer(out);
        w.bytes(self.relaxed.as_bytes());
        let p = &self.program;
        w.u32(p.insts.len() as u32);
        for inst in &p.insts {
            w.inst(inst);
        }
        w.u32(p.classes.len() as u32);
        for c in &p.classes {
            w.set(*c);
        }
        w.bytes(&p.bytes);
        w.u32(p.groups as u32);
        w.u32(p.counters as u32);
        w.u8(match p.anchor {
            Anchor::Anywhere => 0,
            Anchor::Start => 1,
            Anchor::Line => 2,
        });
        match p.scan {
            Scan::Any => w.u8(0),
            Scan::Bytes { offset, bytes } => {
                w.u8(1);
                w.u32(offset);
                w.few(bytes);
            }
            Scan::Set(set) => {
                w.u8(2);
                w.set(set);
            }
        }
        match &p.pairs {
            None => w.u8(0),
            Some(pairs) => {
                w.u8(1);
                for &row in pairs.iter() {
                    w.set(row);
                }
            }
        }
        w.u32(p.prefix_pc);
        w.u32(p.prefix_len);
        w.u32(p.min_len);
        w.u32(p.skip_runs.map_or(NONE, u32::from));
        w.u16(p.captures);
        w.u32(p.required.start);
        w.u16(p.required.len);
        w.u16(p.required.key);
        w.bool(p.required.fold);
    }

    /// The compile `image` holds, `None` when it is not one `write_image` wrote or an
    /// index in it points outside its program.
    pub(crate) fn read_image(image: &[u8]) -> Option<Backtrack> {
        let mut r = Reader { bytes: image, pos: 0 };
        let relaxed = String::from_utf8(r.bytes()?.to_vec()).ok()?;
        let n = r.count()?;
        let mut insts = Vec::with_capacity(n);
        for _ in 0..n {
            insts.push(r.inst()?);
        }
        let n = r.count()?;
        let mut classes = Vec::with_capacity(n);
        for _ in 0..n {
            classes.push(r.set()?);
        }
        let bytes = r.bytes()?.to_vec();
        let groups = usize::from(u16::try_from(r.u32()?).ok()?);
        let counters = usize::from(u16::try_from(r.u32()?).ok()?);
        let anchor = match r.u8()? {
            0 => Anchor::Anywhere,
            1 => Anchor::Start,
            2 => Anchor::Line,
            _ => return None,
        };
        let scan = match r.u8()? {
            0 => Scan::Any,
            1 => Scan::Bytes { offset: r.u32()?, bytes: r.few()? },
            2 => Scan::Set(r.set()?),
            _ => return None,
        };
        let pairs = match r.u8()? {
            0 => None,
            1 => {
                let mut pairs = Box::new([ByteSet::default(); 256]);
                for row in pairs.iter_mut() {
                    *row = r.set()?;
                }
                Some(pairs)
            }
            _ => return None,
        };
        let prefix_pc = r.u32()?;
        let prefix_len = r.u32()?;
        let min_len = r.u32()?;
        let skip_runs = match r.u32()? {
            NONE => None,
            c => Some(u16::try_from(c).ok()?),
        };
        let captures = r.u16()?;
        let required = Required { start: r.u32()?, len: r.u16()?, key: r.u16()?, fold: r.bool()? };
        if r.pos != image.len() {
            return None;
        }
        let program = Program {
            class_scans: classes.iter().map(|&set| ClassScan::of(set)).collect(),
            insts,
            classes,
            bytes,
            groups,
            counters,
            anchor,
            scan,
            pairs,
            prefix_pc,
            prefix_len,
            min_len,
            skip_runs,
            captures,
            required,
        };
        program.indices_valid().then_some(Backtrack { relaxed, program })
    }
}

impl Program {
    /// Every jump, class, literal, counter and group the instructions name exists.
    fn indices_valid(&self) -> bool {
        let pc = |at: u32| (at as usize) < self.insts.len();
        let class = |c: u16| usize::from(c) < self.classes.len();
        let guard = |c: u16| c == NO_CLASS || class(c);
        let counter = |c: u16| usize::from(c) < self.counters;
        let slot = |s: u16| usize::from(s) < self.groups;
        let insts_ok = self.insts.iter().all(|inst| match *inst {
            Inst::Literal { start, len } => {
                (start as usize).checked_add(len as usize).is_some_and(|end| end <= self.bytes.len())
            }
            Inst::Class(c) => class(c),
            Inst::Split { first, second, guard: g } => pc(first) && pc(second) && guard(g),
            Inst::Jump(to) => pc(to),
            Inst::Repeat { class: c, follow, .. } => class(c) && guard(follow),
            Inst::RepeatStart { counter: c } | Inst::RepeatEnter { counter: c } => counter(c),
            Inst::RepeatLoop { counter: c, exit, .. } => counter(c) && pc(exit),
            Inst::Runs { exit, .. } => pc(exit),
            Inst::RepeatEnd { counter: c, loop_pc, body_first } => counter(c) && pc(loop_pc) && guard(body_first),
            Inst::Open(s) | Inst::Close(s) | Inst::Backref { slot: s, .. } => slot(s),
            Inst::LookStart { end, .. } => pc(end),
            Inst::Match | Inst::Byte(_) | Inst::Look(_) | Inst::LookEnd | Inst::AtomicStart | Inst::AtomicEnd => true,
        });
        let r = self.required;
        let required_ok = r.len == 0
            || (r.key < r.len && (r.start as usize).checked_add(usize::from(r.len)).is_some_and(|end| end <= self.bytes.len()));
        insts_ok
            && required_ok
            && usize::from(self.captures) <= self.groups
            && (self.prefix_pc as usize) <= self.insts.len()
            && self.skip_runs.is_none_or(class)
    }
}

const ASSERTS: [Assert; 11] = [
    Assert::Start,
    Assert::End,
    Assert::StartLine,
    Assert::EndLine,
    Assert::Word,
    Assert::NotWord,
    Assert::WordStart,
    Assert::WordEnd,
    Assert::WordStartHalf,
    Assert::WordEndHalf,
    Assert::EndBeforeNewline,
];

const MARKERS: [MarkerKind; 5] = [MarkerKind::Ahead, MarkerKind::NotAhead, MarkerKind::Behind, MarkerKind::NotBehind, MarkerKind::Atomic];

struct Writer<'a>(&'a mut Vec<u8>);

impl Writer<'_> {
    fn u8(&mut self, v: u8) {
        self.0.push(v);
    }

    fn u16(&mut self, v: u16) {
        self.0.extend_from_slice(&v.to_le_bytes());
    }

    fn u32(&mut self, v: u32) {
        self.0.extend_from_slice(&v.to_le_bytes());
    }

    fn bool(&mut self, v: bool) {
        self.u8(u8::from(v));
    }

    fn bytes(&mut self, b: &[u8]) {
        self.u32(b.len() as u32);
        self.0.extend_from_slice(b);
    }

    fn set(&mut self, s: ByteSet) {
        self.0.extend_from_slice(&s.lo.to_le_bytes());
        self.0.extend_from_slice(&s.hi.to_le_bytes());
    }

    fn few(&mut self, f: Few) {
        match f {
            Few::Empty => self.u8(0),
            Few::One(a) => self.0.extend_from_slice(&[1, a]),
            Few::Two(a, b) => self.0.extend_from_slice(&[2, a, b]),
            Few::Three(a, b, c) => self.0.extend_from_slice(&[3, a, b, c]),
            Few::Many => self.u8(4),
        }
    }

    fn inst(&mut self, inst: &Inst) {
        match *inst {
            Inst::Match => self.u8(0),
            Inst::Byte(b) => self.0.extend_from_slice(&[1, b]),
            Inst::Literal { start, len } => {
                self.u8(2);
                self.u32(start);
                self.u32(len);
            }
            Inst::Class(c) => {
                self.u8(3);
                self.u16(c);
            }
            Inst::Look(a) => {
                self.u8(4);
                self.u8(ASSERTS.iter().position(|&x| x == a).unwrap_or(0) as u8);
            }
            Inst::Split { first, second, guard } => {
                self.u8(5);
                self.u32(first);
                self.u32(second);
                self.u16(guard);
            }
            Inst::Jump(to) => {
                self.u8(6);
                self.u32(to);
            }
            Inst::Repeat { class, min, max, greedy, possessive, follow } => {
                self.u8(7);
                self.u16(class);
                self.u16(min);
                self.u16(max);
                self.bool(greedy);
                self.bool(possessive);
                self.u16(follow);
            }
            Inst::RepeatStart { counter } => {
                self.u8(8);
                self.u16(counter);
            }
            Inst::RepeatLoop { counter, min, max, greedy, exit } => {
                self.u8(9);
                self.u16(counter);
                self.u16(min);
                self.u16(max);
                self.bool(greedy);
                self.u32(exit);
            }
            Inst::RepeatEnter { counter } => {
                self.u8(10);
                self.u16(counter);
            }
            Inst::RepeatEnd { counter, loop_pc, body_first } => {
                self.u8(11);
                self.u16(counter);
                self.u32(loop_pc);
                self.u16(body_first);
            }
            Inst::Open(s) => {
                self.u8(12);
                self.u16(s);
            }
            Inst::Close(s) => {
                self.u8(13);
                self.u16(s);
            }
            Inst::Backref { slot, fold } => {
                self.u8(14);
                self.u16(slot);
                self.bool(fold);
            }
            Inst::LookStart { kind, min, max, end } => {
                self.u8(15);
                self.u8(MARKERS.iter().position(|&x| x == kind).unwrap_or(0) as u8);
                self.u16(min);
                self.u16(max);
                self.u32(end);
            }
            Inst::LookEnd => self.u8(16),
            Inst::AtomicStart => self.u8(17),
            Inst::AtomicEnd => self.u8(18),
            Inst::Runs { min, max, exit } => {
                self.u8(19);
                self.u16(min);
                self.u16(max);
                self.u32(exit);
            }
        }
    }
}

struct Reader<'a> {
    bytes: &'a [u8],
    pos: usize,
}

impl<'a> Reader<'a> {
    fn take<const N: usize>(&mut self) -> Option<[u8; N]> {
        let end = self.pos.checked_add(N)?;
        let taken = self.bytes.get(self.pos..end)?.try_into().ok()?;
        self.pos = end;
        Some(taken)
    }

    fn u8(&mut self) -> Option<u8> {
        self.take::<1>().map(|[b]| b)
    }

    fn u16(&mut self) -> Option<u16> {
        self.take().map(u16::from_le_bytes)
    }

    fn u32(&mut self) -> Option<u32> {
        self.take().map(u32::from_le_bytes)
    }

    fn bool(&mut self) -> Option<bool> {
        match self.u8()? {
            0 => Some(false),
            1 => Some(true),
            _ => None,
        }
    }

    /// A length within `MAX_ITEMS`.
    fn count(&mut self) -> Option<usize> {
        Some(self.u32()? as usize).filter(|&n| n <= MAX_ITEMS)
    }

    fn bytes(&mut self) -> Option<&'a [u8]> {
        let len = self.count()?;
        let end = self.pos.checked_add(len)?;
        let taken = self.bytes.get(self.pos..end)?;
        self.pos = end;
        Some(taken)
    }

    fn set(&mut self) -> Option<ByteSet> {
        Some(ByteSet { lo: u128::from_le_bytes(self.take()?), hi: u128::from_le_bytes(self.take()?) })
    }

    fn few(&mut self) -> Option<Few> {
        Some(match self.u8()? {
            0 => Few::Empty,
            1 => Few::One(self.u8()?),
            2 => Few::Two(self.u8()?, self.u8()?),
            3 => Few::Three(self.u8()?, self.u8()?, self.u8()?),
            4 => Few::Many,
            _ => return None,
        })
    }

    fn inst(&mut self) -> Option<Inst> {
        Some(match self.u8()? {
            0 => Inst::Match,
            1 => Inst::Byte(self.u8()?),
            2 => Inst::Literal { start: self.u32()?, len: self.u32()? },
            3 => Inst::Class(self.u16()?),
            4 => Inst::Look(*ASSERTS.get(usize::from(self.u8()?))?),
            5 => Inst::Split { first: self.u32()?, second: self.u32()?, guard: self.u16()? },
            6 => Inst::Jump(self.u32()?),
            7 => Inst::Repeat {
                class: self.u16()?,
                min: self.u16()?,
                max: self.u16()?,
                greedy: self.bool()?,
                possessive: self.bool()?,
                follow: self.u16()?,
            },
            8 => Inst::RepeatStart { counter: self.u16()? },
            9 => Inst::RepeatLoop { counter: self.u16()?, min: self.u16()?, max: self.u16()?, greedy: self.bool()?, exit: self.u32()? },
            10 => Inst::RepeatEnter { counter: self.u16()? },
            11 => Inst::RepeatEnd { counter: self.u16()?, loop_pc: self.u32()?, body_first: self.u16()? },
            12 => Inst::Open(self.u16()?),
            13 => Inst::Close(self.u16()?),
            14 => Inst::Backref { slot: self.u16()?, fold: self.bool()? },
            15 => Inst::LookStart {
                kind: *MARKERS.get(usize::from(self.u8()?))?,
                min: self.u16()?,
                max: self.u16()?,
                end: self.u32()?,
            },
            16 => Inst::LookEnd,
            17 => Inst::AtomicStart,
            18 => Inst::AtomicEnd,
            19 => Inst::Runs { min: self.u16()?, max: self.u16()?, exit: self.u32()? },
            _ => return None,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::rules::perl;

    #[test]
    fn images_table() {
        // Each construct the compiler emits, written and read back whole.
        let patterns = [
            r"/a(?=bc)/",
            r"/foo(?=bar)/i",
            r"/(\w+)\s+\1/",
            r"/(?<!x)y{2,5}?z/m",
            r"/^(?>a+)b/",
            r"/(?:ab|cd){3,40}(?!e)/",
            r"/[a-f]++\b/",
            r"/(?!foo)\w{3}$/",
            r"/[a-r]x|q/",
            r"/(?:,[^,]{1,90}){50}/",
            r"/From: (\w+)\n(?:[^\n]{1,100}\n+)*To: \1/i",
        ];
        for pattern in patterns {
            let Ok(compiled) = perl::backtrack(pattern) else { panic!("{pattern} does not compile") };
            let mut image = Vec::new();
            compiled.write_image(&mut image);
            let Some(read) = Backtrack::read_image(&image) else { panic!("{pattern}: image not read back") };
            assert_eq!(read.relaxed, compiled.relaxed, "{pattern}");
            assert_eq!(read.program.insts, compiled.program.insts, "{pattern}");
            let body_first = compiled.program.insts.iter().any(|i| matches!(i, Inst::RepeatEnd { body_first, .. } if *body_first != NO_CLASS));
            assert_eq!(body_first, pattern.ends_with("{50}/"), "{pattern}");
            let runs = compiled.program.insts.iter().any(|i| matches!(i, Inst::Runs { .. }));
            assert_eq!(runs, pattern.contains(r"\n+)*"), "{pattern}");
            assert_eq!(read.program.classes, compiled.program.classes, "{pattern}");
            assert_eq!(read.program.class_scans, compiled.program.class_scans, "{pattern}");
            assert_eq!(read.program.pairs, compiled.program.pairs, "{pattern}");
            assert_eq!(compiled.program.pairs.is_some(), pattern == r"/[a-r]x|q/", "{pattern}");
            assert_eq!(read.program.bytes, compiled.program.bytes, "{pattern}");
            assert_eq!(
                (read.program.groups, read.program.counters, read.program.anchor, read.program.scan),
                (compiled.program.groups, compiled.program.counters, compiled.program.anchor, compiled.program.scan),
                "{pattern}"
            );
            assert_eq!(
                (read.program.prefix_pc, read.program.prefix_len, read.program.min_len, read.program.skip_runs),
                (compiled.program.prefix_pc, compiled.program.prefix_len, compiled.program.min_len, compiled.program.skip_runs),
                "{pattern}"
            );
            let (a, b) = (read.program.required, compiled.program.required);
            assert_eq!((read.program.captures, a.start, a.len, a.key, a.fold), (compiled.program.captures, b.start, b.len, b.key, b.fold), "{pattern}");
            // Every cut short of the whole image is refused, as is a trailing byte.
            for cut in 0..image.len() {
                assert!(Backtrack::read_image(image.get(..cut).unwrap_or_default()).is_none(), "{pattern} cut at {cut}");
            }
            let mut longer = image.clone();
            longer.push(0);
            assert!(Backtrack::read_image(&longer).is_none(), "{pattern} with a trailing byte");
        }
    }

    #[test]
    fn capture_programs_round_trip() {
        // Eval patterns record captures and check a required literal first.
        let Ok(extended) = perl::translate_backtracking(r"(\S+) by (\S+) with esmtp", "i") else { panic!("does not translate") };
        let Ok(program) = super::super::compile_captures(&extended) else { panic!("does not compile") };
        assert!(program.captures > 0 && program.required.len > 0);
        let compiled = Backtrack { relaxed: String::new(), program };
        let mut image = Vec::new();
        compiled.write_image(&mut image);
        let Some(read) = Backtrack::read_image(&image) else { panic!("image not read back") };
        let (a, b) = (read.program.required, compiled.program.required);
        assert_eq!((read.program.captures, a.start, a.len, a.key, a.fold), (compiled.program.captures, b.start, b.len, b.key, b.fold));
        assert_eq!(read.program.insts, compiled.program.insts);
    }

    #[test]
    fn bad_indices_table() {
        // (pattern, damage to its program) -> the image is refused.
        let Ok(compiled) = perl::backtrack(r"/(a|b)+c\1/") else { panic!("does not compile") };
        let damages: [fn(&mut Program); 4] = [
            |p| p.insts.push(Inst::Jump(u32::MAX - 1)),
            |p| p.insts.push(Inst::Class(u16::MAX - 1)),
            |p| p.insts.push(Inst::Literal { start: 0, len: 1 << 30 }),
            |p| p.insts.push(Inst::Backref { slot: 999, fold: false }),
        ];
        for (i, damage) in damages.iter().enumerate() {
            let mut bad = Backtrack { relaxed: compiled.relaxed.clone(), program: compiled.program.clone() };
            damage(&mut bad.program);
            let mut image = Vec::new();
            bad.write_image(&mut image);
            assert!(Backtrack::read_image(&image).is_none(), "damage {i} accepted");
        }
    }
}
