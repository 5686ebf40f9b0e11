//! Running a compiled rule set over a message.
