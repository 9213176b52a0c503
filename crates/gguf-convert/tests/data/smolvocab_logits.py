"""Writes smolvocab_hf_logits.json: what Hugging Face transformers computes (float32, eager
attention) for the tiny mixture-of-experts checkpoints with SmolLM2's vocabulary that
`cargo xtask models` derives into the cache (hf/smolvocab-*), on a fixed token list.

transformers' own DeepseekV2Attention (4.57) leaves out the softmax factor mscale² that
DeepSeek's modeling code (and transformers' DeepseekV3Attention) apply under YaRN with
`mscale_all_dim`, and llama.cpp with them; the script applies it, as DeepseekV3Attention does.
gpt-oss' MXFP4 experts need `accelerate` to load, and come dequantized (exactly) to BF16;
llama.cpp multiplies MXFP4 weights by activations rounded to Q8_0 blocks (32 values, a scale of
max|x|/127 in F16), so the experts' two products here take their inputs so rounded too.

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
NAMES = [
    "smolvocab-qwen2moe",
    "smolvocab-qwen3moe",
    "smolvocab-olmoe",
    "smolvocab-deepseek2",
    "smolvocab-gpt-oss",
    "smolvocab-deepseek3",
]

def q8_0(x):
    """x rounded as ggml's quantize_row_q8_0 rounds a row of activations."""
    blocks = x.reshape(*x.shape[:-1], -1, 32)
    amax = blocks.abs().amax(dim=-1, keepdim=True)
    inverse = torch.where(amax > 0, 127.0 / amax, torch.zeros_like(amax))
    scale = (amax / 127.0).half().float()
    return (torch.round(blocks * inverse) * scale).reshape(x.shape)


def gpt_oss_experts_forward(self, hidden_states, router_indices=None, routing_weights=None):
    """transformers' GptOssExperts.forward (its CPU path), with Q8_0-rounded product inputs."""
    batch_size = hidden_states.shape[0]
    hidden_states = hidden_states.reshape(-1, self.hidden_size)
    next_states = torch.zeros_like(hidden_states)
    for token in range(hidden_states.shape[0]):
        x = q8_0(hidden_states[token])
        for expert in router_indices[token]:
            gate_up = x @ self.gate_up_proj[expert] + self.gate_up_proj_bias[expert]
            gate, up = gate_up[..., ::2], gate_up[..., 1::2]
            gate = gate.clamp(min=None, max=self.limit)
            up = up.clamp(min=-self.limit, max=self.limit)
            glu = gate * torch.sigmoid(gate * self.alpha)
            out = q8_0((up + 1) * glu) @ self.down_proj[expert] + self.down_proj_bias[expert]
            next_states[token] += out * routing_weights[token, expert]
    return next_states.view(batch_size, -1, self.hidden_size)


root = sys.argv[1]
tokenizer = AutoTokenizer.from_pretrained(f"{root}/{NAMES[0]}")
tokens = tokenizer.encode("<|im_start|>The capital of France is Paris, and 42 + 1 =")
models = {}
for name in NAMES:
    model = AutoModelForCausalLM.from_pretrained(
        f"{root}/{name}", torch_dtype=torch.float32, attn_implementation="eager"
    ).float()  # gpt-oss' MXFP4 experts come dequantized to BF16 on a CPU
    if model.config.model_type == "gpt_oss":
        for layer in model.model.layers:
            layer.mlp.experts.forward = gpt_oss_experts_forward.__get__(layer.mlp.experts)
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
