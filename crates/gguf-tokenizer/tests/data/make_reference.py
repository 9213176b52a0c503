#!/usr/bin/env python3
"""Generate llama.cpp reference token ids for the tokenizer test corpus.

Runs llama.cpp's `llama-tokenize` on every file in `corpus/` for every model
and writes `reference/<model>.json`.  Python 3.11 standard library only.

Usage (defaults match the machine the committed data was made on):

    python3 make_reference.py \
        --llama-tokenize /opt/llama-ref/build/bin/llama-tokenize \
        --model ~/.cache/gguf/smollm2-135m.gguf \
        --model ~/.cache/gguf/gemma3-270m.gguf

Modes (all of them pass `--ids --log-disable --no-escape -f FILE`):

  default           metadata defaults: BOS/EOS added iff the file's
                    tokenizer.ggml.add_bos_token is true (llama-tokenize passes
                    add_special = add_bos), special-token text parsed.
  no_parse_special  as default, plus `--no-parse-special`: control-token text
                    is tokenized literally (user-defined tokens still match).
  no_special        as default, plus `--no-bos`: add_special = false, so
                    neither BOS nor EOS is added; special text still parsed.

`--no-escape` matters: llama-tokenize otherwise turns the two characters
`\\n` in the file into a newline (and `\\t`, `\\\\`, `\\"` ...), so the input
would not be the file's bytes.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import re
import signal
import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
LLAMA_CPP_COMMIT = "0c1e57098"

MODES: dict[str, list[str]] = {
    "default": [],
    "no_parse_special": ["--no-parse-special"],
    "no_special": ["--no-bos"],
}

COMMON_ARGS = ["--ids", "--log-disable", "--no-escape"]

IDS_RE = re.compile(r"^\[\s*(-?\d+(\s*,\s*-?\d+)*)?\s*\]$")


def sha256_file(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def parse_ids(stdout: str) -> list[int]:
    """Find the single `[1, 2, 3]` line that `--ids` prints."""
    found = [ln.strip() for ln in stdout.splitlines() if IDS_RE.match(ln.strip())]
    if len(found) != 1:
        raise ValueError(f"expected exactly one id list in output, found {len(found)}: {stdout[:300]!r}")
    ids = json.loads(found[0])
    if not all(isinstance(i, int) and i >= 0 for i in ids):
        raise ValueError(f"unexpected ids: {found[0][:200]}")
    return ids


def run_tokenize(exe: Path, model: Path, sample: Path, extra: list[str]) -> tuple[list[int] | None, str | None, list[str]]:
    cmd = [str(exe), "-m", str(model), *COMMON_ARGS, *extra, "-f", str(sample)]
    env = dict(os.environ)
    libdir = str(exe.parent)
    env["LD_LIBRARY_PATH"] = libdir + (":" + env["LD_LIBRARY_PATH"] if env.get("LD_LIBRARY_PATH") else "")
    proc = subprocess.run(cmd, capture_output=True, env=env, timeout=300)
    stdout = proc.stdout.decode("utf-8", errors="replace")
    stderr = proc.stderr.decode("utf-8", errors="replace")
    # keep warnings that are about the input (not the model-load noise that repeats for every call)
    warnings = [
        ln.strip() for ln in stderr.splitlines()
        if ln.strip() and "control-looking token" not in ln and "n_ctx_seq" not in ln
    ]
    if proc.returncode != 0:
        how = (f"killed by signal {signal.Signals(-proc.returncode).name}" if proc.returncode < 0
               else f"exited with status {proc.returncode}")
        # the abort handler also dumps a gdb backtrace to stderr; keep only the C++ exception lines
        why = [ln.strip() for ln in stderr.splitlines() if "terminate called" in ln or "what():" in ln]
        return None, f"llama-tokenize {how}: " + " ".join(why or ["(no exception message)"]), []
    try:
        return parse_ids(stdout), None, warnings
    except ValueError as e:
        return None, str(e), warnings


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--llama-tokenize", type=Path, default=Path("/opt/llama-ref/build/bin/llama-tokenize"))
    ap.add_argument("--model", type=Path, action="append",
                    help="GGUF model (repeatable); output name is the file stem")
    ap.add_argument("--corpus", type=Path, default=HERE / "corpus")
    ap.add_argument("--out", type=Path, default=HERE / "reference")
    ap.add_argument("--only", action="append", help="only these sample file names (for debugging; output is not written)")
    args = ap.parse_args()

    models = args.model or [
        Path("~/.cache/gguf/smollm2-135m.gguf").expanduser(),
        Path("~/.cache/gguf/gemma3-270m.gguf").expanduser(),
    ]
    models = [m.expanduser() for m in models]
    exe = args.llama_tokenize

    version = subprocess.run(
        [str(exe), "--version"], capture_output=True, text=True,
        env={**os.environ, "LD_LIBRARY_PATH": str(exe.parent)},
    )
    version_line = next((ln for ln in (version.stdout + version.stderr).splitlines() if ln.startswith("version:")), "")
    if LLAMA_CPP_COMMIT not in version_line:
        print(f"warning: llama-tokenize reports {version_line!r}, expected commit {LLAMA_CPP_COMMIT}", file=sys.stderr)

    samples = sorted(p for p in args.corpus.iterdir() if p.is_file() and not p.name.startswith("."))
    if args.only:
        samples = [p for p in samples if p.name in set(args.only)]

    args.out.mkdir(parents=True, exist_ok=True)
    for model in models:
        name = model.stem
        print(f"== {name}: hashing {model}", file=sys.stderr)
        result: dict = {
            "llama_cpp_commit": LLAMA_CPP_COMMIT,
            "llama_cpp_version": version_line,
            "model_file": model.name,
            "model_sha256": sha256_file(model),
            "modes": {m: " ".join(["llama-tokenize", "-m", "MODEL", *COMMON_ARGS, *extra, "-f", "FILE"]) for m, extra in MODES.items()},
            "corpus_sha256": {},
            "notes": {},
            "samples": {},
        }
        total = 0
        for sample in samples:
            data = sample.read_bytes()
            result["corpus_sha256"][sample.name] = hashlib.sha256(data).hexdigest()
            entry: dict = {}
            for mode, extra in MODES.items():
                ids, err, warnings = run_tokenize(exe, model, sample, extra)
                entry[mode] = ids
                note = []
                if err:
                    note.append(err)
                note.extend(warnings)
                if note:
                    result["notes"].setdefault(sample.name, {})[mode] = "; ".join(note)
                total += len(ids or [])
            result["samples"][sample.name] = entry
            print(f"   {sample.name}: " + ", ".join(f"{m}={'FAIL' if v is None else len(v)}" for m, v in entry.items()),
                  file=sys.stderr)
        print(f"== {name}: {total} ids", file=sys.stderr)
        if args.only:
            print(json.dumps(result["samples"], ensure_ascii=False))
            print(json.dumps(result["notes"], ensure_ascii=False))
            continue
        write_json(args.out / f"{name}.json", result)
    return 0


def write_json(path: Path, result: dict) -> None:
    """Pretty at the top, one sample per line (stable, diff-friendly)."""
    dumps = lambda v: json.dumps(v, ensure_ascii=False, separators=(", ", ": "))
    lines = ["{"]
    head = [k for k in result if k != "samples"]
    for k in head:
        v = result[k]
        if isinstance(v, dict) and v:
            lines.append(f"  {dumps(k)}: {{")
            items = list(v.items())
            for i, (kk, vv) in enumerate(items):
                lines.append(f"    {dumps(kk)}: {dumps(vv)}" + ("," if i + 1 < len(items) else ""))
            lines.append("  },")
        else:
            lines.append(f"  {dumps(k)}: {dumps(v)},")
    lines.append('  "samples": {')
    items = list(result["samples"].items())
    for i, (k, v) in enumerate(items):
        lines.append(f"    {dumps(k)}: {dumps(v)}" + ("," if i + 1 < len(items) else ""))
    lines.append("  }")
    lines.append("}")
    text = "\n".join(lines) + "\n"
    json.loads(text)  # sanity
    path.write_text(text, encoding="utf-8")
    print(f"wrote {path}", file=sys.stderr)


if __name__ == "__main__":
    sys.exit(main())
