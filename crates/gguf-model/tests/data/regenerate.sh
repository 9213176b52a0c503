#!/usr/bin/env bash
# Regenerates every reference file in this folder from llama.cpp. See README.md.
#
#   LLAMA_SRC   llama.cpp source tree (headers)      default /opt/llama-ref/llama_cpp_python-0.3.36/vendor/llama.cpp
#   LLAMA_BIN   llama.cpp build/bin (tools + .so)    default /opt/llama-ref/build/bin
#   MODEL       SmolLM2-135M-Instruct Q4_1 GGUF      default ~/.cache/gguf/smollm2-135m.gguf
#
# Needs: a C compiler, python3 (standard library only), sha256sum. Takes about 5 minutes on 2 cores.
set -euo pipefail

LLAMA_SRC=${LLAMA_SRC:-/opt/llama-ref/llama_cpp_python-0.3.36/vendor/llama.cpp}
LLAMA_BIN=${LLAMA_BIN:-/opt/llama-ref/build/bin}
MODEL=${MODEL:-$HOME/.cache/gguf/smollm2-135m.gguf}
MODEL_SHA256=b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53
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
LONG_PROMPT="The bicycle was invented in the early nineteenth century, although the first machines looked very different from the ones we ride today. They had no pedals, and the rider pushed himself along with his feet, like a child on a scooter. Later designs added pedals to the front wheel, which was made larger and larger to increase speed, until riders sat high above the ground on machines that were dangerous to mount and even more dangerous to fall from. The modern design, with two wheels of equal size and a chain driving the rear wheel,"
PROMPTS=(
    france        "The capital of France is"
    fibonacci     "def fibonacci(n):"
    counting      "1, 2, 3, 4, 5,"
    list          $'Ingredients for a simple pancake recipe:\n1. Flour\n2.'
    question      $'Question: What is the largest planet in the solar system?\nAnswer:'
    leading_space " Once upon a time"
    long_prompt   "$LONG_PROMPT"
)
G=( "$WORK/reference_greedy" -m "$MODEL" -n 32 -c 512 --commit "$COMMIT" )
"${G[@]}" -t 1 --first-logits "france=$OUT/first_logits_france.f32" "${PROMPTS[@]}" > "$WORK/greedy_t1.json"
"${G[@]}" -t 2 --first-logits "france=$WORK/first_logits_france_t2.f32" "${PROMPTS[@]}" > "$WORK/greedy_t2.json"
cmp "$OUT/first_logits_france.f32" "$WORK/first_logits_france_t2.f32" && echo "first logits: -t 1 and -t 2 bit-identical"
"${G[@]}" -t 1 --kv-f32 --no-flash-attn --first-logits "france=$OUT/first_logits_france_kvf32_nofa.f32" \
    "${PROMPTS[@]}" > "$WORK/greedy_kvf32_nofa.json"
"${G[@]}" -t 1 --prompt-one-by-one "${PROMPTS[@]}" > "$WORK/greedy_one_by_one.json"

# llama-completion itself, for the cross-check of the generated text
i=0
while [ $i -lt ${#PROMPTS[@]} ]; do
    name=${PROMPTS[$i]}; prompt=${PROMPTS[$((i + 1))]}; i=$((i + 2))
    for t in 1 2; do
        "$LLAMA_BIN/llama-completion" -m "$MODEL" -p "$prompt" -n 32 -c 512 -t $t \
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
WORK=$WORK OUT=$OUT COMMIT=$COMMIT MODEL_SHA256=$MODEL_SHA256 python3 - <<'PY'
import json, math, os, re

W, OUT = os.environ["WORK"], os.environ["OUT"]

def load(name):
    with open(os.path.join(W, name), encoding="utf-8") as f:
        return json.load(f)

def scalar(x):
    return not isinstance(x, (list, dict))

def dumps(x, ind=0):
    """JSON with short rows: lists of scalars (and lists of small scalar lists) on one line."""
    sp = "  " * ind
    if isinstance(x, dict):
        items = [f'{sp}  {json.dumps(k)}: {dumps(v, ind + 1)}' for k, v in x.items()]
        return "{\n" + ",\n".join(items) + "\n" + sp + "}"
    if isinstance(x, list):
        if all(scalar(e) for e in x):
            if len(x) <= 64:
                return json.dumps(x, ensure_ascii=False)
            rows = [", ".join(json.dumps(e) for e in x[i:i + 32]) for i in range(0, len(x), 32)]
            return "[\n" + ",\n".join(sp + "  " + r for r in rows) + "\n" + sp + "]"
        if all(isinstance(e, list) and all(isinstance(f, list) and all(scalar(g) for g in f) for f in e) for e in x) \
                or all(isinstance(e, list) and all(scalar(f) for f in e) for e in x):
            return "[\n" + ",\n".join(sp + "  " + json.dumps(e, ensure_ascii=False) for e in x) + "\n" + sp + "]"
        return "[\n" + ",\n".join(sp + "  " + dumps(e, ind + 1) for e in x) + "\n" + sp + "]"
    return json.dumps(x, ensure_ascii=False)

def write(name, obj):
    with open(os.path.join(OUT, name), "w", encoding="utf-8") as f:
        f.write(dumps(obj) + "\n")

def first_div(a, b):
    return next((i for i, (x, y) in enumerate(zip(a, b)) if x != y), None if len(a) == len(b) else min(len(a), len(b)))

# ---- greedy.json
g1, g2 = load("greedy_t1.json"), load("greedy_t2.json")
gf, go = load("greedy_kvf32_nofa.json"), load("greedy_one_by_one.json")
thread_independent = all(a["generated_ids"] == b["generated_ids"] and a["top5"] == b["top5"]
                         for a, b in zip(g1["results"], g2["results"]))
for r in g1["results"]:
    exp = (r["prompt"] + r["text"] + "\n\n").encode()
    r["llama_completion_stdout_matches"] = {
        f"t{t}": open(os.path.join(W, f"lc_{r['name']}_t{t}.out"), "rb").read() == exp for t in (1, 2)}
    margins = [round(s[0][1] - s[1][1], 6) for s in r["top5"]]
    r["top1_margin"] = margins
for r, f, o in zip(g1["results"], gf["results"], go["results"]):
    r["first_divergence_kvf32_nofa"] = first_div(r["generated_ids"], f["generated_ids"])
    r["first_divergence_prompt_one_by_one"] = first_div(r["generated_ids"], o["generated_ids"])
    f["first_divergence_from_default"] = r["first_divergence_kvf32_nofa"]
    f["top1_margin"] = [round(s[0][1] - s[1][1], 6) for s in f["top5"]]
out = {k: v for k, v in g1.items() if k != "results"}
out["n_threads"] = [1, 2]
out["thread_independent"] = thread_independent
out["model_sha256"] = os.environ["MODEL_SHA256"]
out["first_logits_file"] = {"prompt": "france", "path": "first_logits_france.f32",
                            "format": "n_vocab little-endian f32, logits after the prompt (step 0)"}
out["llama_completion_command"] = ("llama-completion -m MODEL -p PROMPT -n 32 -c 512 -t {1,2} "
                                   "--temp 0 -s 1 -no-cnv --no-warmup </dev/null")
out["results"] = g1["results"]
write("greedy.json", out)

gf_out = {k: v for k, v in gf.items() if k != "results"}
gf_out["note"] = ("SUPPLEMENTARY, not what llama-completion does by default: f32 KV cache and flash attention off "
                  "(plain f32 attention). See README.md.")
gf_out["model_sha256"] = os.environ["MODEL_SHA256"]
gf_out["first_logits_file"] = {"prompt": "france", "path": "first_logits_france_kvf32_nofa.f32"}
gf_out["results"] = gf["results"]
write("greedy_kvf32_nofa.json", gf_out)

# ---- perplexity.json
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
# reference_ppl.c must reproduce what llama-perplexity printed
acc, cnt = 0.0, 0
for c, s in enumerate(rp["chunk_nll_sum"]):
    acc += s; cnt += rp["scored_per_chunk"]
    assert f"{math.exp(acc / cnt):.4f}" == f"{run[c]:.4f}", (c, math.exp(acc / cnt), run[c])
    assert abs(acc / cnt - t2[c]["mean_nll"]) <= 5.01e-7, (c, acc / cnt, t2[c]["mean_nll"])
assert f"{rp['ppl']:.4f}" == f"{ppl:.4f}"

pj = {
    "llama_cpp_commit": os.environ["COMMIT"],
    "model": "smollm2-135m.gguf",
    "model_sha256": os.environ["MODEL_SHA256"],
    "text_file": "ppl_text.txt",
    "command": "llama-perplexity -m MODEL -f ppl_text.txt -c 128 -b 128 -t 2",
    "n_ctx": 128, "n_batch": 128, "n_threads": 2, "n_seq": 1,
    "add_bos": rp["add_bos"],
    "n_tokens": rp["n_tokens"], "n_chunk": rp["n_chunk"], "first": rp["first"],
    "scored_per_chunk": rp["scored_per_chunk"], "count": rp["count"],
    "final_ppl": ppl, "final_ppl_stderr": err,
    "running_ppl": run,
    "running_mean_nll": [r["mean_nll"] for r in t2],
    "running_nll_stderr": [r["nll_stderr"] for r in t2],
    "thread_independent": t1 == t2,
    "reference_ppl_c": {"ppl": rp["ppl"], "mean_nll": rp["mean_nll"], "chunk_nll_sum": rp["chunk_nll_sum"],
                        "note": "per-token values and the token ids are in perplexity_tokens.json"},
    "variants": {
        "fa_off": {"command_extra": "-fa off", "final_ppl": final("ppl_fa_off.err")[0],
                   "running_ppl": running("ppl_fa_off.out")},
        "fa_off_kv_f32": {"command_extra": "-fa off -ctk f32 -ctv f32", "final_ppl": final("ppl_kvf32.err")[0],
                          "running_ppl": running("ppl_kvf32.out")},
    },
}
write("perplexity.json", pj)
write("perplexity_tokens.json", {
    "generator": "reference_ppl.c", "llama_cpp_commit": os.environ["COMMIT"], "n_ctx": rp["n_ctx"],
    "n_tokens": rp["n_tokens"], "n_chunk": rp["n_chunk"], "first": rp["first"],
    "scored_per_chunk": rp["scored_per_chunk"],
    "note": "token_nll[c][k] = -log p(tokens[c*n_ctx + first + k + 1] | tokens[c*n_ctx .. c*n_ctx + first + k])",
    "tokens": rp["tokens"], "token_nll": rp["token_nll"]})

print(f"greedy: thread_independent={thread_independent}; "
      f"llama-completion text matches: {all(all(r['llama_completion_stdout_matches'].values()) for r in g1['results'])}")
print(f"perplexity: PPL = {ppl} +/- {err}; thread_independent={t1 == t2}; "
      f"fa off {pj['variants']['fa_off']['final_ppl']}, fa off + f32 KV {pj['variants']['fa_off_kv_f32']['final_ppl']}")
PY
