//! Decoding a token stream as it is generated, without ever emitting a broken UTF-8 sequence.

use crate::Tokenizer;

/// Turns tokens into text one at a time, holding back the bytes of a character that is split
/// across tokens (byte-fallback and byte-level tokens often carry part of one) until it is
/// complete.
///
/// The text is what [`Tokenizer::token_to_piece`] gives for each token, concatenated, like
/// llama.cpp's interactive tools print it: the first piece loses one leading space when the
/// model adds a space prefix, and BPE's `clean_spaces` tidying (a whole-text pass of
/// [`Tokenizer::decode`]) is not applied. Bytes that can never form a character are emitted as
/// U+FFFD once the decoder knows they cannot.
///
/// ```no_run
/// # fn demo(tokenizer: &gguf_tokenizer::Tokenizer, ids: &[u32]) {
/// let mut stream = tokenizer.stream_decoder(false);
/// for &id in ids {
///     print!("{}", stream.push(id));
/// }
/// print!("{}", stream.finish());
/// # }
/// ```
#[derive(Debug, Clone)]
pub struct StreamDecoder<'t> {
    tokenizer: &'t Tokenizer,
    special: bool,
    pending: Vec<u8>,
    first: bool,
}

impl<'t> StreamDecoder<'t> {
    pub(crate) fn new(tokenizer: &'t Tokenizer, special: bool) -> StreamDecoder<'t> {
        StreamDecoder {
            tokenizer,
            special,
            pending: Vec::new(),
            first: true,
        }
    }

    /// Adds token `id`; returns the text that is now complete (often empty).
    pub fn push(&mut self, id: u32) -> String {
        let piece = self.tokenizer.token_to_piece(id, self.special);
        let piece = match piece.strip_prefix(b" ") {
            Some(rest) if self.first && self.tokenizer.adds_space_prefix() => rest,
            _ => &piece[..],
        };
        self.first = false;
        self.pending.extend_from_slice(piece);
        self.take(false)
    }

    /// The text still held back (an incomplete character at the end, as U+FFFD).
    pub fn finish(mut self) -> String {
        self.take(true)
    }

    /// Removes and returns the longest complete prefix of `pending`; invalid bytes become
    /// U+FFFD; an incomplete sequence at the end stays unless `all`.
    fn take(&mut self, all: bool) -> String {
        let mut out = String::new();
        let mut start = 0;
        loop {
            match std::str::from_utf8(&self.pending[start..]) {
                Ok(s) => {
                    out.push_str(s);
                    start = self.pending.len();
                    break;
                }
                Err(e) => {
                    let valid = start + e.valid_up_to();
                    // The first `valid_up_to` bytes are UTF-8 by definition.
                    out.push_str(std::str::from_utf8(&self.pending[start..valid]).unwrap_or(""));
                    match e.error_len() {
                        Some(bad) => {
                            out.push('\u{FFFD}');
                            start = valid + bad;
                        }
                        None if all => {
                            out.push('\u{FFFD}');
                            start = self.pending.len();
                            break;
                        }
                        None => {
                            start = valid;
                            break;
                        }
                    }
                }
            }
        }
        self.pending.drain(..start);
        out
    }
}
