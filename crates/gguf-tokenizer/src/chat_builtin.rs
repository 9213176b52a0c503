//! Built-in chat templates, for files without a `tokenizer.chat_template` and for choosing a
//! template by name, as llama.cpp's `--chat-template NAME` does.
//!
//! Each built-in is a Jinja text rendering exactly what llama.cpp's C++ formatter
//! (`llm_chat_apply_template` in `src/llama-chat.cpp`, reached through
//! `llama_chat_apply_template` with the template's name) writes for the same messages:
//!
//! | name | one turn | llama.cpp |
//! |---|---|---|
//! | `chatml` | `<\|im_start\|>ROLE\nCONTENT<\|im_end\|>\n` | also what its fallback for files without a template renders |
//! | `gemma` | `<start_of_turn>ROLE\nCONTENT<end_of_turn>\n`, `assistant` written `model` | system messages have no turn: they are joined and put before the next non-`model` turn's content, followed by a blank line |
//! | `llama3` | `<\|start_header_id\|>ROLE<\|end_header_id\|>\n\nCONTENT<\|eot_id\|>` | |
//! | `phi3` | `<\|ROLE\|>\nCONTENT<\|end\|>\n` | |
//!
//! `gemma` and `llama3` trim the content of ASCII whitespace (C's `isspace`), as llama.cpp's
//! `trim` does; none of them writes BOS, which the tokenizer adds (the file's `add_bos_token`).
//! `tests/data/chat_builtin/expected.json` holds llama.cpp's renderings they are tested against.
//!
//! **Files without a template.** llama.cpp's own tools (`llama-cli`, `llama-server`) then fall
//! back to ChatML whatever the model, warning that replies may be poor; for a Gemma file that
//! means turn markers the model never saw. [`for_file`] instead picks the built-in whose turn
//! markers are tokens of the file's vocabulary, checking them in the order llama.cpp's
//! `llm_chat_detect_template` checks the same markers in a template's text (ChatML's
//! `<|im_start|>`, then Phi 3's, Gemma's `<start_of_turn>`, Llama 3's headers), and refuses
//! when none fits rather than guess.

use gguf_format::{keys, ArrayView, GgufFile};

use crate::chat::{template_names, ChatTemplate, NAMED_TEMPLATE_PREFIX, TEMPLATE_KEY};
use crate::{Result, TokenizerError};

/// A built-in chat template.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Builtin {
    /// Its name, as llama.cpp names it (`--chat-template NAME`).
    pub name: &'static str,
    /// The Jinja source.
    pub source: &'static str,
    /// The tokens a vocabulary must have for a file without a template to get this one.
    pub markers: &'static [&'static str],
}

/// C's `isspace` in the "C" locale, what llama.cpp's `trim` removes: Python's `strip()` without
/// an argument would also remove Unicode spaces (U+00A0, U+3000, ...), which llama.cpp keeps.
macro_rules! ascii_space {
    () => {
        r"' \t\n\u000b\f\r'"
    };
}

/// ChatML; llama.cpp's Jinja fallback for files without a template renders the same.
const CHATML: &str = "\
{%- for message in messages -%}
  {{- '<|im_start|>' + message['role'] + '\\n' + message['content'] + '<|im_end|>' + '\\n' -}}
{%- endfor -%}
{{- '<|im_start|>assistant\\n' if add_generation_prompt else '' -}}";

/// Gemma (google/gemma-7b-it and later): no system turn, `model` for the assistant.
const GEMMA: &str = concat!(
    "{%- set ws = ",
    ascii_space!(),
    " -%}
{%- set ns = namespace(system='') -%}
{%- for message in messages -%}
  {%- if message.role == 'system' -%}
    {#- Concatenated as they come, without a separator. -#}
    {%- set ns.system = ns.system + message.content.strip(ws) -%}
  {%- else -%}
    {%- set role = 'model' if message.role == 'assistant' else message.role -%}
    {{- '<start_of_turn>' + role + '\\n' -}}
    {%- if ns.system and role != 'model' -%}
      {{- ns.system + '\\n\\n' -}}
      {%- set ns.system = '' -%}
    {%- endif -%}
    {{- message.content.strip(ws) + '<end_of_turn>\\n' -}}
  {%- endif -%}
{%- endfor -%}
{%- if add_generation_prompt -%}
  {{- '<start_of_turn>model\\n' -}}
{%- endif -%}"
);

/// Llama 3.
const LLAMA3: &str = concat!(
    "{%- set ws = ",
    ascii_space!(),
    " -%}
{%- for message in messages -%}
  {{- '<|start_header_id|>' + message.role + '<|end_header_id|>\\n\\n' + message.content.strip(ws) + '<|eot_id|>' -}}
{%- endfor -%}
{%- if add_generation_prompt -%}
  {{- '<|start_header_id|>assistant<|end_header_id|>\\n\\n' -}}
{%- endif -%}"
);

/// Phi 3.
const PHI3: &str = "\
{%- for message in messages -%}
  {{- '<|' + message.role + '|>\\n' + message.content + '<|end|>\\n' -}}
{%- endfor -%}
{%- if add_generation_prompt -%}
  {{- '<|assistant|>\\n' -}}
{%- endif -%}";

/// Every built-in, in the order [`detect`] tries them.
pub const BUILTINS: &[Builtin] = &[
    Builtin {
        name: "chatml",
        source: CHATML,
        markers: &["<|im_start|>", "<|im_end|>"],
    },
    Builtin {
        name: "phi3",
        source: PHI3,
        markers: &["<|user|>", "<|assistant|>", "<|end|>"],
    },
    Builtin {
        name: "gemma",
        source: GEMMA,
        markers: &["<start_of_turn>", "<end_of_turn>"],
    },
    Builtin {
        name: "llama3",
        source: LLAMA3,
        markers: &["<|start_header_id|>", "<|end_header_id|>", "<|eot_id|>"],
    },
];

/// The built-in called `name`.
pub fn builtin(name: &str) -> Option<&'static Builtin> {
    BUILTINS.iter().find(|b| b.name == name)
}

/// The names of the built-ins, comma-separated, for messages.
pub fn builtin_names() -> String {
    BUILTINS
        .iter()
        .map(|b| b.name)
        .collect::<Vec<_>>()
        .join(", ")
}

/// The first built-in whose markers are all tokens (`has_token`) of a vocabulary.
pub fn detect(has_token: impl Fn(&str) -> bool) -> Option<&'static Builtin> {
    BUILTINS
        .iter()
        .find(|b| b.markers.iter().all(|m| has_token(m)))
}

impl Builtin {
    /// The template, parsed; it is named after the built-in in errors.
    pub fn template(&self) -> Result<ChatTemplate> {
        ChatTemplate::with_name(Some(self.name), self.source)
    }
}

/// Where the template [`for_file`] chose comes from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Origin {
    /// The file's `tokenizer.chat_template`.
    File,
    /// The file's `tokenizer.chat_template.NAME`.
    Named(String),
    /// A built-in asked for by name.
    Builtin(&'static str),
    /// A built-in chosen by the file's vocabulary, the file having no template.
    Detected(&'static str),
}

/// The chat template for a file's conversations:
///
/// - `choice` `Some(NAME)`: the built-in `NAME`, else the file's `tokenizer.chat_template.NAME`;
///   an error listing both kinds of names when neither exists;
/// - `choice` `None`: the file's `tokenizer.chat_template`, else the built-in whose turn markers
///   are in its vocabulary (see the module's documentation); an error when none is.
///
/// The template gets the file's special tokens (`bos_token`, ...) as
/// [`ChatTemplate::from_gguf`] gives them.
pub fn for_file(file: &GgufFile<'_>, choice: Option<&str>) -> Result<(ChatTemplate, Origin)> {
    let (mut template, origin) = match choice {
        Some(name) => {
            if let Some(b) = builtin(name) {
                (b.template()?, Origin::Builtin(b.name))
            } else if file
                .value(&format!("{NAMED_TEMPLATE_PREFIX}{name}"))
                .is_some()
            {
                let template = ChatTemplate::from_gguf(file, Some(name))?;
                return Ok((template, Origin::Named(name.to_string())));
            } else {
                let named = template_names(file);
                let in_file = if named.is_empty() {
                    String::new()
                } else {
                    format!("; the file's named templates: {}", named.join(", "))
                };
                return Err(TokenizerError::Metadata(format!(
                    "no chat template `{name}`: the built-in ones are {}{in_file}",
                    builtin_names()
                )));
            }
        }
        None if file.value(TEMPLATE_KEY).is_some() => {
            return Ok((ChatTemplate::from_gguf(file, None)?, Origin::File));
        }
        None => {
            let tokens: Option<ArrayView<'_>> = file.get_opt(keys::tokenizer::TOKENS)?;
            let markers: Vec<&str> = BUILTINS.iter().flat_map(|b| b.markers).copied().collect();
            // One pass over the vocabulary for every marker (262,144 tokens for Gemma).
            let mut found = vec![false; markers.len()];
            for token in tokens.iter().filter_map(|t| t.strings()).flatten() {
                if let Some(i) = markers.iter().position(|m| m.as_bytes() == token) {
                    found[i] = true;
                }
            }
            let has = |m: &str| markers.iter().zip(&found).any(|(&k, &f)| f && k == m);
            let Some(b) = detect(has) else {
                return Err(TokenizerError::Metadata(format!(
                    "the file has no chat template (`{TEMPLATE_KEY}`) and its vocabulary has the \
                     turn markers of none of the built-in templates ({})",
                    builtin_names()
                )));
            };
            (b.template()?, Origin::Detected(b.name))
        }
    };
    set_file_special_tokens(&mut template, file);
    Ok((template, origin))
}

/// Gives `template` the file's special tokens as text (`bos_token`, `eos_token`, `unk_token`,
/// `sep_token`, `pad_token`, `mask_token`), for templates that come from elsewhere than the
/// file (a built-in, a template file). A token whose id is missing or unusable is left out:
/// such a template may not need it, and rendering one that does says the variable is undefined.
pub fn set_file_special_tokens(template: &mut ChatTemplate, file: &GgufFile<'_>) {
    const SPECIAL: [(&str, &str); 6] = [
        ("bos_token", keys::tokenizer::BOS_ID),
        ("eos_token", keys::tokenizer::EOS_ID),
        ("unk_token", keys::tokenizer::UNK_ID),
        ("sep_token", keys::tokenizer::SEPARATOR_ID),
        ("pad_token", keys::tokenizer::PAD_ID),
        ("mask_token", keys::tokenizer::MASK_ID),
    ];
    let Ok(Some(tokens)) = file.get_opt::<ArrayView<'_>>(keys::tokenizer::TOKENS) else {
        return;
    };
    for (name, key) in SPECIAL {
        let text = file
            .get_usize(key)
            .ok()
            .and_then(|id| tokens.get(id as u64))
            .and_then(|v| v.as_str().map(str::to_string));
        if let Some(text) = text {
            template.set_special_token(name, text);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::chat::{ChatMessage, RenderOptions};

    fn render(name: &str, messages: &[(&str, &str)], add: bool) -> String {
        let messages: Vec<ChatMessage> = messages
            .iter()
            .map(|&(r, c)| ChatMessage::new(r, c))
            .collect();
        builtin(name)
            .unwrap()
            .template()
            .unwrap()
            .render(
                &messages,
                &RenderOptions {
                    add_generation_prompt: add,
                    ..RenderOptions::default()
                },
            )
            .unwrap()
    }

    #[test]
    fn every_builtin_parses() {
        for b in BUILTINS {
            b.template().unwrap();
        }
    }

    #[test]
    fn gemma_merges_the_system_message_into_the_first_user_turn() {
        assert_eq!(
            render(
                "gemma",
                &[
                    ("system", " Be brief. "),
                    ("user", "Hi\n"),
                    ("assistant", "Hello")
                ],
                true
            ),
            "<start_of_turn>user\nBe brief.\n\nHi<end_of_turn>\n\
             <start_of_turn>model\nHello<end_of_turn>\n<start_of_turn>model\n"
        );
    }

    #[test]
    fn detection_follows_llama_cpp_order() {
        let vocab = [
            "<|im_start|>",
            "<|im_end|>",
            "<start_of_turn>",
            "<end_of_turn>",
        ];
        assert_eq!(detect(|t| vocab.contains(&t)).unwrap().name, "chatml");
        assert_eq!(detect(|t| vocab[2..].contains(&t)).unwrap().name, "gemma");
        // One marker of a pair is not enough.
        assert!(detect(|t| t == "<start_of_turn>").is_none());
    }
}
