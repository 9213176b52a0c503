//! Response bodies and stream chunks, in OpenAI's (or llama-server's) shape. The order of
//! each struct's fields is the order of its JSON keys (serde_json keeps it); an `Option`
//! without `skip_serializing_if` is written as `null` when `None`, one with it is left out.
//!
//! Log-probabilities and embeddings are `f32`s written as the `f64`s they widen to (as a
//! `serde_json::Value` holds them: `-0.10000000149011612`, not `-0.1`), and a value that is
//! not finite as `null`.

use gguf_model::{LogprobEntry, TokenLogprob};
use serde::ser::{SerializeMap, Serializer};
use serde::Serialize;

/// Writes an `f32` as the `f64` it widens to.
fn widened<S: Serializer>(x: &f32, serializer: S) -> Result<S::Ok, S::Error> {
    serializer.serialize_f64(f64::from(*x))
}

/// `f32`s written as the `f64`s they widen to.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Widened<'a>(pub &'a [f32]);

impl Serialize for Widened<'_> {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.collect_seq(self.0.iter().map(|&x| f64::from(x)))
    }
}

/// `GET /health`.
#[derive(Debug, Serialize)]
pub(crate) struct Health {
    /// `ok`.
    pub status: &'static str,
}

/// `GET /v1/models`: `{"object": "list", "data": [...]}`.
#[derive(Debug, Serialize)]
pub(crate) struct ModelList<'a> {
    /// `list`.
    pub object: &'static str,
    /// The models (the one).
    pub data: Vec<ModelCard<'a>>,
}

/// One of the models.
#[derive(Debug, Serialize)]
pub(crate) struct ModelCard<'a> {
    /// Its id (`--alias`).
    pub id: &'a str,
    /// `model`.
    pub object: &'static str,
    /// When the server started (Unix seconds).
    pub created: u64,
    /// `gguf`.
    pub owned_by: &'static str,
}

/// A chat or text completion, whole (`chat.completion`, `text_completion`) or one chunk of a
/// stream (`chat.completion.chunk`, `text_completion`). `C` is the kind of choice.
#[derive(Debug, Serialize)]
pub(crate) struct Completion<'a, C> {
    /// The response's id, the same in every chunk.
    pub id: &'a str,
    /// What it is: `chat.completion`, `chat.completion.chunk` or `text_completion`.
    pub object: &'static str,
    /// When the request came (Unix seconds).
    pub created: u64,
    /// The model's id.
    pub model: &'a str,
    /// The one choice; none in the usage chunk of a stream.
    pub choices: Vec<C>,
    /// The token counts: in the whole response, and in the last chunk of a stream with
    /// `stream_options.include_usage` (the key is left out elsewhere).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub usage: Option<Usage>,
}

/// The token counts of a completion.
#[derive(Debug, Clone, Copy, Serialize)]
pub(crate) struct Usage {
    /// The whole prompt, cached or not.
    pub prompt_tokens: usize,
    /// The tokens generated.
    pub completion_tokens: usize,
    /// Both.
    pub total_tokens: usize,
}

impl Usage {
    /// The counts, with their total.
    pub fn new(prompt_tokens: usize, completion_tokens: usize) -> Usage {
        Usage {
            prompt_tokens,
            completion_tokens,
            total_tokens: prompt_tokens + completion_tokens,
        }
    }
}

/// The choice of a whole chat completion.
#[derive(Debug, Serialize)]
pub(crate) struct ChatChoice<'a> {
    /// 0: there is one choice.
    pub index: u32,
    /// The reply.
    pub message: AssistantMessage<'a>,
    /// `null` unless asked for.
    pub logprobs: Option<Logprobs<'a>>,
    /// `stop` or `length`.
    pub finish_reason: &'static str,
}

/// The reply of a chat completion.
#[derive(Debug, Serialize)]
pub(crate) struct AssistantMessage<'a> {
    /// `assistant`.
    pub role: &'static str,
    /// Its text.
    pub content: &'a str,
}

/// The choice of a chunk of a streamed chat completion.
#[derive(Debug, Serialize)]
pub(crate) struct ChatChunkChoice<'a> {
    /// 0: there is one choice.
    pub index: u32,
    /// What is new.
    pub delta: Delta<'a>,
    /// `null` unless asked for (and in the last chunk).
    pub logprobs: Option<Logprobs<'a>>,
    /// `null` until the last chunk, then `stop` or `length`.
    pub finish_reason: Option<&'static str>,
}

/// What a chunk adds to a chat reply: its role (the first chunk), its text (every chunk but
/// the last); `{}` in the last.
#[derive(Debug, Default, Serialize)]
pub(crate) struct Delta<'a> {
    /// `assistant`, in the first chunk only.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub role: Option<&'static str>,
    /// Text, left out of the last chunk.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub content: Option<&'a str>,
}

/// The choice of a text completion, whole or a chunk of a stream.
#[derive(Debug, Serialize)]
pub(crate) struct TextChoice<'a> {
    /// 0: there is one choice.
    pub index: u32,
    /// The text (of this chunk: `""` in the last).
    pub text: &'a str,
    /// `null` unless asked for (and in the last chunk).
    pub logprobs: Option<Logprobs<'a>>,
    /// `stop` or `length`; `null` in a chunk but the last.
    pub finish_reason: Option<&'static str>,
}

/// The `logprobs` of a choice: chat's or the text completion's.
#[derive(Debug, Serialize)]
#[serde(untagged)]
pub(crate) enum Logprobs<'a> {
    /// `{"content": [...], "refusal": null}`.
    Chat(ChatLogprobs<'a>),
    /// `{"tokens", "token_logprobs", "top_logprobs", "text_offset"}`.
    Text(TextLogprobs<'a>),
}

impl<'a> Logprobs<'a> {
    /// Chat's: each token with its `top_logprobs`.
    pub fn chat(tokens: &'a [TokenLogprob]) -> Logprobs<'a> {
        Logprobs::Chat(ChatLogprobs {
            content: tokens
                .iter()
                .map(|t| ChatTokenLogprob {
                    token: &t.chosen.token,
                    logprob: t.chosen.logprob,
                    bytes: &t.chosen.bytes,
                    top_logprobs: t.top.iter().map(TopLogprob::new).collect(),
                })
                .collect(),
            refusal: None,
        })
    }

    /// The text completion's: parallel lists, `text_offset` counting characters.
    pub fn text(tokens: &'a [TokenLogprob]) -> Logprobs<'a> {
        let mut offset = 0;
        let text_offset = tokens
            .iter()
            .map(|t| {
                let at = offset;
                offset += t.chosen.token.chars().count();
                at
            })
            .collect();
        Logprobs::Text(TextLogprobs {
            tokens: tokens.iter().map(|t| t.chosen.token.as_str()).collect(),
            token_logprobs: tokens.iter().map(|t| f64::from(t.chosen.logprob)).collect(),
            top_logprobs: tokens.iter().map(|t| TopMap(&t.top)).collect(),
            text_offset,
        })
    }
}

/// Chat's log-probabilities.
#[derive(Debug, Serialize)]
pub(crate) struct ChatLogprobs<'a> {
    /// One entry per token.
    pub content: Vec<ChatTokenLogprob<'a>>,
    /// Always `null`.
    pub refusal: Option<&'a str>,
}

/// A generated token in chat's log-probabilities.
#[derive(Debug, Serialize)]
pub(crate) struct ChatTokenLogprob<'a> {
    /// Its text.
    pub token: &'a str,
    /// Its log-probability.
    #[serde(serialize_with = "widened")]
    pub logprob: f32,
    /// Its bytes.
    pub bytes: &'a [u8],
    /// The most likely tokens at its step.
    pub top_logprobs: Vec<TopLogprob<'a>>,
}

/// One of the most likely tokens at a step, in chat's log-probabilities.
#[derive(Debug, Serialize)]
pub(crate) struct TopLogprob<'a> {
    /// Its text.
    pub token: &'a str,
    /// Its log-probability.
    #[serde(serialize_with = "widened")]
    pub logprob: f32,
    /// Its bytes.
    pub bytes: &'a [u8],
}

impl<'a> TopLogprob<'a> {
    fn new(e: &'a LogprobEntry) -> TopLogprob<'a> {
        TopLogprob {
            token: &e.token,
            logprob: e.logprob,
            bytes: &e.bytes,
        }
    }
}

/// The text completion's log-probabilities.
#[derive(Debug, Serialize)]
pub(crate) struct TextLogprobs<'a> {
    /// Each token's text.
    pub tokens: Vec<&'a str>,
    /// Each token's log-probability (widened from `f32`).
    pub token_logprobs: Vec<f64>,
    /// Each step's most likely tokens: text → log-probability.
    pub top_logprobs: Vec<TopMap<'a>>,
    /// Where each token starts in the text, in characters.
    pub text_offset: Vec<usize>,
}

/// A step's most likely tokens as an object of text → log-probability. Two tokens of the same
/// text (bytes that are not UTF-8 on their own) are one key: at the place of the first, with
/// the value of the last.
#[derive(Debug, Clone, Copy)]
pub(crate) struct TopMap<'a>(pub &'a [LogprobEntry]);

impl Serialize for TopMap<'_> {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let entries = self.0;
        let firsts = entries
            .iter()
            .enumerate()
            .filter(|&(i, e)| !entries[..i].iter().any(|p| p.token == e.token));
        let mut map = serializer.serialize_map(None)?;
        for (_, first) in firsts {
            let last = entries
                .iter()
                .rfind(|e| e.token == first.token)
                .unwrap_or(first);
            map.serialize_entry(&first.token, &f64::from(last.logprob))?;
        }
        map.end()
    }
}

/// `POST /v1/embeddings`.
#[derive(Debug, Serialize)]
pub(crate) struct EmbeddingList<'a> {
    /// `list`.
    pub object: &'static str,
    /// One per input, in order.
    pub data: Vec<EmbeddingData<'a>>,
    /// The model's id.
    pub model: &'a str,
    /// The inputs' tokens.
    pub usage: EmbeddingUsage,
}

/// The embedding of one input.
#[derive(Debug, Serialize)]
pub(crate) struct EmbeddingData<'a> {
    /// `embedding`.
    pub object: &'static str,
    /// The input's place in the request.
    pub index: usize,
    /// The vector.
    pub embedding: Vector<'a>,
}

/// An embedding vector as `encoding_format` asks.
#[derive(Debug, Serialize)]
#[serde(untagged)]
pub(crate) enum Vector<'a> {
    /// A list of numbers.
    Float(Widened<'a>),
    /// OpenAI's base64: the little-endian f32 bytes of the vector.
    Base64(String),
}

/// The token counts of an embeddings request.
#[derive(Debug, Clone, Copy, Serialize)]
pub(crate) struct EmbeddingUsage {
    /// All the inputs' tokens.
    pub prompt_tokens: usize,
    /// The same.
    pub total_tokens: usize,
}

/// `POST /tokenize`.
#[derive(Debug, Serialize)]
pub(crate) struct Tokens {
    /// The token ids.
    pub tokens: Vec<u32>,
}

/// `POST /detokenize`.
#[derive(Debug, Serialize)]
pub(crate) struct Detokenized<'a> {
    /// The text (invalid UTF-8 replaced).
    pub content: &'a str,
}
