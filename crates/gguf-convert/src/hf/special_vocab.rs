//! The special tokens, the "add BOS/EOS/SEP" flags, the merges, the chat template and the
//! normalizer flags a checkpoint's `tokenizer.json`, `tokenizer_config.json` and `config.json`
//! give, found by the rules of gguf-py's `SpecialVocab` (which `convert_hf_to_gguf.py` uses),
//! so that the keys written and their order are the ones it writes.
//!
//! Those rules read loosely typed JSON the way Python does: a value "is set" when it is truthy
//! (not null, false, 0, "" or empty), and special tokens are compared as JSON values (a string
//! never equals an `{"content": ...}` object).

use std::path::Path;

use gguf_format::{GgufBuilder, OwnedArray, OwnedValue, ValueType};
use serde_json::{Map, Value};

use super::checkpoint::Checkpoint;
use crate::error::{Error, Result};

/// The special token types gguf-py looks for by default, in its order.
pub(crate) const DEFAULT_TYPES: &[&str] = &["bos", "eos", "unk", "sep", "pad", "cls", "mask"];

/// A chat template: one, or several by name (`default` and others).
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum ChatTemplate {
    One(String),
    Named(Vec<(String, String)>),
}

/// What [`SpecialVocab::load`] found.
#[derive(Debug, Default)]
pub(crate) struct SpecialVocab {
    pub merges: Vec<String>,
    /// (type, id) in the order found; the first id found for a type wins.
    pub special_ids: Vec<(String, u32)>,
    /// (type, add it?) in the order first set.
    pub add_special: Vec<(String, bool)>,
    pub chat_template: Option<ChatTemplate>,
    pub normalizer_lowercase: Option<bool>,
    pub normalizer_strip_accents: Option<bool>,
    types: Vec<String>,
    n_vocab: Option<usize>,
    load_merges: bool,
    /// What was odd but not fatal, for the caller to show.
    pub warnings: Vec<String>,
}

/// Python's truthiness of a JSON value.
pub(crate) fn truthy(v: Option<&Value>) -> bool {
    match v {
        None | Some(Value::Null) => false,
        Some(Value::Bool(b)) => *b,
        Some(Value::Number(n)) => n.as_f64() != Some(0.0),
        Some(Value::String(s)) => !s.is_empty(),
        Some(Value::Array(a)) => !a.is_empty(),
        Some(Value::Object(o)) => !o.is_empty(),
    }
}

/// `processor_item.get('SpecialToken', {}).get('id')`, if truthy.
fn special_token_id(item: Option<&Value>) -> Option<Value> {
    let id = item?.get("SpecialToken")?.get("id")?;
    truthy(Some(id)).then(|| id.clone())
}

fn sequence_id(item: Option<&Value>) -> Option<&Value> {
    item?.get("Sequence")?.get("id")
}

impl SpecialVocab {
    /// Reads `dir`'s tokenizer files as `SpecialVocab(dir, load_merges, types, n_vocab)` does.
    pub(crate) fn load(
        ckpt: &Checkpoint,
        load_merges: bool,
        types: &[&str],
        n_vocab: Option<usize>,
    ) -> Result<SpecialVocab> {
        let mut sv = SpecialVocab {
            types: types.iter().map(|t| t.to_string()).collect(),
            n_vocab,
            load_merges,
            ..SpecialVocab::default()
        };
        sv.load_from_tokenizer_json(ckpt)?;
        sv.load_from_config_json(ckpt)?;
        if sv.load_merges && sv.merges.is_empty() {
            sv.load_merges_txt(ckpt)?;
        }
        Ok(sv)
    }

    fn set_add(&mut self, typ: &str, value: bool, only_if_unset: bool) {
        match self.add_special.iter_mut().find(|(t, _)| t == typ) {
            Some(slot) if !only_if_unset => slot.1 = value,
            Some(_) => {}
            None => self.add_special.push((typ.to_string(), value)),
        }
    }

    fn add_value(&self, typ: &str) -> Option<bool> {
        self.add_special
            .iter()
            .find(|(t, _)| t == typ)
            .map(|&(_, v)| v)
    }

    /// `_set_special_token`: integer ids only; the first one for a type wins; ids past the
    /// vocabulary are skipped with a warning.
    pub(crate) fn set_special_token(&mut self, typ: &str, tid: Option<&Value>) -> Result<()> {
        let tid = match tid {
            Some(Value::Number(n)) if n.is_i64() || n.is_u64() => n.as_i64().unwrap_or(i64::MAX),
            // Python's bool is an int.
            Some(Value::Bool(b)) => i64::from(*b),
            _ => return Ok(()),
        };
        if tid < 0 {
            return Err(Error::Unsupported(format!(
                "invalid value for special token type {typ}: {tid}"
            )));
        }
        if self.n_vocab.is_none_or(|n| (tid as u64) < n as u64) {
            if !self.special_ids.iter().any(|(t, _)| t == typ) {
                let id = u32::try_from(tid).map_err(|_| {
                    Error::Unsupported(format!("special token {typ} id {tid} is out of range"))
                })?;
                self.special_ids.push((typ.to_string(), id));
            }
        } else {
            self.warnings.push(format!(
                "special token type {typ}, id {tid} out of range, must be under {} - skipping",
                self.n_vocab.unwrap_or(0)
            ));
        }
        Ok(())
    }

    fn parse_normalizer(&mut self, normalizer: &Value) {
        match normalizer.get("type").and_then(Value::as_str) {
            Some("Lowercase") => self.normalizer_lowercase = Some(true),
            Some("StripAccents") => self.normalizer_strip_accents = Some(true),
            Some("BertNormalizer") => {
                if let Some(v) = normalizer.get("lowercase") {
                    self.normalizer_lowercase = v.as_bool();
                }
                if let Some(v) = normalizer.get("strip_accents") {
                    self.normalizer_strip_accents = v.as_bool();
                }
            }
            Some("Sequence") => {
                if let Some(list) = normalizer.get("normalizers").and_then(Value::as_array) {
                    for n in list {
                        self.parse_normalizer(n);
                    }
                }
            }
            _ => {}
        }
    }

    fn load_merges_txt(&mut self, ckpt: &Checkpoint) -> Result<()> {
        let path = ckpt.dir().join("merges.txt");
        let Some(text) = ckpt.reads().text_if_exists(&path)? else {
            return Ok(());
        };
        let mut lines = text.lines().peekable();
        if lines.peek().is_some_and(|l| l.trim().starts_with('#')) {
            lines.next();
        }
        self.merges = lines
            .map(str::trim)
            .filter(|l| !l.is_empty())
            .filter_map(|l| {
                let parts: Vec<&str> = l.split_whitespace().collect();
                (parts.len() == 2).then(|| format!("{} {}", parts[0], parts[1]))
            })
            .collect();
        Ok(())
    }

    fn load_from_tokenizer_json(&mut self, ckpt: &Checkpoint) -> Result<()> {
        let (dir, reads) = (ckpt.dir(), ckpt.reads());
        let tokenizer_path = dir.join("tokenizer.json");
        let tokenizer = reads.tokenizer_json(&tokenizer_path)?;
        let mut added_tokens: Vec<Value> = Vec::new();
        if let Some(tokenizer) = &tokenizer {
            if self.load_merges {
                self.merges = merges_of(tokenizer, &tokenizer_path)?;
            }
            if let Some(n) = tokenizer.get("normalizer").filter(|n| truthy(Some(n))) {
                self.parse_normalizer(n);
            }
            if let Some(list) = tokenizer.get("added_tokens").and_then(Value::as_array) {
                added_tokens = list.clone();
            }
        }
        let config_path = dir.join("tokenizer_config.json");
        let mut config: Option<Map<String, Value>> = ckpt
            .tokenizer_config()?
            .cloned()
            .map(|v| match v {
                Value::Object(o) => Ok(o),
                _ => Err(Error::Unsupported(format!(
                    "{}: not a JSON object",
                    config_path.display()
                ))),
            })
            .transpose()?;
        let has_config = |c: &Option<Map<String, Value>>| c.as_ref().is_some_and(|c| !c.is_empty());

        if let Some(tokenizer) = &tokenizer {
            let get = |c: &Option<Map<String, Value>>, k: &str| {
                c.as_ref().and_then(|c| c.get(k)).cloned()
            };
            let mut special_bos = get(&config, "bos_token");
            let mut special_cls = get(&config, "cls_token");
            let mut special_eos = get(&config, "eos_token");
            let mut special_sep = get(&config, "sep_token");
            let set = |c: &mut Option<Map<String, Value>>, k: &str, v: &Option<Value>| {
                if let Some(c) = c.as_mut() {
                    c.insert(k.to_string(), v.clone().unwrap_or(Value::Null));
                }
            };
            if !truthy(special_bos.as_ref()) && truthy(special_cls.as_ref()) && has_config(&config)
            {
                special_bos = special_cls.clone();
                set(&mut config, "bos_token", &special_bos);
            }
            if !truthy(special_eos.as_ref()) && truthy(special_sep.as_ref()) && has_config(&config)
            {
                special_eos = special_sep.clone();
                set(&mut config, "eos_token", &special_eos);
            }
            if let Some(post) = tokenizer.get("post_processor").filter(|p| truthy(Some(p))) {
                let processors: Vec<Value> = match post.get("processors") {
                    Some(Value::Array(list)) => list.clone(),
                    Some(other) => vec![other.clone()],
                    None => vec![post.clone()],
                };
                for processor in &processors {
                    match processor.get("type").and_then(Value::as_str) {
                        Some("ByteLevel") => {
                            self.set_add("bos", false, true);
                            self.set_add("eos", false, true);
                        }
                        Some("RobertaProcessing") => {
                            self.set_add("bos", true, false);
                            self.set_add("eos", true, false);
                            self.set_add("sep", true, false);
                            if !truthy(special_cls.as_ref()) && has_config(&config) {
                                special_cls = processor
                                    .get("cls")
                                    .and_then(|v| v.get(0))
                                    .cloned()
                                    .or_else(|| special_bos.clone());
                                set(&mut config, "cls_token", &special_cls);
                            }
                            if !truthy(special_sep.as_ref()) && has_config(&config) {
                                special_sep = processor
                                    .get("sep")
                                    .and_then(|v| v.get(0))
                                    .cloned()
                                    .or_else(|| special_eos.clone());
                                set(&mut config, "sep_token", &special_sep);
                            }
                        }
                        Some("TemplateProcessing") => {
                            let empty = Vec::new();
                            let single = processor
                                .get("single")
                                .and_then(Value::as_array)
                                .unwrap_or(&empty);
                            let pair = processor
                                .get("pair")
                                .and_then(Value::as_array)
                                .unwrap_or(&empty);
                            let mut special_first = None;
                            let mut special_last = None;
                            if single.len() > 1 {
                                special_first = special_token_id(single.first());
                                if let Some(first) = &special_first {
                                    let is_bos_or_cls = |b: &Option<Value>, c: &Option<Value>| {
                                        b.as_ref() == Some(first) || c.as_ref() == Some(first)
                                    };
                                    if !has_config(&config) {
                                        special_bos = Some(first.clone());
                                    } else if !is_bos_or_cls(&special_bos, &special_cls) {
                                        if !truthy(special_bos.as_ref()) {
                                            special_bos = Some(first.clone());
                                            set(&mut config, "bos_token", &special_bos);
                                        }
                                        if !truthy(special_cls.as_ref()) {
                                            special_cls = Some(first.clone());
                                            set(&mut config, "cls_token", &special_cls);
                                        }
                                    }
                                    let known = is_bos_or_cls(&special_bos, &special_cls);
                                    self.set_add("bos", known, false);
                                    if !known {
                                        self.warnings.push(format!(
                                            "unknown leading special token {first} in TemplateProcessing<single>"
                                        ));
                                    }
                                }
                                special_last = special_token_id(single.last());
                                if let Some(last) = &special_last {
                                    if !has_config(&config) {
                                        special_eos = Some(last.clone());
                                    } else if special_eos.as_ref() != Some(last) {
                                        if !self.types.iter().any(|t| t == "eot") {
                                            self.types.push("eot".into());
                                            set(&mut config, "eot_token", &special_eos);
                                        } else if !self.types.iter().any(|t| t == "eom") {
                                            self.types.push("eom".into());
                                            set(&mut config, "eom_token", &special_eos);
                                        } else {
                                            self.warnings.push(format!(
                                                "overriding EOS token with {last} without EOT/EOM fallback"
                                            ));
                                        }
                                        special_eos = Some(last.clone());
                                        set(&mut config, "eos_token", &special_eos);
                                    }
                                    let is_eos = special_eos.as_ref() == Some(last);
                                    self.set_add("eos", is_eos, false);
                                }
                            }
                            if !pair.is_empty() {
                                let start = usize::from(
                                    special_first.is_some()
                                        && special_token_id(pair.first()) == special_first,
                                );
                                let stop_trim = usize::from(
                                    special_last.is_some()
                                        && special_token_id(pair.last()) == special_last,
                                );
                                let end = pair.len().saturating_sub(stop_trim).max(start);
                                let inner = &pair[start..end];
                                if !inner.is_empty() {
                                    let a = sequence_id(inner.first());
                                    let b = sequence_id(inner.last());
                                    let is_a = a.and_then(Value::as_str) == Some("A");
                                    let is_b = b.and_then(Value::as_str) == Some("B");
                                    if is_a && is_b && inner.len() > 2 {
                                        let middle = &inner[1..inner.len() - 1];
                                        let is_sep_or_eos = |v: &Value| {
                                            special_sep.as_ref() == Some(v)
                                                || special_eos.as_ref() == Some(v)
                                        };
                                        let mut add_sep = false;
                                        if let Some(entry) = special_token_id(middle.first()) {
                                            if is_sep_or_eos(&entry) && special_last.is_none() {
                                                add_sep = true;
                                            }
                                        }
                                        if middle.len() == 2 {
                                            if let Some(entry) = special_token_id(middle.get(1)) {
                                                if is_sep_or_eos(&entry) {
                                                    add_sep = true;
                                                }
                                            }
                                        }
                                        self.set_add("sep", add_sep, false);
                                        if add_sep
                                            && !truthy(special_sep.as_ref())
                                            && has_config(&config)
                                        {
                                            set(&mut config, "sep_token", &special_eos);
                                        }
                                    }
                                }
                            }
                        }
                        _ => {}
                    }
                }
            }
        }

        let Some(config) = config.filter(|c| !c.is_empty()) else {
            return Ok(());
        };

        // The chat template: tokenizer_config.json's, else chat_template.jinja (with
        // additional_chat_templates/*.jinja), else chat_template.json's.
        let mut alternative: Option<ChatTemplate> = None;
        if let Some(text) = reads.text_if_exists(&dir.join("chat_template.jinja"))? {
            let extra_dir = dir.join("additional_chat_templates");
            let mut extra = Vec::new();
            if extra_dir.is_dir() {
                reads.note(&extra_dir);
                let mut paths: Vec<_> = std::fs::read_dir(&extra_dir)
                    .map_err(|e| Error::Unsupported(format!("{}: {e}", extra_dir.display())))?
                    .filter_map(|e| e.ok().map(|e| e.path()))
                    .filter(|p| p.extension().is_some_and(|x| x == "jinja"))
                    .collect();
                paths.sort();
                for p in paths {
                    let name = p
                        .file_stem()
                        .map(|s| s.to_string_lossy().into_owned())
                        .unwrap_or_default();
                    if let Some(t) = reads.text_if_exists(&p)? {
                        extra.push((name, t));
                    }
                }
            }
            alternative = Some(if extra.is_empty() {
                ChatTemplate::One(text)
            } else {
                let mut all = vec![("default".to_string(), text)];
                all.extend(extra);
                ChatTemplate::Named(all)
            });
        } else if let Some(v) = reads.json_if_exists(&dir.join("chat_template.json"))? {
            alternative = v.get("chat_template").and_then(parse_template);
        }
        self.chat_template = match config.get("chat_template") {
            Some(v) => {
                let parsed = parse_template(v);
                if parsed.is_none() && !v.is_null() {
                    self.warnings.push(format!(
                        "bad type for chat_template field in {} - ignoring",
                        config_path.display()
                    ));
                }
                parsed
            }
            None => alternative,
        };

        for typ in self.types.clone() {
            if let Some(Value::Bool(add)) = config.get(&format!("add_{typ}_token")) {
                match self.add_value(&typ) {
                    None => self.set_add(&typ, *add, false),
                    Some(current) if current != *add => self.warnings.push(format!(
                        "mismatch between tokenizer_config add_{typ}_token({add}) and tokenizer \
                         post_processor<{typ}>({current}) - opting for the latter"
                    )),
                    Some(_) => {}
                }
            }
            let content = match config.get(&format!("{typ}_token")) {
                Some(Value::String(s)) => s.clone(),
                Some(Value::Object(o)) => match o.get("content") {
                    Some(Value::String(s)) => s.clone(),
                    _ => continue,
                },
                _ => continue,
            };
            let id = added_tokens
                .iter()
                .find(|t| t.get("content").and_then(Value::as_str) == Some(content.as_str()))
                .and_then(|t| t.get("id"))
                .cloned();
            self.set_special_token(&typ, id.as_ref())?;
        }
        Ok(())
    }

    fn load_from_config_json(&mut self, ckpt: &Checkpoint) -> Result<()> {
        let config = ckpt.config();
        for typ in self.types.clone() {
            let key = format!("{typ}_token_id");
            let mut id = config.get(&key).filter(|v| !v.is_null());
            if id.is_none() {
                id = config
                    .get("text_config")
                    .and_then(|t| t.get(&key))
                    .filter(|v| !v.is_null());
            }
            let id = id.cloned();
            self.set_special_token(&typ, id.as_ref())?;
        }
        Ok(())
    }

    /// Writes what was found, as `SpecialVocab.add_to_gguf` does (types gguf-py has no key for,
    /// such as `cls`, are skipped as it skips them).
    pub(crate) fn add_to_gguf(&self, b: &mut GgufBuilder<'_>) -> Result<()> {
        if !self.merges.is_empty() {
            b.set("tokenizer.ggml.merges", string_array(&self.merges)?);
        }
        for (typ, id) in &self.special_ids {
            if let Some(key) = special_id_key(typ) {
                b.set(key, *id);
            }
        }
        for (typ, add) in &self.add_special {
            if matches!(typ.as_str(), "bos" | "eos" | "sep") {
                b.set(&format!("tokenizer.ggml.add_{typ}_token"), *add);
            }
        }
        if let Some(t) = &self.chat_template {
            add_chat_template(b, t)?;
        }
        if let Some(v) = self.normalizer_lowercase {
            b.set("tokenizer.ggml.normalizer.lowercase", v);
        }
        if let Some(v) = self.normalizer_strip_accents {
            b.set("tokenizer.ggml.normalizer.strip_accents", v);
        }
        Ok(())
    }
}

/// The metadata key gguf-py writes a special token type's id under.
pub(crate) fn special_id_key(typ: &str) -> Option<&'static str> {
    Some(match typ {
        "bos" => "tokenizer.ggml.bos_token_id",
        "eos" => "tokenizer.ggml.eos_token_id",
        "unk" => "tokenizer.ggml.unknown_token_id",
        "sep" => "tokenizer.ggml.seperator_token_id",
        "pad" => "tokenizer.ggml.padding_token_id",
        "mask" => "tokenizer.ggml.mask_token_id",
        "eot" => "tokenizer.ggml.eot_token_id",
        "eom" => "tokenizer.ggml.eom_token_id",
        _ => return None,
    })
}

fn parse_template(v: &Value) -> Option<ChatTemplate> {
    match v {
        Value::String(s) => Some(ChatTemplate::One(s.clone())),
        Value::Array(list) => Some(ChatTemplate::Named(
            list.iter()
                .filter_map(|c| {
                    let name = c.get("name").and_then(Value::as_str).unwrap_or("");
                    let template = c.get("template").and_then(Value::as_str)?;
                    Some((name.to_string(), template.to_string()))
                })
                .collect(),
        )),
        _ => None,
    }
}

/// `GGUFWriter.add_chat_template`: one template, or named ones (`tokenizer.chat_template.NAME`
/// plus `tokenizer.chat_templates`) with `default` as the plain key.
fn add_chat_template(b: &mut GgufBuilder<'_>, t: &ChatTemplate) -> Result<()> {
    match t {
        ChatTemplate::One(s) => {
            b.set("tokenizer.chat_template", s.as_str());
        }
        ChatTemplate::Named(list) => {
            let mut default = None;
            let mut names: Vec<String> = Vec::new();
            for (name, template) in list {
                let name: String = name
                    .chars()
                    .map(|c| if c.is_ascii_alphanumeric() { c } else { '_' })
                    .collect();
                if name.is_empty() {
                    continue;
                }
                if name == "default" {
                    default = Some(template);
                } else {
                    if !names.contains(&name) {
                        names.push(name.clone());
                    }
                    b.set(
                        &format!("tokenizer.chat_template.{name}"),
                        template.as_str(),
                    );
                }
            }
            // gguf-py writes a Python set here, whose order is not defined; name order is.
            if !names.is_empty() {
                names.sort();
                b.set("tokenizer.chat_templates", string_array(&names)?);
            }
            if let Some(d) = default {
                b.set("tokenizer.chat_template", d.as_str());
            }
        }
    }
    Ok(())
}

/// A string array value.
pub(crate) fn string_array(items: &[String]) -> Result<OwnedValue> {
    Ok(OwnedValue::Array(OwnedArray::new(
        ValueType::String,
        items
            .iter()
            .map(|s| OwnedValue::String(s.as_bytes().to_vec()))
            .collect(),
    )?))
}

/// `tokenizer.json`'s merges as gguf-py writes them: `"a b"` strings; the newer pair form
/// `["a", "b"]` joined with a space, spaces inside a part written as U+0120.
fn merges_of(tokenizer: &Value, path: &Path) -> Result<Vec<String>> {
    let Some(Value::Array(merges)) = tokenizer.get("model").and_then(|m| m.get("merges")) else {
        return Ok(Vec::new());
    };
    let bad = || {
        Error::Unsupported(format!(
            "{}: unknown tokenizer merges format",
            path.display()
        ))
    };
    match merges.first() {
        None => Ok(Vec::new()),
        Some(Value::String(_)) => merges
            .iter()
            .map(|m| m.as_str().map(str::to_string).ok_or_else(bad))
            .collect(),
        Some(Value::Array(_)) => merges
            .iter()
            .map(|m| {
                let pair = m.as_array().filter(|p| p.len() == 2).ok_or_else(bad)?;
                let part = |v: &Value| -> Result<String> {
                    Ok(v.as_str()
                        .ok_or_else(bad)?
                        .chars()
                        .map(|c| if c == ' ' { '\u{120}' } else { c })
                        .collect())
                };
                Ok(format!("{} {}", part(&pair[0])?, part(&pair[1])?))
            })
            .collect(),
        Some(_) => Err(bad()),
    }
}
