//! Models (`tokenizers`' `models/`): BPE and WordPiece, each tokenizing one word.

pub(super) mod bpe;
pub(super) mod wordpiece;

use serde_json::{Map, Value};

use super::err;
use crate::error::Result;
use rustc_hash::FxHashMap;

pub(super) use bpe::BpeHf;
pub(super) use wordpiece::WordPieceHf;

#[derive(Clone, Debug)]
pub(super) enum Model {
    Bpe(BpeHf),
    WordPiece(WordPieceHf),
}

pub(super) fn parse_vocab_map(o: &Map<String, Value>) -> Result<FxHashMap<String, u32>> {
    let vocab = o
        .get("vocab")
        .and_then(Value::as_object)
        .ok_or_else(|| err("`model.vocab` is missing or not an object"))?;
    let mut map = FxHashMap::with_capacity_and_hasher(vocab.len(), Default::default());
    let mut seen = FxHashMap::<u32, &str>::default();
    for (text, id) in vocab {
        let id = id
            .as_u64()
            .and_then(|i| u32::try_from(i).ok())
            .filter(|&i| i < u32::MAX / 2)
            .ok_or_else(|| err(format!("`model.vocab` id of {text:?} is not a token id")))?;
        if let Some(other) = seen.insert(id, text) {
            return Err(err(format!(
                "`model.vocab` gives id {id} to both {other:?} and {text:?}"
            )));
        }
        map.insert(text.clone(), id);
    }
    Ok(map)
}

impl Model {
    pub(super) fn parse(o: &Map<String, Value>) -> Result<Model> {
        let ty = match o.get("type") {
            Some(Value::String(s)) => s.as_str(),
            None if o.contains_key("merges") => "BPE",
            None if o.contains_key("max_input_chars_per_word") => "WordPiece",
            _ => return Err(err("`model.type` is missing")),
        };
        match ty {
            "BPE" => BpeHf::parse(o).map(Model::Bpe),
            "WordPiece" => WordPieceHf::parse(o).map(Model::WordPiece),
            other => Err(err(format!(
                "model type `{other}` is not supported (supported: BPE, WordPiece)"
            ))),
        }
    }

    pub(super) fn vocab(&self) -> &FxHashMap<String, u32> {
        match self {
            Model::Bpe(m) => &m.vocab,
            Model::WordPiece(m) => &m.vocab,
        }
    }

    pub(super) fn tokenize(&self, word: &str, out: &mut Vec<u32>) {
        match self {
            Model::Bpe(m) => m.tokenize(word, out),
            Model::WordPiece(m) => m.tokenize(word, out),
        }
    }
}
