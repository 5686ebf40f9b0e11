//! stub
pub fn respond() {} pub fn write_pong() {} pub fn write_scan_response() {}
