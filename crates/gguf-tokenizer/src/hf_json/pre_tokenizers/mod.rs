//! Pre-tokenizers (`tokenizers`' `pre_tokenizers/`): the JSON's list parsed into steps, runs
//! of regex splits mapped onto llama.cpp's pre-tokenizer types ([`crate::pre_regexes`]), the other
//! splitters native ([`split`]).

pub(in crate::hf_json) mod split;

use super::schema::{self, Pattern};
use super::{err, one_char, KEY};
use crate::error::Result;
use crate::pretok::PreTokenizer;
use crate::unicode::cpt_flags;

use crate::pre_regexes::{canonical_regex, name_for_regexes};

/// `SplitDelimiterBehavior`, as the JSON has it.
pub(in crate::hf_json) use schema::Behavior;
/// `Metaspace`'s `prepend_scheme`, as the JSON has it.
pub(in crate::hf_json) use schema::PrependScheme;

/// What a character predicate selects, for the native splitters.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(in crate::hf_json) enum CharClass {
    Whitespace,
    Numeric,
    /// `BertPreTokenizer`'s and `Punctuation`'s: ASCII punctuation or `\p{P}`.
    Punctuation,
    Char(char),
}

impl CharClass {
    pub(in crate::hf_json) fn test(&self, c: char) -> bool {
        match self {
            CharClass::Whitespace => c.is_whitespace(),
            CharClass::Numeric => c.is_numeric(),
            CharClass::Punctuation => {
                c.is_ascii_punctuation() || cpt_flags(c as u32).is_punctuation()
            }
            CharClass::Char(x) => c == *x,
        }
    }
}

#[derive(Clone, Debug)]
pub(in crate::hf_json) enum PreStep {
    /// A run of regexes, as llama.cpp's pre-tokenizer type splits with them.
    Regex(PreTokenizer),
    /// `ByteLevel.add_prefix_space`.
    PrefixSpace,
    /// Every character of the class is a match.
    Chars(CharClass, Behavior),
    /// Occurrences of a literal string are the matches.
    Literal(String, Behavior),
    Metaspace {
        replacement: char,
        prepend: PrependScheme,
        split: bool,
    },
}

/// One entry of the JSON's pre-tokenizer list, before regex runs are grouped.
pub(in crate::hf_json) enum RawStep {
    Regex(String),
    Digits(bool),
    Step(PreStep),
}

#[derive(Clone, Debug, Default)]
pub(in crate::hf_json) struct PreTokenizerSpec {
    pub(in crate::hf_json) steps: Vec<PreStep>,
    /// A `ByteLevel` step ends the list: words are byte-level encoded for the model.
    pub(in crate::hf_json) byte_level: bool,
    /// The llama.cpp type the (first) regex run mapped onto, for `pre_tokenizer()` (empty
    /// when none did).
    pub(in crate::hf_json) mapped_name: String,
}

/// Hugging Face's `ByteLevel` regex (GPT-2's).
pub(in crate::hf_json) const GPT2_REGEX: &str =
    r"'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+";

/// Pre-tokenizer types whose splitting is known to be Hugging Face's for their regexes (the
/// fast paths of llama.cpp, with real Unicode categories); the others follow llama.cpp's
/// approximation of the regex, which can differ on some non-ASCII text.
pub(in crate::hf_json) const EXACT_TYPES: &[&str] =
    &["gpt-2", "llama-bpe", "qwen2", "qwen35", "starcoder"];

impl PreTokenizerSpec {
    pub(in crate::hf_json) fn parse(
        p: schema::PreTokenizer,
        warnings: &mut Vec<String>,
    ) -> Result<PreTokenizerSpec> {
        let mut raw = Vec::new();
        let mut byte_level = false;
        flatten_pre(p, &mut raw, &mut byte_level)?;
        let mut spec = PreTokenizerSpec {
            byte_level,
            ..PreTokenizerSpec::default()
        };
        let mut i = 0;
        while i < raw.len() {
            let regexes: Vec<String> = raw[i..]
                .iter()
                .map_while(|s| match s {
                    RawStep::Regex(r) => Some(canonical_regex(r)),
                    RawStep::Digits(true) => Some(r"\p{N}".to_string()),
                    RawStep::Digits(false) => Some(r"\p{N}+".to_string()),
                    RawStep::Step(_) => None,
                })
                .collect();
            if regexes.is_empty() {
                if let RawStep::Step(step) = &raw[i] {
                    spec.steps.push(step.clone());
                }
                i += 1;
                continue;
            }
            // The longest run from here that is the regex list of a llama.cpp type.
            let found = (1..=regexes.len())
                .rev()
                .find_map(|n| name_for_regexes(&regexes[..n]).map(|name| (n, name)));
            match found {
                Some((n, name)) => {
                    let ty = PreTokenizer::from_name(name)
                        .ok_or_else(|| err(format!("internal: pre-tokenizer `{name}`")))?;
                    if !EXACT_TYPES.contains(&name) {
                        warnings.push(format!(
                            "{KEY}: the pre-tokenizer regexes are llama.cpp's `{name}` type, \
                             which splits as llama.cpp does; its approximation of the regex may \
                             differ from Hugging Face's on some non-ASCII text"
                        ));
                    }
                    if spec.mapped_name.is_empty() {
                        spec.mapped_name = name.to_string();
                    }
                    spec.steps.push(PreStep::Regex(ty));
                    i += n;
                }
                None => {
                    match &raw[i] {
                        RawStep::Digits(individual) => spec.steps.push(PreStep::Chars(
                            CharClass::Numeric,
                            if *individual {
                                Behavior::Isolated
                            } else {
                                Behavior::Contiguous
                            },
                        )),
                        _ => {
                            warnings.push(format!(
                                "{KEY}: the pre-tokenizer regex {:?} is none that llama.cpp \
                                 knows: using llama.cpp's `default` pre-tokenizer instead; \
                                 tokens may differ from Hugging Face's",
                                regexes[0]
                            ));
                            if spec.mapped_name.is_empty() {
                                spec.mapped_name = "default".to_string();
                            }
                            spec.steps.push(PreStep::Regex(PreTokenizer::FALLBACK));
                        }
                    }
                    i += 1;
                }
            }
        }
        Ok(spec)
    }
}

/// The JSON's pre-tokenizer as a flat list of steps (`Sequence`s and `BertPreTokenizer`
/// expanded), each `ByteLevel` regex and `Split` regex kept as its regex.
pub(in crate::hf_json) fn flatten_pre(
    p: schema::PreTokenizer,
    out: &mut Vec<RawStep>,
    byte_level: &mut bool,
) -> Result<()> {
    use schema::PreTokenizer as P;
    let ty = p.type_name();
    if *byte_level {
        return Err(err(format!(
            "pre-tokenizer `{ty}` after ByteLevel is not supported (it would see byte-level text)"
        )));
    }
    match p {
        P::Sequence(seq) => {
            for p in seq.pretokenizers {
                flatten_pre(p, out, byte_level)?;
            }
        }
        P::ByteLevel(b) => {
            if b.add_prefix_space.unwrap_or(true) {
                out.push(RawStep::Step(PreStep::PrefixSpace));
            }
            if b.use_regex.unwrap_or(true) {
                out.push(RawStep::Regex(GPT2_REGEX.to_string()));
            }
            *byte_level = true;
        }
        P::Split(split) => {
            if split.invert.unwrap_or(false) {
                return Err(err(
                    "pre-tokenizer Split with `invert: true` is not supported",
                ));
            }
            let behavior = split.behavior.unwrap_or(Behavior::Removed);
            match split.pattern {
                Pattern::String(s) => out.push(RawStep::Step(PreStep::Literal(s, behavior))),
                Pattern::Regex(r) => {
                    if behavior != Behavior::Isolated {
                        return Err(err(format!(
                            "pre-tokenizer Split with a regex and behavior {behavior:?} is not \
                             supported (only Isolated, which llama.cpp's splitting is)"
                        )));
                    }
                    out.push(RawStep::Regex(r));
                }
            }
        }
        P::Digits(d) => out.push(RawStep::Digits(d.individual_digits.unwrap_or(false))),
        P::Metaspace(m) => {
            let replacement = one_char(&m.replacement, "pre_tokenizer Metaspace.replacement")?;
            let prepend = match m.prepend_scheme {
                None if m.add_prefix_space.unwrap_or(true) => PrependScheme::Always,
                None => PrependScheme::Never,
                Some(scheme) => scheme,
            };
            out.push(RawStep::Step(PreStep::Metaspace {
                replacement,
                prepend,
                split: m.split.unwrap_or(true),
            }));
        }
        P::WhitespaceSplit => out.push(RawStep::Step(PreStep::Chars(
            CharClass::Whitespace,
            Behavior::Removed,
        ))),
        P::CharDelimiterSplit(c) => out.push(RawStep::Step(PreStep::Chars(
            CharClass::Char(one_char(
                &c.delimiter,
                "pre_tokenizer CharDelimiterSplit.delimiter",
            )?),
            Behavior::Removed,
        ))),
        P::Punctuation(p) => out.push(RawStep::Step(PreStep::Chars(
            CharClass::Punctuation,
            p.behavior.unwrap_or(Behavior::Isolated),
        ))),
        P::Bert => {
            out.push(RawStep::Step(PreStep::Chars(
                CharClass::Whitespace,
                Behavior::Removed,
            )));
            out.push(RawStep::Step(PreStep::Chars(
                CharClass::Punctuation,
                Behavior::Isolated,
            )));
        }
        P::Whitespace | P::UnicodeScripts | P::FixedLength(_) => {
            return Err(err(format!(
                "pre-tokenizer `{ty}` is not supported (supported: ByteLevel, Split, Digits, \
                 Metaspace, WhitespaceSplit, CharDelimiterSplit, Punctuation, BertPreTokenizer, \
                 Sequence)"
            )))
        }
    }
    Ok(())
}

#[cfg(test)]
pub(in crate::hf_json) mod tests {
    use super::*;

    use super::super::piece::Piece;

    #[test]
    fn a_deepseek_coder_sequence_is_mapped_with_a_warning() {
        let json = r#"{"type":"Sequence","pretokenizers":[
            {"type":"Split","pattern":{"Regex":"[\r\n]"},"behavior":"Isolated","invert":false},
            {"type":"Split","pattern":{"Regex":"\\s?\\p{L}+"},"behavior":"Isolated","invert":false},
            {"type":"Split","pattern":{"Regex":"\\s?\\p{P}+"},"behavior":"Isolated","invert":false},
            {"type":"Split","pattern":{"Regex":"[一-龥ࠀ-一가-퟿]+"},"behavior":"Isolated","invert":false},
            {"type":"Digits","individual_digits":true},
            {"type":"ByteLevel","add_prefix_space":false,"trim_offsets":true,"use_regex":false}]}"#;
        let p = schema::from_value(serde_json::from_str(json).unwrap()).unwrap();
        let mut warnings = Vec::new();
        let spec = PreTokenizerSpec::parse(p, &mut warnings).unwrap();
        assert_eq!(spec.mapped_name, "deepseek-coder");
        assert!(spec.byte_level);
        assert_eq!(spec.steps.len(), 1);
        assert!(warnings[0].contains("`deepseek-coder`"), "{warnings:?}");
    }

    #[test]
    fn metaspace_splits_before_each_replacement() {
        let step = PreStep::Metaspace {
            replacement: '\u{2581}',
            prepend: PrependScheme::First,
            split: true,
        };
        let mut out = Vec::new();
        step.apply(Piece::new("a  b", 0), &mut out);
        let words: Vec<String> = out.iter().map(Piece::string).collect();
        assert_eq!(words, ["\u{2581}a", "\u{2581}", "\u{2581}b"]);
        out.clear();
        step.apply(Piece::new("a b", 5), &mut out);
        let words: Vec<String> = out.iter().map(Piece::string).collect();
        assert_eq!(words, ["a", "\u{2581}b"]);
    }
}
