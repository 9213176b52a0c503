//! `cargo +nightly fuzz run parse fixtures/` (from crates/gguf-format): any bytes must parse
//! to `Ok` or a clean `Err`; what parses must walk, rewrite and re-parse to the same values.
#![no_main]

use gguf_format::{GgufBuilder, GgufFile, Value};
use libfuzzer_sys::fuzz_target;

fn visit(v: Value<'_>) {
    if let Value::Array(a) = v {
        for item in a.iter() {
            visit(item);
        }
        let _ = a.get(a.len().saturating_sub(1));
    }
}

fuzz_target!(|data: &[u8]| {
    let Ok(file) = GgufFile::parse(data) else { return };
    for kv in file.metadata() {
        visit(kv.value);
    }
    // Files we accept but cannot write (e.g. over-long tensor names) are fine to skip.
    let Ok(copy) = GgufBuilder::from_file(&file).write_from(&file, Vec::new(), &mut |_, _| {}) else {
        return;
    };
    let again = GgufFile::parse(&copy).expect("our own output must parse");
    assert_eq!(again.metadata().len(), file.metadata().len());
    for (a, b) in again.metadata().iter().zip(file.metadata()) {
        assert_eq!((a.key, a.value), (b.key, b.value));
    }
    for (a, b) in again.tensors().iter().zip(file.tensors()) {
        assert_eq!(again.tensor_data(a), file.tensor_data(b));
    }
});
