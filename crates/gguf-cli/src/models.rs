//! `gguf pull`, and model arguments: positional or `-m` ([`ModelArg`]), naming a file or a
//! known model: the registry itself is `gguf-hub`; this module renders its progress and picks
//! what to fetch.

use std::path::{Path, PathBuf};

use anyhow::{bail, Context, Result};
use clap::Args;
use gguf_hub::{KnownModel, PullEvent, MODELS};
use indicatif::{ProgressBar, ProgressStyle};

use crate::output::outln;

/// `gguf pull`.
#[derive(Args)]
pub struct PullArgs {
    /// Model names; `all` for every known model.
    names: Vec<String>,
    /// List the known models and where they are cached.
    #[arg(long)]
    list: bool,
    /// Hash a cached copy again before trusting it.
    #[arg(long)]
    verify: bool,
}

/// Lists the known models, or fetches the ones named.
pub fn pull(a: PullArgs) -> Result<()> {
    if a.list || a.names.is_empty() {
        for m in MODELS {
            let state = if m.cached().is_some() {
                "cached"
            } else {
                "not cached"
            };
            outln!(
                "{:14} {:10} {}  ({})",
                m.name,
                state,
                m.description,
                m.cached_path().display()
            )?;
        }
        return Ok(());
    }
    let wanted: Vec<&KnownModel> = if a.names.iter().any(|n| n == "all") {
        MODELS.iter().collect()
    } else {
        a.names
            .iter()
            .map(|n| {
                gguf_hub::find(n)
                    .with_context(|| format!("unknown model '{n}' (see `gguf pull --list`)"))
            })
            .collect::<Result<_>>()?
    };
    for m in wanted {
        let p = fetch(m, a.verify)?;
        outln!("{}", p.display())?;
    }
    Ok(())
}

/// The model of a command that runs one: the positional MODEL, or `-m/--model MODEL` as
/// llama.cpp's tools take it.
#[derive(Args, Debug, Clone)]
pub struct ModelArg {
    /// A .gguf path or a known model name.
    #[arg(value_name = "MODEL", required_unless_present = "model")]
    file: Option<String>,
    /// The model, as llama.cpp's tools take it (instead of the positional MODEL).
    #[arg(short = 'm', long = "model", value_name = "MODEL")]
    model: Option<String>,
}

impl ModelArg {
    /// The model named, by position or by `-m`; both may be given only if they agree.
    pub fn name(&self) -> Result<&str> {
        match (&self.file, &self.model) {
            (Some(file), Some(model)) if file != model => {
                Err(UsageError(format!("two models given, {file} and -m {model}: give one")).into())
            }
            (Some(name), _) | (None, Some(name)) => Ok(name),
            (None, None) => Err(UsageError("no model given (MODEL or -m MODEL)".into()).into()),
        }
    }

    /// For a command whose model is followed by other positional arguments (texts, ids): the
    /// model and those arguments. With `-m` every positional argument is one of them (clap
    /// put the first in the model's place), each read by `parse`.
    pub fn with_rest<T>(
        &self,
        rest: &[T],
        parse: impl Fn(&str) -> Result<T>,
    ) -> Result<(&str, Vec<T>)>
    where
        T: Clone,
    {
        match (&self.file, &self.model) {
            (file, Some(model)) => {
                let mut all = Vec::with_capacity(rest.len() + 1);
                if let Some(first) = file {
                    all.push(parse(first)?);
                }
                all.extend_from_slice(rest);
                Ok((model, all))
            }
            (Some(file), None) => Ok((file, rest.to_vec())),
            (None, None) => Err(UsageError("no model given (MODEL or -m MODEL)".into()).into()),
        }
    }
}

/// A command line that cannot be run, found after clap's parse (`gguf` exits with 2, as for
/// clap's own refusals).
#[derive(Debug)]
pub struct UsageError(pub String);

impl std::fmt::Display for UsageError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for UsageError {}

/// Resolves a command-line model argument: an existing path, or a known model's name (fetched
/// into the cache on first use).
pub fn resolve(arg: &str) -> Result<PathBuf> {
    let path = Path::new(arg);
    if path.exists() {
        return Ok(path.to_path_buf());
    }
    if let Some(model) = gguf_hub::find(arg) {
        if let Some(p) = model.cached() {
            return Ok(p);
        }
        eprintln!(
            "{} is not cached yet; fetching it (once) into {}",
            model.name,
            gguf_hub::cache_dir().display()
        );
        return fetch(model, false);
    }
    let names: Vec<&str> = MODELS.iter().map(|m| m.name).collect();
    bail!(
        "{arg}: no such file, and not a known model name (known: {})",
        names.join(", ")
    )
}

/// [`gguf_hub::pull`], its steps on stderr and the extraction as a progress bar.
fn fetch(model: &KnownModel, verify_existing: bool) -> Result<PathBuf> {
    let mut bar: Option<ProgressBar> = None;
    let result = gguf_hub::pull(model, verify_existing, &mut |event| match event {
        PullEvent::Extracting { model, done, total } => bar
            .get_or_insert_with(|| {
                let bar = ProgressBar::new(total).with_style(
                    ProgressStyle::with_template(
                        "{msg} [{bar:30}] {bytes}/{total_bytes} {bytes_per_sec} {eta}",
                    )
                    .expect("valid template")
                    .progress_chars("=> "),
                );
                bar.set_message(format!("extracting {}", model.name));
                bar
            })
            .set_position(done),
        // The bar goes before the verdict is printed.
        PullEvent::Extracted { .. } => {
            if let Some(bar) = bar.take() {
                bar.finish_and_clear();
            }
        }
        _ => eprintln!("{event}"),
    });
    if let Some(bar) = bar {
        bar.finish_and_clear();
    }
    Ok(result?)
}
