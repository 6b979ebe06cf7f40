//! libFuzzer's entry for `ipub::fuzzing::fuzz_tensor_file` (see `fuzz/README.md`).
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| ipub::fuzzing::fuzz_tensor_file(data));
