#!/usr/bin/env python3
"""llama.cpp reference ids for the WordPiece (`bert`) and Unigram (`t5`) fixtures.

Writes `inputs/*.txt` (the inputs below, byte for byte) and runs llama.cpp's `llama-tokenize`
on every input -- these and the shared corpus in `../corpus/` -- with every fixture in
`fixtures/tokenizer-{bert,bert-cased,t5,t5-plain}.gguf` (made by `cargo xtask fixtures`), in
three modes, writing `reference/<fixture>.json`. It also builds `detokenize.c` against the
same llama.cpp and records what `llama_detokenize` gives for each default-mode id list, with
every combination of its two flags (`decoded`: plain, remove_special, unparse_special, both;
a string, or `{"hex": ...}` where the bytes are not UTF-8). Python 3.11 standard library and a
C compiler.

    python3 make_reference.py [--llama-tokenize /opt/llama-ref/build/bin/llama-tokenize]
                              [--llama-src /opt/llama-ref/llama_cpp_python-0.3.36/vendor/llama.cpp]

Modes (all pass `--ids --log-disable --no-escape -f FILE`):

  default           llama-tokenize passes add_special = the file's add_bos (true for bert:
                    [CLS] ... [SEP]; false for t5, so its EOS is not added either) and parses
                    special-token text.
  no_parse_special  plus `--no-parse-special`: control-token text is tokenized as text.
  no_special        plus `--no-bos`: add_special = false.

A `null` id list means llama-tokenize failed on that input (the reason is in `notes`).
Each input's length and FNV-1a 64 hash are recorded so the test can tell a changed input from
a changed tokenizer.
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
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
CRATE = HERE.parents[2]
ROOT = CRATE.parents[1]
CORPUS = HERE.parent / "corpus"
LLAMA_CPP_COMMIT = "0c1e57098"
FIXTURES = ["tokenizer-bert", "tokenizer-bert-cased", "tokenizer-t5", "tokenizer-t5-plain"]
MODES = {"default": [], "no_parse_special": ["--no-parse-special"], "no_special": ["--no-bos"]}
COMMON_ARGS = ["--ids", "--log-disable", "--no-escape"]
IDS_RE = re.compile(r"^\[\s*(-?\d+(\s*,\s*-?\d+)*)?\s*\]$")

# The inputs written to inputs/, aimed at these two tokenizers (the shared corpus covers the rest).
INPUTS: dict[str, bytes] = {
    "01_basic.txt": "Hello, world! This is a test of the tokenizer: playing, unable, re-test.".encode(),
    "02_accents.txt": (
        "Café naïve résumé fiancé Über ÉCOLE Ångström São Paulo, Straße, ñandú, ça va? "
        "Ελληνικά über Ünited cafe\u0301 (NFD)"
    ).encode(),
    "03_cjk.txt": "中文测试：日本語の文章。こんにちは世界！한국어 텍스트 中国人大 𠀀𪜀 日本".encode(),
    "04_special_bert.txt": (
        "[CLS] hello [SEP] world [MASK] [PAD] [UNK][CLS]x [unused0] [unused5]"
        " [cls] [SEP][SEP] [MASK"
    ).encode(),
    "05_special_t5.txt": (
        "Translate: hello</s> <pad> <unk> <extra_id_0> world<extra_id_1>x <｜sep｜> <｜foo"
        " <extra_id_9> [PAD179] [PAD180]x </s></s> <extra_id_0>"
    ).encode(),
    "06_fullwidth_compat.txt": (
        "ＨＥＬＬＯ　ｗｏｒｌｄ！ ﬁnal ﬂow ™ ½ x² ①②③ Ⅳ µm Å ｶﾞｶﾊﾟﾊﾀﾞﾞ ｡､ "
        "e\u0301 E\u0301cole nin\u0303o a\u0308 … ｜ <｜ ＜｜"
    ).encode(),
    "07_spaces.txt": (
        "  leading spaces\tand\ttabs\n\nnew  lines   and    runs     of spaces"
        " nbsp\u00a0here ideo\u3000space zw\u200bsp soft\u00adhyphen \ufeffbom   trailing   "
    ).encode(),
    "08_numbers.txt": "In 2024, 100 people paid $19.99 (20%) — 3.14159 1,000,000 0x1F 1e-5 12:30.".encode(),
    "09_controls_nul.txt": b"a\x00b\x01c\x07d\x1be\x7ff \x00\x00 g\r\nh\x0bi\x0cj\x00",
    "10_invalid_utf8.txt": (
        b"ok \xff\xfe bad \xe4\xb8 trunc \x80\xbf cont \xf0\x9f\x98 emoji "
        b"\xc0\xaf overlong \xed\xa0\x80 surrogate caf\xe9 \xf8\x88\x80\x80\x80 end\xe2\x82"
    ),
    "11_mixed_case.txt": "hello Hello HELLO hElLo HeLLo World WORLD wOrLd The THE the iPhone XMLHttpRequest".encode(),
    "12_unknown_words.txt": "xyzzy ß øre 🙂 emoji 👍🏽 ŋ þorn Hello🙂World a🙂b Qqq".encode(),
    "13_long_word.txt": (
        "supercalifragilisticexpialidocious united unity unit unite untied "
        + "a" * 40 + " " + "ab" * 30
    ).encode(),
    "14_punct_runs.txt": (
        "Wait... what?! \"quoted\" 'single' (paren) [bracket] {brace} <angle> a/b\\c @user #tag $5 "
        "^_^ `code` ~tilde |pipe| ¿Qué? ¡Sí! «guillemets» “curly” ‘quotes’ – — … ## ###"
    ).encode(),
    "15_empty.txt": b"",
    "16_only_spaces.txt": b"     ",
    "17_newline.txt": b"\n",
    "18_url.txt": "Visit http://www.example.com/index.html?q=1&r=2#frag or https://中文.com".encode(),
    "19_beyond_max.txt": b"a \xf4\x90\x80\x80 b",
    "20_whitespace_only_unicode.txt": "\u3000\u00a0 \t\u200b".encode(),
}


def fnv1a64(data: bytes) -> str:
    h = 0xCBF29CE484222325
    for b in data:
        h ^= b
        h = (h * 0x100000001B3) & 0xFFFFFFFFFFFFFFFF
    return f"{h:016x}"


def parse_ids(stdout: str) -> list[int]:
    found = [ln.strip() for ln in stdout.splitlines() if IDS_RE.match(ln.strip())]
    if len(found) != 1:
        raise ValueError(f"expected one id list, found {len(found)}: {stdout[:300]!r}")
    return json.loads(found[0])


def run(exe: Path, model: Path, sample: Path, extra: list[str]) -> tuple[list[int] | None, str | None]:
    cmd = [str(exe), "-m", str(model), *COMMON_ARGS, *extra, "-f", str(sample)]
    env = dict(os.environ, LD_LIBRARY_PATH=str(exe.parent))
    proc = subprocess.run(cmd, capture_output=True, env=env, timeout=120)
    if proc.returncode != 0:
        stderr = proc.stderr.decode("utf-8", errors="replace")
        how = (f"killed by signal {signal.Signals(-proc.returncode).name}" if proc.returncode < 0
               else f"exited with status {proc.returncode}")
        why = [ln.strip() for ln in stderr.splitlines() if "what():" in ln or "error" in ln.lower()]
        return None, f"llama-tokenize {how}: " + " ".join(why[:3] or ["(no message)"])
    try:
        ids = parse_ids(proc.stdout.decode("utf-8", errors="replace"))
    except ValueError as e:
        return None, str(e)
    if any(i < 0 for i in ids):
        return None, f"negative id in {ids}"
    return ids, None


DECODE_FLAGS = {"plain": (0, 0), "remove_special": (1, 0), "unparse_special": (0, 1), "both": (1, 1)}


def build_detokenize(src: Path, libdir: Path, out: Path) -> Path:
    exe = out / "detokenize"
    cmd = [os.environ.get("CC", "cc"), "-O1", f"-I{src / 'include'}", f"-I{src / 'ggml' / 'include'}",
           str(HERE / "detokenize.c"), f"-L{libdir}", "-lllama", f"-Wl,-rpath,{libdir}", "-o", str(exe)]
    subprocess.run(cmd, check=True)
    return exe


def detokenize(exe: Path, model: Path, requests: list[tuple[int, int, list[int]]]) -> list[bytes]:
    stdin = "".join(f"{r} {u} {' '.join(map(str, ids))}\n" for r, u, ids in requests)
    proc = subprocess.run([str(exe), str(model)], input=stdin.encode(), capture_output=True, check=True,
                          timeout=120)
    lines = proc.stdout.decode().split("\n")[:-1]
    assert len(lines) == len(requests), proc.stderr
    return [bytes.fromhex(ln) for ln in lines]


def text_value(b: bytes):
    try:
        return b.decode("utf-8")
    except UnicodeDecodeError:
        return {"hex": b.hex()}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--llama-tokenize", type=Path, default=Path("/opt/llama-ref/build/bin/llama-tokenize"))
    ap.add_argument("--llama-src", type=Path,
                    default=Path("/opt/llama-ref/llama_cpp_python-0.3.36/vendor/llama.cpp"))
    ap.add_argument("--fixtures", type=Path, default=ROOT / "fixtures")
    args = ap.parse_args()
    exe = args.llama_tokenize
    scratch = tempfile.TemporaryDirectory()
    detok = build_detokenize(args.llama_src, exe.parent, Path(scratch.name))

    inputs_dir = HERE / "inputs"
    inputs_dir.mkdir(exist_ok=True)
    for name, data in INPUTS.items():
        (inputs_dir / name).write_bytes(data)
    samples = [("inputs/" + n, inputs_dir / n) for n in INPUTS]
    samples += [("corpus/" + p.name, p) for p in sorted(CORPUS.iterdir())
                if p.is_file() and not p.name.startswith(".")]

    version = subprocess.run([str(exe), "--version"], capture_output=True, text=True,
                             env=dict(os.environ, LD_LIBRARY_PATH=str(exe.parent)))
    version_line = next((ln for ln in (version.stdout + version.stderr).splitlines()
                         if ln.startswith("version:")), "")
    if LLAMA_CPP_COMMIT not in version_line:
        print(f"warning: {version_line!r} is not commit {LLAMA_CPP_COMMIT}", file=sys.stderr)

    out_dir = HERE / "reference"
    out_dir.mkdir(exist_ok=True)
    for fixture in FIXTURES:
        model = args.fixtures / f"{fixture}.gguf"
        result: dict = {
            "llama_cpp_commit": LLAMA_CPP_COMMIT,
            "llama_cpp_version": version_line,
            "fixture": model.name,
            "fixture_sha256": hashlib.sha256(model.read_bytes()).hexdigest(),
            "modes": {m: " ".join(["llama-tokenize -m FIXTURE", *COMMON_ARGS, *e, "-f FILE"]) for m, e in MODES.items()},
            "notes": {},
            "samples": {},
        }
        for key, path in samples:
            data = path.read_bytes()
            entry: dict = {"len": len(data), "fnv1a64": fnv1a64(data)}
            for mode, extra in MODES.items():
                ids, err = run(exe, model, path, extra)
                entry[mode] = ids
                if err:
                    result["notes"].setdefault(key, {})[mode] = err
            result["samples"][key] = entry
        # What llama_detokenize makes of each default-mode id list.
        requests = [(k, flags, entry["default"]) for k, entry in result["samples"].items()
                    if entry["default"] is not None for flags in DECODE_FLAGS.values()]
        texts = detokenize(detok, model, [(r, u, ids) for _, (r, u), ids in requests])
        for (key, flags, _), text in zip(requests, texts):
            name = next(n for n, f in DECODE_FLAGS.items() if f == flags)
            result["samples"][key].setdefault("decoded", {})[name] = text_value(text)
        write_json(out_dir / f"{fixture}.json", result)
        failed = sum(v is None for e in result["samples"].values() for k, v in e.items() if k in MODES)
        print(f"{fixture}: {len(samples)} samples, {failed} failed runs", file=sys.stderr)
    return 0


def write_json(path: Path, result: dict) -> None:
    """Pretty at the top, one sample per line."""
    dumps = lambda v: json.dumps(v, ensure_ascii=False, separators=(", ", ": "))
    lines = ["{"]
    for k, v in result.items():
        if isinstance(v, dict) and v:
            lines.append(f"  {dumps(k)}: {{")
            items = list(v.items())
            for i, (kk, vv) in enumerate(items):
                lines.append(f"    {dumps(kk)}: {dumps(vv)}" + ("," if i + 1 < len(items) else ""))
            lines.append("  },")
        else:
            lines.append(f"  {dumps(k)}: {dumps(v)},")
    lines[-1] = lines[-1].rstrip(",")
    lines.append("}")
    text = "\n".join(lines) + "\n"
    json.loads(text)
    path.write_text(text, encoding="utf-8")


if __name__ == "__main__":
    sys.exit(main())
