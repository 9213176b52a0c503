#!/usr/bin/env python3
"""Reference embeddings from llama.cpp's llama-embedding (and sentence-transformers) for
gguf-model's BERT tests.

    python3 minilm_embeddings.py LLAMA_EMBEDDING GGUF HF_DIR [OUT]
        writes minilm_embeddings.json (tests/real_bert.rs): all-MiniLM-L6-v2's embeddings
    python3 minilm_embeddings.py tiny LLAMA_EMBEDDING TINY_GGUF [OUT]
        writes tiny_bert_embeddings.json (tests/tiny_bert.rs) for the tiny random BERT that
        test makes; write it out first with
        GGUF_TINY_BERT_OUT=/tmp/tiny-bert.gguf cargo test -p gguf-model --test tiny_bert

LLAMA_EMBEDDING  llama.cpp's llama-embedding binary
GGUF             all-MiniLM-L6-v2 converted by llama.cpp's convert_hf_to_gguf.py --outtype f16
HF_DIR           the sentence-transformers checkpoint (config.json, model.safetensors, ...)
OUT              default: the JSON file beside this script

llama-embedding runs once per sentence (so each batch is that sentence alone, as
gguf-model encodes it), with the pooling the file names (mean), L2 normalisation
(--embd-normalize 2, its default) and its JSON output (7 decimals). Its --verbose-prompt
listing gives the token ids. sentence-transformers runs on the CPU in float32 with
normalize_embeddings=True; the Hugging Face tokenizer gives its ids.
"""

import hashlib
import json
import os
import platform
import re
import subprocess
import sys

SENTENCES = [
    "The quick brown fox jumps over the lazy dog.",
    "Café au lait — naïve résumé",
    "我想在apple工作",
    "I love pizza 🍕 and sushi 🍣!",
    "How do I convert a PyTorch checkpoint to GGUF?",
    "Sentence embeddings map each piece of text to a single vector, so that texts with "
    "similar meanings end up close together: search engines use them to find passages that "
    "answer a question, recommendation systems to group related items, and clustering tools "
    "to organise large collections of documents without any labels at all, which is why "
    "small encoders like MiniLM remain popular on ordinary CPUs.",
]


def sha256(path):
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def llama_embedding(binary, gguf, text):
    # llama-embedding prints through its logging thread, which now and then loses part of
    # the output: run it again until the JSON parses.
    for _ in range(5):
        out = subprocess.run(
            [binary, "-m", gguf, "-p", text, "--embd-normalize", "2",
             "--embd-output-format", "json", "--verbose-prompt", "-t", "2"],
            check=True, capture_output=True, text=True,
        ).stdout
        ids = [int(m.group(1)) for m in re.finditer(r"^\s*(\d+) -> '", out, re.M)]
        try:
            data = json.loads(out[out.index("{"):])["data"]
        except ValueError:
            continue
        assert len(data) == 1
        return ids, data[0]["embedding"]
    raise RuntimeError(f"llama-embedding gave no JSON for {text!r}")


TINY_SENTENCES = [
    "hello world",
    "Café au lait — naïve résumé",
    "中文 日本語 at the test",
    "the play of the token is a test . " * 9,
]


def fnv1a64(path):
    h = 0xCBF29CE484222325
    with open(path, "rb") as f:
        for b in f.read():
            h = ((h ^ b) * 0x100000001B3) & 0xFFFFFFFFFFFFFFFF
    return f"{h:016x}"


def tiny(binary, gguf, out_path):
    items = []
    for text in TINY_SENTENCES:
        ids, vec = llama_embedding(binary, gguf, text)
        items.append({"text": text, "llama_cpp_token_ids": ids, "llama_cpp": vec})
    doc = {
        "source": {
            "model": "the tiny random BERT of crates/gguf-model/tests/tiny_bert.rs",
            "llama_cpp": "llama-embedding (llama.cpp 0c1e57098, CPU, Release, GGML_NATIVE=ON) "
                         "-m GGUF -p TEXT --embd-normalize 2 --embd-output-format json "
                         "--verbose-prompt -t 2, one run per sentence; pooling from the file "
                         "(bert.pooling_type = 1, mean); values printed with 7 decimals",
            "machine": platform.machine(),
            "script": "crates/gguf-model/tests/data/minilm_embeddings.py tiny",
        },
        "model_fnv1a64": fnv1a64(gguf),
        "sentences": items,
    }
    with open(out_path, "w", encoding="utf-8") as f:
        json.dump(doc, f, ensure_ascii=False, indent=1)
        f.write("\n")


def main():
    here = os.path.dirname(os.path.abspath(__file__))
    if sys.argv[1] == "tiny":
        binary, gguf = sys.argv[2:4]
        out = sys.argv[4] if len(sys.argv) > 4 else os.path.join(here, "tiny_bert_embeddings.json")
        return tiny(binary, gguf, out)
    binary, gguf, hf_dir = sys.argv[1:4]
    out_path = sys.argv[4] if len(sys.argv) > 4 else os.path.join(here, "minilm_embeddings.json")

    import sentence_transformers
    import tokenizers
    import torch
    from sentence_transformers import SentenceTransformer

    model = SentenceTransformer(hf_dir, device="cpu")
    st = model.encode(SENTENCES, normalize_embeddings=True, convert_to_numpy=True,
                      batch_size=len(SENTENCES))
    hf_tok = tokenizers.Tokenizer.from_file(os.path.join(hf_dir, "tokenizer.json"))
    # The checkpoint's tokenizer.json pads to 128; the ids are those of the text alone.
    hf_tok.no_padding()
    hf_tok.no_truncation()

    items = []
    for i, text in enumerate(SENTENCES):
        ids, vec = llama_embedding(binary, gguf, text)
        hf_ids = hf_tok.encode(text).ids
        items.append({
            "text": text,
            "llama_cpp_token_ids": ids,
            "hf_token_ids": hf_ids,
            "llama_cpp": vec,
            "sentence_transformers": [round(float(x), 8) for x in st[i]],
        })

    doc = {
        "source": {
            "model": "sentence-transformers/all-MiniLM-L6-v2 (mean pooling, 384 dimensions)",
            "gguf": "all-MiniLM-L6-v2 converted by llama.cpp's convert_hf_to_gguf.py "
                    f"--outtype f16: {os.path.getsize(gguf)} bytes, sha256 {sha256(gguf)}",
            "llama_cpp": "llama-embedding (llama.cpp 0c1e57098, CPU, Release, GGML_NATIVE=ON) "
                         "-m GGUF -p TEXT --embd-normalize 2 --embd-output-format json "
                         "--verbose-prompt -t 2, one run per sentence; pooling from the file "
                         "(bert.pooling_type = 1, mean); values printed with 7 decimals",
            "sentence_transformers": f"sentence-transformers {sentence_transformers.__version__}, "
                                     f"torch {torch.__version__}, CPU float32: "
                                     "SentenceTransformer(HF_DIR).encode(texts, "
                                     "normalize_embeddings=True)",
            "token_ids": f"llama_cpp_token_ids from llama-embedding --verbose-prompt; "
                         f"hf_token_ids from tokenizers {tokenizers.__version__} "
                         "(the checkpoint's tokenizer.json, padding off)",
            "machine": platform.machine(),
            "script": "crates/gguf-model/tests/data/minilm_embeddings.py",
        },
        "sentences": items,
    }
    with open(out_path, "w", encoding="utf-8") as f:
        json.dump(doc, f, ensure_ascii=False, indent=1)
        f.write("\n")


if __name__ == "__main__":
    main()
