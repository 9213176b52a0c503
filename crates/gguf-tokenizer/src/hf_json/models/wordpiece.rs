//! `tokenizers`' WordPiece model, on the crate's greedy longest match ([`wpm::longest_pieces`]).

use super::parse_vocab_map;
use crate::error::Result;
use crate::hf_json::err;
use crate::hf_json::schema;
use crate::wpm;
use rustc_hash::FxHashMap;

/// `tokenizers`' WordPiece model.
#[derive(Clone, Debug)]
pub(in crate::hf_json) struct WordPieceHf {
    pub(in crate::hf_json) vocab: FxHashMap<String, u32>,
    pub(in crate::hf_json) unk: u32,
    pub(in crate::hf_json) prefix: String,
    pub(in crate::hf_json) max_chars: usize,
}

impl WordPieceHf {
    pub(in crate::hf_json) fn parse(wp: schema::WordPiece) -> Result<WordPieceHf> {
        let vocab = parse_vocab_map(&wp.vocab)?;
        let unk_text = wp.unk_token.as_deref().unwrap_or("[UNK]");
        let unk = vocab.get(unk_text).copied().ok_or_else(|| {
            err(format!(
                "WordPiece unk_token {unk_text:?} is not in the vocabulary"
            ))
        })?;
        let prefix = wp
            .continuing_subword_prefix
            .unwrap_or_else(|| "##".to_string());
        let max_chars = match wp.max_input_chars_per_word {
            None => 100,
            Some(n) => usize::try_from(n)
                .map_err(|_| err("WordPiece max_input_chars_per_word is not a number"))?,
        };
        Ok(WordPieceHf {
            vocab,
            unk,
            prefix,
            max_chars,
        })
    }

    /// `WordPiece::tokenize`: greedy longest match; a word with an unmatchable part, or longer
    /// than `max_input_chars_per_word` characters, is the unknown token.
    pub(in crate::hf_json) fn tokenize(&self, word: &str, out: &mut Vec<u32>) {
        if word.chars().count() > self.max_chars {
            out.push(self.unk);
            return;
        }
        let mut candidate = String::new();
        let piece = |start: usize, end: usize| {
            if !word.is_char_boundary(end) {
                return None;
            }
            candidate.clear();
            if start > 0 {
                candidate.push_str(&self.prefix);
            }
            candidate.push_str(&word[start..end]);
            self.vocab.get(candidate.as_str()).copied()
        };
        if !wpm::longest_pieces(word.len(), word.len(), piece, out) {
            out.push(self.unk);
        }
    }
}
