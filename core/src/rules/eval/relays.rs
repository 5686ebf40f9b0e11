//! The `Received` chain read into relays, as SpamAssassin's Received parser does, and
//! the pseudo-headers built from them (`X-Spam-Relays-Untrusted`, …, `EnvelopeFrom`).

use alloc::vec::Vec;

use super::header::HeaderData;
use crate::msg::Message;

/// The relays of one message, trusted and untrusted.
#[derive(Debug, Default)]
pub struct Relays {
    /// Pseudo-header text being built; reused across messages.
    text: Vec<u8>,
}

impl Relays {
    /// Reads the relays of `message`, replacing the previous message's.
    pub fn read(&mut self, message: &Message<'_>, data: &HeaderData) {
        let _ = (message, data);
        self.text.clear();
    }

    /// Writes the value of pseudo-header `name` into `out`; `None` when `name` is not a
    /// pseudo-header, `Some(false)` when it is one but has no value for this message.
    pub fn pseudo_header(&self, name: &[u8], out: &mut Vec<u8>) -> Option<bool> {
        let _ = (name, out);
        None
    }
}
