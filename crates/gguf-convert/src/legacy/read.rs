//! Parsing a legacy file: the header, the vocabulary and the tensor table, every length
//! checked against the bytes that remain, and the checks that it is a complete llama model.

use gguf_format::GgmlType;

use super::blocks::{Era, OldQuant};
use super::{
    ftype_name, Container, Hparams, LegacyModel, LegacyTensor, Token, GGJT_ALIGNMENT, MAGIC_GGJT,
    MAGIC_GGLA, MAGIC_GGMF, MAGIC_GGML, MAGIC_GGSN,
};
use crate::error::{Error, Result};

/// Reads little-endian fields with bounds checks, naming the offset in errors.
struct Cursor<'a> {
    data: &'a [u8],
    pos: usize,
}

impl<'a> Cursor<'a> {
    fn remaining(&self) -> usize {
        self.data.len() - self.pos
    }

    fn take(&mut self, n: usize, what: &str) -> Result<&'a [u8]> {
        if n > self.remaining() {
            return Err(Error::Truncated {
                offset: self.pos as u64,
                what: what.to_string(),
                needed: n as u64,
                available: self.remaining() as u64,
            });
        }
        let bytes = &self.data[self.pos..self.pos + n];
        self.pos += n;
        Ok(bytes)
    }

    fn u32(&mut self, what: &str) -> Result<u32> {
        let b = self.take(4, what)?;
        Ok(u32::from_le_bytes([b[0], b[1], b[2], b[3]]))
    }

    fn f32(&mut self, what: &str) -> Result<f32> {
        Ok(f32::from_bits(self.u32(what)?))
    }

    fn invalid(&self, at: usize, what: String) -> Error {
        Error::Invalid {
            offset: at as u64,
            what,
        }
    }
}

/// The element count and data bytes of a tensor of `type_id` with `dims` in `era`, or why
/// there are none.
fn tensor_bytes(type_id: u32, dims: &[u64], era: Era) -> std::result::Result<u64, String> {
    let elements = dims
        .iter()
        .try_fold(1u64, |n, &d| n.checked_mul(d))
        .ok_or_else(|| format!("dimensions {dims:?} overflow 64 bits"))?;
    let (block, bytes) = match type_id {
        0 => (1, 4),
        1 => (1, 2),
        10..=14 if era == Era::Current => {
            let t = GgmlType::from_id_opt(type_id).ok_or("unknown type")?;
            (t.block_size(), t.type_size())
        }
        _ => match OldQuant::from_id(type_id).filter(|q| q.exists_in(era)) {
            Some(q) => (q.block_len() as u64, q.block_bytes(era) as u64),
            None => {
                return Err(format!(
                    "type id {type_id} is not a tensor type of this format version \
                     (expected 0 F32, 1 F16, 2 Q4_0, 3 Q4_1, 6 Q5_0, 7 Q5_1, 8 Q8_0{}{})",
                    if era == Era::Shuffled {
                        ", 4 Q4_2, 5 Q4_3"
                    } else {
                        ""
                    },
                    if era == Era::Current {
                        ", 10-14 Q2_K-Q6_K"
                    } else {
                        ""
                    }
                ))
            }
        },
    };
    if dims.first().is_some_and(|&row| row % block != 0) {
        return Err(format!(
            "rows of {} elements are not whole blocks of {block}",
            dims[0]
        ));
    }
    (elements / block)
        .checked_mul(bytes)
        .ok_or_else(|| format!("dimensions {dims:?} overflow 64 bits"))
}

impl<'a> LegacyModel<'a> {
    /// Parses a legacy llama file.
    ///
    /// # Errors
    /// [`Error::Truncated`] or [`Error::Invalid`] (with the offset) for a damaged file,
    /// [`Error::NotLlama`] for a GGML-family file of another layout (whisper.cpp's, a LoRA
    /// adapter, a session), [`Error::Unsupported`] for a GGUF file.
    pub fn parse(data: &'a [u8]) -> Result<LegacyModel<'a>> {
        let mut c = Cursor { data, pos: 0 };
        if data.starts_with(b"GGUF") {
            return Err(Error::Unsupported(
                "this file is already GGUF; there is nothing to convert".into(),
            ));
        }
        let magic = c.u32("the magic")?;
        let container = match magic {
            MAGIC_GGML => Container::Ggml,
            MAGIC_GGMF | MAGIC_GGJT => {
                let at = c.pos;
                let version = c.u32("the format version")?;
                match (magic, version) {
                    (MAGIC_GGMF, 1) => Container::Ggmf,
                    (MAGIC_GGJT, 1..=3) => Container::Ggjt(version),
                    _ => {
                        let what = if magic == MAGIC_GGMF {
                            format!("GGMF version {version}: only version 1 exists")
                        } else {
                            format!("GGJT version {version}: versions 1 to 3 exist")
                        };
                        return Err(c.invalid(at, what));
                    }
                }
            }
            MAGIC_GGLA => {
                return Err(Error::NotLlama(
                    "this is a llama.cpp LoRA adapter ('ggla'), not a model: adapters are not converted".into(),
                ))
            }
            MAGIC_GGSN => {
                return Err(Error::NotLlama(
                    "this is a llama.cpp session file ('ggsn'), not a model".into(),
                ))
            }
            _ => {
                return Err(c.invalid(
                    0,
                    format!(
                        "magic {:?} is not a GGML-family file's (expected 'lmgg', 'fmgg' or 'tjgg')",
                        String::from_utf8_lossy(&data[..4])
                    ),
                ))
            }
        };
        let hparams_at = c.pos;
        if container == Container::Ggml {
            refuse_whisper(&data[hparams_at..])?;
        }
        let mut hp = [0u32; 7];
        for (v, what) in hp.iter_mut().zip([
            "n_vocab", "n_embd", "n_mult", "n_head", "n_layer", "n_rot", "ftype",
        ]) {
            *v = c.u32(what)?;
        }
        let hparams = Hparams {
            n_vocab: hp[0],
            n_embd: hp[1],
            n_mult: hp[2],
            n_head: hp[3],
            n_layer: hp[4],
            n_rot: hp[5],
            ftype: hp[6],
        };
        check_llama(&hparams, container)?;

        // Every token takes at least its 4-byte length.
        if hparams.n_vocab as usize > c.remaining() / 4 {
            return Err(Error::Truncated {
                offset: c.pos as u64,
                what: format!("a vocabulary of {} tokens", hparams.n_vocab),
                needed: u64::from(hparams.n_vocab) * 4,
                available: c.remaining() as u64,
            });
        }
        let mut vocab = Vec::with_capacity(hparams.n_vocab as usize);
        for id in 0..hparams.n_vocab {
            let len = c.u32("a token's length")? as usize;
            let text = c.take(len, &format!("token {id}'s {len} bytes"))?;
            let score = if container.has_scores() {
                c.f32("a token's score")?
            } else {
                0.0
            };
            vocab.push(Token { text, score });
        }

        let mut tensors = Vec::new();
        while c.remaining() > 0 {
            tensors.push(read_tensor(&mut c, container)?);
        }
        check_complete(&tensors, &hparams, data.len())?;
        Ok(LegacyModel {
            container,
            hparams,
            vocab,
            tensors,
        })
    }
}

/// Reads one tensor's header and locates its data.
fn read_tensor<'a>(c: &mut Cursor<'a>, container: Container) -> Result<LegacyTensor<'a>> {
    let start = c.pos;
    let n_dims = c.u32("a tensor's dimension count")?;
    if !(1..=4).contains(&n_dims) {
        return Err(c.invalid(
            start,
            format!("a tensor with {n_dims} dimensions (expected 1 to 4)"),
        ));
    }
    let name_len = c.u32("a tensor's name length")? as usize;
    let type_at = c.pos;
    let type_id = c.u32("a tensor's type")?;
    let mut dims = Vec::with_capacity(n_dims as usize);
    for _ in 0..n_dims {
        dims.push(u64::from(c.u32("a tensor dimension")?));
    }
    let name_at = c.pos;
    let name = c.take(name_len, "a tensor's name")?;
    let name = std::str::from_utf8(name)
        .map_err(|_| c.invalid(name_at, "a tensor name that is not UTF-8".into()))?;
    if let Container::Ggjt(_) = container {
        let pad = c.pos.next_multiple_of(GGJT_ALIGNMENT) - c.pos;
        c.take(pad, "the padding before a tensor's data")?;
    }
    let bytes = tensor_bytes(type_id, &dims, container.era())
        .map_err(|e| c.invalid(type_at, format!("tensor '{name}': {e}")))?;
    let offset = c.pos as u64;
    let len = usize::try_from(bytes).unwrap_or(usize::MAX);
    let data = c.take(len, &format!("tensor '{name}''s data"))?;
    Ok(LegacyTensor {
        name,
        dims,
        type_id,
        offset,
        data,
    })
}

/// Refuses a tensor list that is not a whole llama model (a file without tensors, a
/// vocabulary, is fine): the format has no tensor count, so a file cut between two tensors
/// reads as a model with fewer, and this is where that shows.
fn check_complete(tensors: &[LegacyTensor<'_>], hp: &Hparams, file_len: usize) -> Result<()> {
    if tensors.is_empty() {
        return Ok(());
    }
    let mut seen = std::collections::HashSet::new();
    for t in tensors {
        if !seen.insert(t.name) {
            return Err(Error::Invalid {
                offset: t.offset,
                what: format!("tensor '{}' appears twice", t.name),
            });
        }
    }
    let per_layer = [
        "attention.wq.weight",
        "attention.wk.weight",
        "attention.wv.weight",
        "attention.wo.weight",
        "attention_norm.weight",
        "feed_forward.w1.weight",
        "feed_forward.w2.weight",
        "feed_forward.w3.weight",
        "ffn_norm.weight",
    ];
    let mut expected: Vec<String> = ["tok_embeddings.weight", "norm.weight", "output.weight"]
        .map(String::from)
        .to_vec();
    // Checked one at a time, so a huge n_layer costs nothing before the first gap.
    for layer in 0..hp.n_layer {
        if let Some(missing) = expected.iter().find(|n| !seen.contains(n.as_str())) {
            return Err(missing_tensor(missing, tensors.len(), file_len));
        }
        expected = per_layer
            .iter()
            .map(|p| format!("layers.{layer}.{p}"))
            .collect();
    }
    match expected.iter().find(|n| !seen.contains(n.as_str())) {
        Some(missing) => Err(missing_tensor(missing, tensors.len(), file_len)),
        None => Ok(()),
    }
}

fn missing_tensor(name: &str, count: usize, file_len: usize) -> Error {
    Error::Invalid {
        offset: file_len as u64,
        what: format!(
            "the file ends after {count} tensors without '{name}': truncated, or not a whole \
             llama model"
        ),
    }
}

/// Refuses whisper.cpp's models, which share the unversioned `lmgg` magic: eleven u32
/// hyperparameters with the audio context (1500) second and the mel bins (80 or 128) tenth.
fn refuse_whisper(hparams: &[u8]) -> Result<()> {
    let word = |i: usize| {
        hparams
            .get(4 * i..4 * i + 4)
            .map(|b| u32::from_le_bytes([b[0], b[1], b[2], b[3]]))
    };
    if let (Some(1500), Some(n_mels @ (80 | 128))) = (word(1), word(9)) {
        let n_vocab = word(0).unwrap_or(0);
        let n_text_layer = word(8).unwrap_or(0);
        return Err(Error::NotLlama(format!(
            "this is a whisper.cpp speech model (GGML 'lmgg' with audio hyperparameters: \
             n_audio_ctx 1500, {n_mels} mel bins, {n_vocab} tokens, {n_text_layer} text layers), \
             not a llama-layout model; only llama models are converted"
        )));
    }
    Ok(())
}

/// Refuses hyperparameters that are not a llama model's.
fn check_llama(hp: &Hparams, container: Container) -> Result<()> {
    let problem = if hp.n_head == 0 || hp.n_embd == 0 || !hp.n_embd.is_multiple_of(hp.n_head) {
        Some(format!(
            "n_embd {} is not a positive multiple of n_head {}",
            hp.n_embd, hp.n_head
        ))
    } else if hp.n_rot != hp.n_embd / hp.n_head {
        Some(format!(
            "n_rot {} is not n_embd / n_head = {}",
            hp.n_rot,
            hp.n_embd / hp.n_head
        ))
    } else if hp.n_mult == 0 {
        Some("n_mult is 0".to_string())
    } else if ftype_name(hp.ftype).is_none() {
        Some(format!(
            "file type {} is not one llama.cpp wrote (0 to 18)",
            hp.ftype
        ))
    } else {
        None
    };
    match problem {
        Some(p) => Err(Error::NotLlama(format!(
            "this {} file's hyperparameters are not a llama model's ({p}); only llama-layout \
             files (n_vocab, n_embd, n_mult, n_head, n_layer, n_rot, ftype) are converted",
            container.name()
        ))),
        None => Ok(()),
    }
}
