//! How the split writer treats the file system: all-or-nothing split sets. What a write may
//! replace and the temporary files are gguf-fsutil's (its tests/files.rs).

use std::fs;

use gguf_format::split::{write_split, SplitLimit, SplitSet};
use gguf_format::GgufFile;
use gguf_test_support::{fixtures, listing};

/// all-types-v3 has 6 tensors: with 2 per part, the set has 3 parts.
fn tensor_sizes() -> Vec<u64> {
    let bytes = fs::read(fixtures().join("all-types-v3.gguf")).unwrap();
    let file = GgufFile::parse(&bytes).unwrap();
    file.tensors().iter().map(|t| t.size).collect()
}

#[test]
fn a_split_that_fails_midway_leaves_no_part_and_a_rerun_succeeds() {
    let dir = tempfile::tempdir().unwrap();
    let input = fixtures().join("all-types-v3.gguf");
    let prefix = dir.path().join("part");
    let prefix = prefix.to_str().unwrap();
    let second = dir.path().join("part-00002-of-00003.gguf");
    let sizes = tensor_sizes();
    let first_part_bytes = sizes[0] + sizes[1];
    // While the second part is being written, something takes its name: putting it in place
    // must fail, and then the first part must not be left behind either.
    let result = write_split(
        &input,
        prefix,
        SplitLimit::MaxTensors(2),
        false,
        &mut |done, _| {
            if done > first_part_bytes && !second.exists() {
                fs::create_dir(&second).unwrap();
            }
        },
    );
    assert!(result.is_err(), "the split should fail");
    assert_eq!(
        listing(dir.path()),
        ["part-00002-of-00003.gguf"],
        "only the directory that blocked the second part; no part, no temporary file"
    );
    assert!(second.is_dir());

    fs::remove_dir(&second).unwrap();
    let paths = write_split(
        &input,
        prefix,
        SplitLimit::MaxTensors(2),
        false,
        &mut |_, _| {},
    )
    .expect("a rerun after a failed split succeeds");
    assert_eq!(paths.len(), 3);
    assert_eq!(
        listing(dir.path()),
        [
            "part-00001-of-00003.gguf",
            "part-00002-of-00003.gguf",
            "part-00003-of-00003.gguf"
        ]
    );
    assert_eq!(SplitSet::open(&paths[1]).unwrap().tensor_count(), 6);
}

#[test]
fn a_split_interrupted_midway_leaves_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let input = fixtures().join("all-types-v3.gguf");
    let prefix = dir.path().join("part");
    let prefix = prefix.to_str().unwrap().to_string();
    let sizes = tensor_sizes();
    let first_part_bytes = sizes[0] + sizes[1];
    // An interruption in the middle of the second part (a panic unwinds like an error would
    // return, through every frame in between).
    let outcome = std::panic::catch_unwind(|| {
        write_split(
            &input,
            &prefix,
            SplitLimit::MaxTensors(2),
            false,
            &mut |done, _| {
                if done > first_part_bytes {
                    panic!("interrupted");
                }
            },
        )
    });
    assert!(outcome.is_err());
    assert_eq!(listing(dir.path()), Vec::<String>::new());
    write_split(
        &input,
        &prefix,
        SplitLimit::MaxTensors(2),
        false,
        &mut |_, _| {},
    )
    .expect("a rerun after an interrupted split succeeds");
    assert_eq!(listing(dir.path()).len(), 3);
}
