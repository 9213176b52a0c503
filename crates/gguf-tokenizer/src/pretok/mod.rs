//! Pre-tokenizers: how llama.cpp cuts text into words before byte-level BPE, per
//! `tokenizer.ggml.pre`.
//!
//! llama.cpp (`llm_tokenizer_bpe` in `src/llama-vocab.cpp`) gives every pre-tokenizer type a list
//! of regexes and hands it to `unicode_regex_split` (`src/unicode.cpp`). That function starts from
//! the whole text as one piece and applies the regexes in order; each one cuts every piece it is
//! given into its matches *and* the stretches between them (both kept), so later regexes refine
//! the cuts of earlier ones. No regex ever sees past the ends of the piece it works on (a
//! lookahead at a piece's end sees the end of the text).
//!
//! llama.cpp does not run a Unicode regex engine, and what it runs instead is what we reproduce:
//!
//! * The gpt2, llama3, qwen2 and qwen35 patterns, kimi-k2's, afmoe's/tiny_aya's digit grouping and
//!   `[^\n]+|[\n]+` have hand-written fast paths there, quirks included (e.g. afmoe's digit pass
//!   glues the text before a number to the number's first group). We follow those.
//! * Every other regex goes through `std::regex` (ECMAScript: leftmost match, alternatives tried in
//!   order, greedy quantifiers with backtracking). If the regex uses `\p{..}`, the text is first
//!   collapsed to one byte per code point: ASCII stays, other code points become one byte per
//!   category (whitespace first, then L, N, P, M, S, or "other"), and `\p{L}` etc. become classes of
//!   that byte plus the ASCII members. So `\p{Lu}` and `\p{Ll}` both mean "any letter", `[^a-z]` is
//!   true of every non-ASCII letter, and non-ASCII whitespace is only `\s`. Regexes without `\p`
//!   run on the code points, non-ASCII whitespace replaced by U+000B. `\s` is then exactly
//!   White_Space, `\d` is `[0-9]`, and `$` is the end of the piece.
//!
//! Each regex is implemented here by a hand-written matcher with those semantics (see [`Pass`]).
//! Every pass is linear in the length of its piece: matchers fail in constant time where nothing
//! can match, the whitespace-run scans are cached per run, and backtracking is replaced by
//! computing where it would end. So a megabyte of one letter, of spaces or of digits splits in
//! linear time; no test times it, the reasoning is in the comments of [`Seg`] and the matchers.
//!
//! The expected splits in `tools/pretok_cases.json`, which the tests compare against for every
//! pre-tokenizer type, come from llama.cpp itself (see `tools/gen_pretok_cases.py`).

mod family;
mod fast;
mod matchers;
mod seg;
#[cfg(test)]
mod tests;

use std::ops::Range;

use crate::unicode::{cpt_flags, CptFlags};

use family::*;
use matchers::*;
use seg::{Pass, Seg};

/// Declares [`PreTokenizer`] and [`PreTokenizer::ALL`] from one list of variants.
macro_rules! pre_tokenizer_types {
    ($($variant:ident),* $(,)?) => {
        /// The pre-tokenizer types llama.cpp can select by name (`LLAMA_VOCAB_PRE_TYPE_*`).
        /// Several names can select one type and several types share a regex list; each
        /// variant splits exactly as its llama.cpp type does. (CHATGLM3, LLAMA4 and PIXTRAL
        /// exist in llama.cpp's enum but no name selects them, so they are left out.)
        #[derive(Clone, Copy, PartialEq, Eq, Debug, Hash)]
        pub(crate) enum PreTokenizer {
            $($variant),*
        }

        impl PreTokenizer {
            /// Every type, in declaration order.
            #[cfg(test)]
            pub(crate) const ALL: &[PreTokenizer] = &[$(PreTokenizer::$variant),*];
        }
    };
}

pre_tokenizer_types! {
    Default,
    Llama3,
    DeepseekLlm,
    DeepseekCoder,
    Falcon,
    Mpt,
    Starcoder,
    Gpt2,
    Refact,
    CommandR,
    Stablelm2,
    Qwen2,
    Olmo,
    Dbrx,
    Smaug,
    Poro,
    Chatglm4,
    Viking,
    Jais,
    Tekken,
    Smollm,
    Codeshell,
    Bloom,
    Gpt3Finnish,
    Exaone,
    Chameleon,
    Minerva,
    Deepseek3Llm,
    Gpt4o,
    Superbpe,
    Trillion,
    Bailingmoe,
    SeedCoder,
    Hunyuan,
    KimiK2,
    HunyuanDense,
    Grok2,
    GraniteDocling,
    MinimaxM2,
    Afmoe,
    SolarOpen,
    Youtu,
    ExaoneMoe,
    Qwen35,
    TinyAya,
    JoyaiLlm,
    Jais2,
    Gemma4,
    SarvamMoe,
    Minicpm5,
    Whitespace,
    GraniteEmbMulti,
    Mellum2,
    Laguna,
    HyV4,
    Spark25,
    Ufakzeka,
}

impl PreTokenizer {
    /// What to use when `tokenizer.ggml.pre` is missing or unknown. llama.cpp uses it (with a
    /// warning) when the key is missing or empty; for a name it does not know it refuses to load
    /// the model, so falling back here is our caller's choice, not llama.cpp's behaviour.
    pub(crate) const FALLBACK: PreTokenizer = PreTokenizer::Default;

    /// The type llama.cpp selects for a `tokenizer.ggml.pre` value; `None` for names it does not
    /// know (llama.cpp: "unknown pre-tokenizer type") and for the empty string (llama.cpp: warns
    /// and uses `default`). Note that "gpt2" is not a llama.cpp name ("gpt-2" is).
    pub(crate) fn from_name(pre: &str) -> Option<PreTokenizer> {
        use PreTokenizer::*;
        Some(match pre {
            "default" => Default,
            "minicpm5" => Minicpm5,
            "llama3" | "llama-v3" | "llama-bpe" | "falcon3" | "falcon-h1" | "pixtral"
            | "midm-2.0" | "lfm2" | "jina-v5-nano" => Llama3,
            "deepseek-llm" => DeepseekLlm,
            "deepseek-coder" => DeepseekCoder,
            "deepseek-v3" => Deepseek3Llm,
            "spark2_5" => Spark25,
            "youtu" => Youtu,
            "falcon" => Falcon,
            "mpt" => Mpt,
            "starcoder" => Starcoder,
            "gpt-2" | "phi-2" | "jina-es" | "jina-de" | "gigachat" | "jina-v2-es"
            | "jina-v2-de" | "a.x-4.0" | "mellum" | "modern-bert" => Gpt2,
            "jais-2" => Jais2,
            "gemma4" | "granite-embed-multi-311m" => Gemma4,
            "sarvam-moe" => SarvamMoe,
            "jina-v1-en" | "jina-v2-code" | "roberta-bpe" => Gpt2,
            "whitespace" => Whitespace,
            "refact" => Refact,
            "command-r" => CommandR,
            "qwen2" | "deepseek-r1-qwen" | "kormo" | "f2llmv2" => Qwen2,
            "qwen35" => Qwen35,
            "stablelm2" => Stablelm2,
            "olmo" => Olmo,
            "dbrx" => Dbrx,
            "smaug-bpe" => Smaug,
            "poro-chat" => Poro,
            "chatglm-bpe" | "glm4" | "glm5" => Chatglm4,
            "viking" => Viking,
            "jais" => Jais,
            "tekken" => Tekken,
            "smollm" => Smollm,
            "codeshell" => Codeshell,
            "bloom" => Bloom,
            "gpt3-finnish" => Gpt3Finnish,
            "exaone" => Exaone,
            "exaone4" => Gpt2,
            "exaone-moe" => ExaoneMoe,
            "chameleon" => Chameleon,
            "minerva-7b" => Minerva,
            "megrez" => Qwen2,
            "gpt-4o" | "llama4" | "kanana2" | "talkie" => Gpt4o,
            "granite-embed-multi-97m" => GraniteEmbMulti,
            "tiny_aya" | "cohere2moe" => TinyAya,
            "superbpe" => Superbpe,
            "trillion" => Trillion,
            "granite-docling" => GraniteDocling,
            "bailingmoe" | "bailingmoe2" | "llada-moe" => Bailingmoe,
            "seed-coder" => SeedCoder,
            "hunyuan" => Hunyuan,
            "hunyuan-dense" => HunyuanDense,
            "hy_v4" => HyV4,
            "joyai-llm" => JoyaiLlm,
            "kimi-k2" => KimiK2,
            "ufakzeka" => Ufakzeka,
            "grok-2" => Grok2,
            "afmoe" => Afmoe,
            "laguna" => Laguna,
            "minimax-m2" => MinimaxM2,
            "solar-open" => SolarOpen,
            "mellum2" => Mellum2,
            _ => return None,
        })
    }

    /// llama.cpp's name for the type, `LLAMA_VOCAB_PRE_TYPE_` left off (the tests match
    /// llama.cpp's cases by it).
    #[cfg(test)]
    pub(crate) fn llama_type_name(self) -> &'static str {
        use PreTokenizer::*;
        match self {
            Default => "DEFAULT",
            Llama3 => "LLAMA3",
            DeepseekLlm => "DEEPSEEK_LLM",
            DeepseekCoder => "DEEPSEEK_CODER",
            Falcon => "FALCON",
            Mpt => "MPT",
            Starcoder => "STARCODER",
            Gpt2 => "GPT2",
            Refact => "REFACT",
            CommandR => "COMMAND_R",
            Stablelm2 => "STABLELM2",
            Qwen2 => "QWEN2",
            Olmo => "OLMO",
            Dbrx => "DBRX",
            Smaug => "SMAUG",
            Poro => "PORO",
            Chatglm4 => "CHATGLM4",
            Viking => "VIKING",
            Jais => "JAIS",
            Tekken => "TEKKEN",
            Smollm => "SMOLLM",
            Codeshell => "CODESHELL",
            Bloom => "BLOOM",
            Gpt3Finnish => "GPT3_FINNISH",
            Exaone => "EXAONE",
            Chameleon => "CHAMELEON",
            Minerva => "MINERVA",
            Deepseek3Llm => "DEEPSEEK3_LLM",
            Gpt4o => "GPT4O",
            Superbpe => "SUPERBPE",
            Trillion => "TRILLION",
            Bailingmoe => "BAILINGMOE",
            SeedCoder => "SEED_CODER",
            Hunyuan => "HUNYUAN",
            KimiK2 => "KIMI_K2",
            HunyuanDense => "HUNYUAN_DENSE",
            Grok2 => "GROK_2",
            GraniteDocling => "GRANITE_DOCLING",
            MinimaxM2 => "MINIMAX_M2",
            Afmoe => "AFMOE",
            SolarOpen => "SOLAR_OPEN",
            Youtu => "YOUTU",
            ExaoneMoe => "EXAONE_MOE",
            Qwen35 => "QWEN35",
            TinyAya => "TINY_AYA",
            JoyaiLlm => "JOYAI_LLM",
            Jais2 => "JAIS2",
            Gemma4 => "GEMMA4",
            SarvamMoe => "SARVAM_MOE",
            Minicpm5 => "MINICPM5",
            Whitespace => "WHITESPACE",
            GraniteEmbMulti => "GRANITE_EMB_MULTI",
            Mellum2 => "MELLUM2",
            Laguna => "LAGUNA",
            HyV4 => "HY_V4",
            Spark25 => "SPARK2_5",
            Ufakzeka => "UFAKZEKA",
        }
    }

    /// Whether the words are byte-level (GPT-2) encoded before BPE. llama.cpp turns it off for
    /// the SentencePiece-style BPE of gemma4 and sarvam-moe and for the whitespace pre-tokenizer.
    pub(crate) fn byte_encode(self) -> bool {
        !matches!(
            self,
            PreTokenizer::Gemma4 | PreTokenizer::SarvamMoe | PreTokenizer::Whitespace
        )
    }

    /// The regex passes, in llama.cpp's order.
    fn passes(self) -> &'static [Pass] {
        use Pass::*;
        use PreTokenizer::*;
        match self {
            Default => &[
                Match(m_default_punct),
                Gpt2Fast,
                Match(m_numbers),
                Match(m_ascii_digit_triple),
            ],
            Llama3 | Dbrx | Smaug | Chatglm4 => &[Llama3Fast],
            Jais2 => &[Match(m_jais2)],
            DeepseekLlm => &[
                Match(m_crlf),
                Match(m_ds_llm_letters),
                Match(m_ds_llm_punct),
                TrailingSpaces,
                Match(m_ds_llm_cjk),
                Match(m_numbers),
            ],
            Deepseek3Llm | HunyuanDense | JoyaiLlm | HyV4 => {
                &[Match(m_numbers_upto3), Match(m_cjk_kana), Match(m_ds3)]
            }
            Spark25 => &[
                Match(m_numbers_upto3),
                Match(m_cjk_kana),
                Match(m_spark),
                Match(m_number),
            ],
            Youtu => &[Match(m_youtu_scripts), Match(m_youtu)],
            DeepseekCoder => &[
                Match(m_crlf),
                Match(m_ds_coder_letters),
                Match(m_ds_coder_punct),
                Match(m_ds_llm_cjk),
                Match(m_number),
            ],
            Falcon => &[Match(m_falcon_punct), Gpt2Fast, Match(m_ascii_digit_triple)],
            Starcoder | Refact | CommandR | Smollm | Codeshell | Exaone | Minerva | Mellum2 => {
                &[Match(m_number), Gpt2Fast]
            }
            Gpt2 | Mpt | Olmo | Jais | Trillion | GraniteDocling => &[Gpt2Fast],
            Stablelm2 | Qwen2 | Hunyuan | SolarOpen | Grok2 => &[Qwen2Fast],
            Qwen35 => &[Qwen35Fast],
            Poro | Bloom | Gpt3Finnish => &[Match(m_poro)],
            Viking => &[Match(m_poro), Match(m_number)],
            Tekken => &[Match(m_tekken)],
            Chameleon => &[
                Match(m_sentinel),
                Match(m_image_tokens),
                Match(m_tab_newline_spaces),
                Match(m_number),
                Match(m_chameleon_punct),
                Gpt2Fast,
            ],
            Gpt4o | MinimaxM2 => &[Match(m_gpt4o)],
            GraniteEmbMulti => &[Match(m_granite_multi)],
            TinyAya => &[AfmoeDigits, Match(m_tiny_aya)],
            KimiK2 => &[KimiK2Fast],
            Superbpe => &[Match(m_numbers), DigitTriplesAhead],
            Bailingmoe => &[Match(m_bailingmoe)],
            SeedCoder => &[Match(m_seed_coder)],
            Ufakzeka => &[Match(m_ufakzeka)],
            Afmoe => &[AfmoeDigits, Match(m_afmoe_scripts), Match(m_ds3)],
            Laguna => &[Newlines, Qwen2Fast],
            ExaoneMoe => &[Match(m_exaone_moe)],
            Gemma4 | SarvamMoe => &[Newlines],
            Minicpm5 => &[Match(m_numbers_upto3), Match(m_minicpm5)],
            Whitespace => &[Match(m_non_space)],
        }
    }

    /// Split `text` into words: the byte ranges, in order, non-empty, covering all of `text`
    /// (the tests' form; encoding splits code points with [`PreTokenizer::split_cpts`]).
    #[cfg(test)]
    pub(crate) fn split(&self, text: &str) -> Vec<Range<usize>> {
        let cpts: Vec<u32> = text.chars().map(|c| c as u32).collect();
        let bounds = self.boundaries(&cpts);
        // code point boundaries -> byte offsets, in one walk over the text
        let mut out = Vec::with_capacity(bounds.len().saturating_sub(1));
        let mut chars = text
            .char_indices()
            .map(|(i, _)| i)
            .chain(std::iter::once(text.len()));
        let mut index = 0;
        let mut byte = chars.next().unwrap_or(0);
        let mut prev_byte = 0;
        for &b in bounds.iter().skip(1) {
            while index < b {
                index += 1;
                byte = chars.next().unwrap_or(text.len());
            }
            out.push(prev_byte..byte);
            prev_byte = byte;
        }
        out
    }

    /// Split a code point sequence (e.g. from [`crate::unicode::utf8_to_cpts`], for bytes that
    /// may not be UTF-8): ranges of code point indices, non-empty, covering all of `cpts`.
    pub(crate) fn split_cpts(&self, cpts: &[u32]) -> Vec<Range<usize>> {
        self.boundaries(cpts)
            .windows(2)
            .map(|w| w[0]..w[1])
            .collect()
    }

    /// 0, the word boundaries, and `cpts.len()` (just `[0]` for no text), strictly increasing.
    fn boundaries(&self, cpts: &[u32]) -> Vec<usize> {
        let n = cpts.len();
        if n == 0 {
            return vec![0];
        }
        let flags: Vec<CptFlags> = cpts.iter().map(|&c| cpt_flags(c)).collect();
        let mut bounds = vec![0, n];
        let mut next = Vec::with_capacity(n / 4 + 2);
        for pass in self.passes() {
            next.clear();
            next.push(0);
            for w in bounds.windows(2) {
                let seg = Seg::new(cpts, &flags, w[0], w[1]);
                pass.run(&seg, &mut next);
                debug_assert_eq!(next.last(), Some(&w[1]));
            }
            std::mem::swap(&mut bounds, &mut next);
        }
        bounds
    }
}
