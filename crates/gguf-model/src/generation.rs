//! Generating in a [`Session`]: one sequence, advanced token by token by the same step the
//! [`crate::Batcher`] runs for many ([`crate::sequence`]).

use gguf_tokenizer::chat::{ChatMessage, ChatTemplate};

use crate::error::Result;
use crate::sampling::SamplerConfig;
use crate::sequence::{Advance, Decoding, GeneratedToken, StopReason};
use crate::session::Session;
use crate::EncodeOptions;

impl<'m> Session<'m> {
    /// Generates up to `max_tokens` tokens after the raw text `prompt` (tokenized with the
    /// file's BOS settings, special-token text parsed), stopping at an end-of-generation token.
    pub fn generate(
        &mut self,
        prompt: &str,
        sampler: &SamplerConfig,
        max_tokens: usize,
    ) -> Result<Generation<'_, 'm>> {
        let ids = self
            .model
            .tokenizer()
            .encode(prompt.as_bytes(), EncodeOptions::ADD_AND_PARSE_SPECIAL);
        self.generate_from(&ids, sampler, max_tokens)
    }

    /// As [`Session::generate`] from prompt token ids.
    pub fn generate_from(
        &mut self,
        prompt: &[u32],
        sampler: &SamplerConfig,
        max_tokens: usize,
    ) -> Result<Generation<'_, 'm>> {
        sampler.check()?;
        self.prefill(prompt)?;
        Ok(Generation {
            decoding: Decoding::new(self.model, sampler, max_tokens, &[], None),
            session: self,
            stop: None,
            pending: None,
        })
    }

    /// Renders `messages` with the model's chat template ([`crate::Model::chat_template`]
    /// without a choice: the file's, or the built-in its vocabulary calls for), with the
    /// assistant prompt appended, and generates the reply.
    pub fn chat(
        &mut self,
        messages: &[ChatMessage],
        sampler: &SamplerConfig,
        max_tokens: usize,
    ) -> Result<Generation<'_, 'm>> {
        let prompt = self.model.chat_prompt(messages, self.n_ctx)?;
        self.generate_chat_prompt(&prompt, sampler, max_tokens)
    }

    /// As [`Session::chat`] with a given template (see [`crate::Model::chat_template`]).
    pub fn chat_with(
        &mut self,
        template: &ChatTemplate,
        messages: &[ChatMessage],
        sampler: &SamplerConfig,
        max_tokens: usize,
    ) -> Result<Generation<'_, 'm>> {
        let prompt = self.model.render_chat(template, messages, self.n_ctx)?;
        self.generate_chat_prompt(&prompt, sampler, max_tokens)
    }

    fn generate_chat_prompt(
        &mut self,
        prompt: &str,
        sampler: &SamplerConfig,
        max_tokens: usize,
    ) -> Result<Generation<'_, 'm>> {
        let ids = self.model.tokenize_chat_prompt(prompt);
        self.generate_from(&ids, sampler, max_tokens)
    }
}

/// Tokens as they are generated: an iterator of `Result<GeneratedToken>`. Iterate it by
/// reference (`for t in &mut generation`) to ask [`Generation::stop_reason`] afterwards, or
/// run it to its end with [`Generation::complete`].
///
/// ```no_run
/// use gguf_model::{Model, SamplerConfig, SessionOptions};
///
/// # fn main() -> Result<(), gguf_model::ModelError> {
/// let model = Model::load("SmolLM2-135M-Instruct.Q4_1.gguf")?;
/// let mut session = model.session(SessionOptions::default())?;
/// let done = session.generate("The capital of France is", &SamplerConfig::greedy(), 16)?.complete()?;
/// println!("{} ({} tokens, {})", done.text, done.ids.len(), done.stop_reason.name());
/// # Ok(()) }
/// ```
pub struct Generation<'s, 'm> {
    session: &'s mut Session<'m>,
    decoding: Decoding<'m>,
    stop: Option<StopReason>,
    /// The last token returned, evaluated only when the next is asked for, so the last one
    /// costs no forward pass.
    pending: Option<u32>,
}

/// A generation run to its end ([`Generation::complete`]).
#[derive(Debug, Clone, PartialEq)]
pub struct Completion {
    /// The generated tokens' ids (an end-of-generation token is not among them).
    pub ids: Vec<u32>,
    /// Their text, stop strings and what follows them included.
    pub text: String,
    /// Why it ended.
    pub stop_reason: StopReason,
}

impl Generation<'_, '_> {
    /// Also stop once the generated text contains any of `stops` (the token that completes
    /// one is still returned).
    pub fn stop_at(mut self, stops: &[&str]) -> Self {
        self.decoding.set_stops(stops);
        self
    }

    /// The text generated so far.
    pub fn text(&self) -> &str {
        self.decoding.text()
    }

    /// Why generation ended, once it has (`None` while tokens may still come).
    pub fn stop_reason(&self) -> Option<StopReason> {
        self.stop
    }

    /// Generates to the end: every token, the text and why it stopped. An error ends it with
    /// that error.
    pub fn complete(mut self) -> Result<Completion> {
        let mut ids = Vec::new();
        for token in &mut self {
            ids.push(token?.id);
        }
        Ok(Completion {
            ids,
            text: self.decoding.text().to_string(),
            stop_reason: self.stop.unwrap_or(StopReason::MaxTokens),
        })
    }
}

impl Iterator for Generation<'_, '_> {
    type Item = Result<GeneratedToken>;

    fn next(&mut self) -> Option<Self::Item> {
        if self.stop.is_some() {
            return None;
        }
        if let Some(prev) = self.pending.take() {
            if let Err(e) = self.session.eval(&[prev]) {
                self.stop = Some(StopReason::Error);
                return Some(Err(e));
            }
        }
        let session = &*self.session;
        match self
            .decoding
            .advance(&session.logits, &session.tokens, session.n_ctx)
        {
            Err(e) => {
                self.stop = Some(StopReason::Error);
                Some(Err(e))
            }
            Ok(Advance { token, stop }) => {
                self.stop = stop;
                let token = token?.token;
                if stop.is_none() {
                    self.pending = Some(token.id);
                }
                Some(Ok(token))
            }
        }
    }
}
