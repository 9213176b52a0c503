#!/usr/bin/env bash
# Regenerates the Gemma 3 270M reference files in this folder (gemma3_*) from llama.cpp, with the
# same two C programs as regenerate.sh. See README.md, "Gemma 3 270M".
#
#   LLAMA_SRC   llama.cpp source tree (headers)      default /work/ref/llama_cpp_python-0.3.36/vendor/llama.cpp
#   LLAMA_BIN   llama.cpp build/bin (tools + .so)    default $LLAMA_SRC/build/bin
#   MODEL       Gemma 3 270M Q4_K_M GGUF             default ~/.cache/gguf/gemma3-270m.gguf
#
# Needs: a C compiler, python3 (standard library only), sha256sum. Takes about 15 minutes on 2 cores.
set -euo pipefail

LLAMA_SRC=${LLAMA_SRC:-/work/ref/llama_cpp_python-0.3.36/vendor/llama.cpp}
LLAMA_BIN=${LLAMA_BIN:-$LLAMA_SRC/build/bin}
MODEL=${MODEL:-$HOME/.cache/gguf/gemma3-270m.gguf}
MODEL_SHA256=a5fd3b62230aa5ec60212297dc9d20eaa70578ac519e00d93a17e44c087a6818
COMMIT=$(git -C "$LLAMA_SRC" rev-parse --short=9 HEAD 2>/dev/null || echo 0c1e57098)

OUT=$(cd "$(dirname "$0")" && pwd)
WORK=$(mktemp -d)
trap 'rm -rf "$WORK"' EXIT
export LD_LIBRARY_PATH=$LLAMA_BIN${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}

echo "model:  $MODEL"
echo "llama:  $LLAMA_SRC @ $COMMIT"
[ "$(sha256sum "$MODEL" | cut -d' ' -f1)" = "$MODEL_SHA256" ] || { echo "model SHA-256 mismatch" >&2; exit 1; }

for prog in reference_greedy reference_ppl; do
    cc -O2 -std=c11 -Wall -Wextra -o "$WORK/$prog" "$OUT/$prog.c" \
        -I"$LLAMA_SRC/include" -I"$LLAMA_SRC/ggml/include" \
        -L"$LLAMA_BIN" -lllama -lggml -lggml-base -lm -Wl,-rpath,"$LLAMA_BIN"
done

# ---------------------------------------------------------------- greedy completions
# The long prompt is the start of ppl_text.txt, cut mid-sentence: more than 512 tokens, so that
# every generated token attends past the sliding window of Gemma 3's local layers.
TEXT=$(cat "$OUT/ppl_text.txt")
PAST_WINDOW="${TEXT%%" was drowned while rowing"*}"
PROMPTS=(
    france        "The capital of France is"
    fibonacci     "def fibonacci(n):"
    counting      "1, 2, 3, 4, 5,"
    list          $'Ingredients for a simple pancake recipe:\n1. Flour\n2.'
    question      $'Question: What is the largest planet in the solar system?\nAnswer:'
    leading_space " Once upon a time"
    past_window   "$PAST_WINDOW"
)
N_CTX=1024
G=( "$WORK/reference_greedy" -m "$MODEL" -n 32 -c $N_CTX --commit "$COMMIT" )
"${G[@]}" -t 1 --first-logits "france=$OUT/gemma3_first_logits_france.f32" "${PROMPTS[@]}" > "$WORK/greedy_t1.json"
"${G[@]}" -t 2 --first-logits "france=$WORK/first_t2.f32" "${PROMPTS[@]}" > "$WORK/greedy_t2.json"
"${G[@]}" -t 1 --kv-f32 --no-flash-attn --first-logits "france=$WORK/first_kvf32_nofa.f32" \
    "${PROMPTS[@]}" > "$WORK/greedy_kvf32_nofa.json"
"${G[@]}" -t 1 --no-flash-attn --first-logits "france=$WORK/first_nofa.f32" \
    "${PROMPTS[@]}" > "$WORK/greedy_nofa.json"
"${G[@]}" -t 1 --prompt-one-by-one "${PROMPTS[@]}" > "$WORK/greedy_one_by_one.json"

# llama-completion itself, for the cross-check of the generated text
i=0
while [ $i -lt ${#PROMPTS[@]} ]; do
    name=${PROMPTS[$i]}; prompt=${PROMPTS[$((i + 1))]}; i=$((i + 2))
    for t in 1 2; do
        "$LLAMA_BIN/llama-completion" -m "$MODEL" -p "$prompt" -n 32 -c $N_CTX -t $t \
            --temp 0 -s 1 -no-cnv --no-warmup </dev/null > "$WORK/lc_${name}_t$t.out" 2>/dev/null
    done
done

# ---------------------------------------------------------------- perplexity
PPL=( "$LLAMA_BIN/llama-perplexity" -m "$MODEL" -f "$OUT/ppl_text.txt" -c 128 -b 128 )
"${PPL[@]}" -t 2                               > "$WORK/ppl_t2.out"       2> "$WORK/ppl_t2.err"
"${PPL[@]}" -t 2 --ppl-output-type 1           > "$WORK/ppl_t2_o1.out"    2> "$WORK/ppl_t2_o1.err"
"${PPL[@]}" -t 1 --ppl-output-type 1           > "$WORK/ppl_t1_o1.out"    2> "$WORK/ppl_t1_o1.err"
"${PPL[@]}" -t 2 -fa off                       > "$WORK/ppl_fa_off.out"   2> "$WORK/ppl_fa_off.err"
"${PPL[@]}" -t 2 -fa off -ctk f32 -ctv f32     > "$WORK/ppl_kvf32.out"    2> "$WORK/ppl_kvf32.err"
"$WORK/reference_ppl" -m "$MODEL" -f "$OUT/ppl_text.txt" -c 128 -t 2 --commit "$COMMIT" \
    > "$WORK/reference_ppl.json" 2>/dev/null

# ---------------------------------------------------------------- assemble the JSON files
WORK=$WORK OUT=$OUT COMMIT=$COMMIT MODEL_SHA256=$MODEL_SHA256 N_CTX=$N_CTX python3 - <<'PY'
import array, json, math, os, re

W, OUT = os.environ["WORK"], os.environ["OUT"]

def load(name):
    with open(os.path.join(W, name), encoding="utf-8") as f:
        return json.load(f)

def dumps(x, ind=0):
    """JSON with short rows: lists of scalars (and lists of such lists) on one line each."""
    sp = "  " * ind
    flat = lambda v: not isinstance(v, (list, dict))
    if isinstance(x, dict):
        return "{\n" + ",\n".join(f"{sp}  {json.dumps(k)}: {dumps(v, ind + 1)}" for k, v in x.items()) + "\n" + sp + "}"
    if isinstance(x, list):
        if all(flat(e) for e in x):
            if len(x) <= 64:
                return json.dumps(x, ensure_ascii=False)
            rows = [", ".join(json.dumps(e) for e in x[i:i + 32]) for i in range(0, len(x), 32)]
            return "[\n" + ",\n".join(sp + "  " + r for r in rows) + "\n" + sp + "]"
        if all(isinstance(e, list) for e in x):
            return "[\n" + ",\n".join(sp + "  " + json.dumps(e, ensure_ascii=False) for e in x) + "\n" + sp + "]"
        return "[\n" + ",\n".join(sp + "  " + dumps(e, ind + 1) for e in x) + "\n" + sp + "]"
    return json.dumps(x, ensure_ascii=False)

def write(name, obj):
    with open(os.path.join(OUT, name), "w", encoding="utf-8") as f:
        f.write(dumps(obj) + "\n")

def first_div(a, b):
    return next((i for i, (x, y) in enumerate(zip(a, b)) if x != y), None if len(a) == len(b) else min(len(a), len(b)))

def f32s(path):
    a = array.array("f")
    with open(path, "rb") as f:
        a.frombytes(f.read())
    return a

def spread(ref, other):
    """How far another llama.cpp configuration's logits are from the default ones."""
    def lse(v):
        m = max(v)
        return m + math.log(sum(math.exp(x - m) for x in v))
    lr, lo = lse(ref), lse(other)
    kl = sum(math.exp(r - lr) * ((r - lr) - (o - lo)) for r, o in zip(ref, other))
    diff = [o - r for r, o in zip(ref, other)]
    mean = sum(diff) / len(diff)
    top = sorted(range(len(ref)), key=lambda i: -ref[i])[:100]
    return {"kl_default_vs_this": kl, "max_abs_diff": max(abs(d) for d in diff), "mean_diff": mean,
            "max_abs_diff_after_mean": max(abs(d - mean) for d in diff),
            "max_abs_logsoftmax_diff_top100": max(abs((other[i] - lo) - (ref[i] - lr)) for i in top),
            "argmax_equal": max(range(len(ref)), key=ref.__getitem__) == max(range(len(other)), key=other.__getitem__)}

# ---- gemma3_greedy.json
g1, g2 = load("greedy_t1.json"), load("greedy_t2.json")
variants = {"kvf32_nofa": load("greedy_kvf32_nofa.json"), "nofa": load("greedy_nofa.json"),
            "prompt_one_by_one": load("greedy_one_by_one.json")}
for r, r2 in zip(g1["results"], g2["results"]):
    exp = (r["prompt"] + r["text"] + "\n\n").encode()
    r["llama_completion_stdout_matches"] = {
        f"t{t}": open(os.path.join(W, f"lc_{r['name']}_t{t}.out"), "rb").read() == exp for t in (1, 2)}
    r["llama_completion_t2_stdout_matches_t2_ids"] = (
        open(os.path.join(W, f"lc_{r['name']}_t2.out"), "rb").read() == (r2["prompt"] + r2["text"] + "\n\n").encode())
    r["top1_margin"] = [round(s[0][1] - s[1][1], 6) for s in r["top5"]]
    r["first_divergence_t2"] = first_div(r["generated_ids"], r2["generated_ids"])
    r["max_top1_logit_diff_t2"] = max(abs(a[0][1] - b[0][1]) for a, b in zip(r["top5"], r2["top5"]))
    for name, v in variants.items():
        other = next(x for x in v["results"] if x["name"] == r["name"])
        r[f"first_divergence_{name}"] = first_div(r["generated_ids"], other["generated_ids"])
        n = min(len(r["top5"]), len(other["top5"]))
        # the top-1 logit of the same step in the other configuration, while the ids agree
        until = r[f"first_divergence_{name}"] if r[f"first_divergence_{name}"] is not None else n
        r[f"max_top1_logit_diff_{name}"] = max((abs(r["top5"][s][0][1] - other["top5"][s][0][1])
                                                for s in range(min(until + 1, n))), default=None)
ref = f32s(os.path.join(OUT, "gemma3_first_logits_france.f32"))
out = {k: v for k, v in g1.items() if k != "results"}
out["n_threads"] = 1
out["model_sha256"] = os.environ["MODEL_SHA256"]
out["note"] = ("-t 1 is the reference: past 512 KV cells, a one-token decode takes ggml's split-KV flash-attention "
               "path, whose partial sums depend on the thread count (see README.md). The t2 fields compare -t 2.")
out["first_logits_file"] = {"prompt": "france", "path": "gemma3_first_logits_france.f32",
                            "format": "n_vocab little-endian f32, logits after the prompt (step 0)",
                            "t2_bit_identical": f32s(os.path.join(W, "first_t2.f32")) == ref,
                            "llama_cpp_spread": {"kvf32_nofa": spread(ref, f32s(os.path.join(W, "first_kvf32_nofa.f32"))),
                                                 "nofa": spread(ref, f32s(os.path.join(W, "first_nofa.f32")))}}
out["llama_completion_command"] = (f"llama-completion -m MODEL -p PROMPT -n 32 -c {os.environ['N_CTX']} -t {{1,2}} "
                                   "--temp 0 -s 1 -no-cnv --no-warmup </dev/null")
out["results"] = g1["results"]
write("gemma3_greedy.json", out)

# ---- gemma3_perplexity.json
def final(errfile):
    m = re.search(r"Final estimate: PPL = ([0-9.]+) \+/- ([0-9.]+)", open(os.path.join(W, errfile)).read())
    return float(m.group(1)), float(m.group(2))

def running(outfile):
    return [float(v) for v in re.findall(r"\[\d+\]([0-9.]+),", open(os.path.join(W, outfile)).read())]

def type1(outfile):
    rows = []
    for line in open(os.path.join(W, outfile)).read().splitlines():
        p = line.split()
        if len(p) == 4 and p[0].isdigit():
            rows.append({"start": int(p[0]), "ppl": float(p[1]), "mean_nll": float(p[2]), "nll_stderr": float(p[3])})
    return rows

rp = load("reference_ppl.json")
ppl, err = final("ppl_t2.err")
run = running("ppl_t2.out")
t1, t2 = type1("ppl_t1_o1.out"), type1("ppl_t2_o1.out")
assert len(run) == rp["n_chunk"] == len(t2)
acc, cnt = 0.0, 0
for c, s in enumerate(rp["chunk_nll_sum"]):
    acc += s; cnt += rp["scored_per_chunk"]
    assert f"{math.exp(acc / cnt):.4f}" == f"{run[c]:.4f}", (c, math.exp(acc / cnt), run[c])
    assert abs(acc / cnt - t2[c]["mean_nll"]) <= 5.01e-7, (c, acc / cnt, t2[c]["mean_nll"])
assert f"{rp['ppl']:.4f}" == f"{ppl:.4f}"
pj = {
    "llama_cpp_commit": os.environ["COMMIT"], "model": "gemma3-270m.gguf", "model_sha256": os.environ["MODEL_SHA256"],
    "text_file": "ppl_text.txt", "command": "llama-perplexity -m MODEL -f ppl_text.txt -c 128 -b 128 -t 2",
    "n_ctx": 128, "n_batch": 128, "n_threads": 2, "n_seq": 1, "add_bos": rp["add_bos"],
    "n_tokens": rp["n_tokens"], "n_chunk": rp["n_chunk"], "first": rp["first"],
    "scored_per_chunk": rp["scored_per_chunk"], "count": rp["count"],
    "final_ppl": ppl, "final_ppl_stderr": err, "running_ppl": run,
    "running_mean_nll": [r["mean_nll"] for r in t2], "running_nll_stderr": [r["nll_stderr"] for r in t2],
    "thread_independent": t1 == t2,
    "reference_ppl_c": {"ppl": rp["ppl"], "mean_nll": rp["mean_nll"], "chunk_nll_sum": rp["chunk_nll_sum"],
                        "note": "per-token values and the token ids are in gemma3_perplexity_tokens.json"},
    "variants": {
        "fa_off": {"command_extra": "-fa off", "final_ppl": final("ppl_fa_off.err")[0], "running_ppl": running("ppl_fa_off.out")},
        "fa_off_kv_f32": {"command_extra": "-fa off -ctk f32 -ctv f32", "final_ppl": final("ppl_kvf32.err")[0],
                          "running_ppl": running("ppl_kvf32.out")},
    },
}
write("gemma3_perplexity.json", pj)
write("gemma3_perplexity_tokens.json", {
    "generator": "reference_ppl.c", "llama_cpp_commit": os.environ["COMMIT"], "n_ctx": rp["n_ctx"],
    "n_tokens": rp["n_tokens"], "n_chunk": rp["n_chunk"], "first": rp["first"], "scored_per_chunk": rp["scored_per_chunk"],
    "note": "token_nll[c][k] = -log p(tokens[c*n_ctx + first + k + 1] | chunk c up to position first + k), "
            "with tokens[c*n_ctx] replaced by BOS for the decode (add_bos)",
    "tokens": rp["tokens"], "token_nll": rp["token_nll"]})

print("greedy:", [(r["name"], len(r["prompt_ids"]), r["llama_completion_stdout_matches"], r["first_divergence_t2"],
                   min(r["top1_margin"])) for r in g1["results"]])
print("first logits spread:", json.dumps(out["first_logits_file"]["llama_cpp_spread"]))
print(f"perplexity: PPL = {ppl} +/- {err}; thread_independent={t1 == t2}; "
      f"fa off {pj['variants']['fa_off']['final_ppl']}, fa off + f32 KV {pj['variants']['fa_off_kv_f32']['final_ppl']}")
PY
