//! `gguf chat` on the real Gemma 3 270M file, which carries no chat template: the built-in
//! `gemma` template is chosen from its vocabulary and the exchange stays coherent.
//!
//! The file is the pretrained model, not the instruction-tuned one: asked a question in a fresh
//! conversation it repeats the question (llama.cpp does the same with the same prompt). With one
//! earlier exchange in the conversation (`--history`) it answers, as llama.cpp does.

mod common;

use std::io::Write;
use std::path::PathBuf;
use std::process::Stdio;

use common::gguf;
use gguf_test_support::{fixture, real_model};

/// `gguf chat FILE ARGS` with `input` on stdin: (stdout, stderr).
fn chat(file: &PathBuf, args: &[&str], input: &str) -> (String, String) {
    let mut child = gguf()
        .arg("chat")
        .arg(file)
        .args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    child
        .stdin
        .take()
        .unwrap()
        .write_all(input.as_bytes())
        .unwrap();
    let out = child.wait_with_output().unwrap();
    let (stdout, stderr) = (
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    );
    assert!(out.status.success(), "{stdout}\n{stderr}");
    (stdout, stderr)
}

#[test]
fn gemma3_chat_answers_with_the_builtin_gemma_template() {
    let Some(model) = real_model("gemma3-270m") else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let history = dir.path().join("history.json");
    std::fs::write(
        &history,
        r#"[{"role": "user", "content": "What is the capital of Italy?"},
            {"role": "assistant", "content": "The capital of Italy is Rome."}]"#,
    )
    .unwrap();
    let run = ["--temp", "0", "-n", "8", "-t", "2", "-c", "256"];
    let mut args = vec!["--history", history.to_str().unwrap()];
    args.extend(run);
    let (stdout, stderr) = chat(&model, &args, "What is the capital of France?\n");
    assert!(
        stderr.contains("using the built-in `gemma` template"),
        "{stderr}"
    );
    // llama.cpp, given the same rendered prompt, answers "The capital of France is Paris."
    let reply = stdout.trim_start_matches("> ");
    assert!(
        reply.starts_with("The capital of France is Paris."),
        "{stdout}"
    );

    // Naming the template gives the same, and without the note.
    args.extend(["--chat-template", "gemma"]);
    let (named, stderr) = chat(&model, &args, "What is the capital of France?\n");
    assert_eq!(named, stdout);
    assert!(!stderr.contains("note:"), "{stderr}");
}

/// A file without a template whose vocabulary has no known turn markers (the tiny llama
/// fixture) is refused before the first prompt, naming the way out; a built-in named with
/// `--chat-template` or a template file makes it chat.
#[test]
fn without_a_template_or_turn_markers_chat_says_what_to_do() {
    let model = fixture("model-llama.gguf");
    let run = |args: &[&str]| {
        gguf()
            .arg("chat")
            .arg(&model)
            .args(args)
            .args(["-n", "2", "-t", "1", "-c", "64"])
            .stdin(Stdio::null())
            .output()
            .unwrap()
    };
    let out = run(&[]);
    assert!(!out.status.success());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("has no chat template")
            && stderr.contains("chatml, phi3, gemma, llama3")
            && stderr.contains("--chat-template NAME|FILE"),
        "{stderr}"
    );
    assert!(!stderr.contains("panicked"), "{stderr}");

    let out = run(&["--chat-template", "no-such-template"]);
    assert!(!out.status.success());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("no chat template `no-such-template`")
            && stderr.contains("no file `no-such-template`"),
        "{stderr}"
    );

    assert!(run(&["--chat-template", "chatml"]).status.success());
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("t.jinja");
    std::fs::write(&file, "{% for m in messages %}{{ m.content }}{% endfor %}").unwrap();
    assert!(run(&["--chat-template", file.to_str().unwrap()])
        .status
        .success());
    std::fs::write(&file, "{% for m in messages %}").unwrap();
    let out = run(&["--chat-template", file.to_str().unwrap()]);
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("t.jinja"));
}
