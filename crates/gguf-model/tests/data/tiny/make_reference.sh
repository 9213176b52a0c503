#!/bin/sh
# Regenerates the llama.cpp reference logits of the tiny fixture models (fixtures/model-*.gguf,
# written by `cargo xtask fixtures`) into this folder. See README.md.
#
#   LLAMA=/path/to/llama.cpp LLAMA_BUILD=/path/to/build/bin ./make_reference.sh
set -eu

here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../../../../.." && pwd)
LLAMA=${LLAMA:-/opt/llama-ref/llama_cpp_python-0.3.36/vendor/llama.cpp}
LLAMA_BUILD=${LLAMA_BUILD:-/opt/llama-ref/build/bin}
commit=$(git -C "$LLAMA" rev-parse HEAD 2>/dev/null || echo unknown)

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
cc -O2 -std=c11 -Wall -Wextra -o "$tmp/reference_logits" "$here/reference_logits.c" \
    -I"$LLAMA/include" -I"$LLAMA/ggml/include" \
    -L"$LLAMA_BUILD" -lllama -lggml -lggml-base -lggml-cpu -lm
run() {
    LD_LIBRARY_PATH="$LLAMA_BUILD${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}" \
        "$tmp/reference_logits" --commit "$commit" -n 8 "$@"
}

# 20 token ids per vocabulary (seeded random picks; the SentencePiece ones start with BOS).
spm=1,243,96,299,158,105,212,138,275,128,328,258,184,215,272,318,114,161,281,172
bpe=265,38,374,105,352,385,372,239,363,334,75,272,108,210,29,178,321,213,238,63

run -m "$root/fixtures/model-llama.gguf" -o "$here/model-llama.json" --tokens "$spm"
run -m "$root/fixtures/model-qwen2.gguf" -o "$here/model-qwen2.json" --tokens "$bpe"
run -m "$root/fixtures/model-qwen3.gguf" -o "$here/model-qwen3.json" --tokens "$bpe"
run -m "$root/fixtures/model-gemma.gguf" -o "$here/model-gemma.json" --tokens "$spm"
run -m "$root/fixtures/model-gemma2.gguf" -o "$here/model-gemma2.json" --tokens "$spm"
run -m "$root/fixtures/model-gemma3.gguf" -o "$here/model-gemma3.json" --tokens "$spm"
run -m "$root/fixtures/model-phi2.gguf" -o "$here/model-phi2.json" --tokens "$bpe"
# Phi-3's LongRoPE factors depend on the context: 512 > original 256 takes the long ones,
# 256 the short ones.
run -m "$root/fixtures/model-phi3.gguf" -o "$here/model-phi3.json" --tokens "$spm"
run -m "$root/fixtures/model-phi3.gguf" -o "$here/model-phi3-short.json" --tokens "$spm" \
    --n-ctx 256
# Mixtures of experts (Mixtral is `llama` with experts).
run -m "$root/fixtures/model-mixtral.gguf" -o "$here/model-mixtral.json" --tokens "$spm"
run -m "$root/fixtures/model-qwen2moe.gguf" -o "$here/model-qwen2moe.json" --tokens "$bpe"
run -m "$root/fixtures/model-qwen3moe.gguf" -o "$here/model-qwen3moe.json" --tokens "$bpe"
run -m "$root/fixtures/model-olmoe.gguf" -o "$here/model-olmoe.json" --tokens "$bpe"
run -m "$root/fixtures/model-phimoe.gguf" -o "$here/model-phimoe.json" --tokens "$spm"
run -m "$root/fixtures/model-granite.gguf" -o "$here/model-granite.json" --tokens "$spm"
run -m "$root/fixtures/model-granitemoe.gguf" -o "$here/model-granitemoe.json" --tokens "$spm"
run -m "$root/fixtures/model-gpt-oss.gguf" -o "$here/model-gpt-oss.json" --tokens "$bpe"
run -m "$root/fixtures/model-deepseek2.gguf" -o "$here/model-deepseek2.json" --tokens "$bpe"
# llama.cpp has no `mistral` architecture: the same weights loaded as `llama`, once with the
# sliding window emulated (what gguf-model must give) and once with llama.cpp's full attention.
run -m "$root/fixtures/model-mistral.gguf" -o "$here/model-mistral.json" --tokens "$spm" \
    --load-as-llama --swa 8
run -m "$root/fixtures/model-mistral.gguf" -o "$here/model-mistral-full.json" --tokens "$spm" \
    --load-as-llama
echo "wrote $here/model-*.json"
