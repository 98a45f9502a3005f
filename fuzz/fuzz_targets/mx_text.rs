//! Fuzz target: text as the mx IR's textual form, through `mxc_dialects::text::parse`. A graph
//! that parses is printed and parsed again: printing must not panic on any parsed graph.
#![no_main]

use libfuzzer_sys::fuzz_target;
use mxc_dialects::text;

fuzz_target!(|data: &[u8]| {
    if let Ok(src) = std::str::from_utf8(data) {
        if let Ok(graph) = text::parse(src) {
            let _ = text::parse(&text::print(&graph));
        }
    }
});
