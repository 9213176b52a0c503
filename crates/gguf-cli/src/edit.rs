//! The commands that write model files: `gguf edit`, `split` and `merge`. Every output goes
//! through `gguf_fsutil`'s temporary file and rename.

use std::path::{Path, PathBuf};

use anyhow::{bail, Context, Result};
use clap::Args;
use gguf_format::edit::{edit_metadata, Edit};
use gguf_format::split::{self, SplitLimit};
use gguf_format::{GgufFile, OwnedValue, ValueType};
use gguf_fsutil::{Refusal, WriteMode};

use crate::models;
use crate::output::{bytes_bar, outln};

/// `gguf edit`.
#[derive(Args)]
pub struct EditArgs {
    /// The file to edit (or a known model name, when writing to -o).
    input: String,
    /// Where to write the result.
    #[arg(
        short,
        long,
        required_unless_present = "in_place",
        conflicts_with = "in_place"
    )]
    output: Option<PathBuf>,
    /// Replace the input (through a temporary file and an atomic rename), keeping its mode
    /// and owner; a symbolic link is followed and kept.
    #[arg(long)]
    in_place: bool,
    /// Overwrite an existing output file (regular files only), or a read-only one.
    #[arg(long)]
    force: bool,
    /// Set a key: `KEY=VALUE` keeps the existing key's type, `KEY:TYPE=VALUE` names it
    /// (u8 i8 u16 i16 u32 i32 u64 i64 f32 f64 bool string).
    #[arg(long = "set", value_name = "KEY[:TYPE]=VALUE")]
    set: Vec<String>,
    /// Remove a key.
    #[arg(long = "remove", value_name = "KEY")]
    remove: Vec<String>,
    /// Rename a key: `OLD=NEW`.
    #[arg(long = "rename", value_name = "OLD=NEW")]
    rename: Vec<String>,
}

/// `gguf split`.
#[derive(Args)]
pub struct SplitArgs {
    /// The model to split.
    input: String,
    /// Output prefix: parts are PREFIX-00001-of-0000N.gguf.
    output_prefix: String,
    /// At most N tensors per part (the default, 128, as gguf-split).
    #[arg(long, value_name = "N", conflicts_with = "max_size")]
    max_tensors: Option<usize>,
    /// At most this much tensor data per part: a number with M or G (decimal, as gguf-split).
    #[arg(long, value_name = "SIZE")]
    max_size: Option<String>,
    /// Put only metadata in the first part.
    #[arg(long)]
    no_tensor_first_split: bool,
}

/// `gguf merge`.
#[derive(Args)]
pub struct MergeArgs {
    /// Any part of the split set (normally PREFIX-00001-of-0000N.gguf).
    first_part: PathBuf,
    /// The merged file (must not exist).
    output: PathBuf,
}

/// The file-writing error a library's error holds, if that is what it is: how
/// [`with_force_hint`] finds a refused destination in whichever error reports it.
pub(crate) trait FsErrorOf {
    /// The gguf-fsutil error inside `self`.
    fn fs_error(&self) -> Option<&gguf_fsutil::Error>;
}

impl FsErrorOf for gguf_fsutil::Error {
    fn fs_error(&self) -> Option<&gguf_fsutil::Error> {
        Some(self)
    }
}

impl FsErrorOf for gguf_format::Error {
    fn fs_error(&self) -> Option<&gguf_fsutil::Error> {
        match self {
            gguf_format::Error::Fs(e) => Some(e),
            _ => None,
        }
    }
}

impl FsErrorOf for gguf_convert::Error {
    fn fs_error(&self) -> Option<&gguf_fsutil::Error> {
        match self {
            gguf_convert::Error::Fs(e) => Some(e),
            gguf_convert::Error::Format(e) => e.fs_error(),
            _ => None,
        }
    }
}

impl FsErrorOf for gguf_model::ModelError {
    fn fs_error(&self) -> Option<&gguf_fsutil::Error> {
        match self {
            gguf_model::ModelError::Fs(e) => Some(e),
            gguf_model::ModelError::Format(e) => e.fs_error(),
            _ => None,
        }
    }
}

/// A refused destination, with the flag that would allow it.
pub(crate) fn with_force_hint<E>(e: E) -> anyhow::Error
where
    E: FsErrorOf + std::error::Error + Send + Sync + 'static,
{
    match e.fs_error().and_then(gguf_fsutil::Error::refusal) {
        Some(Refusal::Exists) => anyhow::anyhow!("{e} (pass --force to replace it)"),
        Some(Refusal::ReadOnly) => {
            anyhow::anyhow!("{e} (pass --force to replace it all the same; it stays read-only)")
        }
        _ => e.into(),
    }
}

fn parse_typed_value(text: &str, ty: ValueType) -> Result<OwnedValue> {
    let bad = || format!("'{text}' is not a valid {ty}");
    Ok(match ty {
        ValueType::U8 => OwnedValue::U8(text.parse().with_context(bad)?),
        ValueType::I8 => OwnedValue::I8(text.parse().with_context(bad)?),
        ValueType::U16 => OwnedValue::U16(text.parse().with_context(bad)?),
        ValueType::I16 => OwnedValue::I16(text.parse().with_context(bad)?),
        ValueType::U32 => OwnedValue::U32(text.parse().with_context(bad)?),
        ValueType::I32 => OwnedValue::I32(text.parse().with_context(bad)?),
        ValueType::U64 => OwnedValue::U64(text.parse().with_context(bad)?),
        ValueType::I64 => OwnedValue::I64(text.parse().with_context(bad)?),
        ValueType::F32 => OwnedValue::F32(text.parse().with_context(bad)?),
        ValueType::F64 => OwnedValue::F64(text.parse().with_context(bad)?),
        ValueType::Bool => OwnedValue::Bool(text.parse().with_context(bad)?),
        ValueType::String => OwnedValue::from(text),
        ValueType::Array => bail!("--set cannot write arrays; only scalar and string values"),
    })
}

fn value_type_named(name: &str) -> Result<ValueType> {
    (0..13)
        .filter_map(ValueType::from_id)
        .find(|t| t.name() == name || (name == "str" && *t == ValueType::String))
        .with_context(|| format!("unknown value type '{name}'"))
}

/// Applies the `--set`/`--remove`/`--rename` edits, to a new file or in place.
pub fn edit(a: EditArgs) -> Result<()> {
    let input = models::resolve(&a.input)?;
    if a.in_place && gguf_hub::find(&a.input).is_some() && !Path::new(&a.input).exists() {
        bail!(
            "refusing to edit the cached model {} in place; write a copy with -o",
            a.input
        );
    }
    let output = a.output.clone().unwrap_or_else(|| input.clone());
    let mode = if a.in_place || a.force {
        WriteMode::Replace { force: a.force }
    } else {
        WriteMode::CreateNew
    };
    // Refuse before the work; the write checks again when it starts and when it ends. A file
    // is rewritten only when asked for by name: -o naming the input (or a link to it) is not.
    if !a.in_place {
        gguf_fsutil::refuse_inputs(&output, &[input.as_path()]).map_err(|e| {
            anyhow::anyhow!("{e} (--in-place rewrites a file, keeping its mode and owner)")
        })?;
    }
    gguf_fsutil::check_destination(&output, mode).map_err(with_force_hint)?;
    let mapped = GgufFile::open(&input)?;
    let file = mapped.file();
    let mut edits = Vec::new();
    for s in &a.set {
        let (lhs, value) = s
            .split_once('=')
            .with_context(|| format!("--set '{s}': expected KEY[:TYPE]=VALUE"))?;
        let (key, ty) = match lhs.rsplit_once(':') {
            Some((k, t)) => (k, value_type_named(t)?),
            None => {
                let existing = file.value(lhs).with_context(|| {
                    format!("--set '{s}': key '{lhs}' is new, so name its type as {lhs}:TYPE=VALUE")
                })?;
                (lhs, existing.value_type())
            }
        };
        edits.push(Edit::Set(key.to_string(), parse_typed_value(value, ty)?));
    }
    for k in &a.remove {
        edits.push(Edit::Remove(k.clone()));
    }
    for r in &a.rename {
        let (from, to) = r
            .split_once('=')
            .with_context(|| format!("--rename '{r}': expected OLD=NEW"))?;
        edits.push(Edit::Rename(from.to_string(), to.to_string()));
    }
    if edits.is_empty() {
        bail!("nothing to do: give --set, --remove or --rename");
    }
    drop(mapped);
    let bar = bytes_bar("writing");
    edit_metadata(&input, &output, mode, &edits, &mut |done, total| {
        bar.set_length(total);
        bar.set_position(done);
    })
    .map_err(with_force_hint)?;
    bar.finish_and_clear();
    eprintln!("wrote {}", output.display());
    Ok(())
}

/// Parses gguf-split's sizes: a number followed by M (10^6) or G (10^9).
fn parse_split_size(text: &str) -> Result<u64> {
    let (digits, unit) = text.split_at(text.len().saturating_sub(1));
    let scale = match unit {
        "M" | "m" => 1_000_000,
        "G" | "g" => 1_000_000_000,
        _ => bail!("--max-size '{text}': expected a number followed by M or G, e.g. 2G"),
    };
    let n: u64 = digits
        .parse()
        .with_context(|| format!("--max-size '{text}': bad number"))?;
    n.checked_mul(scale)
        .filter(|&v| v > 0)
        .context("--max-size must be above zero and fit 64 bits")
}

/// Cuts a model into a split set named like gguf-split's.
pub fn split(a: SplitArgs) -> Result<()> {
    let input = models::resolve(&a.input)?;
    let limit = match (&a.max_size, a.max_tensors) {
        (Some(s), _) => SplitLimit::MaxBytes(parse_split_size(s)?),
        (None, Some(n)) => SplitLimit::MaxTensors(n),
        (None, None) => SplitLimit::MaxTensors(128),
    };
    let bar = bytes_bar("splitting");
    let paths = split::write_split(
        &input,
        &a.output_prefix,
        limit,
        a.no_tensor_first_split,
        &mut |d, t| {
            bar.set_length(t);
            bar.set_position(d);
        },
    )?;
    bar.finish_and_clear();
    for p in paths {
        outln!("{}", p.display())?;
    }
    Ok(())
}

/// Joins a split set into one file.
pub fn merge(a: MergeArgs) -> Result<()> {
    let bar = bytes_bar("merging");
    split::merge(&a.first_part, &a.output, &mut |d, t| {
        bar.set_length(t);
        bar.set_position(d);
    })?;
    bar.finish_and_clear();
    outln!("{}", Path::new(&a.output).display())?;
    Ok(())
}
