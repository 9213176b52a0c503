//! Post-processors (`tokenizers`' `processors/`): the tokens `add_special` puts around the ids
//! (TemplateProcessing, BertProcessing, RobertaProcessing, ByteLevel, Sequence).

use serde_json::Value;

use super::{err, obj, type_of};
use crate::error::Result;

/// The tokens `add_special` puts around the ids.
#[derive(Clone, Debug, Default)]
pub(super) struct PostProcessor {
    pub(super) prefix: Vec<u32>,
    pub(super) suffix: Vec<u32>,
}

impl PostProcessor {
    pub(super) fn parse(v: &Value, id_of: &dyn Fn(&str) -> Option<u32>) -> Result<PostProcessor> {
        let o = obj(v, "post_processor")?;
        let ty = type_of(o, "post_processor")?;
        let token_pair = |name: &str| -> Result<u32> {
            match o.get(name).and_then(Value::as_array).map(Vec::as_slice) {
                Some([Value::String(_), id]) => id
                    .as_u64()
                    .and_then(|i| u32::try_from(i).ok())
                    .ok_or_else(|| err(format!("post_processor {ty}.{name} has no token id"))),
                _ => Err(err(format!("post_processor {ty}.{name} is not [text, id]"))),
            }
        };
        Ok(match ty {
            "ByteLevel" => PostProcessor::default(),
            "BertProcessing" | "RobertaProcessing" => PostProcessor {
                prefix: vec![token_pair("cls")?],
                suffix: vec![token_pair("sep")?],
            },
            "Sequence" => {
                let list = o
                    .get("processors")
                    .and_then(Value::as_array)
                    .ok_or_else(|| err("`post_processor.processors` is missing"))?;
                let mut out = PostProcessor::default();
                for p in list {
                    let inner = PostProcessor::parse(p, id_of)?;
                    out.prefix.splice(0..0, inner.prefix);
                    out.suffix.extend(inner.suffix);
                }
                out
            }
            "TemplateProcessing" => {
                let single = o
                    .get("single")
                    .and_then(Value::as_array)
                    .ok_or_else(|| err("TemplateProcessing has no `single` template"))?;
                let specials = o.get("special_tokens").and_then(Value::as_object);
                let mut out = PostProcessor::default();
                let mut seen_a = false;
                for piece in single {
                    let piece = obj(piece, "TemplateProcessing.single[]")?;
                    if let Some(seq) = piece.get("Sequence") {
                        if seq.get("id").and_then(Value::as_str) != Some("A") || seen_a {
                            return Err(err(
                                "TemplateProcessing `single` must hold sequence A once",
                            ));
                        }
                        seen_a = true;
                    } else if let Some(tok) = piece.get("SpecialToken") {
                        let name = tok
                            .get("id")
                            .and_then(Value::as_str)
                            .ok_or_else(|| err("TemplateProcessing special token has no id"))?;
                        let ids: Vec<u32> = match specials.and_then(|s| s.get(name)) {
                            Some(entry) => entry
                                .get("ids")
                                .and_then(Value::as_array)
                                .ok_or_else(|| {
                                    err(format!("TemplateProcessing `{name}` has no ids"))
                                })?
                                .iter()
                                .map(|i| {
                                    i.as_u64().and_then(|i| u32::try_from(i).ok()).ok_or_else(
                                        || err(format!("TemplateProcessing `{name}`: bad id")),
                                    )
                                })
                                .collect::<Result<_>>()?,
                            None => vec![id_of(name).ok_or_else(|| {
                                err(format!("TemplateProcessing token `{name}` is unknown"))
                            })?],
                        };
                        if seen_a {
                            out.suffix.extend(ids);
                        } else {
                            out.prefix.extend(ids);
                        }
                    } else {
                        return Err(err(
                            "TemplateProcessing piece is neither Sequence nor SpecialToken",
                        ));
                    }
                }
                if !seen_a {
                    return Err(err("TemplateProcessing `single` has no sequence A"));
                }
                out
            }
            other => {
                return Err(err(format!(
                    "post-processor `{other}` is not supported (supported: TemplateProcessing, \
                     BertProcessing, RobertaProcessing, ByteLevel, Sequence)"
                )))
            }
        })
    }
}
