//! The prefork policy through its public API, as a shell drives it: steady state
//! allocates nothing, and a small master loop with chunked back-channels works.

use sift_core::prefork::{
    encode, write_prometheus, Action, Actions, Config, Event, Pid, Policy, Record, RecordKind, RecordReader, Stats,
    ACTIONS_SLACK,
};
use sift_core::score::Score;

const CAP: usize = 16;
type Pool = Policy<CAP>;
type ActionBuf = Actions<{ CAP + ACTIONS_SLACK }>;

/// A fake master: forks get increasing pids, each child has a reader; the child side
/// is driven by the test.
struct Master {
    policy: Pool,
    actions: ActionBuf,
    readers: [(Pid, RecordReader); CAP],
    next_pid: Pid,
    now: u64,
    ordered: [Option<Pid>; 4],
}

impl Master {
    fn new(config: Config) -> Master {
        Master {
            policy: Pool::new(config).unwrap_or_else(|e| panic!("{e}")),
            actions: ActionBuf::new(),
            readers: core::array::from_fn(|_| (0, RecordReader::new())),
            next_pid: 500,
            now: 0,
            ordered: [None; 4],
        }
    }

    fn on(&mut self, event: Event) {
        self.policy.on(event, &mut self.actions);
        let mut spawned = [0 as Pid; CAP + ACTIONS_SLACK];
        let mut n = 0;
        for a in self.actions.iter() {
            match *a {
                Action::Spawn => {
                    spawned[n] = self.next_pid;
                    self.next_pid += 1;
                    n += 1;
                }
                Action::AcceptOrder { pid } => {
                    if let Some(slot) = self.ordered.iter_mut().find(|s| s.is_none()) {
                        *slot = Some(pid);
                    }
                }
                _ => {}
            }
        }
        for &pid in &spawned[..n] {
            if let Some(r) = self.readers.iter_mut().find(|(p, _)| *p == 0) {
                *r = (pid, RecordReader::new());
            }
            self.on(Event::Spawned { pid, now_ms: self.now });
        }
    }

    /// Bytes arrive on `pid`'s back-channel.
    fn channel(&mut self, pid: Pid, bytes: &[u8]) {
        let mut records = [None; 8];
        let mut n = 0;
        if let Some((_, reader)) = self.readers.iter_mut().find(|(p, _)| *p == pid) {
            let mut rest = bytes;
            while !rest.is_empty() {
                let took = reader.push(rest);
                rest = &rest[took..];
                while let Some(r) = reader.next_record() {
                    records[n] = Some(r);
                    n += 1;
                }
            }
        }
        for r in records.into_iter().flatten() {
            match r {
                Ok(record) => self.on(Event::Record { pid, record }),
                Err(_) => self.on(Event::BadRecord { pid }),
            }
        }
    }

    fn take_order(&mut self) -> Option<Pid> {
        self.ordered.iter_mut().find_map(Option::take)
    }
}

/// One round: a connection, the ordered child accepts, serves, reports, with the
/// two records split across three reads.
fn serve_one(m: &mut Master, seq: &mut u32) -> Pid {
    m.on(Event::ConnectionPending);
    let pid = m.take_order().unwrap_or_else(|| panic!("an order; {}", m.policy.table().states()));
    let busy = encode(&Record::new(RecordKind::Busy, pid, *seq));
    let served = encode(&Record::served(pid, *seq + 1, 2048, 1500, Score(-900), false));
    *seq += 2;
    let mut both = [0u8; 64];
    both[..32].copy_from_slice(&busy);
    both[32..].copy_from_slice(&served);
    m.channel(pid, &both[..20]);
    m.channel(pid, &both[20..45]);
    m.channel(pid, &both[45..]);
    pid
}

#[test]
fn sequential_master_loop_uses_one_child() {
    let mut m = Master::new(Config::default());
    m.on(Event::Tick { now_ms: 0 });
    let first = m.readers[0].0;
    m.channel(first, &encode(&Record::new(RecordKind::Ready, first, 0)));
    let mut seq = 1;
    for i in 0..100u64 {
        let pid = serve_one(&mut m, &mut seq);
        assert_eq!(pid, first);
        m.now = i * 700;
        m.on(Event::Tick { now_ms: m.now });
        // Children spawned for the shortage report ready.
        for k in 0..CAP {
            let pid = m.readers[k].0;
            if pid != 0 && pid != first && m.policy.table().get(pid).is_some_and(|c| c.last_seq.is_none()) {
                m.channel(pid, &encode(&Record::new(RecordKind::Ready, pid, 0)));
            }
        }
    }
    let s = m.policy.stats();
    assert_eq!((s.ham, s.bytes, s.protocol_errors, s.bad_records, s.seq_gaps), (100, 204_800, 0, 0, 0));
}

#[test]
fn steady_state_allocates_nothing() {
    let mut m = Master::new(Config { min_children: 3, ..Config::default() });
    m.on(Event::Tick { now_ms: 0 });
    let pids: Vec<Pid> = m.readers.iter().map(|(p, _)| *p).filter(|p| *p != 0).collect();
    for &pid in &pids {
        m.channel(pid, &encode(&Record::new(RecordKind::Ready, pid, 0)));
    }
    let probe = allocation_counter::measure(|| {
        std::hint::black_box(Vec::<u8>::with_capacity(8));
    });
    assert!(probe.count_total > 0, "the counter counts");
    let mut text = heapless::String::<4096>::new();
    let mut seq = 1;
    let info = allocation_counter::measure(|| {
        for i in 0..500u64 {
            serve_one(&mut m, &mut seq);
            m.now = 1000 + i * 10;
            m.on(Event::Tick { now_ms: m.now });
        }
        m.on(Event::Reload);
        text.clear();
        let stats: &Stats = m.policy.stats();
        assert!(write_prometheus(stats, &mut text).is_ok());
    });
    assert_eq!(info.count_total, 0, "allocations: {info:?}");
    assert!(text.contains("sift_messages_total{verdict=\"ham\"} 500"), "{text}");
}
