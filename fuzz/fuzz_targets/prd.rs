#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| ralph_fuzz::prd(data));
