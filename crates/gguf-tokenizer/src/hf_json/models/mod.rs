//! Models (`tokenizers`' `models/`): BPE and WordPiece, each tokenizing one word.

pub(super) mod bpe;
pub(super) mod wordpiece;

use super::err;
use super::schema::{self, OrderedMap};
use crate::error::Result;
use rustc_hash::FxHashMap;

pub(super) use bpe::BpeHf;
pub(super) use wordpiece::WordPieceHf;

#[derive(Clone, Debug)]
pub(super) enum Model {
    Bpe(BpeHf),
    WordPiece(WordPieceHf),
}

/// The model's vocabulary as a map, its ids checked: token ids, and each given once.
pub(super) fn parse_vocab_map(vocab: &OrderedMap<u64>) -> Result<FxHashMap<String, u32>> {
    let mut map = FxHashMap::with_capacity_and_hasher(vocab.0.len(), Default::default());
    let mut seen = FxHashMap::<u32, &str>::default();
    for (text, id) in &vocab.0 {
        let id = u32::try_from(*id)
            .ok()
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
    pub(super) fn parse(m: schema::Model) -> Result<Model> {
        match m {
            schema::Model::Bpe(bpe) => BpeHf::parse(bpe).map(Model::Bpe),
            schema::Model::WordPiece(wp) => WordPieceHf::parse(wp).map(Model::WordPiece),
            other @ (schema::Model::Unigram(_) | schema::Model::WordLevel(_)) => Err(err(format!(
                "model type `{}` is not supported (supported: BPE, WordPiece)",
                other.type_name()
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
