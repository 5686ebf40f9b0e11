//! Synthetic extreme messages, shared by the msg unit tests and the scan extremes test.

#![allow(dead_code)]

use std::vec::Vec;
use std::format;

/// A message whose body is `bytes` long.
pub fn big_body(bytes: usize) -> Vec<u8> {
    let mut m = b"From: a@example.com\nSubject: big\n\n".to_vec();
    let line = b"The quick brown fox jumps over the lazy dog; see http://example.com/x now!\n";
    while m.len() < bytes {
        m.extend_from_slice(line);
    }
    m
}

/// `n` headers.
pub fn many_headers(n: usize) -> Vec<u8> {
    let mut m = Vec::new();
    for i in 0..n {
        m.extend_from_slice(format!("X-Header-{i}: value {i}\n").as_bytes());
    }
    m.extend_from_slice(b"Subject: many headers\n\nbody\n");
    m
}

/// A multipart message with `n` text parts.
pub fn many_parts(n: usize) -> Vec<u8> {
    let mut m = b"Subject: parts\nContent-Type: multipart/mixed; boundary=\"b\"\n\n".to_vec();
    for i in 0..n {
        m.extend_from_slice(format!("--b\nContent-Type: text/plain\n\npart {i}\n").as_bytes());
    }
    m.extend_from_slice(b"--b--\n");
    m
}

/// Multiparts nested `depth` deep.
pub fn deep_nesting(depth: usize) -> Vec<u8> {
    let mut m = b"Subject: deep\n".to_vec();
    for i in 0..depth {
        m.extend_from_slice(format!("Content-Type: multipart/mixed; boundary=\"b{i}\"\n\n--b{i}\n").as_bytes());
    }
    m.extend_from_slice(b"Content-Type: text/plain\n\ninnermost text\n");
    for i in (0..depth).rev() {
        m.extend_from_slice(format!("--b{i}--\n").as_bytes());
    }
    m
}

