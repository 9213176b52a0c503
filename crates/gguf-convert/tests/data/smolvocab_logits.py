"""Writes smolvocab_hf_logits.json: what Hugging Face transformers computes (float32, eager
attention) for the tiny mixture-of-experts checkpoints with SmolLM2's vocabulary that
`cargo xtask models` derives into the cache (hf/smolvocab-*), on a fixed token list.

transformers' own DeepseekV2Attention (4.57) leaves out the softmax factor mscale² that
DeepSeek's modeling code (and transformers' DeepseekV3Attention) apply under YaRN with
`mscale_all_dim`, and llama.cpp with them; the script applies it, as DeepseekV3Attention does.

For each position it keeps the logits of every STRIDE-th token id, and the position's best
token id over the whole vocabulary with its logit, so the file stays small.

    python3 smolvocab_logits.py ~/.cache/gguf/hf > smolvocab_hf_logits.json
"""
import json
import math
import sys

import torch
import transformers
from transformers import AutoModelForCausalLM, AutoTokenizer

STRIDE = 389
NAMES = ["smolvocab-qwen2moe", "smolvocab-qwen3moe", "smolvocab-olmoe", "smolvocab-deepseek2"]

root = sys.argv[1]
tokenizer = AutoTokenizer.from_pretrained(f"{root}/{NAMES[0]}")
tokens = tokenizer.encode("<|im_start|>The capital of France is Paris, and 42 + 1 =")
models = {}
for name in NAMES:
    model = AutoModelForCausalLM.from_pretrained(
        f"{root}/{name}", torch_dtype=torch.float32, attn_implementation="eager"
    )
    scaling = model.config.rope_scaling or {}
    if model.config.model_type == "deepseek_v2" and scaling.get("mscale_all_dim"):
        mscale = 0.1 * scaling["mscale_all_dim"] * math.log(scaling["factor"]) + 1.0
        for layer in model.model.layers:
            layer.self_attn.scaling *= mscale * mscale
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
