//! Hugging Face checkpoints: a directory with `config.json` and safetensors weights (one
//! `model.safetensors`, or shards listed by `model.safetensors.index.json`), read through
//! memory maps without copying. The safetensors headers are parsed and checked by the
//! `safetensors` crate (offsets inside the file, sizes matching dtype and shape); this module
//! adds the checkpoint around them: the index, the shards it names (plain file names in the
//! directory only), tensor lookup across shards, and widening to f32.
//!
//! ```no_run
//! let ckpt = gguf_convert::hf::Checkpoint::open("all-MiniLM-L6-v2".as_ref())?;
//! assert_eq!(ckpt.model_type(), Some("bert"));
//! let emb = ckpt.tensor("embeddings.word_embeddings.weight").unwrap();
//! println!("{:?} {:?}", emb.dtype, emb.shape);
//! let values = emb.to_f32()?;
//! # Ok::<(), gguf_convert::Error>(())
//! ```

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::OnceLock;

use gguf_format::MappedBytes;
use half::{bf16, f16};
use safetensors::SafeTensors;

pub use safetensors::Dtype;

use super::json::{file_error, Reads};
use crate::error::{Error, Result};

/// A Hugging Face checkpoint directory, its weights mapped.
pub struct Checkpoint {
    dir: PathBuf,
    /// What was read of it, by opening it and by the conversions planned from it.
    reads: Reads,
    config: serde_json::Value,
    /// `tokenizer_config.json`, read on first use (its errors then belong to the step that
    /// needs it) and only once.
    tokenizer_config: OnceLock<Option<serde_json::Value>>,
    shards: Vec<Shard>,
    tensors: Vec<Entry>,
    by_name: HashMap<String, usize>,
}

impl std::fmt::Debug for Checkpoint {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Checkpoint")
            .field("dir", &self.dir)
            .field("shards", &self.shards.len())
            .field("tensors", &self.tensors.len())
            .finish_non_exhaustive()
    }
}

struct Shard {
    path: PathBuf,
    map: MappedBytes,
}

struct Entry {
    name: String,
    shard: usize,
    dtype: Dtype,
    shape: Vec<usize>,
    range: std::ops::Range<usize>,
}

/// A tensor of a checkpoint: its dtype, shape (outermost first, as PyTorch's) and bytes.
#[derive(Debug, Clone, Copy)]
pub struct HfTensor<'a> {
    /// Its name in the checkpoint (`model.layers.0.self_attn.q_proj.weight`).
    pub name: &'a str,
    /// Its element type.
    pub dtype: Dtype,
    /// Its shape, outermost dimension first.
    pub shape: &'a [usize],
    /// Its little-endian bytes, straight from the mapped file.
    pub data: &'a [u8],
    /// The file that holds it.
    pub file: &'a Path,
}

impl HfTensor<'_> {
    /// Its element count.
    pub fn len(&self) -> usize {
        self.shape.iter().product()
    }

    /// Whether it has no elements.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Its values widened to f32 (F32 as is, F16 and BF16 exactly, F64 rounded to nearest).
    ///
    /// # Errors
    /// [`Error::Unsupported`] for other dtypes (integers, booleans, 8-bit floats).
    pub fn to_f32(&self) -> Result<Vec<f32>> {
        self.values_f32(0..self.len())
    }

    /// The values of the elements in `range` (row-major order), widened as [`Self::to_f32`]
    /// widens them; a range past the end is cut to it.
    ///
    /// # Errors
    /// As [`Self::to_f32`].
    pub fn values_f32(&self, range: std::ops::Range<usize>) -> Result<Vec<f32>> {
        let size = match self.dtype {
            Dtype::F32 => 4,
            Dtype::F16 | Dtype::BF16 => 2,
            Dtype::F64 => 8,
            other => {
                return Err(Error::Unsupported(format!(
                    "{}: tensor '{}' is {other:?}; only F32, F16, BF16 and F64 tensors are read as numbers",
                    self.file.display(),
                    self.name
                )))
            }
        };
        let end = range.end.min(self.data.len() / size);
        let start = range.start.min(end);
        let d = &self.data[start * size..end * size];
        Ok(match self.dtype {
            Dtype::F32 => d
                .chunks_exact(4)
                .map(|b| f32::from_le_bytes([b[0], b[1], b[2], b[3]]))
                .collect(),
            Dtype::F16 => d
                .chunks_exact(2)
                .map(|b| f16::from_le_bytes([b[0], b[1]]).to_f32())
                .collect(),
            Dtype::BF16 => d
                .chunks_exact(2)
                .map(|b| bf16::from_le_bytes([b[0], b[1]]).to_f32())
                .collect(),
            _ => d
                .chunks_exact(8)
                .map(|b| {
                    f64::from_le_bytes([b[0], b[1], b[2], b[3], b[4], b[5], b[6], b[7]]) as f32
                })
                .collect(),
        })
    }
}

impl Checkpoint {
    /// Opens the checkpoint in `dir`: its `config.json`, and its weights from
    /// `model.safetensors.index.json`'s shards, or `model.safetensors`, or else every
    /// `*.safetensors` file in the directory.
    ///
    /// # Errors
    /// Each names the file: a missing or invalid `config.json`, no safetensors weights, an
    /// index naming files outside the directory or missing, a damaged safetensors file, a
    /// tensor in two shards, an index entry its shard lacks.
    pub fn open(dir: &Path) -> Result<Checkpoint> {
        let reads = Reads::default();
        reads.note(dir);
        let config_path = dir.join("config.json");
        if !config_path.is_file() {
            return Err(file_error(
                dir,
                "no config.json: not a Hugging Face checkpoint directory",
            ));
        }
        // The model card's bound (config.json is read once, here, for the metadata too).
        let max = crate::model_card::MAX_CONFIG_BYTES;
        if std::fs::metadata(&config_path).is_ok_and(|m| m.len() > max) {
            return Err(file_error(
                &config_path,
                format!("larger than the {max} bytes read of such a file"),
            ));
        }
        let config = reads.json(&config_path)?;
        if !config.is_object() {
            return Err(file_error(&config_path, "not a JSON object"));
        }

        // The shards, and for an index the tensor each must hold.
        let index_path = dir.join("model.safetensors.index.json");
        let (files, wanted): (Vec<String>, Option<HashMap<String, String>>) =
            if index_path.is_file() {
                let index = reads.json(&index_path)?;
                let map = index
                    .get("weight_map")
                    .and_then(|m| m.as_object())
                    .ok_or_else(|| file_error(&index_path, "no \"weight_map\" object"))?;
                let mut files: Vec<String> = Vec::new();
                let mut wanted = HashMap::new();
                for (tensor, file) in map {
                    let file = file.as_str().ok_or_else(|| {
                        file_error(
                            &index_path,
                            format!("the file of '{tensor}' is not a string"),
                        )
                    })?;
                    if !is_plain_name(file) {
                        return Err(file_error(
                            &index_path,
                            format!("'{file}' is not a file name in the checkpoint's directory"),
                        ));
                    }
                    if !files.iter().any(|f| f == file) {
                        files.push(file.to_string());
                    }
                    wanted.insert(tensor.clone(), file.to_string());
                }
                // llama.cpp's converter reads the shards in name order.
                files.sort();
                (files, Some(wanted))
            } else if dir.join("model.safetensors").is_file() {
                (vec!["model.safetensors".to_string()], None)
            } else {
                let mut files: Vec<String> = std::fs::read_dir(dir)
                    .map_err(|e| file_error(dir, e))?
                    .filter_map(|e| e.ok())
                    .filter_map(|e| e.file_name().into_string().ok())
                    .filter(|n| n.ends_with(".safetensors"))
                    .collect();
                files.sort();
                (files, None)
            };
        if files.is_empty() {
            return Err(file_error(
                dir,
                "no safetensors weights (model.safetensors, or shards with \
                 model.safetensors.index.json); PyTorch .bin checkpoints are not read",
            ));
        }

        let mut shards = Vec::with_capacity(files.len());
        let mut tensors = Vec::new();
        let mut by_name = HashMap::new();
        for (shard, file) in files.iter().enumerate() {
            let path = dir.join(file);
            reads.note(&path);
            let map = MappedBytes::open(&path)?;
            let st = SafeTensors::deserialize(map.bytes())
                .map_err(|e| file_error(&path, format!("not a valid safetensors file: {e}")))?;
            let base = map.bytes().as_ptr() as usize;
            // Name order within a shard, as `safetensors`' Python `keys()` and llama.cpp's
            // converter give them (the Rust crate's own order is a hash map's).
            let mut views: Vec<_> = st.iter().collect();
            views.sort_by(|a, b| a.0.cmp(b.0));
            for (name, view) in views {
                if let Some(wanted) = &wanted {
                    if wanted.get(name).map(String::as_str) != Some(file.as_str()) {
                        // Not this shard's according to the index: what loaders ignore.
                        continue;
                    }
                }
                if by_name.contains_key(name) {
                    return Err(file_error(
                        &path,
                        format!("tensor '{name}' is also in an earlier shard"),
                    ));
                }
                let start = view.data().as_ptr() as usize - base;
                by_name.insert(name.to_string(), tensors.len());
                tensors.push(Entry {
                    name: name.to_string(),
                    shard,
                    dtype: view.dtype(),
                    shape: view.shape().to_vec(),
                    range: start..start + view.data().len(),
                });
            }
            shards.push(Shard { path, map });
        }
        if let Some(wanted) = &wanted {
            let mut missing: Vec<_> = wanted
                .iter()
                .filter(|(t, _)| !by_name.contains_key(t.as_str()))
                .collect();
            missing.sort();
            if let Some((tensor, file)) = missing.first() {
                return Err(file_error(
                    &dir.join(file),
                    format!(
                        "lacks tensor '{tensor}', which model.safetensors.index.json puts there \
                         ({} missing in all)",
                        missing.len()
                    ),
                ));
            }
        }
        Ok(Checkpoint {
            dir: dir.to_path_buf(),
            reads,
            config,
            tokenizer_config: OnceLock::new(),
            shards,
            tensors,
            by_name,
        })
    }

    /// The directory.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// What has been read of the checkpoint; every read of its files goes through it.
    pub(crate) fn reads(&self) -> &Reads {
        &self.reads
    }

    /// `config.json`.
    pub fn config(&self) -> &serde_json::Value {
        &self.config
    }

    /// `tokenizer_config.json`, `None` when the checkpoint has none; read the first time it is
    /// asked for.
    ///
    /// # Errors
    /// A file that is not valid JSON (each call retries the read until one succeeds).
    pub(crate) fn tokenizer_config(&self) -> Result<Option<&serde_json::Value>> {
        if let Some(config) = self.tokenizer_config.get() {
            return Ok(config.as_ref());
        }
        let config = self
            .reads
            .json_if_exists(&self.dir.join("tokenizer_config.json"))?;
        Ok(self.tokenizer_config.get_or_init(|| config).as_ref())
    }

    /// `config.json`'s `model_type` (`llama`, `bert`, ...).
    pub fn model_type(&self) -> Option<&str> {
        self.config.get("model_type").and_then(|v| v.as_str())
    }

    /// `config.json`'s `architectures` (`["LlamaForCausalLM"]`).
    pub fn architectures(&self) -> Vec<&str> {
        self.config
            .get("architectures")
            .and_then(|v| v.as_array())
            .map(|a| a.iter().filter_map(|v| v.as_str()).collect())
            .unwrap_or_default()
    }

    /// How many safetensors files the weights are in.
    pub fn shard_count(&self) -> usize {
        self.shards.len()
    }

    /// Every tensor: shards in file-name order, each shard's tensors in name order (the order
    /// llama.cpp's converter writes them in).
    pub fn tensors(&self) -> impl Iterator<Item = HfTensor<'_>> {
        self.tensors.iter().map(|e| self.view(e))
    }

    /// The tensor called `name`, if there is one.
    pub fn tensor(&self, name: &str) -> Option<HfTensor<'_>> {
        self.by_name.get(name).map(|&i| self.view(&self.tensors[i]))
    }

    /// How many tensors there are.
    pub fn len(&self) -> usize {
        self.tensors.len()
    }

    /// Whether there are none.
    pub fn is_empty(&self) -> bool {
        self.tensors.is_empty()
    }

    fn view<'a>(&'a self, e: &'a Entry) -> HfTensor<'a> {
        let shard = &self.shards[e.shard];
        HfTensor {
            name: &e.name,
            dtype: e.dtype,
            shape: &e.shape,
            data: &shard.map.bytes()[e.range.clone()],
            file: &shard.path,
        }
    }

    /// A line for messages: `model_type 'bert' (BertModel), 101 tensors in 1 safetensors file`.
    pub fn summary(&self) -> String {
        format!(
            "model_type '{}' ({}), {} tensors in {} safetensors file{}",
            self.model_type().unwrap_or("?"),
            self.architectures().join(", "),
            self.len(),
            self.shard_count(),
            if self.shard_count() == 1 { "" } else { "s" }
        )
    }
}

/// Whether `name` is a plain file name (no directories, not `.` or `..`).
fn is_plain_name(name: &str) -> bool {
    !name.is_empty()
        && name != "."
        && name != ".."
        && !name.contains('/')
        && !name.contains('\\')
        && !name.contains('\0')
}
