//! Whole-message tests: SpamAssassin golden outputs, extremes, reuse.

use super::*;
