//! gguf-py's `Metadata.apply_metadata_heuristic` and the writing of `general.*`: the model card's
//! fields, then the model ids, as `Metadata.load` and `set_gguf_meta_model` use them.

use crate::error::Result;
use gguf_format::{OwnedArray, OwnedValue, ValueType, MAX_ARRAY_DEPTH};
use regex::Regex;
use std::path::Path;
use std::sync::LazyLock;

use super::model_id::{id_to_title, model_id_components};
use super::sampling::py_f32;
use super::yaml::{get, Py};
use super::{file_error, MAX_ARRAY_VALUES};

/// The fields of gguf-py's `Metadata` that `Metadata.load` can set without an override.
/// Values from the model card keep their YAML type (gguf-py does not check it).
#[derive(Default)]
pub(super) struct Meta {
    pub(super) name: Option<Py>,
    pub(super) author: Option<Py>,
    pub(super) version: Option<Py>,
    pub(super) organization: Option<Py>,
    pub(super) finetune: Option<Py>,
    pub(super) basename: Option<Py>,
    pub(super) description: Option<Py>,
    pub(super) size_label: Option<Py>,
    pub(super) source_url: Option<Py>,
    pub(super) source_doi: Option<Py>,
    pub(super) source_uuid: Option<Py>,
    pub(super) source_repo_url: Option<Py>,
    pub(super) license: Option<Py>,
    pub(super) license_name: Option<Py>,
    pub(super) license_link: Option<Py>,
    pub(super) base_models: Option<Vec<Vec<(Py, Py)>>>,
    pub(super) datasets: Option<Vec<Vec<(Py, Py)>>>,
    pub(super) tags: Option<Vec<Py>>,
    pub(super) languages: Option<Vec<Py>>,
}

/// `use_model_card_metadata`: the card's value when the field is still None.
pub(super) fn use_card(field: &mut Option<Py>, card: &[(Py, Py)], key: &str) {
    if field.is_none() {
        if let Some(v) = get(card, key) {
            *field = match v {
                Py::None => None,
                v => Some(v.clone()),
            };
        }
    }
}

/// `use_array_model_card_metadata`: appends a string, extends with a list.
pub(super) fn use_card_array(field: &mut Option<Vec<Py>>, card: &[(Py, Py)], key: &str) {
    let value = match get(card, key) {
        None | Some(Py::None) => return,
        Some(v) => v,
    };
    let current = field.get_or_insert_with(Vec::new);
    match value {
        Py::Str(_) => current.push(value.clone()),
        Py::List(items) => current.extend(items.iter().cloned()),
        _ => {}
    }
}

/// The base model or dataset entries of `keys` (the first present), as gguf-py builds them.
pub(super) fn sources(
    card: &[(Py, Py)],
    keys: [&str; 3],
    total: i128,
) -> Option<Vec<Vec<(Py, Py)>>> {
    let value = keys.iter().find_map(|k| get(card, k))?;
    let ids: Vec<Py> = match value {
        Py::Str(_) => vec![value.clone()],
        Py::List(items) => items.to_vec(),
        _ => Vec::new(),
    };
    static HF_URL: LazyLock<Regex> = LazyLock::new(|| {
        Regex::new(r"^https?://huggingface.co/([^/]+/[^/]+)$").expect("valid regex")
    });
    let mut entries = Vec::with_capacity(ids.len());
    for id in ids {
        let mut entry: Vec<(Py, Py)> = Vec::new();
        let mut set = |k: &str, v: &str| entry.push((Py::str(k), Py::str(v)));
        match &id {
            Py::Str(s) => {
                let s: &str = s;
                if s.starts_with("http://") || s.starts_with("https://") || s.starts_with("ssh://")
                {
                    set("repo_url", s);
                    if s.contains("huggingface.co") {
                        if let Some(m) = HF_URL.captures(s) {
                            let c = model_id_components(&m[1], total);
                            set("name", &id_to_title(&c.full));
                            if let Some(org) = &c.org {
                                set("organization", &id_to_title(org));
                            }
                            if let Some(v) = &c.version {
                                set("version", v);
                            }
                        }
                    }
                } else {
                    let c = model_id_components(s, total);
                    set("name", &id_to_title(&c.full));
                    if let Some(org) = &c.org {
                        set("organization", &id_to_title(org));
                    }
                    if let Some(v) = &c.version {
                        set("version", v);
                    }
                    if let Some(org) = &c.org {
                        set(
                            "repo_url",
                            &format!("https://huggingface.co/{org}/{}", c.full),
                        );
                    }
                }
            }
            Py::Dict(d) => entry = d.to_vec(),
            // gguf-py logs "not in a known format" and appends an empty entry.
            _ => {}
        }
        entries.push(entry);
    }
    Some(entries)
}

pub(super) fn apply_model_card(m: &mut Meta, card: &[(Py, Py)], total: i128) {
    // llama.cpp's own keys, then the same with `model_` before them, then others' habits.
    for prefix in ["", "model_"] {
        let key = |k: &str| format!("{prefix}{k}");
        use_card(&mut m.name, card, &key("name"));
        use_card(&mut m.author, card, &key("author"));
        use_card(&mut m.version, card, &key("version"));
        use_card(&mut m.organization, card, &key("organization"));
        use_card(&mut m.description, card, &key("description"));
        use_card(&mut m.finetune, card, &key("finetune"));
        use_card(&mut m.basename, card, &key("basename"));
        use_card(&mut m.size_label, card, &key("size_label"));
        use_card(&mut m.source_url, card, &key("url"));
        use_card(&mut m.source_doi, card, &key("doi"));
        use_card(&mut m.source_uuid, card, &key("uuid"));
        use_card(&mut m.source_repo_url, card, &key("repo_url"));
    }
    use_card(&mut m.name, card, "model_name");
    use_card(&mut m.author, card, "model_creator");
    use_card(&mut m.basename, card, "model_type");

    if let Some(entries) = sources(
        card,
        ["base_model", "base_models", "base_model_sources"],
        total,
    ) {
        m.base_models.get_or_insert_with(Vec::new).extend(entries);
    }
    if let Some(entries) = sources(card, ["datasets", "dataset", "dataset_sources"], total) {
        m.datasets.get_or_insert_with(Vec::new).extend(entries);
    }

    use_card(&mut m.license, card, "license");
    use_card(&mut m.license_name, card, "license_name");
    use_card(&mut m.license_link, card, "license_link");

    use_card_array(&mut m.tags, card, "tags");
    use_card_array(&mut m.tags, card, "pipeline_tag");
    use_card_array(&mut m.languages, card, "languages");
    use_card_array(&mut m.languages, card, "language");
}

impl Meta {
    /// The heuristics on a model id (`config.json`'s `_name_or_path`, the directory's name):
    /// each field that is still None.
    pub(super) fn fill_from_id(&mut self, id: &str, total: i128) {
        let c = model_id_components(id, total);
        let fill = |field: &mut Option<Py>, v: Option<String>| {
            if field.is_none() {
                if let Some(v) = v {
                    *field = Some(Py::str(&v));
                }
            }
        };
        fill(&mut self.name, Some(id_to_title(&c.full)));
        fill(&mut self.organization, c.org.as_deref().map(id_to_title));
        fill(&mut self.basename, c.basename);
        fill(&mut self.finetune, c.finetune);
        fill(&mut self.version, c.version);
        fill(&mut self.size_label, c.size_label);
    }

    /// `Metadata.set_gguf_meta_model`, through `GGUFWriter`'s `add_string` (which skips a
    /// falsy value), `add_uint32` and `add_array` (which skips an empty list).
    pub(super) fn write(&self, readme: &Path, out: &mut Vec<(String, OwnedValue)>) -> Result<()> {
        let mut put = |key: String, v: &Option<Py>| -> Result<()> {
            if let Some(v) = v {
                if let Some(s) = string_value(readme, &key, v)? {
                    out.push((key, OwnedValue::from(s)));
                }
            }
            Ok(())
        };
        put("general.name".into(), &self.name)?;
        put("general.author".into(), &self.author)?;
        put("general.version".into(), &self.version)?;
        put("general.organization".into(), &self.organization)?;
        put("general.finetune".into(), &self.finetune)?;
        put("general.basename".into(), &self.basename)?;
        put("general.description".into(), &self.description)?;
        put("general.size_label".into(), &self.size_label)?;
        let license = match &self.license {
            Some(Py::List(items)) => {
                let mut parts = Vec::with_capacity(items.len());
                for item in items.iter() {
                    match item {
                        Py::Str(s) => parts.push(s.to_string()),
                        other => {
                            return Err(file_error(
                                readme,
                                format!(
                                    "license lists {}, not a string (gguf-py fails on it too)",
                                    other.type_name()
                                ),
                            ))
                        }
                    }
                }
                Some(Py::str(&parts.join(",")))
            }
            other => other.clone(),
        };
        put("general.license".into(), &license)?;
        put("general.license.name".into(), &self.license_name)?;
        put("general.license.link".into(), &self.license_link)?;
        put("general.source.url".into(), &self.source_url)?;
        put("general.source.doi".into(), &self.source_doi)?;
        put("general.source.uuid".into(), &self.source_uuid)?;
        put("general.source.repo_url".into(), &self.source_repo_url)?;
        for (group, entries) in [
            ("base_model", &self.base_models),
            ("dataset", &self.datasets),
        ] {
            let Some(entries) = entries else { continue };
            let count = u32::try_from(entries.len())
                .map_err(|_| file_error(readme, format!("too many {group} entries")))?;
            out.push((format!("general.{group}.count"), OwnedValue::U32(count)));
            for (i, entry) in entries.iter().enumerate() {
                for field in [
                    "name",
                    "author",
                    "version",
                    "organization",
                    "description",
                    "url",
                    "doi",
                    "uuid",
                    "repo_url",
                ] {
                    if let Some(v) = get(entry, field) {
                        let key = format!("general.{group}.{i}.{field}");
                        if let Some(s) = string_value(readme, &key, v)? {
                            out.push((key, OwnedValue::from(s)));
                        }
                    }
                }
            }
        }
        for (key, items) in [
            ("general.tags", &self.tags),
            ("general.languages", &self.languages),
        ] {
            let Some(items) = items else { continue };
            if items.is_empty() {
                continue;
            }
            let mut budget = MAX_ARRAY_VALUES;
            let array = array_value(items, 1, &mut budget).map_err(|e| {
                file_error(
                    readme,
                    format!("{key} cannot be written: {e} (gguf-py fails on it too)"),
                )
            })?;
            out.push((key.to_string(), OwnedValue::Array(array)));
        }
        Ok(())
    }
}

/// `add_string(key, value)`: `None` for a falsy value (skipped); an error for a truthy value
/// that is not a string, on which gguf-py's writer fails.
pub(super) fn string_value(readme: &Path, key: &str, v: &Py) -> Result<Option<String>> {
    match v {
        _ if !v.truthy() => Ok(None),
        Py::Str(s) => Ok(Some(s.to_string())),
        other => Err(file_error(
            readme,
            format!(
                "{key} would be {}, not a string: gguf-py cannot write it either (convert_hf_to_gguf.py fails)",
                other.type_name()
            ),
        )),
    }
}

/// The GGUF array gguf-py's `_pack_val` writes for a list: the element type of its first item
/// (`str` string, `float` f32, `bool` bool, `int` i32, `list` array), which every item must
/// share.
pub(super) fn array_value(
    items: &[Py],
    depth: u32,
    budget: &mut usize,
) -> std::result::Result<OwnedArray, String> {
    if items.is_empty() {
        return Err("an empty nested list".into());
    }
    if depth > MAX_ARRAY_DEPTH {
        return Err(format!("lists nested more than {MAX_ARRAY_DEPTH} deep"));
    }
    *budget = budget
        .checked_sub(items.len())
        .ok_or_else(|| format!("more than {MAX_ARRAY_VALUES} values"))?;
    let elem = match &items[0] {
        Py::Str(_) => ValueType::String,
        Py::Float(_) => ValueType::F32,
        Py::Bool(_) => ValueType::Bool,
        Py::Int(_) | Py::BigInt => ValueType::I32,
        Py::List(_) => ValueType::Array,
        other => return Err(format!("an item is {}", other.type_name())),
    };
    let mut values = Vec::with_capacity(items.len());
    for item in items {
        let v = match (elem, item) {
            (ValueType::String, Py::Str(s)) => OwnedValue::from(&**s),
            (ValueType::F32, Py::Float(x)) => OwnedValue::F32(
                py_f32(*x).ok_or_else(|| format!("{x} is too large for a float32"))?,
            ),
            (ValueType::Bool, Py::Bool(b)) => OwnedValue::Bool(*b),
            (ValueType::I32, Py::Int(n)) => {
                OwnedValue::I32(i32::try_from(*n).map_err(|_| format!("{n} is not an int32"))?)
            }
            (ValueType::I32, Py::BigInt) => return Err("an int is not an int32".into()),
            (ValueType::Array, Py::List(l)) => {
                OwnedValue::Array(array_value(l, depth + 1, budget)?)
            }
            (_, other) => {
                return Err(format!(
                    "its items are not all of one type ({} among them)",
                    other.type_name()
                ))
            }
        };
        values.push(v);
    }
    OwnedArray::new(elem, values).map_err(|e| e.to_string())
}
