//! How the writing functions treat the file system: what a write may replace, staged files
//! that appear together, an input refused by any of its names, temporary directories.

use std::fs;
use std::path::Path;

use gguf_fsutil::{same_file, write_atomic, Error, Refusal, StagedFiles, TempDir, WriteMode};

/// The sorted names in `dir` (gguf-test-support's `listing`, which this crate cannot use:
/// gguf-test-support depends on gguf-hub, which depends on this crate).
fn listing(dir: &Path) -> Vec<String> {
    let mut names: Vec<String> = fs::read_dir(dir)
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    names
}

fn write(dest: &Path, mode: WriteMode, text: &str) -> gguf_fsutil::Result<()> {
    write_atomic(dest, mode, |out| {
        std::io::Write::write_all(out, text.as_bytes())?;
        Ok::<_, Error>(())
    })
}

fn refusal(result: gguf_fsutil::Result<()>) -> Refusal {
    match result {
        Err(Error::Refused { reason, .. }) => reason,
        other => panic!("expected a refusal, got {other:?}"),
    }
}

#[test]
fn write_modes_say_what_may_be_replaced() {
    let dir = tempfile::tempdir().unwrap();
    let a = dir.path().join("a");
    write(&a, WriteMode::CreateNew, "1").unwrap();
    assert_eq!(
        refusal(write(&a, WriteMode::CreateNew, "2")),
        Refusal::Exists
    );
    write(&a, WriteMode::Replace { force: false }, "3").unwrap();
    assert_eq!(fs::read_to_string(&a).unwrap(), "3");
    let replace = WriteMode::Replace { force: true };
    assert!(matches!(
        refusal(write(dir.path(), replace, "x")),
        Refusal::NotRegular("a directory")
    ));
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        let dangling = dir.path().join("dangling");
        std::os::unix::fs::symlink("nowhere", &dangling).unwrap();
        assert_eq!(
            refusal(write(&dangling, replace, "x")),
            Refusal::DanglingSymlink
        );
        assert_eq!(
            refusal(write(&dangling, WriteMode::CreateNew, "x")),
            Refusal::Exists
        );
        fs::set_permissions(&a, fs::Permissions::from_mode(0o400)).unwrap();
        assert_eq!(
            refusal(write(&a, WriteMode::Replace { force: false }, "4")),
            Refusal::ReadOnly
        );
        write(&a, replace, "5").unwrap();
        assert_eq!(fs::read_to_string(&a).unwrap(), "5");
        assert_eq!(
            fs::metadata(&a).unwrap().permissions().mode() & 0o777,
            0o400
        );
        // Hard links are the same file.
        let b = dir.path().join("b");
        fs::hard_link(&a, &b).unwrap();
        assert!(same_file(&a, &b));
        assert_eq!(
            refusal(gguf_fsutil::refuse_inputs(&b, &[&a])),
            Refusal::Input
        );
    }
    let names = listing(dir.path());
    assert!(names.iter().all(|n| !n.starts_with('.')), "{names:?}");
}

#[test]
fn staged_files_appear_together_or_not_at_all() {
    let dir = tempfile::tempdir().unwrap();
    let (a, b) = (dir.path().join("a"), dir.path().join("b"));
    let mut staged = StagedFiles::new();
    for p in [&a, &b] {
        staged
            .stage(p, WriteMode::CreateNew, |out| {
                std::io::Write::write_all(out, b"x")?;
                Ok::<_, Error>(())
            })
            .unwrap();
    }
    assert_eq!(listing(dir.path()).len(), 2, "two temporary files");
    assert!(!a.exists() && !b.exists());
    drop(staged);
    assert_eq!(listing(dir.path()), Vec::<String>::new());

    // A failing write removes its own temporary file; the others wait for the commit.
    let mut staged = StagedFiles::new();
    staged
        .stage(&a, WriteMode::CreateNew, |_| Ok::<_, Error>(()))
        .unwrap();
    let failed = staged.stage(&b, WriteMode::CreateNew, |_| {
        Err::<(), _>(Error::Invalid("no".into()))
    });
    assert!(failed
        .unwrap_err()
        .to_string()
        .contains("invalid input: no"));
    assert_eq!(listing(dir.path()).len(), 1);
    staged.commit().unwrap();
    assert_eq!(listing(dir.path()), ["a"]);
}

/// Stages `text` at `dest` as a new file.
fn stage_text(staged: &mut StagedFiles, dest: &Path, text: &str) {
    staged
        .stage(dest, WriteMode::CreateNew, |out| {
            std::io::Write::write_all(out, text.as_bytes())?;
            Ok::<_, Error>(())
        })
        .unwrap();
}

#[test]
fn directories_made_for_staged_files_go_with_them_unless_committed() {
    let dir = tempfile::tempdir().unwrap();
    let top = dir.path().join("a");
    let deep = top.join("b");

    // Dropped without a commit: the file and both directories go.
    let mut staged = StagedFiles::new();
    staged.create_dirs(&deep).unwrap();
    stage_text(&mut staged, &deep.join("f"), "x");
    assert!(deep.is_dir());
    drop(staged);
    assert_eq!(listing(dir.path()), Vec::<String>::new());

    // A directory that was there stays; so does one made here that now holds another's file.
    fs::create_dir(&top).unwrap();
    let mut staged = StagedFiles::new();
    staged.create_dirs(&deep.join("c")).unwrap();
    stage_text(&mut staged, &deep.join("c").join("f"), "x");
    fs::write(deep.join("theirs"), "y").unwrap();
    drop(staged);
    assert_eq!(listing(&top), ["b"]);
    assert_eq!(listing(&deep), ["theirs"]);
    fs::remove_dir_all(&top).unwrap();

    // Committed: they stay, with the files.
    let mut staged = StagedFiles::new();
    staged.create_dirs(&deep).unwrap();
    staged.create_dirs(&deep).unwrap();
    stage_text(&mut staged, &deep.join("f"), "x");
    staged.commit().unwrap();
    assert_eq!(listing(&deep), ["f"]);

    // A commit that fails (a name taken meanwhile) removes what it made, directories too.
    let other = dir.path().join("new");
    let taken = dir.path().join("taken");
    let mut staged = StagedFiles::new();
    staged.create_dirs(&other).unwrap();
    stage_text(&mut staged, &other.join("f"), "x");
    stage_text(&mut staged, &taken, "x");
    fs::write(&taken, "theirs").unwrap();
    let e = staged.commit().unwrap_err();
    assert!(e.to_string().contains("already exists"), "{e}");
    assert_eq!(listing(dir.path()), ["a", "taken"]);
    assert_eq!(fs::read_to_string(&taken).unwrap(), "theirs");

    // What is there and not a directory is refused.
    let e = StagedFiles::new()
        .create_dirs(&deep.join("f"))
        .unwrap_err()
        .to_string();
    assert!(e.contains("not a directory"), "{e}");
    assert_eq!(listing(&deep), ["f"]);
}

#[cfg(unix)]
#[test]
fn an_input_is_refused_by_any_of_its_names() {
    use gguf_fsutil::refuse_inputs;
    let dir = tempfile::tempdir().unwrap();
    let input = dir.path().join("in.gguf");
    fs::write(&input, "x").unwrap();
    let (link, hard, copy) = (
        dir.path().join("link"),
        dir.path().join("hard"),
        dir.path().join("copy"),
    );
    std::os::unix::fs::symlink("in.gguf", &link).unwrap();
    fs::hard_link(&input, &hard).unwrap();
    fs::copy(&input, &copy).unwrap();
    let sub = dir.path().join("sub");
    fs::create_dir(&sub).unwrap();
    let sub_link = dir.path().join("sub-link");
    std::os::unix::fs::symlink("sub", &sub_link).unwrap();
    let inputs = [input.clone(), sub.clone()];
    for dest in [&input, &link, &hard, &sub, &sub_link] {
        match refuse_inputs(dest, &inputs) {
            Err(Error::Refused { path, reason }) => {
                assert_eq!((path.as_path(), reason), (dest.as_path(), Refusal::Input));
            }
            other => panic!("{}: {other:?}", dest.display()),
        }
    }
    // Another file with the same bytes, or nothing, is no input.
    refuse_inputs(&copy, &inputs).unwrap();
    refuse_inputs(&dir.path().join("new"), &inputs).unwrap();
    let e = refuse_inputs(&link, &[&input]).unwrap_err().to_string();
    assert_eq!(
        e,
        format!(
            "{} is an input of this command; refusing to write over it",
            link.display()
        )
    );
}

#[test]
fn a_working_directory_goes_when_dropped_and_an_abandoned_one_on_the_next_run() {
    let dir = tempfile::tempdir().unwrap();
    let dest = dir.path().join("model.gguf");
    let work = TempDir::beside(&dest).unwrap();
    let name = work
        .path()
        .file_name()
        .unwrap()
        .to_string_lossy()
        .into_owned();
    assert!(
        name.starts_with(".model.gguf.gguf-tmp.") && work.path().is_dir(),
        "{name}"
    );
    fs::write(work.path().join("wheel.whl"), b"x").unwrap();
    // In use: another run for the same destination leaves it alone.
    let other = TempDir::beside(&dest).unwrap();
    assert!(work.path().is_dir());
    drop(other);
    drop(work);
    assert_eq!(listing(dir.path()), Vec::<String>::new());

    // What a killed run leaves: the directory with its lock file, unlocked.
    let abandoned = dir.path().join(".model.gguf.gguf-tmp.999999.0");
    fs::create_dir(&abandoned).unwrap();
    fs::write(abandoned.join(".lock"), b"").unwrap();
    fs::write(abandoned.join("half.gguf"), vec![0u8; 1000]).unwrap();
    // Not ours: another destination's, or not named exactly as ours are.
    let others = [".other.gguf.gguf-tmp.999999.0", ".model.gguf.gguf-tmp.x.0"];
    for name in others {
        fs::create_dir(dir.path().join(name)).unwrap();
        fs::write(dir.path().join(name).join(".lock"), b"").unwrap();
    }
    let work = TempDir::beside(&dest).unwrap();
    assert!(!abandoned.exists());
    for name in others {
        assert!(dir.path().join(name).exists(), "{name}");
    }
    drop(work);
}
