//! llama.cpp's pre-tokenizer regexes, one table for the crate and its users: for each
//! pre-tokenizer name (`tokenizer.ggml.pre`), the regex list llama.cpp splits with.
//!
//! The crate's `tokenizer.json` reader matches a run of `Split` regexes (and `ByteLevel`'s
//! GPT-2 regex) against it ([`name_for_regexes`]) to pick the llama.cpp type that splits the
//! same way; gguf-convert's exporter writes a type's list back as `Split` steps
//! ([`regexes`], in `tokenizer.json`'s spelling: [`hugging_face_regex`]).
//!
//! ```
//! use gguf_tokenizer::pre_regexes::{canonical_regex, hugging_face_regex, name_for_regexes, regexes};
//! let llama3 = regexes("llama-bpe").unwrap();
//! assert_eq!(name_for_regexes(&[canonical_regex(&hugging_face_regex(llama3[0]))]), Some("llama-bpe"));
//! assert!(hugging_face_regex(llama3[0]).starts_with("(?i:'s|'t|'re|'ve|'m|'ll|'d)|"));
//! ```

/// Llama 3's case-insensitive contractions as `tokenizer.json` files write them.
const CONTRACTIONS_HF: &str = r"(?i:'s|'t|'re|'ve|'m|'ll|'d)";
/// The same as llama.cpp spells them out (it has no `(?i:`).
const CONTRACTIONS_LLAMA: &str = r"(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])";

/// A regex in the form [`PRE_REGEXES`] uses: `\r`/`\n` escapes for those characters, Llama 3's
/// case-insensitive contractions spelled out as llama.cpp does, and GPT-2's trailing `|\s+`
/// (which changes no split) dropped.
pub fn canonical_regex(r: &str) -> String {
    let mut s = r
        .replace('\r', r"\r")
        .replace('\n', r"\n")
        .replace(CONTRACTIONS_HF, CONTRACTIONS_LLAMA);
    if s.starts_with(r"'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+") && s.ends_with(r"\s+(?!\S)|\s+") {
        s.truncate(s.len() - r"|\s+".len());
    }
    s
}

/// A regex of [`PRE_REGEXES`] as Hugging Face's `tokenizer.json` files write it: Llama 3's
/// contractions as `(?i:'s|'t|'re|'ve|'m|'ll|'d)`. [`canonical_regex`] of it is `r` again.
pub fn hugging_face_regex(r: &str) -> String {
    r.replace(CONTRACTIONS_LLAMA, CONTRACTIONS_HF)
}

/// The regex list llama.cpp splits with for pre-tokenizer `name` (a name of [`PRE_REGEXES`]),
/// in [`canonical_regex`] form; `None` for other names.
pub fn regexes(name: &str) -> Option<&'static [&'static str]> {
    PRE_REGEXES
        .iter()
        .find(|(n, _)| *n == name)
        .and_then(|(_, lists)| lists.first().copied())
}

/// The llama.cpp pre-tokenizer name whose regex list is exactly `regexes` (in
/// [`canonical_regex`] form), among [`PRE_REGEXES`]' lists.
pub fn name_for_regexes(regexes: &[String]) -> Option<&'static str> {
    PRE_REGEXES.iter().find_map(|(name, alternatives)| {
        alternatives
            .iter()
            .any(|list| {
                list.len() == regexes.len() && list.iter().zip(regexes).all(|(a, b)| a == b)
            })
            .then_some(*name)
    })
}

// ---------------------------------------------------------------------------------------------
// llama.cpp's regexes per pre-tokenizer type

/// For each llama.cpp pre-tokenizer type (by one of its names), the regex lists that select it:
/// first the list `llm_tokenizer_bpe` gives the type (llama.cpp commit 0c1e57098,
/// `src/llama-vocab.cpp`), then the original `tokenizer.json` list where llama.cpp records a
/// different one, in [`canonical_regex`] form. Types whose regex is llama.cpp's own device
/// (kimi-k2's, afmoe's digits, gemma4's and whitespace's raw-UTF-8 splitting) are left out.
#[rustfmt::skip]
pub const PRE_REGEXES: &[(&str, &[&[&str]])] = &[
    ("llama-bpe", &[
        &[
            r"(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+",
        ],
    ]),
    ("jais-2", &[
        &[
            r"(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s{512}(?!\S)|\s{256}(?!\S)|\s{128}(?!\S)|\s{64}(?!\S)|\s{32}(?!\S)|\s{16}(?!\S)|\s{8}(?!\S)|\s{4}(?!\S)|\s{1,2}(?!\S)|\s{1}",
        ],
    ]),
    ("dbrx", &[
        &[
            r"(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+",
        ],
    ]),
    ("deepseek-llm", &[
        &[
            r"[\r\n]",
            r"\s?[A-Za-zµÀ-ÖØ-öø-ƺƼ-ƿǄ-ʓʕ-ʯͰ-ͳͶͷͻ-ͽͿΆΈ-ΊΌΎ-ΡΣ-ϵϷ-ҁҊ-ԯԱ-ՖႠ-ჅᎠ-Ᏽᏸ-ᏽᲐ-ᲺᲽ-Ჿᴀ-ᴫᵫ-ᵷᵹ-ᶚḀ-ἕἘ-Ἕἠ-ὅὈ-Ὅὐ-ὗὙὛὝὟ-ώᾀ-ᾴᾶ-ᾼιῂ-ῄῆ-ῌῐ-ΐῖ-Ίῠ-Ῥῲ-ῴῶ-ῼℂℇℊ-ℓℕℙ-ℝℤΩℨK-ℭℯ-ℴℹℼ-ℿⅅ-ⅉⅎↃↄⰀ-ⱻⱾ-ⳤⳫ-ⳮⳲⳳꙀ-ꙭꚀ-ꚛꜢ-ꝯꝱ-ꞇꞋ-ꞎꭰ-ꮿﬀ-ﬆﬓ-ﬗＡ-Ｚａ-ｚ𐐀-𐑏𐒰-𐓓𐓘-𐓻𐲀-𐲲𐳀-𐳲𑢠-𑣟𞤀-𞥃]+",
            r"\s?[!-/:-~！-／：-～‘-‟　-。]+",
            r"\s+$",
            r"[一-龥ࠀ-一가-퟿]+",
            r"\p{N}+",
        ],
    ]),
    ("deepseek-v3", &[
        &[
            r"\p{N}{1,3}",
            r"[一-龥぀-ゟ゠-ヿ]+",
            r##"[!"#$%&'()*+,\-./:;<=>?@\[\\\]^_`{|}~][A-Za-z]+|[^\r\n\p{L}\p{P}\p{S}]?[\p{L}\p{M}]+| ?[\p{P}\p{S}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+"##,
        ],
    ]),
    ("spark2_5", &[
        &[
            r"\p{N}{1,3}",
            r"[一-龥぀-ゟ゠-ヿ]+",
            r##"[!"#$%&'()*+,\-./:;<=>?@\[\\\]^_`{|}~][A-Za-z]+|[^\r\n\p{L}\p{P}\p{S}]?[\p{L}\p{M}]+| ?[\p{P}\p{S}]+|[\r\n]|\s+(?!\S)|\s+"##,
            r"\p{N}",
        ],
    ]),
    ("youtu", &[
        &[
            r"[가-힣ㄱ-ㆎ]+|[！…“”‘’—：；，、-〿︰-﹏]+|[ㄅ-ㄯ]+|[一-龥぀-ゟ゠-ヿ]+",
            r"[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]*[\p{Ll}\p{Lm}\p{Lo}\p{M}]+(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])?|[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]+[\p{Ll}\p{Lm}\p{Lo}\p{M}]*(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])?|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n/]*|\s*[\r\n]+|\s+(?!\S)|\s+",
        ],
    ]),
    ("deepseek-coder", &[
        &[
            r"[\r\n]",
            r"\s?\p{L}+",
            r"\s?\p{P}+",
            r"[一-龥ࠀ-一가-퟿]+",
            r"\p{N}",
        ],
    ]),
    ("falcon", &[
        &[
            r"[\p{P}\$\+<=>\^~\|`]+",
            r"'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)",
            r"[0-9][0-9][0-9]",
        ],
    ]),
    ("starcoder", &[
        &[
            r"\p{N}",
            r"'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)",
        ],
    ]),
    ("gpt-2", &[
        &[
            r"'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)",
        ],
    ]),
    ("qwen2", &[
        &[
            r"(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+",
        ],
    ]),
    ("qwen35", &[
        &[
            r"(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])|[^\r\n\p{L}\p{N}]?[\p{L}\p{M}]+|\p{N}| ?[^\s\p{L}\p{M}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+",
        ],
    ]),
    ("poro-chat", &[
        &[
            r" ?[^(\s|.,!?…。，、।۔،)]+",
        ],
    ]),
    ("chatglm-bpe", &[
        &[
            r"(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+",
        ],
    ]),
    ("viking", &[
        &[
            r" ?[^(\s|.,!?…。，、।۔،)]+",
            r"\p{N}",
        ],
    ]),
    ("tekken", &[
        &[
            r"[^\r\n\p{L}\p{N}]?((?=[\p{L}])([^a-z]))*((?=[\p{L}])([^A-Z]))+|[^\r\n\p{L}\p{N}]?((?=[\p{L}])([^a-z]))+((?=[\p{L}])([^A-Z]))*|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n/]*|\s*[\r\n]+|\s+(?!\S)|\s+",
        ],
        &[
            r"[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]*[\p{Ll}\p{Lm}\p{Lo}\p{M}]+|[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]+[\p{Ll}\p{Lm}\p{Lo}\p{M}]*|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n/]*|\s*[\r\n]+|\s+(?!\S)|\s+",
        ],
    ]),
    ("chameleon", &[
        &[
            r"<sentinel:[0-9]+>",
            r"(IMGIMG)((A|B|C|D|E|F|G|H|I){1,4})Z",
            r"([\t\n]|    |  )",
            r"\p{N}",
            r"[\p{P}!-/:-@\[-`{-~]",
            r"'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)",
        ],
    ]),
    ("gpt-4o", &[
        &[
            r"[^\r\n\p{L}\p{N}]?((?=[\p{L}])([^a-z]))*((?=[\p{L}])([^A-Z]))+(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])?|[^\r\n\p{L}\p{N}]?((?=[\p{L}])([^a-z]))+((?=[\p{L}])([^A-Z]))*(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])?|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n/]*|\s*[\r\n]+|\s+(?!\S)|\s+",
        ],
        &[
            r"[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]*[\p{Ll}\p{Lm}\p{Lo}\p{M}]+(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])?|[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]+[\p{Ll}\p{Lm}\p{Lo}\p{M}]*(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])?|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n/]*|\s*[\r\n]+|\s+(?!\S)|\s+",
        ],
    ]),
    ("granite-embed-multi-97m", &[
        &[
            r"[^\r\n\p{L}\p{N}]?((?=[\p{L}\p{M}])([^a-z]))*((?=[\p{L}\p{M}])([^A-Z]))+(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])?|[^\r\n\p{L}\p{N}]?((?=[\p{L}\p{M}])([^a-z]))+((?=[\p{L}\p{M}])([^A-Z]))*(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])?|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n/]*|\s*[\r\n]+|\s+(?!\S)|\s+",
        ],
    ]),
    ("tiny_aya", &[
        &[
            r"\d{1,3}(?=(?:\d{3})*\b)",
            r"[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]*[\p{Ll}\p{Lm}\p{Lo}\p{M}]+(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])?|[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]+[\p{Ll}\p{Lm}\p{Lo}\p{M}]*(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])?|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n/]*|\s*[\r\n]+|\s+(?!\S)|\s+",
        ],
    ]),
    ("superbpe", &[
        &[
            r"\p{N}+",
            r"(?=(\d{3})+(?!\d))",
        ],
    ]),
    ("bailingmoe", &[
        &[
            r"'(?:[sSdDmMtT]|[lL][lL]|[vV][eE]|[rR][eE])|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]|\s+(?!\S)|\s+",
        ],
        &[
            r"'(?i:[sdmt]|ll|ve|re)|[^\r\n\p{L}\p{N}]?+\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]++[\r\n]*|\s*[\r\n]|\s+(?!\S)|\s+",
        ],
    ]),
    ("seed-coder", &[
        &[
            r"(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1}| ?[^\s\p{L}\p{N}\r\n]+|\s*[\r\n]+|\s+(?!\S)|\s+",
        ],
    ]),
    ("ufakzeka", &[
        &[
            r"[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+",
        ],
    ]),
    ("grok-2", &[
        &[
            r"(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+",
        ],
    ]),
    ("laguna", &[
        &[
            r"[^\n]+|[\n]+",
            r"(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+",
        ],
    ]),
    ("exaone-moe", &[
        &[
            r"(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])|[^\r\n\p{L}\p{N}]?(?:\p{L}\p{M}*(?: \p{L}\p{M}*)*)+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n/]?|\s*[\r\n]|\s+(?!\S)|\s+",
        ],
    ]),
    ("minicpm5", &[
        &[
            r"\p{N}{1,3}",
            r"(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}+| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+",
        ],
    ]),
    ("default", &[
        &[
            r"[\p{P}\$\+<=>\^~\|]+",
            r"'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)",
            r"\p{N}+",
            r"[0-9][0-9][0-9]",
        ],
    ]),
];

#[cfg(test)]
mod tests {
    use super::*;

    use crate::pretok::PreTokenizer;

    #[test]
    fn hugging_face_regexes_map_onto_llama_cpp_types() {
        let llama3 = r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+";
        assert_eq!(
            name_for_regexes(&[canonical_regex(llama3)]),
            Some("llama-bpe")
        );
        assert_eq!(
            regexes("llama-bpe")
                .map(|l| hugging_face_regex(l[0]))
                .as_deref(),
            Some(llama3)
        );
        let gpt2 = r"'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+";
        assert_eq!(name_for_regexes(&[canonical_regex(gpt2)]), Some("gpt-2"));
        let coder = [
            "[\r\n]",
            r"\s?\p{L}+",
            r"\s?\p{P}+",
            "[一-龥ࠀ-一가-퟿]+",
            r"\p{N}",
        ];
        let coder: Vec<String> = coder.iter().map(|r| canonical_regex(r)).collect();
        assert_eq!(name_for_regexes(&coder), Some("deepseek-coder"));
        // Every table entry names a type llama.cpp knows, and reads back from its
        // Hugging Face spelling.
        for (name, lists) in PRE_REGEXES {
            assert!(PreTokenizer::from_name(name).is_some(), "{name}");
            for list in *lists {
                for r in *list {
                    assert_eq!(canonical_regex(&hugging_face_regex(r)), *r, "{name}");
                }
            }
        }
        assert_eq!(regexes("no-such-type"), None);
    }
}
