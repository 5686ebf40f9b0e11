//! Message parsing throughput on one core over the SpamAssassin public corpus:
//! `Message::parse` alone (headers, MIME, decoding, HTML, URIs, rendering), in CPU
//! time (Linux schedstat; wall clock elsewhere) summed over many passes.
//! Run: `cargo bench -p sift-core --bench parse` (SIFT_BENCH_PASSES sets the timed passes).

use std::fs;
use std::time::{Duration, Instant};

use sift_core::msg::{Limits, Message, MessageBuffers};

#[path = "support/corpus.rs"]
mod corpus;

/// CPU time this thread has run (Linux schedstat), or `None` elsewhere.
fn cpu_time() -> Option<Duration> {
    let s = fs::read_to_string("/proc/thread-self/schedstat").ok()?;
    s.split_whitespace().next()?.parse().ok().map(Duration::from_nanos)
}

fn main() {
    let Some(paths) = corpus::paths_or_skip() else { return };
    let messages: Vec<Vec<u8>> = paths.iter().filter_map(|p| fs::read(p).ok()).collect();
    let raw_bytes: usize = messages.iter().map(Vec::len).sum();

    // One warm-up pass, which also measures the rendered text.
    let mut bufs = MessageBuffers::new(Limits::default());
    let mut rendered = 0usize;
    for m in &messages {
        let msg = Message::parse(m, &mut bufs);
        rendered += msg.body().len() + msg.rawbody().len() + msg.uris().len();
    }

    let passes: usize = std::env::var("SIFT_BENCH_PASSES").ok().and_then(|v| v.parse().ok()).unwrap_or(20);
    let (cpu0, wall0) = (cpu_time(), Instant::now());
    let mut check = 0usize;
    for _ in 0..passes {
        for m in &messages {
            let msg = Message::parse(m, &mut bufs);
            check = check.wrapping_add(msg.body().len() ^ msg.uri_count());
        }
    }
    let wall = wall0.elapsed();
    let (secs, clock) = match (cpu0, cpu_time()) {
        (Some(a), Some(b)) if b > a => ((b - a).as_secs_f64(), "CPU"),
        _ => (wall.as_secs_f64(), "wall"),
    };
    let n = (messages.len() * passes) as f64;
    let p = passes as f64;
    println!("corpus: {} messages, {:.1} MB raw, {:.1} MB rendered text (body+rawbody+uri)", messages.len(), raw_bytes as f64 / 1e6, rendered as f64 / 1e6);
    println!(
        "parse (one core, {passes} passes, {clock} time {secs:.2} s, wall {:.2} s): {:.0} messages/s, {:.1} MB/s raw, {:.1} MB/s rendered, {:.2} us/message",
        wall.as_secs_f64(),
        n / secs,
        raw_bytes as f64 * p / secs / 1e6,
        rendered as f64 * p / secs / 1e6,
        secs / n * 1e6
    );
    println!("checksum {check}");
}
