"""Writes smolvocab_hf_logits.json: what Hugging Face transformers computes (float32, eager
attention) for the tiny mixture-of-experts checkpoints with SmolLM2's vocabulary that
`cargo xtask models` derives into the cache (hf/smolvocab-*), on a fixed token list.

For each position it keeps the logits of every STRIDE-th token id, and the position's best
token id over the whole vocabulary with its logit, so the file stays small.

    python3 smolvocab_logits.py ~/.cache/gguf/hf > smolvocab_hf_logits.json
"""
import json
import sys

import torch
import transformers
from transformers import AutoModelForCausalLM, AutoTokenizer

STRIDE = 389
NAMES = ["smolvocab-qwen2moe", "smolvocab-qwen3moe", "smolvocab-olmoe"]

root = sys.argv[1]
tokenizer = AutoTokenizer.from_pretrained(f"{root}/{NAMES[0]}")
tokens = tokenizer.encode("<|im_start|>The capital of France is Paris, and 42 + 1 =")
models = {}
for name in NAMES:
    model = AutoModelForCausalLM.from_pretrained(
        f"{root}/{name}", torch_dtype=torch.float32, attn_implementation="eager"
    )
    with torch.no_grad():
        logits = model(torch.tensor([tokens])).logits[0]
    models[name] = {
        "strided": [[round(float(v), 7) for v in row[::STRIDE]] for row in logits],
        "argmax": [int(row.argmax()) for row in logits],
        "max": [round(float(row.max()), 7) for row in logits],
    }
json.dump(
    {
        "source": f"transformers {transformers.__version__}, torch {torch.__version__}: "
        "crates/gguf-convert/tests/data/smolvocab_logits.py",
        "stride": STRIDE,
        "tokens": tokens,
        "models": models,
    },
    sys.stdout,
    separators=(",", ":"),
)
print()
