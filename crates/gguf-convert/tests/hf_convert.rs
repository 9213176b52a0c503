//! Hugging Face checkpoints to GGUF: the tiny random checkpoints of `fixtures/hf/` (one per
//! decoder family) and the real all-MiniLM-L6-v2 convert to what llama.cpp's
//! `convert_hf_to_gguf.py` writes; the converted decoders compute what Hugging Face
//! transformers computes from the checkpoints; damaged or unsupported checkpoints are clear
//! errors.

use std::path::{Path, PathBuf};

use gguf_convert::hf::{Checkpoint, HfConversion, HfOptions, OutType};
use gguf_format::GgufFile;
use gguf_model::{Model, SessionOptions};
use gguf_test_support::{fixture, hf_checkpoint};
use sha2::{Digest, Sha256};

const TINY: &[&str] = &[
    "tiny-llama",
    "tiny-mistral",
    "tiny-qwen2",
    "tiny-qwen3",
    "tiny-gemma",
    "tiny-gemma2",
    "tiny-gemma3",
    "tiny-phi3",
    "tiny-mixtral",
    "tiny-granite",
    "tiny-granitemoe",
];

fn convert(dir: &Path, outtype: OutType) -> Vec<u8> {
    let ckpt = Checkpoint::open(dir).unwrap();
    let options = HfOptions {
        outtype,
        ..HfOptions::default()
    };
    let plan = HfConversion::plan(&ckpt, &options).unwrap();
    plan.write(Vec::new(), &mut |_, _| {}).unwrap()
}

fn hex_sha256(bytes: &[u8]) -> String {
    Sha256::digest(bytes)
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

/// The converted tiny decoders, run by this project's engine, give the logits transformers
/// gives for the same checkpoint and tokens (`tests/data/tiny_hf_logits.json`, written by the
/// script its `source` names). F32 weights, so only the order of float operations differs.
#[test]
fn converted_decoders_compute_what_transformers_computes() {
    let data: serde_json::Value = serde_json::from_str(
        &std::fs::read_to_string(
            PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/data/tiny_hf_logits.json"),
        )
        .unwrap(),
    )
    .unwrap();
    let tokens: Vec<u32> = data["tokens"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t.as_u64().unwrap() as u32)
        .collect();
    let tmp = tempfile::tempdir().unwrap();
    for name in TINY {
        let path = tmp.path().join(format!("{name}.gguf"));
        std::fs::write(
            &path,
            convert(&fixture(&format!("hf/{name}")), OutType::F32),
        )
        .unwrap();
        let model = Model::load(&path).unwrap();
        let mut session = model
            .session(SessionOptions {
                threads: 1,
                n_ctx: 64,
                ..SessionOptions::default()
            })
            .unwrap();
        let ours = session.eval_all_logits(&tokens).unwrap();
        let reference: Vec<f32> = data["models"][name]
            .as_array()
            .unwrap()
            .iter()
            .flat_map(|row| row.as_array().unwrap().iter())
            .map(|v| v.as_f64().unwrap() as f32)
            .collect();
        assert_eq!(ours.len(), reference.len(), "{name}");
        let worst = ours
            .iter()
            .zip(&reference)
            .map(|(a, b)| (a - b).abs())
            .fold(0.0f32, f32::max);
        // The logits are of order 1; the F16 KV cache rounds keys and values (1.6e-3 at most
        // when measured).
        eprintln!("{name}: largest logit difference from transformers {worst}");
        assert!(
            worst < 5e-3,
            "{name}: logits differ from transformers' by up to {worst}"
        );
        // tiny-llama has Llama 3's RoPE scaling, which reaches the engine as rope_freqs.weight:
        // 7e-6 with it applied, 1.5e-3 when it was ignored.
        if *name == "tiny-llama" {
            assert!(worst < 1e-4, "{name}: rope_freqs not applied? {worst}");
        }
    }
}

/// SHA-256 of the file llama.cpp's `convert_hf_to_gguf.py` (llama.cpp 0c1e57098, transformers
/// 5.24, gguf-py from the same source) writes for each tiny checkpoint and `--outtype`:
/// `python3 convert_hf_to_gguf.py fixtures/hf/NAME --outfile X.gguf --outtype TYPE`.
const LLAMA_CPP_DIGESTS: &[(&str, &str, &str)] = &[
    (
        "tiny-llama",
        "f16",
        "2a08f6126d89f87d0ba4bc6e5e14d99ad1aeef549982bc3c28fabf1f2cdb9593",
    ),
    (
        "tiny-llama",
        "f32",
        "c16324a54f10ba7dcf5c10f771d6e06b4154b2f33c725d345d244844c497d6b7",
    ),
    (
        "tiny-llama",
        "bf16",
        "a9220d627e26fea714f17527a4d466dd2638688b40ddc0bdb503394c62dc3578",
    ),
    (
        "tiny-llama",
        "q8_0",
        "8c546ebf7e34c6fcac57ed1702bcfe49a4b851f7cd832fa21a13ecea300f0107",
    ),
    (
        "tiny-mistral",
        "f16",
        "a0dcd53168d45535075e9b07f57d203cbf28c07155112a281f37d657cea27897",
    ),
    (
        "tiny-mistral",
        "f32",
        "4e1fdc14e49ecf2a932213a264ca35285f9201fbde51c74258c05e3067ec36b1",
    ),
    (
        "tiny-mistral",
        "bf16",
        "4f3841dde6f763620607bd5eadb23d1e6810a2d3503f3343f3ae8be685e25ff4",
    ),
    (
        "tiny-mistral",
        "q8_0",
        "064b793198299280b868b525ef727c56d1fcbd5d4b1ebc19cbc39bfbcbff633e",
    ),
    (
        "tiny-qwen2",
        "f16",
        "098550b310b6fe12b187179ef71f80416aa1f6a5a4266ee86d0a6f8f64a42f22",
    ),
    (
        "tiny-qwen2",
        "f32",
        "4e76627e7e1d46cf400b970ff3df76de52acca8f4aba995aa43c3b7ce6a2ed86",
    ),
    (
        "tiny-qwen2",
        "bf16",
        "514bc14f4c2ca70041e557f31ef4fd237f2b51ddba93585123f26c742af5c0c4",
    ),
    (
        "tiny-qwen2",
        "q8_0",
        "97965b55334acf2f3e93b86a0943773085c0f770d6e122b20531333d09b3d65f",
    ),
    (
        "tiny-qwen3",
        "f16",
        "77c8df5dd65111f2e74c3813e26b8dacf69f375694a8d266c62867eca51dcbe2",
    ),
    (
        "tiny-qwen3",
        "f32",
        "704bd6344d4a77af850138ccde674836113641c955f1096dd7b4730733f2f3d8",
    ),
    (
        "tiny-qwen3",
        "bf16",
        "dc2bb0d2cbe59abe11419e4cc1afed7bf2fb89021225a951bc6e53bbf12e855f",
    ),
    (
        "tiny-qwen3",
        "q8_0",
        "da47f7a9841567733801d4363eef111df1c19a842f790ebff591a2039e7842d6",
    ),
    (
        "tiny-gemma",
        "f16",
        "a7775dd78733f44c0ace4024bfe352e29bb8aa641e020468cf095a66f08c21d1",
    ),
    (
        "tiny-gemma",
        "f32",
        "3d85fb2c853359d0df3da3411e184cce14e8f2ac99e7684074bf394f890f1db1",
    ),
    (
        "tiny-gemma",
        "bf16",
        "e13fd8149b4826195000072cc5d6e59aa5857d43359b3350a0c4a2334b67f192",
    ),
    (
        "tiny-gemma",
        "q8_0",
        "24d91d4027956475b767deae4e26fe71f23fcdcbc9a394aa59c54d07e87553a0",
    ),
    (
        "tiny-gemma2",
        "f16",
        "84468fc5b14dd08a245d6635d35af644f0d5cf5a9fe567b2b55fe6d24b46479b",
    ),
    (
        "tiny-gemma2",
        "f32",
        "2ce0bf1221ea79f4e5a15c216c80a269309ee2afd23b49a060022c1c4f0c14e5",
    ),
    (
        "tiny-gemma2",
        "bf16",
        "d9874bbfb8a1e710004aba73feaf74b924bc660c443dfcc0d60418c074cb3b30",
    ),
    (
        "tiny-gemma2",
        "q8_0",
        "9816dbd1ffcda2ee77688facd6b063b3defb62328f78b2bca7ad72aa0a22f76b",
    ),
    (
        "tiny-gemma3",
        "f16",
        "05139304dc34a1ff7fc3ad355a98fdba9f2f8528347844ee6990372ac654d0ad",
    ),
    (
        "tiny-gemma3",
        "f32",
        "585303e9aba103d0345cf93565b4ea8a11d84e1e09a0a0cb7a342d961a7b0c03",
    ),
    (
        "tiny-gemma3",
        "bf16",
        "984c559057c76277601324db9fa4324867961f8a8c166d576ff7a823fccdedf2",
    ),
    (
        "tiny-gemma3",
        "q8_0",
        "9373399ed0841c029359b94071e3acbc0e993acea26c065d16f1ed00e3ea1049",
    ),
    (
        "tiny-phi3",
        "f16",
        "4f275f2a71bde82492586794d832f77937e7d5d1a7a16ebad729117dd071aab4",
    ),
    (
        "tiny-phi3",
        "f32",
        "f5f2c2635afdb7a707427255d12bf9dac41e26da21cf36ea33288d933317ffee",
    ),
    (
        "tiny-phi3",
        "bf16",
        "f0302d767083cee80fa28dd42f63604d575b775ff09f2cf0d0db117fa5dd52f9",
    ),
    (
        "tiny-phi3",
        "q8_0",
        "dd0ed493b6ebe290a9ca659bafaa6e667f0c471c6fda1968554adffc3ac216fe",
    ),
    // Mixtral's experts stacked per layer (llama.cpp 0c1e57098's script under transformers
    // 4.57.6).
    (
        "tiny-mixtral",
        "f32",
        "120324908bafe6e1cf806344792a7670623f1dba034f939d822e57dc5db2635a",
    ),
    (
        "tiny-mixtral",
        "f16",
        "1b8eb60808190e1d97ca49a7c2cfec8ed63df3b89dd76e052b5569221d53566f",
    ),
    (
        "tiny-mixtral",
        "bf16",
        "743fe8e5cb09177184e0c5df6e54449b2ce3096e4c0baa64e0e8e1faf76eb68f",
    ),
    (
        "tiny-mixtral",
        "q8_0",
        "12a6f0430ff702d89c009c432a38cd95c1fd19e78cc80ab5af282c310135f875",
    ),
    // PhiMoE's too (its engine logits are not compared with transformers': llama.cpp
    // computes its norms as RMSNorm plus a bias, transformers as LayerNorm).
    (
        "tiny-phimoe",
        "f32",
        "496c9fce9249a2dc2a8e09730bced69df36314c1067a7e379c298b0ff4a66cce",
    ),
    (
        "tiny-phimoe",
        "f16",
        "8267b0dd7c24223e54ee3d86d4999db37086e0033fca94561992b139d9e82471",
    ),
    (
        "tiny-phimoe",
        "bf16",
        "76546eb88a7d6fb07a0fd3261c11ad607ce1898be9a0b640fa501e1772cf6683",
    ),
    (
        "tiny-phimoe",
        "q8_0",
        "0d23a116430d91f75afd1f3ad77d136f079c0dda7fd441e5979cc64522da5c5b",
    ),
    // Granite (its multipliers) and Granite-MoE (the fused input_linear split into gate and
    // up, as GraniteMoeModel splits it).
    (
        "tiny-granite",
        "f32",
        "449c2a2428f1a244bfe8a862688fb779592ca4e0490767fab03a6463b4f8dadf",
    ),
    (
        "tiny-granite",
        "f16",
        "085b57d10cab06a218f4152480471e2ad89b6cc9c811d13828b97b22e4800aa2",
    ),
    (
        "tiny-granite",
        "bf16",
        "b14cae31635dc29e080f32764358ba943e0f3aba192bdb49c26c445c93699f94",
    ),
    (
        "tiny-granite",
        "q8_0",
        "0ed98e6f69830979a9e5b0e81c7302bec79b2ec7e7a5f216700d945597b325f1",
    ),
    (
        "tiny-granitemoe",
        "f32",
        "9b651c405732a3be1787179a1e95a8e676665d780d4ebfd30b27e6de1e1dd191",
    ),
    (
        "tiny-granitemoe",
        "f16",
        "43666114f1bf4f848d0b882c94bf5a378dde0a17a6b276ddda735fb28a63b410",
    ),
    (
        "tiny-granitemoe",
        "bf16",
        "89fd01511b772e09c35d3ee916e4de3faa2b8d61fbbdf7783dac85beb28c0890",
    ),
    (
        "tiny-granitemoe",
        "q8_0",
        "a2ce739d8e3b05994a02b0b5b347fbf10c160f947c9302d25511107cc066b558",
    ),
];

fn outtype(name: &str) -> OutType {
    OutType::parse(name).unwrap()
}

/// Every tiny checkpoint, in every output type, converts to the very bytes llama.cpp's script
/// writes: metadata (model-card keys, hyperparameters, vocabulary, special tokens, chat
/// template) in its order, tensor names, types, shapes, transformations and data.
#[test]
fn tiny_checkpoints_convert_to_the_bytes_llama_cpp_writes() {
    for (name, ty, digest) in LLAMA_CPP_DIGESTS {
        let bytes = convert(&fixture(&format!("hf/{name}")), outtype(ty));
        assert_eq!(hex_sha256(&bytes), *digest, "{name} --outtype {ty}");
    }
}

/// The script's defaults: `--outtype auto` (a BF16 checkpoint stays BF16; the digest is the
/// `bf16` one above) and `--vocab-only` (metadata without padding after it).
#[test]
fn defaults_and_vocab_only_are_the_scripts() {
    let dir = fixture("hf/tiny-mistral");
    let ckpt = Checkpoint::open(&dir).unwrap();
    let plan = HfConversion::plan(&ckpt, &HfOptions::default()).unwrap();
    let bytes = plan.write(Vec::new(), &mut |_, _| {}).unwrap();
    assert_eq!(
        hex_sha256(&bytes),
        "4f3841dde6f763620607bd5eadb23d1e6810a2d3503f3343f3ae8be685e25ff4"
    );
    // python3 convert_hf_to_gguf.py fixtures/hf/tiny-gemma3 --outfile X.gguf --vocab-only
    let ckpt = Checkpoint::open(&fixture("hf/tiny-gemma3")).unwrap();
    let options = HfOptions {
        vocab_only: true,
        ..HfOptions::default()
    };
    let plan = HfConversion::plan(&ckpt, &options).unwrap();
    let bytes = plan.write(Vec::new(), &mut |_, _| {}).unwrap();
    assert_eq!(
        hex_sha256(&bytes),
        "375add5fb53978207570c67c97bc175977983dffabb834f3273f26b670317d36"
    );
}

/// all-MiniLM-L6-v2 (BERT, WordPiece, sentence-transformers pooling, a model card with 21
/// datasets) converts to the bytes llama.cpp's script writes for it.
#[test]
fn minilm_converts_to_the_bytes_llama_cpp_writes() {
    let Some(dir) = hf_checkpoint("all-MiniLM-L6-v2") else {
        return;
    };
    for (ty, digest) in [
        (
            "f16",
            "8965e38d1d0f59d5f5f49dfa54efd76060bab80149844361d21935302ecef37e",
        ),
        (
            "q8_0",
            "5f3eb40585ffd5a467cd4c2d8072def5f33a40151cd30ba2f6982e027d697a2d",
        ),
        (
            "f32",
            "d7789a32f129eb1c40149073cdfdda11c538029695c7ff52eac04ae4af1130bb",
        ),
        (
            "bf16",
            "77b5b87a6cd19f303570c11981b1570d2dacb9c32b28256a827b196c3882f1ed",
        ),
    ] {
        let bytes = convert(&dir, outtype(ty));
        assert_eq!(hex_sha256(&bytes), digest, "--outtype {ty}");
    }
    let bytes = convert(&dir, OutType::F16);
    let file = GgufFile::parse(&bytes).unwrap();
    assert_eq!(
        file.value("tokenizer.ggml.pre").and_then(|v| v.as_str()),
        Some("jina-v2-en")
    );
}

fn write_dir(files: &[(&str, &[u8])]) -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    for (name, bytes) in files {
        std::fs::write(dir.path().join(name), bytes).unwrap();
    }
    dir
}

fn plan_error(dir: &Path) -> String {
    let ckpt = match Checkpoint::open(dir) {
        Ok(c) => c,
        Err(e) => return e.to_string(),
    };
    HfConversion::plan(&ckpt, &HfOptions::default())
        .err()
        .map(|e| e.to_string())
        .unwrap_or_default()
}

/// A copy of a tiny fixture with some files replaced.
fn fixture_with(name: &str, replace: &[(&str, &[u8])]) -> tempfile::TempDir {
    let src = fixture(&format!("hf/{name}"));
    let dir = tempfile::tempdir().unwrap();
    for entry in std::fs::read_dir(&src).unwrap() {
        let entry = entry.unwrap();
        std::fs::copy(entry.path(), dir.path().join(entry.file_name())).unwrap();
    }
    for (file, bytes) in replace {
        std::fs::write(dir.path().join(file), bytes).unwrap();
    }
    dir
}

/// A plan lists every file the conversion read (for the writer to refuse as its output), and
/// nothing else of the directory: the directory, `config.json`, the index and its shards, the
/// model card and generation settings, the tokenizer files of the architecture.
#[test]
fn a_plan_lists_the_files_it_read_and_no_others() {
    let extra: &[(&str, &[u8])] = &[
        ("README.md", b"# Tiny\n"),
        ("generation_config.json", b"{\"top_k\": 5}"),
        ("notes.txt", b"not read"),
        ("old-conversion.gguf", b"not read"),
        ("merges.txt", b"not read by a SentencePiece conversion"),
    ];
    for (name, read) in [
        (
            "tiny-phi3",
            &[
                "config.json",
                "model.safetensors.index.json",
                "model-00001-of-00002.safetensors",
                "model-00002-of-00002.safetensors",
                "README.md",
                "generation_config.json",
                "tokenizer_config.json",
                "tokenizer.model",
            ][..],
        ),
        (
            "tiny-gemma3",
            &[
                "config.json",
                "model.safetensors",
                "README.md",
                "generation_config.json",
                "tokenizer.model",
                "tokenizer_config.json",
            ],
        ),
    ] {
        let dir = fixture_with(name, extra);
        let ckpt = Checkpoint::open(dir.path()).unwrap();
        let plan = HfConversion::plan(&ckpt, &HfOptions::default()).unwrap();
        let inputs = plan.inputs();
        assert_eq!(inputs[0], dir.path(), "{name}: the directory first");
        let mut got: Vec<String> = inputs[1..]
            .iter()
            .map(|p| {
                p.strip_prefix(dir.path())
                    .unwrap()
                    .to_string_lossy()
                    .into_owned()
            })
            .collect();
        got.sort();
        let mut want: Vec<&str> = read.to_vec();
        want.sort();
        assert_eq!(got, want, "{name}");
    }
}

#[test]
fn unsupported_and_damaged_checkpoints_are_clear_errors() {
    // An architecture the converter does not write: the message lists those it does.
    let config = br#"{"architectures": ["GPT2LMHeadModel"], "model_type": "gpt2"}"#;
    let st = safetensors::serialize(
        [(
            "w",
            safetensors::tensor::TensorView::new(safetensors::Dtype::F32, vec![1], &[0u8; 4])
                .unwrap(),
        )],
        None,
    )
    .unwrap();
    let dir = write_dir(&[("config.json", config), ("model.safetensors", &st)]);
    let e = plan_error(dir.path());
    assert!(
        e.contains("GPT2LMHeadModel") && e.contains("LlamaForCausalLM") && e.contains("BertModel"),
        "{e}"
    );

    // A damaged tokenizer.model names the file.
    let dir = fixture_with("tiny-gemma", &[("tokenizer.model", &[0x0a, 0xff, 0x01])]);
    let e = plan_error(dir.path());
    assert!(
        e.contains("tokenizer.model") && e.contains("not a SentencePiece model"),
        "{e}"
    );

    // Gemma without its tokenizer.model.
    let dir = fixture_with("tiny-gemma", &[]);
    std::fs::remove_file(dir.path().join("tokenizer.model")).unwrap();
    let e = plan_error(dir.path());
    assert!(e.contains("no tokenizer.model"), "{e}");

    // A count that is not a count.
    let config = std::fs::read_to_string(fixture("hf/tiny-qwen2/config.json"))
        .unwrap()
        .replace("\"num_hidden_layers\": 2", "\"num_hidden_layers\": \"two\"");
    let dir = fixture_with("tiny-qwen2", &[("config.json", config.as_bytes())]);
    let e = plan_error(dir.path());
    assert!(e.contains("num_hidden_layers"), "{e}");

    // Heads that do not divide the Q rows (nor the KV heads): refused by the load check of the
    // plan, before the permutation of Q's rows could fail while writing.
    let dir = with_config(
        "tiny-llama",
        "\"num_attention_heads\": 4",
        "\"num_attention_heads\": 3",
    );
    let e = plan_error(dir.path());
    assert!(
        e.contains("llama.attention.head_count 3")
            && e.contains("config.json's num_attention_heads"),
        "{e}"
    );

    // A tensor no table maps.
    let original = std::fs::read(fixture("hf/tiny-qwen3/model.safetensors")).unwrap();
    let mut tensors = safetensors::SafeTensors::deserialize(&original)
        .unwrap()
        .tensors();
    tensors.push((
        "model.layers.0.mlp.extra_proj.weight".to_string(),
        safetensors::tensor::TensorView::new(safetensors::Dtype::F32, vec![1], &[0u8; 4]).unwrap(),
    ));
    let st = safetensors::serialize(tensors, None).unwrap();
    let dir = fixture_with("tiny-qwen3", &[("model.safetensors", &st)]);
    let e = plan_error(dir.path());
    assert!(e.contains("model.layers.0.mlp.extra_proj.weight"), "{e}");
}

/// Seeded corruptions of the tiny checkpoints' files (bytes flipped, cut short, values of
/// `config.json` replaced by others of every JSON type): planning and writing return a result,
/// never a panic.
#[test]
fn corrupted_checkpoints_never_panic() {
    let mut rng = gguf_test_support::Rng::new(14);
    let oddities = [
        "null",
        "3000000000",
        "-1",
        "0",
        "1e30",
        "\"x\"",
        "[]",
        "{}",
        "true",
        "4294967296",
        "[1, \"a\"]",
    ];
    for round in 0..120 {
        let name = TINY[round % TINY.len()];
        let src = fixture(&format!("hf/{name}"));
        let files = ["config.json", "tokenizer.model", "tokenizer_config.json"];
        let file = files[rng.below(files.len() as u64) as usize];
        let original = std::fs::read(src.join(file)).unwrap();
        let bytes = if file == "config.json" && rng.below(2) == 0 {
            // Replace one value by an odd one.
            let mut config: serde_json::Value = serde_json::from_slice(&original).unwrap();
            let keys: Vec<String> = config.as_object().unwrap().keys().cloned().collect();
            let key = &keys[rng.below(keys.len() as u64) as usize];
            let odd = oddities[rng.below(oddities.len() as u64) as usize];
            config[key.as_str()] = serde_json::from_str(odd).unwrap();
            serde_json::to_vec(&config).unwrap()
        } else {
            let mut b = original.clone();
            match rng.below(3) {
                0 => b.truncate(rng.below(b.len() as u64) as usize),
                _ => {
                    for _ in 0..1 + rng.below(4) {
                        let i = rng.below(b.len() as u64) as usize;
                        b[i] ^= 1 << rng.below(8);
                    }
                }
            }
            b
        };
        let dir = fixture_with(name, &[(file, &bytes)]);
        let result = std::panic::catch_unwind(|| {
            let Ok(ckpt) = Checkpoint::open(dir.path()) else {
                return;
            };
            if let Ok(plan) = HfConversion::plan(&ckpt, &HfOptions::default()) {
                let _ = plan.write(Vec::new(), &mut |_, _| {});
            }
        });
        assert!(
            result.is_ok(),
            "round {round}: {name}/{file} made the converter panic"
        );
    }
}

/// An empty `tokenizer.model`, or one without pieces, is an error naming the file, not a
/// vocabulary of `[PADn]` tokens.
#[test]
fn a_tokenizer_model_without_pieces_is_refused() {
    // A ModelProto with only its normalizer spec (field 3, an empty message).
    for (bytes, wanted) in [(&[][..], "is empty"), (&[0x1a, 0x00][..], "without pieces")] {
        for name in ["tiny-llama", "tiny-gemma", "tiny-phi3"] {
            let dir = fixture_with(name, &[("tokenizer.model", bytes)]);
            let e = plan_error(dir.path());
            assert!(
                e.contains("tokenizer.model") && e.contains(wanted),
                "{name}: {e}"
            );
        }
    }
}

/// Mixtral checkpoints whose experts do not match `num_local_experts` are refused naming the
/// tensor or the layer, before anything is written; other mixtures of experts are refused
/// naming their class.
#[test]
fn mismatched_experts_and_unconverted_mixtures_are_refused() {
    let fewer = with_config(
        "tiny-mixtral",
        "\"num_local_experts\": 3",
        "\"num_local_experts\": 2",
    );
    let e = plan_error(fewer.path());
    assert!(
        e.contains("block_sparse_moe.experts.2.") && e.contains("num_local_experts 2"),
        "{e}"
    );
    let more = with_config(
        "tiny-mixtral",
        "\"num_local_experts\": 3",
        "\"num_local_experts\": 4",
    );
    let e = plan_error(more.path());
    assert!(e.contains("layer 0 has 9 of the 12 expert matrices"), "{e}");
    let qwen = with_config(
        "tiny-qwen3",
        "\"head_dim\"",
        "\"num_experts\": 4, \"head_dim\"",
    );
    let e = plan_error(qwen.path());
    assert!(
        e.contains("mixture of experts") && e.contains("Qwen3ForCausalLM"),
        "{e}"
    );
}

/// A fixture with `from` replaced by `to` in its `config.json` (which must contain `from`).
fn with_config(name: &str, from: &str, to: &str) -> tempfile::TempDir {
    let config = std::fs::read_to_string(fixture(&format!("hf/{name}/config.json"))).unwrap();
    assert!(config.contains(from), "{name}: no {from}");
    fixture_with(
        name,
        &[("config.json", config.replacen(from, to, 1).as_bytes())],
    )
}

/// A `config.json` that is not JSON (Python's json writes NaN, which JSON does not have) is
/// an error that shows the line, so the key is named.
#[test]
fn invalid_json_shows_the_line() {
    let dir = with_config(
        "tiny-mistral",
        "\"rope_theta\": 1000000.0",
        "\"rope_theta\": NaN",
    );
    let e = plan_error(dir.path());
    assert!(
        e.contains("config.json: not valid JSON")
            && e.contains("(line 13: `\"rope_theta\": NaN,`)"),
        "{e}"
    );
}

/// Checkpoints whose converted file would fail `gguf validate` (issue 24's hostile configs):
/// planning fails, before anything is written, with the engine's load check naming the GGUF key
/// or tensor and where it comes from in the checkpoint.
#[test]
fn checkpoints_whose_file_would_not_load_are_refused_naming_the_key() {
    let long = r#""rope_scaling": {"type": "longrope", "long_factor": [1, 1, 1, 0, 1, 1, 1, 1], "short_factor": [1, 1, 1, 1, 1, 1, 1, 1]}"#;
    let cases: &[(&str, &str, &str, &[&str])] = &[
        (
            "tiny-llama",
            "\"num_hidden_layers\": 2",
            "\"num_hidden_layers\": 1000000",
            &[
                "llama.block_count is 1000000; it must be 1 to 1024",
                "config.json's num_hidden_layers",
            ],
        ),
        (
            "tiny-qwen3",
            "\"num_hidden_layers\": 2",
            "\"num_hidden_layers\": 3",
            &[
                "tensor `blk.2.attn_norm.weight` is missing",
                "qwen3.block_count is 3 but the input has tensors for 2 blocks",
                "config.json's num_hidden_layers",
            ],
        ),
        (
            "tiny-llama",
            "\"rope_theta\": 10000.0",
            "\"rope_theta\": -1",
            &["llama.rope.freq_base is -1", "config.json's rope_theta"],
        ),
        (
            "tiny-qwen2",
            "\"rope_theta\": 10000.0",
            "\"rope_theta\": 0",
            &["qwen2.rope.freq_base is 0", "config.json's rope_theta"],
        ),
        (
            "tiny-phi3",
            "\"rope_scaling\": null",
            long,
            &[
                "tensor `rope_factors_long.weight` holds 0",
                "config.json's rope_scaling",
            ],
        ),
        (
            "tiny-qwen2",
            "\"intermediate_size\": 128",
            "\"intermediate_size\": 100",
            &[
                "tensor `blk.0.ffn_gate.weight` has shape [64, 128], but the hyperparameters need [64, 100]",
                "the checkpoint's model.layers.0.mlp.gate_proj.weight",
            ],
        ),
        (
            "tiny-qwen2",
            "\"num_key_value_heads\": 2",
            "\"num_key_value_heads\": 3",
            &[
                "qwen2.attention.head_count 4 is not a multiple of qwen2.attention.head_count_kv 3",
                "config.json's num_key_value_heads",
            ],
        ),
        (
            "tiny-gemma2",
            "\"hidden_size\": 64",
            "\"hidden_size\": 0",
            &["gemma2.embedding_length is 0"],
        ),
        (
            "tiny-phi3",
            "\"rms_norm_eps\": 1e-6",
            "\"rms_norm_eps\": -1",
            &["phi3.attention.layer_norm_rms_epsilon is -1"],
        ),
    ];
    for (name, from, to, wanted) in cases {
        let dir = with_config(name, from, to);
        let e = plan_error(dir.path());
        for w in *wanted {
            assert!(e.contains(w), "{name} with {to}: {e:?} lacks {w:?}");
        }
        if e.contains("gguf validate") {
            assert!(e.ends_with("nothing was written"), "{e}");
        }
    }
    // The tiny checkpoints themselves pass the check (their conversions are pinned above).
    for name in TINY {
        let ckpt = Checkpoint::open(&fixture(&format!("hf/{name}"))).unwrap();
        HfConversion::plan(&ckpt, &HfOptions::default()).unwrap();
    }
}

/// Llama 3's RoPE scaling parameters divide wavelengths and frequencies: a zero or negative
/// one (whose `rope_freqs.weight` would hold zeros, which the engine refuses) is refused naming
/// the key.
#[test]
fn llama3_rope_scaling_parameters_must_be_positive() {
    for (from, to, wanted) in [
        (
            "\"factor\": 8.0",
            "\"factor\": 0",
            "rope_scaling.factor is 0",
        ),
        (
            "\"factor\": 8.0",
            "\"factor\": -8",
            "rope_scaling.factor is -8",
        ),
        (
            "\"high_freq_factor\": 4.0",
            "\"high_freq_factor\": -4.0",
            "rope_scaling.high_freq_factor is -4",
        ),
        (
            "\"original_max_position_embeddings\": 64",
            "\"original_max_position_embeddings\": 0",
            "rope_scaling.original_max_position_embeddings is 0",
        ),
    ] {
        let e = plan_error(with_config("tiny-llama", from, to).path());
        assert!(e.starts_with("config.json: ") && e.contains(wanted), "{e}");
    }
}
