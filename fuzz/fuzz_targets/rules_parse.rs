//! Fuzz target: text as a rule file, parsed and type-checked by `parse_rules`, the entry that
//! `mxc rules check` and `--rules` go through (via `load_rules`).
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    if let Ok(text) = std::str::from_utf8(data) {
        let _ = mxc_rewrite::rules::parse_rules(text, "fuzz.rules");
    }
});
