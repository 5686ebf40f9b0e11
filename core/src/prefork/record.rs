//! The back-channel record: what a child tells the master, in fixed-size frames.
//!
//! A child writes one [`SIZE`]-byte record per event (one write per served message),
//! never a byte at a time. The master may find several records, or a record cut in
//! two, in one read: [`RecordReader`] keeps the partial tail for the next read.
//!
//! Layout, little-endian:
//! ```text
//!  0  magic 0xA5        1  version 1        2  kind        3  flags (bit 0: spam)
//!  4  pid u32           8  seq u32         12  bytes u32  16  scan time µs u32
//! 20  score i32 (thousandths of a point)   24  reserved, zero
//! 28  check u32: FNV-1a over bytes 0..28
//! ```

use core::fmt;

use crate::score::Score;

/// Size of one record on the wire, in bytes.
pub const SIZE: usize = 32;

/// First byte of every record: catches a stream that has lost its framing.
pub const MAGIC: u8 = 0xA5;

/// Layout version in the second byte; a decoder refuses others.
pub const VERSION: u8 = 1;

const FLAG_SPAM: u8 = 0x01;
const CHECKED_LEN: usize = 28;

/// What a record reports.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub enum RecordKind {
    /// The child has started and waits for work (idle).
    Ready,
    /// The child has taken a connection (busy). Sent after an accept order in
    /// child-accept mode, or on its own in round-robin mode.
    Busy,
    /// The child scanned one message and is idle again; the figures are valid.
    Served,
    /// The child finished a connection without a verdict (PING, a bad request, a
    /// client that went away, nothing to accept) and is idle again.
    NoVerdict,
}

impl RecordKind {
    fn to_byte(self) -> u8 {
        match self {
            RecordKind::Ready => 1,
            RecordKind::Busy => 2,
            RecordKind::Served => 3,
            RecordKind::NoVerdict => 4,
        }
    }

    fn from_byte(b: u8) -> Option<RecordKind> {
        match b {
            1 => Some(RecordKind::Ready),
            2 => Some(RecordKind::Busy),
            3 => Some(RecordKind::Served),
            4 => Some(RecordKind::NoVerdict),
            _ => None,
        }
    }
}

/// One back-channel record, decoded.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct Record {
    /// What happened.
    pub kind: RecordKind,
    /// The sender's pid, checked by the master against the channel it came on.
    pub pid: u32,
    /// The sender's record counter, starting at 0: a gap means a lost record.
    pub seq: u32,
    /// Message size in bytes (`Served`), else 0.
    pub bytes: u32,
    /// Time spent parsing and scanning, in microseconds (`Served`), else 0.
    pub scan_us: u32,
    /// The message's score (`Served`), else 0.
    pub score: Score,
    /// Whether the message was judged spam (`Served`).
    pub spam: bool,
}

impl Record {
    /// A record with all figures zero.
    pub const fn new(kind: RecordKind, pid: u32, seq: u32) -> Record {
        Record { kind, pid, seq, bytes: 0, scan_us: 0, score: Score(0), spam: false }
    }

    /// `Served` with one message's figures.
    pub const fn served(pid: u32, seq: u32, bytes: u32, scan_us: u32, score: Score, spam: bool) -> Record {
        Record { kind: RecordKind::Served, pid, seq, bytes, scan_us, score, spam }
    }
}

/// Why bytes are not a valid record.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub enum RecordError {
    /// The first byte is not [`MAGIC`].
    BadMagic(u8),
    /// The layout version is not [`VERSION`].
    BadVersion(u8),
    /// Unknown record kind.
    BadKind(u8),
    /// Flag bits that this version does not define are set.
    BadFlags(u8),
    /// The reserved bytes are not zero.
    ReservedNotZero,
    /// The check value does not match the contents.
    BadCheck {
        /// Check computed over the received bytes.
        computed: u32,
        /// Check carried by the record.
        carried: u32,
    },
}

impl fmt::Display for RecordError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            RecordError::BadMagic(b) => write!(f, "back-channel record: bad magic byte 0x{b:02x}"),
            RecordError::BadVersion(v) => write!(f, "back-channel record: unsupported version {v}"),
            RecordError::BadKind(k) => write!(f, "back-channel record: unknown kind {k}"),
            RecordError::BadFlags(fl) => write!(f, "back-channel record: undefined flags 0x{fl:02x}"),
            RecordError::ReservedNotZero => f.write_str("back-channel record: reserved bytes not zero"),
            RecordError::BadCheck { computed, carried } => {
                write!(f, "back-channel record: check 0x{carried:08x} does not match 0x{computed:08x}")
            }
        }
    }
}

fn fnv1a(bytes: &[u8]) -> u32 {
    bytes.iter().fold(0x811c_9dc5u32, |h, &b| (h ^ u32::from(b)).wrapping_mul(0x0100_0193))
}

fn put_u32(out: &mut [u8; SIZE], at: usize, v: u32) {
    for (dst, src) in out.iter_mut().skip(at).zip(v.to_le_bytes()) {
        *dst = src;
    }
}

fn get_u32(buf: &[u8; SIZE], at: usize) -> u32 {
    let mut word = [0u8; 4];
    for (dst, src) in word.iter_mut().zip(buf.iter().skip(at)) {
        *dst = *src;
    }
    u32::from_le_bytes(word)
}

/// The wire form of `record`.
pub fn encode(record: &Record) -> [u8; SIZE] {
    let mut out = [0u8; SIZE];
    out[0] = MAGIC;
    out[1] = VERSION;
    out[2] = record.kind.to_byte();
    out[3] = if record.spam { FLAG_SPAM } else { 0 };
    put_u32(&mut out, 4, record.pid);
    put_u32(&mut out, 8, record.seq);
    put_u32(&mut out, 12, record.bytes);
    put_u32(&mut out, 16, record.scan_us);
    put_u32(&mut out, 20, record.score.0 as u32);
    let check = fnv1a(&out[..CHECKED_LEN]);
    put_u32(&mut out, CHECKED_LEN, check);
    out
}

/// Reads one record; anything malformed is an error, never a panic.
pub fn decode(buf: &[u8; SIZE]) -> Result<Record, RecordError> {
    let [magic, version, kind, flags, ..] = *buf;
    if magic != MAGIC {
        return Err(RecordError::BadMagic(magic));
    }
    if version != VERSION {
        return Err(RecordError::BadVersion(version));
    }
    let carried = get_u32(buf, CHECKED_LEN);
    let computed = fnv1a(&buf[..CHECKED_LEN]);
    if carried != computed {
        return Err(RecordError::BadCheck { computed, carried });
    }
    let kind = RecordKind::from_byte(kind).ok_or(RecordError::BadKind(kind))?;
    if flags & !FLAG_SPAM != 0 {
        return Err(RecordError::BadFlags(flags));
    }
    if get_u32(buf, 24) != 0 {
        return Err(RecordError::ReservedNotZero);
    }
    Ok(Record {
        kind,
        pid: get_u32(buf, 4),
        seq: get_u32(buf, 8),
        bytes: get_u32(buf, 12),
        scan_us: get_u32(buf, 16),
        score: Score(get_u32(buf, 20) as i32),
        spam: flags & FLAG_SPAM != 0,
    })
}

/// Bytes a [`RecordReader`] holds: eight records, enough for any burst a child can
/// write between two master reads; more simply waits in the socket.
pub const READER_CAPACITY: usize = 8 * SIZE;

/// Turns arbitrary read chunks from one back-channel into whole records.
///
/// Either read straight into [`spare_mut`](Self::spare_mut) and [`commit`](Self::commit),
/// or hand over a chunk with [`push`](Self::push) / [`feed`](Self::feed); then take
/// records with [`next_record`](Self::next_record) until it returns `None`. A partial
/// record at the end stays for the next read. One reader per child.
#[derive(Debug, Clone)]
pub struct RecordReader {
    buf: [u8; READER_CAPACITY],
    start: usize,
    end: usize,
}

impl Default for RecordReader {
    fn default() -> Self {
        RecordReader::new()
    }
}

impl RecordReader {
    /// An empty reader.
    pub const fn new() -> RecordReader {
        RecordReader { buf: [0; READER_CAPACITY], start: 0, end: 0 }
    }

    /// Bytes held that do not yet make a whole record (after draining) or are not yet taken.
    pub fn buffered(&self) -> usize {
        self.end.saturating_sub(self.start)
    }

    /// Forgets everything held (the channel was closed or reset).
    pub fn clear(&mut self) {
        self.start = 0;
        self.end = 0;
    }

    fn compact(&mut self) {
        if self.start > 0 {
            self.buf.copy_within(self.start..self.end, 0);
            self.end -= self.start;
            self.start = 0;
        }
    }

    /// Free space to read into; call [`commit`](Self::commit) with the count read.
    /// Take all whole records first, or the space may be small.
    pub fn spare_mut(&mut self) -> &mut [u8] {
        self.compact();
        self.buf.get_mut(self.end..).unwrap_or(&mut [])
    }

    /// Marks `n` bytes of [`spare_mut`](Self::spare_mut) as filled (clamped to the space).
    pub fn commit(&mut self, n: usize) {
        self.end = self.end.saturating_add(n).min(READER_CAPACITY);
    }

    /// Copies as much of `chunk` as fits; returns how many bytes were taken.
    pub fn push(&mut self, chunk: &[u8]) -> usize {
        let spare = self.spare_mut();
        let n = spare.len().min(chunk.len());
        for (dst, src) in spare.iter_mut().zip(chunk) {
            *dst = *src;
        }
        self.commit(n);
        n
    }

    /// The next whole record, if one is buffered. A malformed record is consumed
    /// and returned as an error; after one the channel's framing is not to be trusted.
    pub fn next_record(&mut self) -> Option<Result<Record, RecordError>> {
        let stop = self.start.checked_add(SIZE)?;
        if stop > self.end {
            return None;
        }
        let frame: &[u8; SIZE] = self.buf.get(self.start..stop)?.try_into().ok()?;
        let result = decode(frame);
        self.start = stop;
        if self.start == self.end {
            self.clear();
        }
        Some(result)
    }

    /// Takes all of `chunk`, calling `on_record` for every whole record in order.
    pub fn feed(&mut self, mut chunk: &[u8], mut on_record: impl FnMut(Result<Record, RecordError>)) {
        loop {
            let taken = self.push(chunk);
            while let Some(r) = self.next_record() {
                on_record(r);
            }
            chunk = chunk.get(taken..).unwrap_or(&[]);
            if chunk.is_empty() {
                break;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::vec::Vec;

    fn samples() -> [Record; 5] {
        [
            Record::new(RecordKind::Ready, 4242, 0),
            Record::new(RecordKind::Busy, 1, 1),
            Record::served(70_000, 2, 12_345, 8_765, Score(5_300), true),
            Record::served(u32::MAX, u32::MAX, u32::MAX, u32::MAX, Score(-12_500), false),
            Record::new(RecordKind::NoVerdict, 9, 7),
        ]
    }

    #[test]
    fn round_trip_table() {
        for r in samples() {
            assert_eq!(decode(&encode(&r)), Ok(r));
        }
    }

    #[test]
    fn layout_is_little_endian() {
        let b = encode(&Record::served(0x0102_0304, 5, 0x10, 0x20, Score(-1), true));
        assert_eq!(&b[..8], &[MAGIC, VERSION, 3, 1, 4, 3, 2, 1]);
        assert_eq!(&b[8..24], &[5, 0, 0, 0, 0x10, 0, 0, 0, 0x20, 0, 0, 0, 0xff, 0xff, 0xff, 0xff]);
        assert_eq!(&b[24..28], &[0, 0, 0, 0]);
    }

    /// Rewrites the check so a test reaches the field validation behind it.
    fn recheck(mut b: [u8; SIZE]) -> [u8; SIZE] {
        let c = fnv1a(&b[..CHECKED_LEN]);
        b[CHECKED_LEN..].copy_from_slice(&c.to_le_bytes());
        b
    }

    #[test]
    fn bad_records_are_errors() {
        let good = encode(&Record::new(RecordKind::Ready, 1, 0));
        let cases: &[(usize, u8, bool, RecordError)] = &[
            (0, 0x00, false, RecordError::BadMagic(0)),
            (1, 2, false, RecordError::BadVersion(2)),
            (2, 0, true, RecordError::BadKind(0)),
            (2, 9, true, RecordError::BadKind(9)),
            (3, 0x02, true, RecordError::BadFlags(0x02)),
            (25, 1, true, RecordError::ReservedNotZero),
        ];
        for &(at, value, fix_check, ref want) in cases {
            let mut b = good;
            b[at] = value;
            if fix_check {
                b = recheck(b);
            }
            assert_eq!(decode(&b), Err(*want), "byte {at} = {value}");
        }
        let mut flipped = good;
        flipped[5] ^= 0x40;
        assert!(matches!(decode(&flipped), Err(RecordError::BadCheck { .. })));
        assert!(matches!(decode(&[0xff; SIZE]), Err(RecordError::BadMagic(0xff))));
    }

    #[test]
    fn every_single_byte_corruption_is_caught() {
        let good = encode(&Record::served(321, 3, 999, 77, Score(4_200), true));
        for at in 0..SIZE {
            for bit in 0..8 {
                let mut b = good;
                b[at] ^= 1 << bit;
                assert!(decode(&b).is_err(), "byte {at} bit {bit}");
            }
        }
    }

    fn stream() -> Vec<u8> {
        samples().iter().flat_map(encode).collect()
    }

    #[test]
    fn reader_handles_any_chunking() {
        let bytes = stream();
        for chunk in [1, 2, 3, 7, 31, 32, 33, 64, 65, 100, 160, 1000] {
            let mut reader = RecordReader::new();
            let mut got = Vec::new();
            for piece in bytes.chunks(chunk) {
                reader.feed(piece, |r| got.push(r));
            }
            assert_eq!(got, samples().iter().map(|r| Ok(*r)).collect::<Vec<_>>(), "chunk {chunk}");
            assert_eq!(reader.buffered(), 0);
        }
    }

    #[test]
    fn reader_keeps_partial_tail() {
        let bytes = stream();
        let mut reader = RecordReader::new();
        assert_eq!(reader.push(&bytes[..SIZE + 10]), SIZE + 10);
        assert_eq!(reader.next_record(), Some(Ok(samples()[0])));
        assert_eq!(reader.next_record(), None);
        assert_eq!(reader.buffered(), 10);
        let spare = reader.spare_mut();
        spare[..SIZE - 10].copy_from_slice(&bytes[SIZE + 10..2 * SIZE]);
        reader.commit(SIZE - 10);
        assert_eq!(reader.next_record(), Some(Ok(samples()[1])));
        assert_eq!(reader.next_record(), None);
    }

    #[test]
    fn reader_push_stops_when_full_and_feed_continues() {
        let one = encode(&Record::new(RecordKind::Busy, 5, 0));
        let many: Vec<u8> = (0..20).flat_map(|_| one).collect();
        let mut reader = RecordReader::new();
        assert_eq!(reader.push(&many), READER_CAPACITY);
        assert_eq!(reader.push(&many), 0);
        reader.clear();
        let mut n = 0;
        reader.feed(&many, |r| {
            assert!(r.is_ok());
            n += 1;
        });
        assert_eq!(n, 20);
    }

    #[test]
    fn reader_reports_garbage_without_panicking() {
        let mut reader = RecordReader::new();
        let mut errors = 0;
        let mut oks = 0;
        let mut garbage = [0u8; 100];
        let mut x = 0x1234_5678u32;
        for b in garbage.iter_mut() {
            x ^= x << 13;
            x ^= x >> 17;
            x ^= x << 5;
            *b = x as u8;
        }
        reader.feed(&garbage, |r| if r.is_ok() { oks += 1 } else { errors += 1 });
        assert_eq!((oks, errors), (0, 3));
        assert_eq!(reader.buffered(), 4);
        assert_eq!(reader.spare_mut().len(), READER_CAPACITY - 4);
        reader.commit(usize::MAX);
        assert_eq!(reader.buffered(), READER_CAPACITY);
    }
}
