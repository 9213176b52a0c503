//! Chat templates rendered byte for byte as Hugging Face `transformers` renders them.
//!
//! `tests/data/chat/expected.json` holds the prompts `transformers` itself rendered
//! (`tests/data/chat/make_reference.py`) for real and well-known templates and for templates
//! that exercise the Jinja features chat templates use, and for small inline templates, one
//! point each of how Jinja2 treats none and undefined values (sources stored in `expected.json`).

use std::collections::{BTreeMap, HashMap};
use std::path::{Path, PathBuf};

use gguf_format::{GgufBuilder, GgufFile};
use gguf_test_support::real_model;
use gguf_tokenizer::chat::{
    template_names, ChatMessage, ChatTemplate, DateTime, RenderLimits, RenderOptions, Value,
};
use gguf_tokenizer::TokenizerError;
use proptest::prelude::*;

fn data_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/chat")
}

fn template_source(name: &str) -> String {
    let path = data_dir().join("templates").join(format!("{name}.jinja"));
    std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// The source of a reference case's template: a file of `templates/`, or, for the small inline
/// templates of `make_reference.py`, the source stored in `expected.json`.
fn case_source(reference: &serde_json::Value, name: &str) -> String {
    match reference["templates"][name]["source"].as_str() {
        Some(source) => source.to_string(),
        None => template_source(name),
    }
}

fn reference() -> serde_json::Value {
    let path = data_dir().join("expected.json");
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    serde_json::from_str(&text).expect("expected.json is JSON")
}

fn fixed_now(reference: &serde_json::Value) -> DateTime {
    let n: Vec<i64> = reference["now"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v.as_i64().unwrap())
        .collect();
    DateTime::new(
        n[0] as i32,
        n[1] as u8,
        n[2] as u8,
        n[3] as u8,
        n[4] as u8,
        n[5] as u8,
    )
    .unwrap()
}

/// The options a reference case was rendered with.
fn case_options(reference: &serde_json::Value, case: &serde_json::Value) -> RenderOptions {
    let template = case["template"].as_str().unwrap();
    let conversation = &reference["conversations"][case["conversation"].as_str().unwrap()];
    let tokens = &reference["templates"][template];
    let extra: BTreeMap<String, Value> = case["extra"]
        .as_object()
        .unwrap()
        .iter()
        .map(|(k, v)| (k.clone(), Value::from_serialize(v)))
        .collect();
    RenderOptions {
        add_generation_prompt: case["add_generation_prompt"].as_bool().unwrap(),
        bos_token: Some(tokens["bos_token"].as_str().unwrap().to_string()),
        eos_token: Some(tokens["eos_token"].as_str().unwrap().to_string()),
        tools: conversation.get("tools").map(Value::from_serialize),
        documents: None,
        extra,
        now: Some(fixed_now(reference)),
        ..RenderOptions::default()
    }
}

#[test]
fn renders_exactly_what_transformers_renders() {
    let reference = reference();
    let mut templates: HashMap<String, ChatTemplate> = HashMap::new();
    let mut failures = Vec::new();
    let cases = reference["cases"].as_array().unwrap();
    for case in cases {
        let name = case["template"].as_str().unwrap();
        let template = templates.entry(name.to_string()).or_insert_with(|| {
            ChatTemplate::new(&case_source(&reference, name))
                .unwrap_or_else(|e| panic!("template {name} does not parse: {e}"))
        });
        let conversation = &reference["conversations"][case["conversation"].as_str().unwrap()];
        let messages = Value::from_serialize(&conversation["messages"]);
        let opts = case_options(&reference, case);
        let label = format!(
            "{name} / {} / add_generation_prompt={} / extra={}",
            case["conversation"].as_str().unwrap(),
            opts.add_generation_prompt,
            case["extra"]
        );
        let got = template.render_value(&messages, &opts);
        match (&case["expected"], &case["error"], got) {
            (serde_json::Value::String(want), _, Ok(got)) => {
                if &got != want {
                    failures.push(format!("{label}\n--- want\n{want:?}\n--- got\n{got:?}"));
                }
            }
            (serde_json::Value::String(want), _, Err(e)) => {
                failures.push(format!("{label}: error {e}\n--- want\n{want:?}"));
            }
            (_, error, Ok(got)) => {
                failures.push(format!("{label}: rendered {got:?}, want the error {error}"));
            }
            (_, error, Err(e)) => {
                let message = e.to_string();
                if error["kind"] == "raise_exception" {
                    let want = error["message"].as_str().unwrap();
                    if !message.contains(&format!("raise_exception: {want}")) {
                        failures.push(format!("{label}: error {message:?} lacks {want:?}"));
                    }
                }
                // The line Jinja2's traceback gives for the template.
                let line = format!("(line {})", error["line"]);
                if !matches!(e, TokenizerError::Template { .. }) || !message.contains(&line) {
                    failures.push(format!("{label}: error {message:?} does not name {line}"));
                }
            }
        }
    }
    assert!(
        failures.is_empty(),
        "{} of {} cases differ from transformers:\n\n{}",
        failures.len(),
        cases.len(),
        failures.join("\n\n")
    );
    assert!(
        cases.len() >= 400,
        "expected.json has only {} cases",
        cases.len()
    );
}

#[test]
fn real_model_template_is_read_from_the_file() {
    let Some(path) = real_model("smollm2-135m") else {
        return;
    };
    let bytes = std::fs::read(&path).unwrap();
    let file = GgufFile::parse(&bytes).unwrap();
    let template = ChatTemplate::from_gguf(&file, None).unwrap();
    assert_eq!(template.name(), None);
    assert_eq!(template.source(), template_source("smollm2-135m"));
    let tokens: HashMap<&str, &str> = template
        .special_tokens()
        .iter()
        .map(|(k, v)| (k.as_str(), v.as_str()))
        .collect();
    assert_eq!(tokens["bos_token"], "<|im_start|>");
    assert_eq!(tokens["eos_token"], "<|im_end|>");
    assert_eq!(tokens["unk_token"], "<|endoftext|>");
    assert!(template_names(&file).is_empty());

    // With the file's own special tokens, the reference prompts come out.
    let reference = reference();
    let mut checked = 0;
    for case in reference["cases"].as_array().unwrap() {
        if case["template"] != "smollm2-135m" || case["expected"].is_null() {
            continue;
        }
        let conversation = &reference["conversations"][case["conversation"].as_str().unwrap()];
        let mut opts = case_options(&reference, case);
        opts.bos_token = None;
        opts.eos_token = None;
        let got = template
            .render_value(&Value::from_serialize(&conversation["messages"]), &opts)
            .unwrap();
        assert_eq!(got, case["expected"].as_str().unwrap());
        checked += 1;
    }
    assert!(checked >= 10);
}

#[test]
fn a_file_without_a_template_says_so() {
    let Some(path) = real_model("gemma3-270m") else {
        return;
    };
    let bytes = std::fs::read(&path).unwrap();
    let file = GgufFile::parse(&bytes).unwrap();
    let err = ChatTemplate::from_gguf(&file, None).unwrap_err();
    assert!(matches!(err, TokenizerError::Metadata(_)), "{err:?}");
    assert!(err.to_string().contains("tokenizer.chat_template"), "{err}");
}

fn synthetic_file(extra: &[(&str, &str)], bos: u32) -> Vec<u8> {
    let mut b = GgufBuilder::new();
    b.set("general.architecture", "llama");
    b.set(
        "tokenizer.ggml.tokens",
        vec!["<unk>", "<s>", "</s>", "<pad>"],
    );
    b.set("tokenizer.ggml.bos_token_id", bos);
    b.set("tokenizer.ggml.eos_token_id", 2u32);
    b.set("tokenizer.ggml.unknown_token_id", 0u32);
    b.set("tokenizer.ggml.padding_token_id", 99u32); // out of range: left out, not an error
    for (k, v) in extra {
        b.set(k, *v);
    }
    let mut out = Vec::new();
    b.write(&mut out).unwrap().finish().unwrap();
    out
}

#[test]
fn named_templates_and_special_tokens_from_metadata() {
    let bytes = synthetic_file(
        &[
            (
                "tokenizer.chat_template",
                "{{ bos_token }}default{{ eos_token }}",
            ),
            (
                "tokenizer.chat_template.tool_use",
                "{{ bos_token }}tools={{ tools | tojson }}{{ unk_token }}[{{ pad_token }}]",
            ),
            (
                "tokenizer.chat_template.rag",
                "{{ documents | length }} documents",
            ),
        ],
        1,
    );
    let file = GgufFile::parse(&bytes).unwrap();
    assert_eq!(template_names(&file), ["tool_use", "rag"]);
    let hi = [ChatMessage::new("user", "hi")];

    let default = ChatTemplate::from_gguf(&file, None).unwrap();
    assert_eq!(
        default.render(&hi, &RenderOptions::default()).unwrap(),
        "<s>default</s>"
    );
    let by_name = ChatTemplate::from_gguf(&file, Some("default")).unwrap();
    assert_eq!(by_name.name(), None);
    assert_eq!(by_name.source(), default.source());

    let tool_use = ChatTemplate::from_gguf(&file, Some("tool_use")).unwrap();
    assert_eq!(tool_use.name(), Some("tool_use"));
    let opts = RenderOptions {
        tools: Some(Value::from_serialize(
            serde_json::json!([{"name": "f", "é": [1, 2.0]}]),
        )),
        ..RenderOptions::default()
    };
    assert_eq!(
        tool_use.render(&hi, &opts).unwrap(),
        r#"<s>tools=[{"name": "f", "é": [1, 2.0]}]<unk>[]"#
    );
    let mut tool_use = tool_use;
    tool_use.set_special_token("pad_token", "<pad>");
    tool_use.set_special_token("bos_token", "<BOS>");
    let opts = RenderOptions::default();
    assert_eq!(
        tool_use.render(&hi, &opts).unwrap(),
        "<BOS>tools=null<unk>[<pad>]"
    );
    let rag = ChatTemplate::from_gguf(&file, Some("rag")).unwrap();
    let opts = RenderOptions {
        documents: Some(Value::from_serialize(
            serde_json::json!([{"title": "a", "text": "b"}]),
        )),
        ..RenderOptions::default()
    };
    assert_eq!(rag.render(&hi, &opts).unwrap(), "1 documents");

    let err = ChatTemplate::from_gguf(&file, Some("missing")).unwrap_err();
    let msg = err.to_string();
    assert!(matches!(err, TokenizerError::Metadata(_)), "{err:?}");
    assert!(
        msg.contains("tokenizer.chat_template.missing") && msg.contains("tool_use, rag"),
        "{msg}"
    );

    // A BOS id past the vocabulary is an error naming the key.
    let bytes = synthetic_file(&[("tokenizer.chat_template", "x")], 7);
    let file = GgufFile::parse(&bytes).unwrap();
    let err = ChatTemplate::from_gguf(&file, None)
        .unwrap_err()
        .to_string();
    assert!(err.contains("tokenizer.ggml.bos_token_id"), "{err}");
}

#[test]
fn a_broken_named_template_names_itself_and_the_line() {
    let bytes = synthetic_file(
        &[("tokenizer.chat_template.bad", "ok\n{% if x %}\nno end")],
        1,
    );
    let file = GgufFile::parse(&bytes).unwrap();
    match ChatTemplate::from_gguf(&file, Some("bad")).unwrap_err() {
        TokenizerError::Template { name, message } => {
            assert_eq!(name.as_deref(), Some("bad"));
            assert!(message.contains("line 3"), "{message}");
        }
        other => panic!("{other:?}"),
    }
}

fn template_error(result: Result<impl std::fmt::Debug, TokenizerError>) -> String {
    match result {
        Err(TokenizerError::Template { message, .. }) => message,
        other => panic!("expected a template error, got {other:?}"),
    }
}

#[test]
fn syntax_errors_name_the_line() {
    let cases = [
        ("{{ messages[0] ", 1),
        ("line one\n{% for m in messages %}\n{{ m.content }}\n", 3),
        ("a\nb\n{% if x %}{% else %}{% else %}{% endif %}", 3),
        ("{% for m in messages %}\n{% endif %}", 2),
        ("\n\n{{ 'unterminated }}", 3),
        ("{% set %}", 1),
        ("one\ntwo\n{{ x | }}", 3),
        ("{% macro m( %}{% endmacro %}", 1),
        ("{% unknowntag %}", 1),
        ("ok\n{{ 1 +* 2 }}", 2),
    ];
    for (source, line) in cases {
        let message = template_error(ChatTemplate::new(source));
        assert!(message.contains("syntax error"), "{source:?}: {message}");
        assert!(
            message.contains(&format!("(line {line})")),
            "{source:?}: {message}"
        );
    }
}

#[test]
fn raise_exception_is_an_error_with_its_message_and_line() {
    let template = ChatTemplate::new(
        "{% for m in messages %}\n{% if m.role == 'tool' %}\n{{ raise_exception('Tools are not supported: ' ~ m.content) }}\n{% endif %}{% endfor %}",
    )
    .unwrap();
    let ok = template.render(&[ChatMessage::new("user", "hi")], &RenderOptions::default());
    assert_eq!(ok.unwrap(), "");
    let message = template_error(template.render(
        &[
            ChatMessage::new("user", "hi"),
            ChatMessage::new("tool", "42"),
        ],
        &RenderOptions::default(),
    ));
    assert_eq!(
        message,
        "raise_exception: Tools are not supported: 42 (line 3)"
    );
}

#[test]
fn runtime_errors_name_the_line() {
    let template = ChatTemplate::new("a\n{{ 'x' + messages }}").unwrap();
    let message = template_error(
        template.render(&[ChatMessage::new("user", "u")], &RenderOptions::default()),
    );
    assert!(message.contains("(line 2)"), "{message}");
    let template = ChatTemplate::new("\n\n{{ messages[0].content.nope() }}").unwrap();
    let message = template_error(
        template.render(&[ChatMessage::new("user", "u")], &RenderOptions::default()),
    );
    assert!(
        message.contains("nope") && message.contains("(line 3)"),
        "{message}"
    );
    let template =
        ChatTemplate::new("{{ messages | tojson }}{{ undefined_thing | tojson }}").unwrap();
    let message = template_error(
        template.render(&[ChatMessage::new("user", "u")], &RenderOptions::default()),
    );
    assert!(message.contains("not JSON serializable"), "{message}");
}

#[test]
fn messages_extra_variables_and_clock() {
    let template = ChatTemplate::new(
        "{% for m in messages %}{{ m | tojson }}\n{% endfor %}{{ bos_token }}|{{ greeting }}|{{ strftime_now('%Y') }}",
    )
    .unwrap();
    let messages = [
        ChatMessage::new("assistant", Value::from(()))
            .with(
                "tool_calls",
                Value::from_serialize(serde_json::json!([{"id": 1}])),
            )
            .with("name", Value::from(())),
        ChatMessage::new("assistant", "a").with("reasoning", "r"),
    ];
    let mut opts = RenderOptions {
        bos_token: Some("<s>".into()),
        now: DateTime::new(1999, 12, 31, 23, 59, 59),
        ..RenderOptions::default()
    };
    opts.extra.insert("greeting".into(), Value::from("hé"));
    opts.extra.insert("bos_token".into(), Value::from("<BOS>")); // extra wins, as in transformers
    assert_eq!(
        template.render(&messages, &opts).unwrap(),
        "{\"role\": \"assistant\", \"tool_calls\": [{\"id\": 1}]}\n\
         {\"thinking\": \"r\", \"role\": \"assistant\", \"content\": \"a\", \"reasoning\": \"r\", \"reasoning_content\": \"r\"}\n\
         <BOS>|hé|1999"
    );

    // Without a clock the system's is used.
    opts.now = None;
    let year: i32 = template
        .render(&messages, &opts)
        .unwrap()
        .rsplit('|')
        .next()
        .unwrap()
        .parse()
        .unwrap();
    assert!(year >= 2024, "{year}");

    // Reserved names, an empty conversation and messages that are not maps are errors.
    opts.extra.insert("messages".into(), Value::from(1));
    assert!(template_error(template.render(&messages, &opts)).contains("messages"));
    let message = template_error(template.render(&[], &RenderOptions::default()));
    assert!(message.contains("empty conversation"), "{message}");
    let message =
        template_error(template.render_value(&Value::from(vec![1, 2]), &RenderOptions::default()));
    assert!(message.contains("must be maps"), "{message}");
    let message =
        template_error(template.render_value(&Value::from("x"), &RenderOptions::default()));
    assert!(message.contains("list of maps"), "{message}");
}

#[test]
fn strftime_like_python() {
    let t = DateTime::new(2024, 7, 6, 14, 5, 9).unwrap();
    assert_eq!(t.strftime("%Y-%m-%d %H:%M:%S"), "2024-07-06 14:05:09");
    assert_eq!(t.strftime("%d %b %Y"), "06 Jul 2024");
    assert_eq!(
        t.strftime("%A, %B %-d, %Y %I:%M %p"),
        "Saturday, July 6, 2024 02:05 PM"
    );
    assert_eq!(
        t.strftime("%c|%x|%X|%^a|%_m|%Q|%z%Z|%f|%"),
        "Sat Jul  6 14:05:09 2024|07/06/24|14:05:09|SAT| 7|%Q||000000|%"
    );
    assert_eq!(
        t.strftime("%k|%l|%P|%r|%C|%g|%G|%-j|%#p|%^B|%e"),
        "14| 2|pm|02:05:09 PM|20|24|2024|188|pm|JULY| 6"
    );
    let midnight = DateTime::new(2000, 1, 1, 0, 0, 0).unwrap();
    assert_eq!(
        midnight.strftime("%I %p %j %U %W %u %w"),
        "12 AM 001 00 00 6 6"
    );
    assert_eq!(
        DateTime::from_unix(0).strftime("%F %T %s"),
        "1970-01-01 00:00:00 0"
    );
    assert_eq!(
        DateTime::from_unix(-1).strftime("%F %T"),
        "1969-12-31 23:59:59"
    );
}

#[test]
fn the_template_is_send_sync_and_clonable() {
    fn assert_send_sync<T: Send + Sync + Clone>() {}
    assert_send_sync::<ChatTemplate>();
    let template = ChatTemplate::new("{{ messages | length }}").unwrap();
    let copy = template.clone();
    let handle = std::thread::spawn(move || {
        copy.render(&[ChatMessage::new("user", "x")], &RenderOptions::default())
            .unwrap()
    });
    assert_eq!(handle.join().unwrap(), "1");
    assert!(format!("{template:?}").contains("ChatTemplate"));
}

/// Templates that must fail (or render) cleanly: an error, never a panic or a hang.
const NASTY: &[&str] = &[
    "",
    "{",
    "{{",
    "{%",
    "{#",
    "}}",
    "%}",
    "{{}}",
    "{%%}",
    "{% %}",
    "{% endfor %}",
    "{% for %}",
    "{% for x in %}{% endfor %}",
    "{{ ((((((((((((((((((((((((((((((((((((((((((((((((((((((( }}",
    "{{ [[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[ }}",
    "{{ messages[1000000000000000000000] }}",
    "{{ messages[-1000000000000000000000] }}",
    "{{ messages[::0] }}",
    "{{ 1 / 0 }}",
    "{{ 1 // 0 }}",
    "{{ 1 % 0 }}",
    "{{ 2 ** 100000 }}",
    "{{ 9223372036854775807 + 1 }}",
    "{{ -9223372036854775808 // -1 }}",
    "{{ range(10000000) | length }}",
    "{{ 'abc'.count('') }}",
    "{{ ''.split('') }}",
    "{{ 'x'.center(-5) }}",
    "{{ 'x'.zfill(1000000000000) }}",
    "{{ 'abc'.find('b', -100, 100) }}",
    "{{ 'abc'.startswith('a', 10) }}",
    "{{ 'é'.rjust(3, 'ab') }}",
    "{{ 'a'.replace() }}",
    "{{ messages.items() }}",
    "{{ messages[0].get() }}",
    "{{ strftime_now() }}",
    "{{ strftime_now('%') }}",
    "{{ strftime_now('%-') }}",
    "{{ strftime_now(42) }}",
    "{{ raise_exception() }}",
    "{{ raise_exception(none) }}",
    "{{ none | tojson(indent=1.5) }}",
    "{{ none | tojson(separators=1) }}",
    "{{ {(1, 2): 1} | tojson }}",
    "{{ messages | tojson(nope=1) }}",
    "{% set ns = namespace(a=1) %}{% set ns.self = ns %}{{ ns.self.a }}",
    "{% macro f() %}{{ f() }}{% endmacro %}{{ f() }}",
    "{% set ns = namespace() %}{% set ns.x = ns %}{% set ns.y = ns %}{{ ns }}{{ ns | string }}",
    "{% set ns = namespace() %}{% set ns.x = ns %}{% set ns.y = ns %}{{ ns | tojson }}",
    "{{ nothing | length }}{{ 'x' | int(base=99) }}{{ 'x' | float(1, 2) }}",
    "{% raw %}",
    "{% generation %}",
    "{% endgeneration %}",
    "{% generation %}{% endgeneration %}{% endgeneration %}",
    "{%- generation -%}x{%- endgeneration -%}",
    "{% include 'other' %}",
    "{% extends 'base' %}",
    "{% import 'm' as m %}",
    "{{ self }}",
    "{{ loop }}",
    "{{ caller() }}",
    "{{ '\\u12' }}",
    "{{ '\\x' }}",
    "{{ 'a' * 10 }}",
    "\u{0}{{ '\u{0}' }}\u{feff}",
    "{{ messages | map('upper') | list }}",
    "{{ messages | selectattr('role', 'nonexistent_test') | list }}",
    "{{ messages | sort(attribute='nope') }}",
    "{{ messages[0] | dictsort(by='nope') }}",
    "{{ x.y.z }}",
    "{{ messages[0].content.strip().split(none, -5) }}",
    "{{ 1e400 }}{{ -1e400 | tojson }}",
    "{% for x in none %}{% endfor %}",
    "{% for x in tools if x recursive %}{{ loop(none) }}{% endfor %}",
    "{% for x in [[1], none] recursive %}{{ loop(x) }}{% endfor %}",
    "{% for x in y is sameas if if x %}{% endfor %}",
    "{% for recursive in recursive recursive %}{% endfor %}",
    "{% for x in __for_iterable %}{{ none | __for_iterable }}{% endfor %}",
    "{% for x in\n\n(((((((((( none ))))))))))\n%}\n{% endfor %}",
];

fn render_any(source: &str) -> Option<String> {
    let template = match ChatTemplate::new(source) {
        Ok(t) => t,
        Err(e) => return Some(e.to_string()),
    };
    let messages = [
        ChatMessage::new("system", "s"),
        ChatMessage::new("user", " Hello "),
    ];
    let opts = RenderOptions {
        add_generation_prompt: true,
        now: DateTime::new(2024, 1, 2, 3, 4, 5),
        ..RenderOptions::default()
    };
    match template.render(&messages, &opts) {
        Ok(text) => {
            assert!(
                text.len() < 1 << 24,
                "{source:?} rendered {} bytes",
                text.len()
            );
            None
        }
        Err(e) => Some(e.to_string()),
    }
}

/// Templates on which minijinja itself panics: the panic is caught and becomes an error.
const ENGINE_PANICS: &[&str] = &["{% for m in messages %}{{ loop.cycle() }}{% endfor %}"];

#[test]
fn nasty_templates_fail_cleanly() {
    for source in NASTY {
        if let Some(error) = render_any(source) {
            assert!(
                !error.contains("internal error"),
                "{source:?} panicked inside the engine: {error}"
            );
        }
    }
    for source in ENGINE_PANICS {
        let error = render_any(source).expect("an error");
        assert!(
            error.contains("internal error of the template engine"),
            "{source:?}: {error}"
        );
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 400, ..ProptestConfig::default() })]

    #[test]
    fn random_templates_never_panic(pieces in proptest::collection::vec(
        prop_oneof![
            Just("{{"), Just("}}"), Just("{%"), Just("%}"), Just("{#"), Just("#}"), Just("-"),
            Just("+"), Just(" for m in messages "), Just(" endfor "), Just(" if "), Just(" endif "),
            Just(" else "), Just(" set x = "), Just("messages"), Just("[0]"), Just("[1:]"),
            Just(".content"), Just(".strip()"), Just(".split(',')"), Just("|tojson"), Just("|trim"),
            Just("|length"), Just("'str'"), Just("\""), Just("("), Just(")"), Just("["), Just("]"),
            Just(","), Just("1"), Just("2.5"), Just("none"), Just(" is defined "), Just(" generation "),
            Just(" endgeneration "), Just("raise_exception('x')"), Just("\n"), Just("  "), Just("é"),
            Just(" ~ "), Just(" + "), Just(" in "), Just("namespace(a=1)"), Just(" macro f() "),
            Just(" endmacro "), Just("f()"), Just("loop.index"), Just(" break "), Just(" continue "),
        ],
        0..40,
    )) {
        let source: String = pieces.concat();
        if let Some(error) = render_any(&source) {
            prop_assert!(!error.contains("internal error"), "{:?}: {}", source, error);
        }
    }

    #[test]
    fn arbitrary_text_never_panics(source in "\\PC{0,80}") {
        if let Some(error) = render_any(&source) {
            prop_assert!(!error.contains("internal error"), "{:?}: {}", source, error);
        }
    }
}

/// Three loops over the messages: 8 million lines for 200 messages.
const THREE_LOOPS: &str = "{% for a in messages %}{% for b in messages %}{% for c in messages %}\
    {{ a.content }}{{ b.content }}{{ c.content }} and some text{% endfor %}{% endfor %}{% endfor %}";

/// Renders `source` over `n` short messages with `limits`; the error, or the prompt's length.
fn render_bounded(source: &str, n: usize, limits: RenderLimits) -> Result<usize, String> {
    let template = ChatTemplate::new(source).map_err(|e| e.to_string())?;
    let messages: Vec<ChatMessage> = (0..n)
        .map(|i| ChatMessage::new(if i % 2 == 0 { "user" } else { "assistant" }, "hi"))
        .collect();
    let opts = RenderOptions {
        limits,
        ..RenderOptions::default()
    };
    template
        .render(&messages, &opts)
        .map(|prompt| prompt.len())
        .map_err(|e| e.to_string())
}

/// Templates that grow a value, their output or their work without end (the hostile audit's
/// doubling namespace and nested loops among them) end in an error naming the bound, quickly
/// and within a few hundred megabytes, instead of taking the process down.
#[test]
fn templates_that_grow_without_end_fail_cleanly() {
    const VALUE: &str = "string or list of more than";
    const WORK: &str = "bytes of text and lists";
    const STEPS: &str = "instructions";
    const TREE: &str = "a list or map holding the same one many times counts it each time";
    // Sixty statements in a row, each doubling `a`.
    let repeated = |step: &str| format!("{{% set a = [1] %}}{}{{{{ a == a }}}}", step.repeat(60));
    let ns = "{% set ns = namespace(s='xx', l=[1], big='x' * 1000000) %}";
    let cases: &[(&str, &str)] = &[
        // The audit's case: 2^41 bytes by concatenation.
        (
            "{% set ns = namespace(s='xx') %}{% for i in range(40) %}\
             {% set ns.s = ns.s ~ ns.s %}{% endfor %}{{ ns.s }}",
            VALUE,
        ),
        (
            "{% for i in range(40) %}{% set ns.s = ns.s + ns.s %}{% endfor %}",
            VALUE,
        ),
        (
            "{% for i in range(40) %}{% set ns.s = ns.s * 2 %}{% endfor %}",
            VALUE,
        ),
        (
            "{% for i in range(40) %}{% set ns.l = ns.l + ns.l %}{% endfor %}",
            TREE,
        ),
        (
            "{% for i in range(40) %}{% set ns.s = [ns.s, ns.s] | join %}{% endfor %}",
            VALUE,
        ),
        (
            "{% for i in range(40) %}{% set ns.s = ns.s.join([ns.s, ns.s]) %}{% endfor %}",
            VALUE,
        ),
        (
            "{% for i in range(40) %}{% set ns.s = ns.s | replace('x', 'xx') %}{% endfor %}",
            VALUE,
        ),
        (
            "{% for i in range(40) %}{% set ns.s = ns.s.replace('x', 'xx') %}{% endfor %}",
            VALUE,
        ),
        (
            "{% for i in range(40) %}{% set ns.s = '%s%s' | format(ns.s, ns.s) %}{% endfor %}",
            VALUE,
        ),
        (
            "{% for i in range(40) %}{% set ns.s = [ns.s, ns.s] | string %}{% endfor %}",
            VALUE,
        ),
        (
            "{% for i in range(40) %}{% set ns.s = [ns.s, ns.s] | tojson %}{% endfor %}",
            VALUE,
        ),
        // One step that would be huge.
        ("{{ 'x' | indent(1000000000000) }}", VALUE),
        ("{{ 'x'.center(1000000000000) }}", VALUE),
        ("{{ '%1000000000000s' | format('x') }}", VALUE),
        ("{{ [1] | batch(1000000000000, 'x') }}", VALUE),
        ("{{ [1] | slice(1000000000000) }}", VALUE),
        ("{{ ns.big.replace('', ns.big) }}", VALUE),
        ("{{ ns.big * 1000 }}", VALUE),
        // A list repeated is lazy in minijinja, until a filter builds it.
        ("{{ ([1] * 1000000000000) | list }}", VALUE),
        ("{{ ([1] * 1000000000000) | join }}", VALUE),
        // Many copies kept: slices, lists built from a long string, macro output.
        (
            "{% for i in range(1000) %}{% set ns.l = ns.l + [ns.big[i:]] %}{% endfor %}",
            WORK,
        ),
        (
            "{% for i in range(1000) %}{% set ns.l = ns.l + [ns.big | list] %}{% endfor %}",
            TREE,
        ),
        (
            "{% macro d(n) %}{% if n %}{{ d(n - 1) }}{{ d(n - 1) }}{% else %}{{ ns.big }}\
             {% endif %}{% endmacro %}{% set x = d(30) %}",
            VALUE,
        ),
        // Text written into a captured block, not the output.
        (
            "{% set s %}{% for i in range(100000) %}{% for j in range(100000) %}\
             some text some text some text{% endfor %}{% endfor %}{% endset %}",
            STEPS,
        ),
        // The audit's second case: three loops over 200 messages would write ~800 MB (with
        // the output limit of a context, see `render_limits_are_exact`, that stops it first).
        (THREE_LOOPS, STEPS),
        // Loops that only count.
        (
            "{% for i in range(100000) %}{% for j in range(100000) %}{% endfor %}{% endfor %}",
            STEPS,
        ),
        // A list of two copies of the list before, sixty deep: sixty lists in memory, but
        // 2^60 values to compare, print or hash (minijinja walks the whole tree), whether
        // built by recursion, by the template's own statements, or by filters and functions.
        (
            "{% macro m(x, y, n) %}{% if n %}{{ m([x, x], [y, y], n - 1) }}{% else %}\
             {{ x == y }}{% endif %}{% endmacro %}{{ m(1, 1, 60) }}",
            TREE,
        ),
        (
            "{% macro m(x, n) %}{% if n %}{{ m({'a': x, 'b': x}, n - 1) }}{% else %}\
             {{ '%s' | format(x) }}{% endif %}{% endmacro %}{{ m(1, 60) }}",
            TREE,
        ),
        (&repeated("{% set a = [a] * 2 %}"), TREE),
        (&repeated("{% set a = a | zip(a) | list %}"), TREE),
        (&repeated("{% set a = dict(x=a, y=a) %}"), TREE),
        (&repeated("{% set a = [a] + [a] %}"), TREE),
        (&repeated("{% set a = namespace(x=a, y=a) %}"), TREE),
        // A namespace inside itself, directly or through a list, prints and compares without end.
        (
            "{% set ns.y = ns %}{{ ns ~ '' }}",
            "a namespace cannot hold itself",
        ),
        (
            "{% set ns.y = [1, {'a': ns}] %}{{ ns == ns }}",
            "a namespace cannot hold itself",
        ),
        // Nesting deep enough to overflow the stack when dropped.
        (
            "{% for i in range(100000) %}{% set ns.l = [ns.l] %}{% endfor %}",
            "nested more than",
        ),
    ];
    let limits = RenderLimits::default();
    for (body, want) in cases {
        let source = if body.contains("namespace(s='xx')") {
            body.to_string()
        } else {
            format!("{ns}{body}")
        };
        match render_bounded(&source, 200, limits) {
            Err(e) => assert!(e.contains(want), "{body}: {e}"),
            Ok(len) => panic!("{body}: rendered {len} bytes"),
        }
    }
}

/// The limits are the caller's: a prompt just under the output limit renders, one byte more
/// does not; fuel for a few instructions stops a short loop.
#[test]
fn render_limits_are_exact() {
    let source = "{% for m in messages %}{{ m.content }}{% endfor %}";
    let limits = |max_output_bytes| RenderLimits {
        max_output_bytes,
        ..RenderLimits::default()
    };
    assert_eq!(render_bounded(source, 10, limits(20)), Ok(20));
    let err = render_bounded(source, 10, limits(19)).unwrap_err();
    assert!(err.contains("longer than 19 bytes"), "{err}");
    let err = render_bounded(THREE_LOOPS, 200, RenderLimits::for_output(1 << 20)).unwrap_err();
    assert!(
        err.contains("the rendered prompt is longer than 1048576 bytes"),
        "{err}"
    );
    let few = RenderLimits {
        max_instructions: 50,
        ..RenderLimits::default()
    };
    let err = render_bounded(source, 100, few).unwrap_err();
    assert!(err.contains("more than 50 instructions"), "{err}");
    let err = render_bounded(
        "{{ messages[0].content * 100 }}",
        1,
        RenderLimits {
            max_work_bytes: 100,
            ..RenderLimits::default()
        },
    )
    .unwrap_err();
    assert!(err.contains("more than 100 bytes of text"), "{err}");
}

/// A tag of thousands of operators, which minijinja would compile and drop by recursion until
/// the stack overflows, is refused before it is parsed.
#[test]
fn a_tag_of_thousands_of_operators_is_refused() {
    for op in [" + ", " ~ ", "|trim|", "."] {
        let chain = vec!["x"; 5000].join(op);
        let err = ChatTemplate::new(&format!("a\n{{{{ {chain} }}}}"))
            .unwrap_err()
            .to_string();
        assert!(
            err.contains("a tag on line 2 holds more than 500 operators"),
            "{op}: {err}"
        );
    }
    // A long but flat tag is fine.
    let items = vec!["'x'"; 2000].join(", ");
    assert!(ChatTemplate::new(&format!("{{{{ [{items}] | length }}}}")).is_ok());
}

/// `~` converts with Python's `str()`, as Jinja2 does (minijinja's own prints `none`, `true`
/// and lists with double quotes).
#[test]
fn concatenation_converts_as_python() {
    let template =
        ChatTemplate::new("{{ none ~ '|' ~ true ~ '|' ~ [1, 'a'] ~ '|' ~ nothing ~ 1.0 }}")
            .unwrap();
    let prompt = template
        .render(&[ChatMessage::new("user", "x")], &RenderOptions::default())
        .unwrap();
    assert_eq!(prompt, "None|True|[1, 'a']|1.0");
}
