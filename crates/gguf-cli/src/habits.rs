//! What llama.cpp's users type: its GPU options, accepted and ignored with a note (this build
//! runs on the CPU), and its multi-letter short options (`-ngl 99`), which clap would read as
//! a one-letter option and its value (`-n gl`).

use std::ffi::OsString;

use clap::Args;

/// llama.cpp's multi-letter short options and the long names `gguf` knows them by.
const MULTI_LETTER: [(&str, &str); 4] = [
    ("-ngl", "--n-gpu-layers"),
    ("-sm", "--split-mode"),
    ("-mg", "--main-gpu"),
    ("-ts", "--tensor-split"),
];

/// The commands that take [`GpuOptions`] (and so the multi-letter short options).
const GPU_COMMANDS: [&str; 6] = ["generate", "chat", "perplexity", "bench", "embed", "serve"];

/// The command line with llama.cpp's multi-letter short options (`-ngl 99`, `-ngl=99`)
/// written as their long names, for the commands that take them. Nothing else changes:
/// other commands, and everything after `--`, are left as they are.
pub fn rewrite_multi_letter_options(args: impl IntoIterator<Item = OsString>) -> Vec<OsString> {
    let mut args: Vec<OsString> = args.into_iter().collect();
    // The subcommand is the first argument after the program's name that is not an option
    // (`gguf` itself takes only --help and --version, which take no value).
    let command = args
        .iter()
        .skip(1)
        .find(|a| !a.to_string_lossy().starts_with('-'));
    if !command.is_some_and(|c| GPU_COMMANDS.iter().any(|g| c == *g)) {
        return args;
    }
    for arg in args.iter_mut().skip(1) {
        let Some(text) = arg.to_str() else {
            continue;
        };
        if text == "--" {
            break;
        }
        for (short, long) in MULTI_LETTER {
            if let Some(rest) = text.strip_prefix(short) {
                if rest.is_empty() || rest.starts_with('=') {
                    *arg = format!("{long}{rest}").into();
                    break;
                }
            }
        }
    }
    args
}

/// llama.cpp's GPU options, accepted so that its command lines run, and ignored.
#[derive(Args, Debug, Clone, Default)]
#[command(
    next_help_heading = "llama.cpp's GPU options (accepted and ignored: this build runs on the CPU)"
)]
pub struct GpuOptions {
    /// Layers to offload to the GPU (llama.cpp's -ngl).
    #[arg(long = "n-gpu-layers", visible_alias = "gpu-layers", value_name = "N")]
    n_gpu_layers: Option<String>,
    /// How to split the model across GPUs (llama.cpp's -sm).
    #[arg(long = "split-mode", value_name = "MODE")]
    split_mode: Option<String>,
    /// The GPU for the model (llama.cpp's -mg).
    #[arg(long = "main-gpu", value_name = "INDEX")]
    main_gpu: Option<String>,
    /// Fractions of the model per GPU (llama.cpp's -ts).
    #[arg(long = "tensor-split", value_name = "SPLIT")]
    tensor_split: Option<String>,
}

impl GpuOptions {
    /// The options given, as llama.cpp's short names and their values (`-ngl 99`).
    fn given(&self) -> Vec<String> {
        [
            ("-ngl", &self.n_gpu_layers),
            ("-sm", &self.split_mode),
            ("-mg", &self.main_gpu),
            ("-ts", &self.tensor_split),
        ]
        .into_iter()
        .filter_map(|(name, value)| Some(format!("{name} {}", value.as_ref()?)))
        .collect()
    }

    /// One `note:` line on stderr when any was given.
    pub fn note_ignored(&self) {
        let given = self.given();
        if !given.is_empty() {
            eprintln!(
                "note: this build runs on the CPU; ignoring {}",
                given.join(", ")
            );
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rewrite(args: &[&str]) -> Vec<String> {
        rewrite_multi_letter_options(args.iter().map(OsString::from))
            .into_iter()
            .map(|a| a.into_string().unwrap())
            .collect()
    }

    #[test]
    fn multi_letter_options_become_long_ones_for_the_model_commands_only() {
        assert_eq!(
            rewrite(&["gguf", "generate", "m", "-ngl", "99", "-sm=row", "-mg", "0", "-n", "4"]),
            [
                "gguf",
                "generate",
                "m",
                "--n-gpu-layers",
                "99",
                "--split-mode=row",
                "--main-gpu",
                "0",
                "-n",
                "4"
            ]
        );
        // Only whole options: `-tsx` and `-n4` are someone else's.
        assert_eq!(
            rewrite(&["gguf", "bench", "m", "-ts", "3,1", "-tsx", "-n4"]),
            ["gguf", "bench", "m", "--tensor-split", "3,1", "-tsx", "-n4"]
        );
        assert_eq!(
            rewrite(&["gguf", "tokenize", "m", "-ngl"]),
            ["gguf", "tokenize", "m", "-ngl"]
        );
        assert_eq!(
            rewrite(&["gguf", "chat", "m", "--", "-ngl"]),
            ["gguf", "chat", "m", "--", "-ngl"]
        );
    }
}
