//! Gemma 3's SentencePiece-style vocabulary gives exactly llama.cpp's ids (llama-tokenize of
//! llama.cpp 0c1e57098 on the same file, in its three modes: defaults, `--no-parse-special`
//! and `--no-bos`), and decoding gives the text back.

mod common;

use common::real_model;
use gguf_format::GgufFile;
use gguf_tokenizer::Tokenizer;

/// (text, default ids, --no-parse-special ids, --no-bos ids)
type Case = (&'static str, &'static [u32], &'static [u32], &'static [u32]);

const CASES: &[Case] = &[
    (
        "Hello world",
        &[2, 9259, 1902],
        &[2, 9259, 1902],
        &[9259, 1902],
    ),
    (
        "  two  spaces, tabs\tand\nnewlines",
        &[
            2, 138, 13498, 138, 35220, 236764, 42364, 255968, 624, 107, 208697,
        ],
        &[
            2, 138, 13498, 138, 35220, 236764, 42364, 255968, 624, 107, 208697,
        ],
        &[
            138, 13498, 138, 35220, 236764, 42364, 255968, 624, 107, 208697,
        ],
    ),
    (
        "I'm DON'T you'Ll they've",
        &[
            2, 236777, 236789, 236757, 52402, 236789, 236774, 611, 236789, 148194, 901, 236789, 560,
        ],
        &[
            2, 236777, 236789, 236757, 52402, 236789, 236774, 611, 236789, 148194, 901, 236789, 560,
        ],
        &[
            236777, 236789, 236757, 52402, 236789, 236774, 611, 236789, 148194, 901, 236789, 560,
        ],
    ),
    (
        "café naïve Ελληνικά Привет 日本語 한국어 العربية",
        &[
            2, 123125, 236859, 120362, 23883, 109959, 42220, 15745, 8362, 33375, 238582, 50413,
            237430, 87595,
        ],
        &[
            2, 123125, 236859, 120362, 23883, 109959, 42220, 15745, 8362, 33375, 238582, 50413,
            237430, 87595,
        ],
        &[
            123125, 236859, 120362, 23883, 109959, 42220, 15745, 8362, 33375, 238582, 50413,
            237430, 87595,
        ],
    ),
    (
        "👨‍👩‍👧‍👦 🇫🇷 👍🏽",
        &[
            2, 243874, 237243, 243767, 237243, 244814, 237243, 244990, 236743, 246598, 242644,
            103712, 242713,
        ],
        &[
            2, 243874, 237243, 243767, 237243, 244814, 237243, 244990, 236743, 246598, 242644,
            103712, 242713,
        ],
        &[
            243874, 237243, 243767, 237243, 244814, 237243, 244990, 236743, 246598, 242644, 103712,
            242713,
        ],
    ),
    (
        "<start_of_turn>user\nhi<end_of_turn>\n<start_of_turn>model\n",
        &[2, 105, 2364, 107, 2202, 106, 107, 105, 4368, 107],
        &[
            2, 236820, 3041, 236779, 1340, 236779, 887, 236813, 2364, 107, 2202, 236820, 643,
            236779, 1340, 236779, 887, 236813, 107, 236820, 3041, 236779, 1340, 236779, 887,
            236813, 4368, 107,
        ],
        &[105, 2364, 107, 2202, 106, 107, 105, 4368, 107],
    ),
    (
        "fn main() {\n    println!(\"{}\", 1 + 2);\n}\n",
        &[
            2, 15059, 1689, 825, 642, 107, 140, 4629, 183228, 236743, 236770, 900, 236743, 236778,
            626, 107, 236783, 107,
        ],
        &[
            2, 15059, 1689, 825, 642, 107, 140, 4629, 183228, 236743, 236770, 900, 236743, 236778,
            626, 107, 236783, 107,
        ],
        &[
            15059, 1689, 825, 642, 107, 140, 4629, 183228, 236743, 236770, 900, 236743, 236778,
            626, 107, 236783, 107,
        ],
    ),
    (
        "1234567890 3.14159 2026-11-29",
        &[
            2, 236770, 236778, 236800, 236812, 236810, 236825, 236832, 236828, 236819, 236771,
            236743, 236800, 236761, 236770, 236812, 236770, 236810, 236819, 236743, 236778, 236771,
            236778, 236825, 236772, 236770, 236770, 236772, 236778, 236819,
        ],
        &[
            2, 236770, 236778, 236800, 236812, 236810, 236825, 236832, 236828, 236819, 236771,
            236743, 236800, 236761, 236770, 236812, 236770, 236810, 236819, 236743, 236778, 236771,
            236778, 236825, 236772, 236770, 236770, 236772, 236778, 236819,
        ],
        &[
            236770, 236778, 236800, 236812, 236810, 236825, 236832, 236828, 236819, 236771, 236743,
            236800, 236761, 236770, 236812, 236770, 236810, 236819, 236743, 236778, 236771, 236778,
            236825, 236772, 236770, 236770, 236772, 236778, 236819,
        ],
    ),
    (" ", &[2, 236743], &[2, 236743], &[236743]),
    ("\n\n", &[2, 108], &[2, 108], &[108]),
    (
        "<bos>text<eos>",
        &[2, 2, 1005, 1],
        &[2, 236820, 46757, 236813, 1005, 236820, 211827, 236813],
        &[2, 1005, 1],
    ),
    (
        "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa",
        &[
            2, 128820, 128820, 128820, 128820, 128820, 128820, 128820, 128820, 128820, 128820,
        ],
        &[
            2, 128820, 128820, 128820, 128820, 128820, 128820, 128820, 128820, 128820, 128820,
        ],
        &[
            128820, 128820, 128820, 128820, 128820, 128820, 128820, 128820, 128820, 128820,
        ],
    ),
];

#[test]
fn gemma3_ids_equal_llama_cpp() {
    let Some(path) = real_model("gemma3-270m") else {
        return;
    };
    let mapped = GgufFile::open(&path).unwrap();
    let tokenizer = Tokenizer::from_gguf(mapped.file()).unwrap();
    for &(text, default, no_parse_special, no_bos) in CASES {
        let bytes = text.as_bytes();
        assert_eq!(
            tokenizer.encode(bytes, gguf_tokenizer::EncodeOptions::ADD_AND_PARSE_SPECIAL),
            default,
            "{text:?}"
        );
        assert_eq!(
            tokenizer.encode(bytes, gguf_tokenizer::EncodeOptions::ADD_SPECIAL),
            no_parse_special,
            "{text:?} literal"
        );
        assert_eq!(
            tokenizer.encode(bytes, gguf_tokenizer::EncodeOptions::PARSE_SPECIAL),
            no_bos,
            "{text:?} without BOS"
        );
        // Round trip: rendering control tokens gives the input back exactly.
        let ids = tokenizer.encode(bytes, gguf_tokenizer::EncodeOptions::PARSE_SPECIAL);
        assert_eq!(
            tokenizer.decode(&ids, gguf_tokenizer::DecodeOptions::UNPARSE_SPECIAL),
            bytes,
            "{text:?} round trip"
        );
    }
}

#[test]
fn invalid_utf8_and_nul_tokenize_as_llama_cpp_does() {
    let Some(path) = real_model("gemma3-270m") else {
        return;
    };
    let mapped = GgufFile::open(&path).unwrap();
    let tokenizer = Tokenizer::from_gguf(mapped.file()).unwrap();
    // llama-tokenize -f FILE --ids --no-bos. A lead byte announces its sequence length even
    // when the continuation bytes are wrong, so \xfe swallows the first bytes of the `▁` that
    // follows it and they come out as byte tokens.
    let cases: [(&[u8], &[u32]); 3] = [
        (
            b"\xff\xfe invalid \xe6\x97",
            &[493, 492, 464, 388, 367, 29995, 236743, 468, 389],
        ),
        (b"\0\0nul\0", &[238, 238, 163085, 238]),
        (b"", &[]),
    ];
    for (input, expected) in cases {
        assert_eq!(
            tokenizer.encode(input, gguf_tokenizer::EncodeOptions::PARSE_SPECIAL),
            expected,
            "{input:?}"
        );
    }
    // Valid text with NUL bytes survives a round trip.
    let ids = tokenizer.encode(b"\0\0nul\0", gguf_tokenizer::EncodeOptions::PARSE_SPECIAL);
    assert_eq!(
        tokenizer.decode(&ids, gguf_tokenizer::DecodeOptions::UNPARSE_SPECIAL),
        b"\0\0nul\0"
    );
}
