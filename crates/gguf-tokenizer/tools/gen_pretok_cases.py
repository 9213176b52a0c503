#!/usr/bin/env python3
"""Generate tools/pretok_cases.json: how llama.cpp itself pre-tokenizes a corpus of tricky strings.

The expected splits come from llama.cpp, not from a re-implementation: this script builds
tools/llama_oracle.cpp against a built libllama.so and calls llama.cpp's own
`unicode_regex_split(text, regex_exprs, false)` with the regex list of every pre-tokenizer type.
The regex lists and the `tokenizer.ggml.pre` name -> type map are read out of llama.cpp's
src/llama-vocab.cpp, so they are exactly the ones llama.cpp uses.

For information it also runs the same regex lists through Python's `regex` module (pip install
regex) and records, per type, which texts split differently there: llama.cpp does not run a real
Unicode regex engine (it has hand-written fast paths, and otherwise std::regex over text whose
non-ASCII code points are collapsed to one byte per Unicode category), so some differences are
expected and are llama.cpp's behaviour, which is what we follow.

Usage (development only; the crate's tests read the committed JSON):
    python3 crates/gguf-tokenizer/tools/gen_pretok_cases.py \
        --llama-src /path/to/llama.cpp --llama-build /path/to/llama.cpp/build \
        > crates/gguf-tokenizer/tools/pretok_cases.json

A bigger differential run, not committed (the ignored test reads the file named by PRETOK_CASES):
    python3 .../gen_pretok_cases.py --llama-src ... --llama-build ... --random 20000 --seed 7 \
        --no-regex-module > /tmp/big.json
    PRETOK_CASES=/tmp/big.json cargo test -p gguf-tokenizer --lib -- --ignored pretok
"""

from __future__ import annotations

import argparse
import json
import os
import random
import re
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))


# ---------------------------------------------------------------------------------------------
# reading llama-vocab.cpp


def c_unescape(s: str) -> str:
    out, i = [], 0
    while i < len(s):
        if s[i] == "\\":
            out.append({"\\": "\\", '"': '"', "'": "'", "r": "\r", "n": "\n", "t": "\t"}[s[i + 1]])
            i += 2
        else:
            out.append(s[i])
            i += 1
    return "".join(out)


def read_regex_lists(vocab_cpp: str) -> dict[str, list[str]]:
    """LLAMA_VOCAB_PRE_TYPE_X (without the prefix) -> regex list, from llm_tokenizer_bpe's constructor."""
    body = vocab_cpp[vocab_cpp.index("struct llm_tokenizer_bpe : llm_tokenizer {"):vocab_cpp.index("struct llm_tokenizer_bpe_session")]
    labels: list[str] = []
    result: dict[str, list[str]] = {}
    current: list[str] | None = None
    for line in body.splitlines():
        t = line.strip()
        m = re.match(r"case LLAMA_VOCAB_PRE_TYPE_(\w+):", t)
        if m:
            labels.append(m.group(1))
            continue
        if t.startswith("default:"):
            labels.append("DEFAULT")
            continue
        if t.startswith("regex_exprs = {"):
            current = []
            continue
        if current is not None:
            if t.startswith("};"):
                for label in labels:
                    result[label] = current
                current = None
                continue
            if not t or t.startswith("//"):
                continue
            m = re.match(r'"((?:[^"\\]|\\.)*)",?\s*(//.*)?$', t)
            assert m, t
            current.append(c_unescape(m.group(1)))
            continue
        if t.startswith("break;"):
            labels = []
    return result


def read_original_regexes(vocab_cpp: str, unicode_cpp: str) -> dict[str, list[str]]:
    """The tokenizer.json regexes llama.cpp adapted, where its source keeps them in a comment.

    Only used for the informative comparison with Python's `regex` module. A block's commented
    strings are taken as its originals when there is one per regex.
    """
    body = vocab_cpp[vocab_cpp.index("struct llm_tokenizer_bpe : llm_tokenizer {"):vocab_cpp.index("struct llm_tokenizer_bpe_session")]
    labels: list[str] = []
    result: dict[str, list[str]] = {}
    commented: list[str] = []
    actual: list[str] = []
    for line in body.splitlines():
        t = line.strip()
        m = re.match(r"case LLAMA_VOCAB_PRE_TYPE_(\w+):", t)
        if m:
            labels.append(m.group(1))
            continue
        m = re.match(r'//\s*"((?:[^"\\]|\\.)*)",?$', t)
        if m:
            commented.append(c_unescape(m.group(1)))
            continue
        m = re.match(r'"((?:[^"\\]|\\.)*)",?\s*(//.*)?$', t)
        if m:
            actual.append(c_unescape(m.group(1)))
            continue
        if t.startswith("break;"):
            if commented and len(commented) == len(actual):
                for label in labels:
                    result[label] = commented
            labels, commented, actual = [], [], []
    # kimi-k2: llama.cpp's list is a placeholder; the original is in a comment in unicode.cpp
    for line in unicode_cpp.splitlines():
        if line.startswith("// [\\p{Han}]+|"):
            result["KIMI_K2"] = [line[3:].strip()]
    return result


def read_names(vocab_cpp: str) -> dict[str, list[str]]:
    """LLAMA_VOCAB_PRE_TYPE_X -> the tokenizer.ggml.pre strings llama.cpp maps to it."""
    start = vocab_cpp.index("if (type == LLAMA_VOCAB_TYPE_BPE) {")
    end = vocab_cpp.index("} else if (type == LLAMA_VOCAB_TYPE_SPM) {", start)
    names: dict[str, list[str]] = {}
    pending: list[str] = []
    for m in re.finditer(r'tokenizer_pre == "([^"]*)"|pre_type = LLAMA_VOCAB_PRE_TYPE_(\w+);', vocab_cpp[start:end]):
        if m.group(1) is not None:
            pending.append(m.group(1))
        else:
            names.setdefault(m.group(2), []).extend(pending)
            pending = []
    return names


# ---------------------------------------------------------------------------------------------
# the corpus

ATOMS = [
    # words, case
    "Hello", "world", "hello", "HTTPServer", "camelCase", "ABC", "abc", "x", "I", "a", "HeLLo",
    # contractions
    "'s", "'S", "'re", "'RE", "'Ll", "'ve", "'m", "'d", "'t", "'x", "'", "\u2019s", "don't", "I'M", "we'LL",
    # numbers
    "1", "12", "123", "1234", "12345", "1234567", "0", "\u0663\u0664\u0665", "\uff13", "\u00b2", "\u216b", "\u00bd",
    # whitespace
    " ", "  ", "   ", "\t", "\n", "\r\n", "\n\n", " \n ", "\r", "\u00a0", "\u3000", "\u2028", "\u0085",
    "\u000b", "\u000c", "\u001c", "\u200b", "\ufeff", "\u2009",
    # punctuation and symbols
    ".", ",", "!", "?", "...", "-", "--", "/", "//", "(", ")", "[", "]", "{", "}", "<", ">", "=", "+",
    "$", "^", "~", "|", "`", "#", "@", "&", "*", "%", "_", "\"", ";", ":", "\\",
    "\u2026", "\u3002", "\uff0c", "\u3001", "\uff01", "\u2013", "\u2014", "\u201c", "\u201d", "\u00ab",
    "\u00bb", "\u20ac", "\u00a3", "\u00a9", "\u00b0", "\u00d7", "\u2192", "\u0964", "\u060c", "\uff1a",
    # combining marks and scripts that use them
    "\u0301", "e\u0301", "\u0915\u094d\u0937", "\u0e01\u0e34", "\u05d0\u05b7", "\u0928\u092e\u0938\u094d\u0924\u0947",
    # non-ASCII letters
    "\u00e9", "\u00df", "\u00d1and\u00fa", "\u00c9mile", "\u00c0B", "\u00e0b", "\u00c0\u00c9a", "A\u00c0b",
    "\u03a3\u03af\u03c3\u03c5\u03c6\u03bf\u03c2", "\u0391\u0392\u0393", "\u01c5", "\u02b0", "\u0133", "\u13a0",
    "\ufb00", "\uff21", "\uff41", "\u0130", "\u212a", "\u00b5", "\u0444\u044b\u0432", "\u0628\u0633\u0645",
    # CJK and other scripts llama.cpp lists by range
    "\u4e2d\u6587", "\u6f22\u5b57\u30c6\u30b9\u30c8", "\u3072\u3089\u304c\u306a", "\u30ab\u30bf\u30ab\u30ca",
    "\ud55c\uad6d\uc5b4", "\u3131", "\u3105\u3106", "\U00020000", "\uf900", "\U0002f800", "\u0e40\u0e21",
    "\u1780", "\u1000", "\uff76", "\u9fa6", "\u4e00", "\u0800", "\uac00", "\ufe30", "\u303f",
    # emoji and friends
    "\U0001f642", "\U0001f44d\U0001f3fd", "\U0001f1fa\U0001f1f8", "\U0001f468\u200d\U0001f469\u200d\U0001f467",
    "\u2764\ufe0f",
    # controls, unassigned, private use, replacement
    "\u0000", "\u0007", "\u007f", "\ufffd", "\u0378", "\ue000", "\U000f0000", "\U0010ffff",
    # pieces some patterns single out
    "<sentinel:12>", "<sentinel:>", "IMGIMGABZ", "IMGIMGABCDEZ", "IMGIMGABCDZ", "    ", "\t\t",
    # mixed whitespace runs
    " \t\n", "\r\r\n ", " \u000b\n", "\n \u00a0", "\u3000\n", "     ", "\t \t",
]

CURATED = [
    "", " ", "  ", "   ", "\n", "\n\n", " \n", "\n ", "\r\n", "\t", "a", "A", "1",
    "Hello world", "Hello  world", "Hello world  ", "  hello", "a  b", "a   b", "\n\n  x", "x\n\n  ",
    "I'm here, you're there; they'll see it's done'", "I'M HERE, YOU'RE THERE", "'s 's", "'", "''", "'ss",
    "12345", "1234567890", " 12345", "a12345b", "x=12345.678", "\u0663\u0664\u0665\u0666", "1 22 333 4444",
    "HTTPServer camelCase ABC abc AbcDef", "\u00c0B \u00e0b \u00c0\u00c9a \u00c9MILE \u00c9mile",
    "\u4e2d\u6587\u5b57 and English \ud55c\uad6d\uc5b4 \u3072\u3089\u304c\u306a",
    "Hello \U0001f642 world \U0001f44d\U0001f3fd!",
    "caf\u00e9 cafe\u0301 na\u00efve \u0928\u092e\u0938\u094d\u0924\u0947",
    "trailing spaces   ", "tabs\tand\ttabs\t\t", "\u00a0nbsp\u00a0 \u3000ideographic\u3000",
    "line\u2028sep\u2029para\u0085nel", "foo.bar(baz) { return x->y; }", "    def f(x):\n        return x\n",
    "http://example.com/a/b?c=d&e=f", "C++ // comment\n/* block */", "a/b/c//d", "x!!! y??? z...",
    "<sentinel:0> IMGIMGAAZ IMGIMGABCDEZ", "\u0000\u0001\u0002", "\ufffd\ufffd", "\U000f0000\ue000",
    " " * 600 + "x", " " * 513, "\t" * 70 + "\n" + " " * 40 + "y", "a" * 300, "1" * 31, "A" * 20 + "b",
    "\u00c0" + "B" * 10 + " end", "\n" * 5 + "x" + "\r\n" * 3,
    "\u3001\u3002\uff01\uff0c\u2026\u201c\u201d\u2014", "\u0e40\u0e21\u0e37\u0e2d\u0e07 \u1780\u1781 \u1000\u1001",
    "The quick brown fox jumps over the lazy dog 3 times.", "\u0130stanbul'da \u0130\u0131 iI",
    "\u212aelvin \u017ftop", "don't DON'T Don'T", "x 'll 've 're", "'\U0001f642", " \U0001f642",
]


def random_cpt(rng: random.Random) -> str:
    """A code point from anywhere, ASCII and whitespace favoured (no surrogates)."""
    r = rng.random()
    if r < 0.35:
        c = rng.randint(0x20, 0x7E)
    elif r < 0.45:
        c = rng.choice([0x09, 0x0A, 0x0D, 0x20, 0x20, 0x0B, 0x0C, 0x85, 0xA0, 0x2028, 0x3000, 0x1C, 0x00])
    elif r < 0.6:
        c = rng.randint(0x80, 0x24F)
    elif r < 0.9:
        c = rng.randint(0x250, 0xFFFF)
    else:
        c = rng.randint(0x10000, 0x10FFFF)
    if 0xD800 <= c <= 0xDFFF:
        c = 0xFFFD
    return chr(c)


def make_corpus(seed: int = 1234, n_random: int = 450, n_random_cpts: int = 0) -> list[str]:
    rng = random.Random(seed)
    texts = list(CURATED)
    for _ in range(n_random):
        k = rng.randint(1, 10)
        texts.append("".join(rng.choice(ATOMS) for _ in range(k)))
    for _ in range(n_random_cpts):
        texts.append("".join(random_cpt(rng) for _ in range(rng.randint(1, 16))))
    seen, out = set(), []
    for t in texts:
        if t not in seen:
            seen.add(t)
            out.append(t)
    return out


# ---------------------------------------------------------------------------------------------
# running llama.cpp


def build_oracle(llama_src: str, llama_build: str, workdir: str) -> str:
    exe = os.path.join(workdir, "llama_oracle")
    bindir = os.path.join(llama_build, "bin")
    subprocess.run(
        ["g++", "-std=c++17", "-O1", "-I" + os.path.join(llama_src, "src"), os.path.join(HERE, "llama_oracle.cpp"),
         "-L" + bindir, "-lllama", "-Wl,-rpath," + bindir, "-o", exe],
        check=True,
    )
    return exe


def llama_split(exe: str, regexes: list[str], texts: list[str]) -> list[list[int]]:
    rx = ",".join(r.encode().hex() for r in regexes)
    inp = "".join(rx + "\t" + t.encode().hex() + "\n" for t in texts)
    out = subprocess.run([exe, "split"], input=inp.encode(), capture_output=True, check=True).stdout.decode()
    lines = out.split("\n")[:-1]
    assert len(lines) == len(texts)
    result = []
    for text, line in zip(texts, lines):
        if line.startswith("ERROR"):
            # llama.cpp throws for an empty text with the kimi-k2 and afmoe lists: their first regex
            # is a placeholder that only the fast path understands, and the fast path returns no
            # words for no text, which sends llama.cpp to std::regex with the placeholder. llama.cpp
            # never tokenizes an empty fragment, so we record "no words".
            assert text == "", (regexes, text, line)
            result.append([])
            continue
        # zero-length words (empty regex matches) carry no text and give no token: drop them
        result.append([int(x) for x in line.split(",") if x and int(x) > 0] if line else [])
    return result


def regex_module_split(regexes: list[str], text: str) -> list[int] | None:
    import regex  # type: ignore

    try:
        compiled = [regex.compile(r, regex.V1 if "&&" in r else 0) for r in regexes]
    except regex.error:
        return None
    pieces = [text] if text else []
    for rx in compiled:
        new = []
        for piece in pieces:
            last = 0
            for m in rx.finditer(piece):
                if m.start() > last:
                    new.append(piece[last:m.start()])
                if m.end() > m.start():
                    new.append(piece[m.start():m.end()])
                last = m.end()
            if last < len(piece):
                new.append(piece[last:])
        pieces = new
    return [len(p.encode()) for p in pieces]


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--llama-src", required=True)
    ap.add_argument("--llama-build", required=True)
    ap.add_argument("--random", type=int, default=450, help="number of random strings (default 450)")
    ap.add_argument("--random-cpts", type=int, default=0, help="number of strings of random code points")
    ap.add_argument("--seed", type=int, default=1234)
    ap.add_argument("--no-regex-module", action="store_true", help="skip the comparison with Python's regex")
    args = ap.parse_args()

    with open(os.path.join(args.llama_src, "src", "llama-vocab.cpp"), encoding="utf-8") as fh:
        vocab_cpp = fh.read()
    regex_lists = read_regex_lists(vocab_cpp)
    names = read_names(vocab_cpp)
    with open(os.path.join(args.llama_src, "src", "unicode.cpp"), encoding="utf-8") as fh:
        originals = read_original_regexes(vocab_cpp, fh.read())
    commit = subprocess.run(["git", "-C", args.llama_src, "rev-parse", "HEAD"], capture_output=True, text=True).stdout.strip()

    texts = make_corpus(args.seed, args.random, args.random_cpts)
    groups: list[dict] = []
    with tempfile.TemporaryDirectory() as tmp:
        exe = build_oracle(args.llama_src, args.llama_build, tmp)
        by_list: dict[tuple, dict] = {}
        for pre_type, regexes in regex_lists.items():
            key = tuple(regexes)
            if key not in by_list:
                splits = llama_split(exe, regexes, texts)
                reference = originals.get(pre_type, regexes)
                differs = []
                for i, (t, s) in enumerate(zip(texts, splits)):
                    if args.no_regex_module:
                        break
                    r = regex_module_split(reference, t)
                    if r is not None and r != s:
                        differs.append(i)
                by_list[key] = {
                    "regexes": regexes,
                    "types": {},
                    "splits": [",".join(map(str, s)) for s in splits],
                    "regex_module_regexes": reference,
                    "regex_module_differs": differs,
                }
                groups.append(by_list[key])
            by_list[key]["types"][pre_type] = names.get(pre_type, [])
    for g in groups:
        if not args.no_regex_module:
            print(f"{'/'.join(g['types'])}: regex module differs on {len(g['regex_module_differs'])} of {len(texts)}", file=sys.stderr)
    doc = {
        "source": f"llama.cpp {commit}: unicode_regex_split(text, regex_exprs, false), see tools/gen_pretok_cases.py",
        "texts": texts,
        "groups": groups,
    }
    json.dump(doc, sys.stdout, ensure_ascii=True, indent=0)
    print()


if __name__ == "__main__":
    main()
