//! Embeddings as llama.cpp's `llama-embedding` computes them: the model's last hidden states
//! (after the final norm of a decoder; the last block's output of an encoder such as BERT),
//! pooled per [`Pooling`] and normalised per [`Normalize`].
//!
//! ```no_run
//! use gguf_model::{Model, SessionOptions};
//!
//! # fn main() -> Result<(), gguf_model::ModelError> {
//! let model = Model::load("all-MiniLM-L6-v2.f16.gguf")?;
//! let mut session = model.session(SessionOptions::default())?;
//! let a = session.embed("A man is eating food.")?;
//! let b = session.embed("A man is eating a piece of bread.")?;
//! // L2-normalised (the default), so the dot product is the cosine similarity.
//! let cosine: f32 = a.as_flat().iter().zip(b.as_flat()).map(|(x, y)| x * y).sum();
//! assert!(cosine > 0.5);
//! # Ok(()) }
//! ```

use gguf_quant::GgmlType;

use crate::error::{ModelError, Result};
use crate::EncodeOptions;
use crate::Session;

/// How the token embeddings of an input become its embedding: a model's `{arch}.pooling_type`
/// (llama.cpp's `enum llama_pooling_type`), or a choice in [`EmbeddingOptions`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Pooling {
    /// No pooling: one embedding per token (llama.cpp's default for a file without the key).
    #[default]
    None,
    /// The mean of the token embeddings (sentence-transformers models such as all-MiniLM).
    Mean,
    /// The first token's embedding (BERT's `[CLS]`).
    Cls,
    /// The last token's embedding.
    Last,
    /// A reranker's classification head over the CLS embedding: not supported; embedding
    /// with it is an error.
    Rank,
}

impl Pooling {
    /// The pooling type of llama.cpp's id (0 none, 1 mean, 2 cls, 3 last, 4 rank).
    pub fn from_id(id: i64) -> Option<Pooling> {
        Some(match id {
            0 => Pooling::None,
            1 => Pooling::Mean,
            2 => Pooling::Cls,
            3 => Pooling::Last,
            4 => Pooling::Rank,
            _ => return None,
        })
    }

    /// The pooling type named as llama.cpp's `--pooling` names it (`none`, `mean`, `cls`,
    /// `last`, `rank`).
    pub fn from_name(name: &str) -> Option<Pooling> {
        Some(match name {
            "none" => Pooling::None,
            "mean" => Pooling::Mean,
            "cls" => Pooling::Cls,
            "last" => Pooling::Last,
            "rank" => Pooling::Rank,
            _ => return None,
        })
    }

    /// Its name, as [`Pooling::from_name`] reads it.
    pub fn name(self) -> &'static str {
        match self {
            Pooling::None => "none",
            Pooling::Mean => "mean",
            Pooling::Cls => "cls",
            Pooling::Last => "last",
            Pooling::Rank => "rank",
        }
    }

    /// Pools `rows`, the `n_embd`-wide embeddings of an input's tokens in order, as llama.cpp
    /// does: [`Pooling::Mean`] as its product of the transposed rows with a vector of `1/n`
    /// (each dimension one f32 dot product, [`gguf_quant::vec_dot`]); [`Pooling::Cls`] and
    /// [`Pooling::Last`] copy the first or the last row; [`Pooling::None`] returns the rows as
    /// they are. An error for [`Pooling::Rank`] and for no rows.
    ///
    /// ```
    /// use gguf_model::Pooling;
    /// let rows = [1.0, 2.0, 3.0, 6.0]; // two tokens of two dimensions
    /// assert_eq!(Pooling::Mean.apply(&rows, 2)?, [2.0, 4.0]);
    /// assert_eq!(Pooling::Cls.apply(&rows, 2)?, [1.0, 2.0]);
    /// assert_eq!(Pooling::Last.apply(&rows, 2)?, [3.0, 6.0]);
    /// # Ok::<(), gguf_model::ModelError>(())
    /// ```
    pub fn apply(self, rows: &[f32], n_embd: usize) -> Result<Vec<f32>> {
        let n = rows.len().checked_div(n_embd).unwrap_or(0);
        if n == 0 || rows.len() != n * n_embd {
            return Err(ModelError::Request(format!(
                "{} values are not a positive number of {n_embd}-wide rows",
                rows.len()
            )));
        }
        Ok(match self {
            Pooling::None => rows.to_vec(),
            Pooling::Cls => rows[..n_embd].to_vec(),
            Pooling::Last => rows[(n - 1) * n_embd..].to_vec(),
            Pooling::Mean => {
                // ggml_mul_mat(ggml_cont(ggml_transpose(rows)), mean) with mean[t] = 1/n.
                let weight = 1.0 / n as f32;
                let mean: Vec<u8> = (0..n).flat_map(|_| weight.to_le_bytes()).collect();
                let mut column = Vec::with_capacity(n * 4);
                let mut out = Vec::with_capacity(n_embd);
                for d in 0..n_embd {
                    column.clear();
                    column.extend(
                        rows.iter()
                            .skip(d)
                            .step_by(n_embd)
                            .flat_map(|v| v.to_le_bytes()),
                    );
                    out.push(gguf_quant::vec_dot(GgmlType::F32, n, &column, &mean)?);
                }
                out
            }
            Pooling::Rank => return Err(rank_unsupported()),
        })
    }
}

fn rank_unsupported() -> ModelError {
    ModelError::Request("rank pooling (a reranker's classification head) is not supported".into())
}

/// How each embedding is normalised: llama-embedding's `--embd-normalize` -1 (none) or 2
/// (Euclidean, its default).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Normalize {
    /// As computed.
    None,
    /// Divided by its Euclidean norm (a zero vector stays zero), so that dot products are
    /// cosine similarities.
    #[default]
    L2,
}

impl Normalize {
    /// The normalisation named `none` or `l2`.
    pub fn from_name(name: &str) -> Option<Normalize> {
        match name {
            "none" => Some(Normalize::None),
            "l2" => Some(Normalize::L2),
            _ => None,
        }
    }

    /// Normalises `v` in place, as llama.cpp's `common_embd_normalize`: for L2, the squares
    /// (each rounded to f32) summed in f64, the factor `1/sqrt(sum)` rounded to f32 and each
    /// value multiplied by it.
    ///
    /// ```
    /// use gguf_model::Normalize;
    /// let mut v = [3.0, -4.0];
    /// Normalize::L2.apply(&mut v);
    /// assert_eq!(v, [0.6, -0.8]);
    /// ```
    pub fn apply(self, v: &mut [f32]) {
        match self {
            Normalize::None => {}
            Normalize::L2 => {
                let sum: f64 = v.iter().map(|&x| f64::from(x * x)).sum::<f64>().sqrt();
                let factor = if sum > 0.0 { (1.0 / sum) as f32 } else { 0.0 };
                for x in v {
                    *x *= factor;
                }
            }
        }
    }
}

/// Options of [`Session::embed_with`] and [`Session::embed_tokens_with`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct EmbeddingOptions {
    /// The pooling; `None` takes the model's ([`crate::Hparams::pooling`]).
    pub pooling: Option<Pooling>,
    /// The normalisation of each embedding (default L2).
    pub normalize: Normalize,
}

/// The embeddings of one input: one vector when pooled, or with [`Pooling::None`] one per
/// token, each [`Embeddings::dim`] values.
///
/// ```
/// use gguf_model::Embeddings;
/// let e = Embeddings::from_rows(vec![1.0, 0.0, 0.0, 1.0], 2);
/// assert_eq!((e.len(), e.dim()), (2, 2));
/// assert_eq!(e.row(1), Some(&[0.0, 1.0][..]));
/// ```
#[derive(Debug, Clone, PartialEq)]
pub struct Embeddings {
    values: Vec<f32>,
    dim: usize,
}

impl Embeddings {
    /// Rows of `dim` values held one after another in `values` (a last partial row is not
    /// one: `dim` 0 or a length that is not a multiple of it keeps only whole rows).
    pub fn from_rows(mut values: Vec<f32>, dim: usize) -> Embeddings {
        let whole = values.len().checked_div(dim).unwrap_or(0) * dim;
        values.truncate(whole);
        Embeddings { values, dim }
    }

    /// The values of each vector.
    pub fn dim(&self) -> usize {
        self.dim
    }

    /// The number of vectors: 1 when pooled, else the input's tokens.
    pub fn len(&self) -> usize {
        self.values.len().checked_div(self.dim).unwrap_or(0)
    }

    /// Whether there is no vector.
    pub fn is_empty(&self) -> bool {
        self.values.is_empty()
    }

    /// Vector `i`.
    pub fn row(&self, i: usize) -> Option<&[f32]> {
        self.values.get(i * self.dim..(i + 1) * self.dim)
    }

    /// The vectors in order.
    pub fn rows(&self) -> impl ExactSizeIterator<Item = &[f32]> {
        self.values.chunks_exact(self.dim.max(1))
    }

    /// Every value, vector after vector.
    pub fn as_flat(&self) -> &[f32] {
        &self.values
    }

    /// Every value, vector after vector, without copying.
    pub fn into_flat(self) -> Vec<f32> {
        self.values
    }
}

impl Session<'_> {
    /// The embedding of `text` with the model's pooling and L2 normalisation, as
    /// `llama-embedding` prints it: `text` tokenized with the file's special tokens added (BERT:
    /// `[CLS] ... [SEP]`) and special-token text parsed, then [`Session::embed_tokens`].
    ///
    /// ```no_run
    /// # use gguf_model::{Model, SessionOptions};
    /// # fn main() -> Result<(), gguf_model::ModelError> {
    /// let model = Model::load("all-MiniLM-L6-v2.f16.gguf")?;
    /// let mut session = model.session(SessionOptions::default())?;
    /// let v = session.embed("Café au lait")?;
    /// assert_eq!((v.len(), v.dim()), (1, model.hparams().n_embd)); // one vector of 384
    /// # Ok(()) }
    /// ```
    pub fn embed(&mut self, text: &str) -> Result<Embeddings> {
        self.embed_with(text, &EmbeddingOptions::default())
    }

    /// As [`Session::embed`] with a choice of pooling and normalisation.
    pub fn embed_with(&mut self, text: &str, options: &EmbeddingOptions) -> Result<Embeddings> {
        let ids = self
            .model
            .tokenizer
            .encode(text.as_bytes(), EncodeOptions::ADD_AND_PARSE_SPECIAL);
        self.embed_tokens_with(&ids, options)
    }

    /// The embedding of `tokens` (special tokens included as given) with the model's pooling
    /// and L2 normalisation: one vector, or with [`Pooling::None`] every token's, each
    /// normalised on its own.
    ///
    /// An encoder (`attention.causal` false: BERT) takes the whole input in one pass from an
    /// empty context (the session's `n_batch` does not apply), so an input longer than the
    /// session's context is an error; nothing is kept in the cache afterwards. A decoder runs
    /// the input through its causal attention in batches from an empty cache, as llama.cpp does
    /// for an embedding context, and its embeddings are the rows after the final norm; the
    /// cache then holds the input, and [`Session::logits`] is empty. No tokens, an id outside
    /// the vocabulary and [`Pooling::Rank`] are errors.
    pub fn embed_tokens(&mut self, tokens: &[u32]) -> Result<Embeddings> {
        self.embed_tokens_with(tokens, &EmbeddingOptions::default())
    }

    /// As [`Session::embed_tokens`] with a choice of pooling and normalisation.
    pub fn embed_tokens_with(
        &mut self,
        tokens: &[u32],
        options: &EmbeddingOptions,
    ) -> Result<Embeddings> {
        let pooling = options.pooling.unwrap_or(self.model.hparams().pooling);
        if pooling == Pooling::Rank {
            // Refused before anything is computed.
            return Err(rank_unsupported());
        }
        let d = self.model.hparams().n_embd;
        let rows = self.hidden_states(tokens)?;
        let mut out = pooling.apply(&rows, d)?;
        for v in out.chunks_exact_mut(d) {
            options.normalize.apply(v);
        }
        Ok(Embeddings::from_rows(out, d))
    }

    /// Every token's last hidden state (`tokens.len()` rows of `n_embd`), from an empty cache.
    fn hidden_states(&mut self, tokens: &[u32]) -> Result<Vec<f32>> {
        let hp = self.model.hparams();
        let encoder = !hp.causal;
        self.tokens.clear();
        self.logits.clear();
        if tokens.is_empty() {
            return Err(ModelError::Request("there are no tokens to embed".into()));
        }
        if encoder && tokens.len() > self.n_ctx {
            return Err(ModelError::Request(format!(
                "the input has {} tokens, more than the context of {}; `{}` encodes an input \
                 whole and cannot split it",
                tokens.len(),
                self.n_ctx,
                hp.arch
            )));
        }
        self.check_request(tokens)?;
        let chunk = if encoder { tokens.len() } else { self.n_batch };
        let mut rows = Vec::with_capacity(tokens.len() * hp.n_embd);
        for batch in tokens.chunks(chunk) {
            if let Err(e) = self.run(batch, true, true) {
                self.tokens.clear();
                self.logits.clear();
                return Err(e);
            }
            rows.extend_from_slice(&self.logits);
        }
        // What `run` left there are hidden states, not logits.
        self.logits.clear();
        if encoder {
            // An encoder's cache holds nothing a later input could reuse.
            self.tokens.clear();
        }
        if rows.iter().any(|v| v.is_nan()) {
            return Err(ModelError::NotANumber {
                position: tokens.len() - 1,
            });
        }
        Ok(rows)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pooling_ids_and_names_round_trip() {
        for id in 0..5 {
            let p = Pooling::from_id(id).unwrap();
            assert_eq!(Pooling::from_name(p.name()), Some(p));
        }
        assert_eq!(Pooling::from_id(5), None);
        assert_eq!(Pooling::from_id(-1), None);
        assert_eq!(Pooling::from_name("max"), None);
        assert_eq!(Normalize::from_name("l2"), Some(Normalize::L2));
        assert_eq!(Normalize::from_name("none"), Some(Normalize::None));
        assert_eq!(Normalize::from_name("l1"), None);
    }

    #[test]
    fn pooling_of_three_tokens() {
        // Three tokens of four dimensions.
        let rows = [
            1.0, 0.0, -3.0, 0.5, //
            2.0, 4.0, 3.0, 0.25, //
            6.0, -1.0, 0.0, 0.25,
        ];
        assert_eq!(Pooling::None.apply(&rows, 4).unwrap(), rows);
        assert_eq!(Pooling::Cls.apply(&rows, 4).unwrap(), [1.0, 0.0, -3.0, 0.5]);
        assert_eq!(
            Pooling::Last.apply(&rows, 4).unwrap(),
            [6.0, -1.0, 0.0, 0.25]
        );
        let mean = Pooling::Mean.apply(&rows, 4).unwrap();
        for (m, e) in mean.iter().zip([3.0, 1.0, 0.0, 1.0 / 3.0]) {
            assert!((m - e).abs() < 1e-6, "{mean:?}");
        }
        // One token: every pooling is that token.
        for p in [Pooling::Mean, Pooling::Cls, Pooling::Last, Pooling::None] {
            assert_eq!(p.apply(&rows[..4], 4).unwrap(), rows[..4]);
        }
    }

    #[test]
    fn pooling_refuses_rank_and_ragged_input() {
        assert!(Pooling::Rank.apply(&[1.0, 2.0], 2).is_err());
        assert!(Pooling::Mean.apply(&[], 2).is_err());
        assert!(Pooling::Mean.apply(&[1.0, 2.0, 3.0], 2).is_err());
        assert!(Pooling::Cls.apply(&[1.0], 0).is_err());
    }

    #[test]
    fn l2_normalisation_gives_unit_vectors() {
        let mut v = [3.0f32, 0.0, -4.0];
        Normalize::L2.apply(&mut v);
        assert_eq!(v, [0.6, 0.0, -0.8]);
        let mut v: Vec<f32> = (0..384).map(|i| (i as f32 * 0.37).sin() * 5.0).collect();
        let original = v.clone();
        Normalize::L2.apply(&mut v);
        let norm: f64 = v.iter().map(|&x| f64::from(x) * f64::from(x)).sum();
        assert!((norm - 1.0).abs() < 1e-6, "{norm}");
        // Direction kept: every ratio is the same factor.
        let factor = v[1] / original[1];
        for (a, b) in v.iter().zip(&original) {
            assert!((a - b * factor).abs() < 1e-6);
        }
        let mut zero = [0.0f32; 4];
        Normalize::L2.apply(&mut zero);
        assert_eq!(zero, [0.0; 4]);
        let mut same = [1.0f32, 2.0];
        Normalize::None.apply(&mut same);
        assert_eq!(same, [1.0, 2.0]);
    }
}
