//! The verdict rendered as SpamAssassin renders it.
