//! The vocabulary a `tokenizer.json` gives, laid out as llama.cpp lays out its own (WordPiece
//! texts as `▁word` and bare continuations, roles and token types), so that the crate's
//! decoder, special-token matcher and accessors serve it as they serve a GGUF vocabulary. The
//! JSON's `decoder` is not read: decoding is the crate's, which `decode_matches_hugging_face`
//! (tests/hf_json.rs) compares with `tokenizers`' (docs/tokenizer.md names the one difference).

use super::added_vocabulary::AddedToken;
use super::models::Model;
use super::normalizers::Normalizer;
use super::pre_tokenizers::{PreStep, PreTokenizerSpec, PrependScheme};
use super::processors::PostProcessor;
use super::{err, KEY};
use crate::error::Result;
use crate::vocab::{ModelKind, SpecialIds, TokenData, TokenType, Vocab, VocabParts};

pub(super) fn build_vocab(
    model: &Model,
    added: &[AddedToken],
    normalizer: &[Normalizer],
    pre: &PreTokenizerSpec,
    post: &PostProcessor,
    overrides: SpecialIds,
    warnings: &mut Vec<String>,
) -> Result<Vocab> {
    let model_vocab = model.vocab();
    let size = model_vocab
        .values()
        .chain(added.iter().map(|t| &t.id))
        .map(|&id| id as usize + 1)
        .max()
        .unwrap_or(0);
    // Ids are dense in real vocabularies; a few holes become placeholders, not billions.
    if size > model_vocab.len() + added.len() + 1_000_000 {
        return Err(err(format!(
            "token ids go up to {} for {} tokens",
            size - 1,
            model_vocab.len() + added.len()
        )));
    }
    if let Some(id) = post
        .prefix
        .iter()
        .chain(&post.suffix)
        .find(|&&id| id as usize >= size)
    {
        return Err(err(format!(
            "the post-processor adds token id {id}, past the vocabulary ({size} tokens)"
        )));
    }
    let mut texts: Vec<Option<String>> = vec![None; size];
    let mut types = vec![TokenType::Normal; size];
    for (text, &id) in model_vocab {
        let text = match model {
            // llama.cpp's WordPiece layout: `▁word`, continuation pieces without their prefix.
            Model::WordPiece(wp) => match text.strip_prefix(wp.prefix.as_str()) {
                Some(rest) if !wp.prefix.is_empty() && !rest.is_empty() => rest.to_string(),
                _ => format!("\u{2581}{text}"),
            },
            Model::Bpe(_) => text.clone(),
        };
        texts[id as usize] = Some(text);
    }
    if let Model::Bpe(bpe) = model {
        if bpe.byte_fallback {
            for id in bpe.byte_ids.iter().flatten() {
                types[*id as usize] = TokenType::Byte;
            }
        }
        if let Some(unk) = bpe.unk {
            types[unk as usize] = TokenType::Unknown;
        }
    }
    if let Model::WordPiece(wp) = model {
        types[wp.unk as usize] = TokenType::Unknown;
    }
    for t in added {
        texts[t.id as usize] = Some(t.content.clone());
        types[t.id as usize] = if t.special {
            TokenType::Control
        } else {
            TokenType::UserDefined
        };
    }
    let holes = texts.iter().filter(|t| t.is_none()).count();
    if holes > 0 {
        warnings.push(format!(
            "{KEY}: {holes} ids below {size} have no token; they are unused placeholders"
        ));
    }
    let tokens: Vec<TokenData> = texts
        .into_iter()
        .zip(types)
        .enumerate()
        .map(|(i, (text, ty))| {
            let (text, ty) = match text {
                Some(t) => (t, ty),
                None => (format!("[HF_UNUSED_{i}]"), TokenType::Unused),
            };
            TokenData {
                text: text.into_bytes().into(),
                score: 0.0,
                ty,
                attr: ty.attr(),
            }
        })
        .collect();

    let find = |texts: &[&str]| {
        texts.iter().find_map(|t| {
            added
                .iter()
                .find(|a| a.special && a.content == *t)
                .map(|a| a.id)
        })
    };
    let single = |ids: &[u32]| match ids {
        [id] => Some(*id),
        _ => None,
    };
    let bos = overrides.bos.or(single(&post.prefix)).or_else(|| {
        find(&[
            "<s>",
            "<|begin_of_text|>",
            "<bos>",
            "<|startoftext|>",
            "[CLS]",
        ])
    });
    let eos = overrides.eos.or(single(&post.suffix)).or_else(|| {
        find(&[
            "</s>",
            "<|end_of_text|>",
            "<|endoftext|>",
            "<eos>",
            "<|im_end|>",
            "[SEP]",
        ])
    });
    let unk = overrides.unk.or(match model {
        Model::Bpe(m) => m.unk,
        Model::WordPiece(m) => Some(m.unk),
    });
    let special = SpecialIds {
        bos,
        eos,
        eot: overrides.eot,
        eom: None,
        unk,
        sep: match model {
            Model::WordPiece(_) => single(&post.suffix).or_else(|| find(&["[SEP]"])),
            Model::Bpe(_) => None,
        },
        pad: overrides
            .pad
            .or_else(|| find(&["<pad>", "[PAD]", "<|pad|>", "<|finetune_right_pad_id|>"])),
    };
    let add_bos = !post.prefix.is_empty() && bos.is_some() && post.prefix == [bos.unwrap_or(0)];
    let add_eos = !post.suffix.is_empty() && eos.is_some() && post.suffix == [eos.unwrap_or(0)];
    let prepends_space = pre.steps.iter().any(|s| {
        matches!(
            s,
            PreStep::Metaspace { prepend, .. } if *prepend != PrependScheme::Never
        )
    }) || normalizer
        .iter()
        .any(|n| matches!(n, Normalizer::Prepend(s) if s == "\u{2581}" || s == " "));
    let (kind, byte_level) = match model {
        Model::Bpe(m) => (ModelKind::Bpe, m.byte_level),
        Model::WordPiece(_) => (ModelKind::Wpm, false),
    };
    Vocab::from_parts(VocabParts {
        kind,
        tokens,
        special,
        add_bos,
        add_eos,
        add_space_prefix: prepends_space || kind == ModelKind::Wpm,
        pre: if byte_level {
            pre.mapped_name.clone()
        } else {
            String::new()
        },
        escape_whitespaces: kind == ModelKind::Bpe && !byte_level,
    })
}
