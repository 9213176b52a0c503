//! Post-processors (`tokenizers`' `processors/`): the tokens `add_special` puts around the ids
//! (TemplateProcessing, BertProcessing, RobertaProcessing, ByteLevel, Sequence).

use super::err;
use super::schema::{self, SequenceId, TemplatePiece};
use crate::error::Result;

/// The tokens `add_special` puts around the ids.
#[derive(Clone, Debug, Default)]
pub(super) struct PostProcessor {
    pub(super) prefix: Vec<u32>,
    pub(super) suffix: Vec<u32>,
}

impl PostProcessor {
    pub(super) fn parse(
        p: schema::PostProcessor,
        id_of: &dyn Fn(&str) -> Option<u32>,
    ) -> Result<PostProcessor> {
        use schema::PostProcessor as P;
        let ty = p.type_name();
        let token_id = |name: &str, (_, id): (String, u64)| -> Result<u32> {
            u32::try_from(id)
                .map_err(|_| err(format!("post_processor {ty}.{name} has no token id")))
        };
        Ok(match p {
            P::ByteLevel(_) => PostProcessor::default(),
            P::Bert(schema::BertProcessing { sep, cls })
            | P::Roberta(schema::RobertaProcessing { sep, cls, .. }) => PostProcessor {
                prefix: vec![token_id("cls", cls)?],
                suffix: vec![token_id("sep", sep)?],
            },
            P::Sequence(seq) => {
                let mut out = PostProcessor::default();
                for p in seq.processors {
                    let inner = PostProcessor::parse(p, id_of)?;
                    out.prefix.splice(0..0, inner.prefix);
                    out.suffix.extend(inner.suffix);
                }
                out
            }
            P::Template(t) => {
                let mut out = PostProcessor::default();
                let mut seen_a = false;
                for piece in t.single {
                    match piece {
                        TemplatePiece::Sequence { id, .. } => {
                            if id != SequenceId::A || seen_a {
                                return Err(err(
                                    "TemplateProcessing `single` must hold sequence A once",
                                ));
                            }
                            seen_a = true;
                        }
                        TemplatePiece::SpecialToken { id: name, .. } => {
                            let ids: Vec<u32> = match t.special_tokens.get(&name) {
                                Some(entry) => entry.ids.clone(),
                                None => vec![id_of(&name).ok_or_else(|| {
                                    err(format!("TemplateProcessing token `{name}` is unknown"))
                                })?],
                            };
                            if seen_a {
                                out.suffix.extend(ids);
                            } else {
                                out.prefix.extend(ids);
                            }
                        }
                    }
                }
                if !seen_a {
                    return Err(err("TemplateProcessing `single` has no sequence A"));
                }
                out
            }
        })
    }
}
