//! `remove_temp_files`, in a process of its own: it ends all writing in the process.

use gguf_fsutil::{remove_temp_files, write_atomic, Error, StagedFiles, TempDir, WriteMode};

#[test]
fn remove_temp_files_removes_them_and_stops_further_writes() {
    let dir = tempfile::tempdir().unwrap();
    let dest = dir.path().join("out");
    let mut staged = StagedFiles::new();
    staged
        .stage(&dest, WriteMode::CreateNew, |out| {
            std::io::Write::write_all(out, b"data")?;
            Ok::<_, Error>(())
        })
        .unwrap();
    let work = TempDir::beside(&dir.path().join("model.gguf")).unwrap();
    std::fs::write(work.path().join("download.whl"), b"wheel").unwrap();
    assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 2);
    remove_temp_files();
    assert!(!work.path().exists());
    assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 0);
    let err = staged.commit().unwrap_err();
    assert!(err.to_string().contains("interrupted"), "{err}");
    assert!(!dest.exists());
    let err = write_atomic(&dest, WriteMode::CreateNew, |_| Ok::<_, Error>(())).unwrap_err();
    assert!(err.to_string().contains("interrupted"), "{err}");
    assert!(TempDir::beside(&dest).is_err());
    assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 0);
}
