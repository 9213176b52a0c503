//! The model card's unit tests: size labels, parameter counts, model ids, front matter and
//! YAML typing, each against gguf-py's and PyYAML's results.

mod checkpoints;

use gguf_format::{OwnedArray, ValueType};

use super::model_id::*;
use super::yaml::*;
use super::*;

fn s(v: &str) -> OwnedValue {
    OwnedValue::from(v)
}

fn strings(items: &[&str]) -> OwnedValue {
    OwnedValue::Array(
        OwnedArray::new(ValueType::String, items.iter().map(|v| s(v)).collect()).unwrap(),
    )
}

fn kv(entries: &[(&str, OwnedValue)]) -> Vec<(String, OwnedValue)> {
    entries
        .iter()
        .map(|(k, v)| (k.to_string(), v.clone()))
        .collect()
}

/// A checkpoint directory `parent/name` with these files.
fn checkpoint(parent: &Path, name: &str, files: &[(&str, &str)]) -> std::path::PathBuf {
    let dir = parent.join(name);
    std::fs::create_dir_all(&dir).unwrap();
    for (file, text) in files {
        std::fs::write(dir.join(file), text).unwrap();
    }
    dir
}

fn params(total: u64) -> ParamCounts {
    ParamCounts {
        total,
        shared: total,
        expert: 0,
        expert_count: 0,
    }
}

#[test]
fn size_labels_as_gguf_py() {
    // gguf.size_label(t, t, 0, 0) and gguf.size_label(t, s, e, n), gguf-py of llama.cpp
    // vendored in llama_cpp_python 0.3.36.
    for (total, want) in [
        (22_565_376, "23M"),
        (134_515_008, "135M"),
        (494_032_768, "494M"),
        (1_235_814_400, "1.2B"),
        (7_241_732_096, "7.2B"),
        (3_821_079_552, "3.8B"),
        (400, "0.40K"),
        (999_999, "1000K"),
        (1_000_001, "1.0M"),
        (1_250_000, "1.2M"),
        (2_500_000_000_000, "2.5T"),
    ] {
        assert_eq!(size_label(&params(total)), want, "{total}");
    }
    let moe = ParamCounts {
        total: 46_702_792_704,
        shared: 1_604_390_912,
        expert: 5_637_144_576,
        expert_count: 8,
    };
    assert_eq!(size_label(&moe), "8x7.2B");
}

#[test]
fn params_are_counted_as_gguf_py() {
    let p = count_params([
        ("token_embd.weight", &[384u64, 30522][..]),
        ("blk.0.ffn_gate_exps.weight", &[64, 128, 8][..]),
        ("blk.0.ffn_down_exps.bias", &[64, 8, 1][..]),
        ("blk.0.ffn_up_exps.bias", &[64, 8][..]),
        ("output_norm.weight", &[384][..]),
    ]);
    assert_eq!(p.total, 384 * 30522 + 64 * 128 * 8 + 64 * 8 + 64 * 8 + 384);
    assert_eq!(p.shared, 384 * 30522 + 64 * 8 + 384);
    assert_eq!(p.expert, 64 * 128 + 64);
    assert_eq!(p.expert_count, 8);
}

#[test]
fn model_ids_split_as_gguf_py() {
    // (model_id, total_params) -> gguf.Metadata.get_model_id_components(model_id, total_params)
    // and gguf.Metadata.id_to_title(s), printed by
    // PYTHONPATH=/work/ref/llama_cpp_python-0.3.36/vendor/llama.cpp/gguf-py python3 -c '...'
    let c = |full: &str,
             org: Option<&str>,
             base: Option<&str>,
             ft: Option<&str>,
             ver: Option<&str>,
             size: Option<&str>| Components {
        full: full.into(),
        org: org.map(Into::into),
        basename: base.map(Into::into),
        finetune: ft.map(Into::into),
        version: ver.map(Into::into),
        size_label: size.map(Into::into),
    };
    let cases = [
        (
            "nreimers/MiniLM-L6-H384-uncased",
            22565376,
            c(
                "MiniLM-L6-H384-uncased",
                Some("nreimers"),
                None,
                None,
                None,
                None,
            ),
        ),
        (
            "all-MiniLM-L6-v2",
            22565376,
            c(
                "all-MiniLM-L6-v2",
                None,
                Some("all-MiniLM-L6"),
                None,
                Some("v2"),
                None,
            ),
        ),
        (
            "microsoft/Phi-3-mini-4k-instruct",
            3821079552,
            c(
                "Phi-3-mini-4k-instruct",
                Some("microsoft"),
                Some("Phi-3"),
                Some("4k-instruct"),
                None,
                Some("mini"),
            ),
        ),
        (
            "microsoft/Phi-3-mini-4k-instruct",
            0,
            c(
                "Phi-3-mini-4k-instruct",
                Some("microsoft"),
                Some("Phi-3-mini"),
                Some("instruct"),
                None,
                Some("4K"),
            ),
        ),
        (
            "bigscience/bloom-7b1",
            7069016064,
            c(
                "bloom-7b1",
                Some("bigscience"),
                Some("bloom"),
                None,
                None,
                Some("7.1B"),
            ),
        ),
        (
            "mistralai/Mixtral-8x7B-Instruct-v0.1",
            46702792704,
            c(
                "Mixtral-8x7B-Instruct-v0.1",
                Some("mistralai"),
                Some("Mixtral"),
                Some("Instruct"),
                Some("v0.1"),
                Some("8x7B"),
            ),
        ),
        (
            "TheBloke/Llama-2-7B-Chat-GGUF-Q4_K_M",
            6738415616,
            c(
                "Llama-2-7B-Chat-GGUF-Q4_K_M",
                Some("TheBloke"),
                Some("Llama-2"),
                Some("Chat-GGUF"),
                None,
                Some("7B"),
            ),
        ),
        (
            "../models/x",
            0,
            c("models/x", None, None, None, None, None),
        ),
        (
            "Qwen/Qwen3-30B-A3B",
            30532122624,
            c(
                "Qwen3-30B-A3B",
                Some("Qwen"),
                Some("Qwen3"),
                None,
                None,
                Some("30B-A3B"),
            ),
        ),
        (
            "a model name",
            0,
            c("a model name", None, None, None, None, None),
        ),
        (
            "HuggingFaceTB/SmolLM2-135M-Instruct",
            134515008,
            c(
                "SmolLM2-135M-Instruct",
                Some("HuggingFaceTB"),
                Some("SmolLM2"),
                Some("Instruct"),
                None,
                Some("135M"),
            ),
        ),
        (
            "google/gemma-3-270m-it",
            268098176,
            c(
                "gemma-3-270m-it",
                Some("google"),
                Some("gemma-3"),
                Some("it"),
                None,
                Some("270M"),
            ),
        ),
        (
            "mistralai/Mistral-7B-Instruct-v0.3",
            7248023552,
            c(
                "Mistral-7B-Instruct-v0.3",
                Some("mistralai"),
                Some("Mistral"),
                Some("Instruct"),
                Some("v0.3"),
                Some("7B"),
            ),
        ),
        (
            "Qwen/Qwen2.5-0.5B-Instruct",
            494032768,
            c(
                "Qwen2.5-0.5B-Instruct",
                Some("Qwen"),
                Some("Qwen2.5"),
                Some("Instruct"),
                None,
                Some("0.5B"),
            ),
        ),
        (
            "meta-llama/Llama-3.2-1B-Instruct-bf16-q8_0",
            1235814400,
            c(
                "Llama-3.2-1B-Instruct-bf16-q8_0",
                Some("meta-llama"),
                Some("Llama-3.2"),
                Some("Instruct"),
                None,
                Some("1B"),
            ),
        ),
        ("/lead", 0, c("lead", Some(""), None, None, None, None)),
        ("org/", 0, c("", Some("org"), None, None, None, None)),
        (
            "x-small-7b-xl",
            7000000000,
            c(
                "x-small-7b-xl",
                None,
                Some("x-small"),
                Some("xl"),
                None,
                Some("7B"),
            ),
        ),
        (
            "deepseek-ai/DeepSeek-V2-Lite-Chat",
            15706484224,
            c(
                "DeepSeek-V2-Lite-Chat",
                Some("deepseek-ai"),
                Some("DeepSeek-V2-Lite"),
                Some("Chat"),
                None,
                None,
            ),
        ),
        (
            "BAAI/bge-small-en-v1.5",
            33360000,
            c(
                "bge-small-en-v1.5",
                Some("BAAI"),
                Some("bge"),
                Some("en"),
                Some("v1.5"),
                Some("small"),
            ),
        ),
        (
            "intfloat/e5-large-v2",
            335000000,
            c(
                "e5-large-v2",
                Some("intfloat"),
                Some("e5"),
                None,
                Some("v2"),
                Some("large"),
            ),
        ),
        (
            "Llama-2-70b-32k-lora",
            70000000000,
            c(
                "Llama-2-70b-32k-lora",
                None,
                Some("Llama-2"),
                Some("32k-lora"),
                None,
                Some("70B"),
            ),
        ),
        (
            "tiiuae/falcon-180B-chat",
            180000000000,
            c(
                "falcon-180B-chat",
                Some("tiiuae"),
                Some("falcon"),
                Some("chat"),
                None,
                Some("180B"),
            ),
        ),
        (
            "EleutherAI/pythia-1b-deduped-v0-iter143000",
            1000000000,
            c(
                "pythia-1b-deduped-v0-iter143000",
                Some("EleutherAI"),
                Some("pythia"),
                Some("deduped"),
                Some("v0-iter143000"),
                Some("1B"),
            ),
        ),
        ("x--y-", 0, c("x--y-", None, None, None, None, None)),
        (
            "Model-8x22b_1-1_5m",
            0,
            c(
                "Model-8x22b_1-1_5m",
                None,
                Some("Model"),
                Some("8x22b_1"),
                None,
                Some("1.5M"),
            ),
        ),
    ];
    for (id, total, want) in cases {
        assert_eq!(model_id_components(id, total), want, "{id} {total}");
    }
    assert_eq!(id_to_title("stackexchange_xml"), "Stackexchange_Xml");
    assert_eq!(id_to_title("flickr30k-captions"), "Flickr30K Captions");
    assert_eq!(
        id_to_title("Qwen2.5-0.5B-Instruct"),
        "Qwen2.5 0.5B Instruct"
    );
    assert_eq!(id_to_title("gemma-3-270m-it"), "Gemma 3 270m It");
    assert_eq!(id_to_title("v0.3 x7b"), "v0.3 X7B");
    assert_eq!(id_to_title("straße ǆx ﬁx"), "Straße ǅx Fix");
    assert_eq!(id_to_title("a\x1cb"), "A B");
    assert_eq!(id_to_title("٣abc"), "٣abc");
}

#[test]
fn front_matter_is_found_as_gguf_py_finds_it() {
    assert_eq!(front_matter(""), None);
    assert_eq!(front_matter("# Title\n---\na: 1\n---\n"), None);
    assert_eq!(front_matter("\u{feff}---\na: 1\n---\n"), None);
    assert_eq!(
        front_matter("---\r\na: 1\r\n---\r\nbody").as_deref(),
        Some("a: 1\n")
    );
    assert_eq!(
        front_matter("---\na: 1\n--- \nb: 2").as_deref(),
        Some("a: 1\n--- \nb: 2\n")
    );
    assert_eq!(
        front_matter("---\nlanguage:\n- en\n- no\n---").as_deref(),
        Some("language:\n- en\n- \"no\"\n")
    );
    assert_eq!(
        front_matter("---\na:\n\t- b\n").as_deref(),
        Some("a:\n  - b\n")
    );
    assert_eq!(front_matter("---").as_deref(), Some("\n"));
}

/// What `yaml.safe_load` gives, in the terms gguf-py looks at.
fn show(v: &Py) -> String {
    match v {
        Py::None => "None".into(),
        Py::Bool(b) => if *b { "True" } else { "False" }.into(),
        Py::Int(n) => n.to_string(),
        Py::BigInt => "bigint".into(),
        Py::Float(f) => format!("{f:?}"),
        Py::Str(s) => format!("{s:?}"),
        Py::Bytes { .. } => "bytes".into(),
        Py::List(l) => format!("[{}]", l.iter().map(show).collect::<Vec<_>>().join(", ")),
        Py::Dict(d) => {
            let mut seen: Vec<String> = Vec::new();
            let mut out: Vec<String> = Vec::new();
            // Python dict order: first insertion, last value.
            for (k, _) in d.iter() {
                let ks = show(k);
                if !seen.contains(&ks) {
                    let v = d.iter().rev().find(|(k2, _)| show(k2) == ks).unwrap();
                    out.push(format!("{ks}: {}", show(&v.1)));
                    seen.push(ks);
                }
            }
            format!("{{{}}}", out.join(", "))
        }
        Py::Date => "date".into(),
        Py::DateTime => "datetime".into(),
        Py::Set { .. } => "set".into(),
        Py::Tuple => "tuple".into(),
        Py::Recursive => "[...]".into(),
        Py::MergeKey | Py::ValueKey => "marker".into(),
    }
}

#[test]
fn yaml_is_typed_as_pyyaml_types_it() {
    // python3 -c 'import yaml; print(yaml.safe_load(TEXT))' (PyYAML 6.0.3).
    let cases = [
        ("license: apache-2.0", r#"{"license": "apache-2.0"}"#),
        (
            "a: [yes, No, on, y, off]",
            r#"{"a": [True, False, True, "y", False]}"#,
        ),
        ("a: 012", r#"{"a": 10}"#),
        ("a: 09", r#"{"a": "09"}"#),
        ("a: 0x1F", r#"{"a": 31}"#),
        ("a: 0b101", r#"{"a": 5}"#),
        ("a: 1:30", r#"{"a": 90}"#),
        ("a: 1_000", r#"{"a": 1000}"#),
        ("a: 1e5", r#"{"a": "1e5"}"#),
        ("a: 1.5e+3", r#"{"a": 1500.0}"#),
        ("a: 1.", r#"{"a": 1.0}"#),
        ("a: .5", r#"{"a": 0.5}"#),
        ("a: -.inf", r#"{"a": -inf}"#),
        ("a: 1:30.5", r#"{"a": 90.5}"#),
        ("a: ~", r#"{"a": None}"#),
        ("a:", r#"{"a": None}"#),
        ("a: Null", r#"{"a": None}"#),
        ("a: 'yes'", r#"{"a": "yes"}"#),
        ("a: ! 5", r#"{"a": 5}"#),
        ("a: ! \"5\"", r#"{"a": 5}"#),
        ("a: !!str 5", r#"{"a": "5"}"#),
        ("a: !!float 1e5", r#"{"a": 100000.0}"#),
        ("a: !!null foo", r#"{"a": None}"#),
        ("a: 2024-01-31", r#"{"a": date}"#),
        ("a: 2024-01-31 10:00:00 +01:00", r#"{"a": datetime}"#),
        ("a: !!timestamp 2024-1-1", r#"{"a": date}"#),
        ("a: 99999999999999999999999", r#"{"a": bigint}"#),
        ("a: |\n  x\n  y\n", r#"{"a": "x\ny\n"}"#),
        ("a: >-\n  x\n  y\n", r#"{"a": "x y"}"#),
        ("=: 1", r#"{"=": 1}"#),
        ("{<<: [{a: 1}, {a: 2, b: 3}], b: 4}", r#"{"a": 1, "b": 4}"#),
        (
            "x: &x {a: 1, b: 2}\ny:\n  <<: *x\n  b: 3",
            r#"{"x": {"a": 1, "b": 2}, "y": {"a": 1, "b": 3}}"#,
        ),
        ("a: &a [*a]", r#"{"a": [[...]]}"#),
        ("a: 1\na: 2", r#"{"a": 2}"#),
        ("a: !!set {x, y}", r#"{"a": set}"#),
        ("a: !!omap [{x: 1}]", r#"{"a": [tuple]}"#),
        ("just text", r#""just text""#),
        ("# only a comment", "None"),
    ];
    for (text, want) in cases {
        let got = load_yaml(&format!("{text}\n")).unwrap_or_else(|e| panic!("{text}: {e}"));
        assert_eq!(got.as_ref().map_or("None".into(), show), want, "{text}");
    }
    // yaml.safe_load raises on these.
    for text in [
        "a: <<",
        "a: =",
        "a: !!int \" 0x1F \"",
        "a: !!bool Y",
        "a: 2024-13-01",
        "a: 0x_",
        "a: !!str [1]",
        "[a]: 1",
        "? {a: 1}\n: 2",
        "a: !foo bar",
        "a: *nothing",
        "a: 1\n---\nb: 2",
        "a: \u{1}",
        "a: [1",
        "a: b: c",
        "{<<: 1}",
    ] {
        assert!(
            load_yaml(&format!("{text}\n")).is_err(),
            "{text:?} was accepted"
        );
    }
}
