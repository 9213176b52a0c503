#!/usr/bin/env bash
# Regenerates quantize.json: the SHA-256 of what llama-quantize writes, for tests/quantize.rs.
#
#   LLAMA_BIN   llama.cpp build/bin with llama-quantize   default /opt/llama-ref/build/bin
#   GGUF_CACHE  the real models (smollm2-135m.gguf, gemma3-270m.gguf)   default ~/.cache/gguf
#
# Every file is made by llama-quantize alone: the tiny fixtures of tests (requantized), SmolLM2
# requantized to F32, every file type from that F32 and from its F16, and Gemma 3
# requantized to Q4_K_M and Q8_0. About 10 minutes on 2 cores.
set -euo pipefail
LLAMA_BIN=${LLAMA_BIN:-/opt/llama-ref/build/bin}
CACHE=${GGUF_CACHE:-$HOME/.cache/gguf}
HERE=$(cd "$(dirname "$0")" && pwd)
FIXTURES=$HERE/../../../../fixtures
WORK=$(mktemp -d)
trap 'rm -rf "$WORK"' EXIT
Q() { "$LLAMA_BIN/llama-quantize" "$@" > "$WORK/log" 2>&1 || { tail -5 "$WORK/log" >&2; return 1; }; }
SHA() { sha256sum "$1" | cut -d' ' -f1; }

TINY_TYPES="Q4_0 Q4_1 Q5_0 Q5_1 Q8_0 Q2_K Q3_K_M Q4_K_S Q4_K_M Q5_K_M Q6_K IQ4_NL IQ4_XS TQ2_0 MXFP4_MOE F16 BF16 F32"
ALL_TYPES="Q4_0 Q4_1 Q5_0 Q5_1 Q8_0 Q2_K Q3_K_S Q3_K_M Q3_K_L Q4_K_S Q4_K_M Q5_K_S Q5_K_M Q6_K IQ4_NL IQ4_XS IQ3_S IQ3_M TQ1_0 TQ2_0 MXFP4_MOE F16 BF16 F32 Q2_0"
F16_TYPES="$ALL_TYPES"

{
  echo "{"
  echo "  \"generator\": \"regenerate_quantize.sh\","
  echo "  \"llama_quantize\": \"$LLAMA_BIN/llama-quantize (llama.cpp 0c1e57098)\","
  echo "  \"tiny\": {"
  first_model=1
  # mistral is missing: llama.cpp knows no such architecture (it reads Mistral files as llama).
  for model in gemma gemma2 gemma3 llama phi2 phi3 qwen2 qwen3 \
      mixtral qwen2moe qwen3moe olmoe phimoe granite granitemoe; do
    [ $first_model = 1 ] || echo ","
    first_model=0
    printf '    "model-%s.gguf": {' "$model"
    sep=""
    for t in $TINY_TYPES; do
      Q --allow-requantize "$FIXTURES/model-$model.gguf" "$WORK/out.gguf" "$t" 1
      printf '%s"%s": "%s"' "$sep" "$t" "$(SHA "$WORK/out.gguf")"
      sep=", "
    done
    printf '}'
  done
  echo ""
  echo "  },"
  Q --allow-requantize "$CACHE/smollm2-135m.gguf" "$WORK/f32.gguf" F32 2
  Q "$WORK/f32.gguf" "$WORK/f16.gguf" F16 2
  echo "  \"smollm2_f32\": \"$(SHA "$WORK/f32.gguf")\","
  printf '  "smollm2_from_f32": {'
  sep=""
  for t in $ALL_TYPES; do
    Q "$WORK/f32.gguf" "$WORK/out.gguf" "$t" 2
    printf '%s"%s": "%s"' "$sep" "$t" "$(SHA "$WORK/out.gguf")"
    sep=", "
  done
  echo "},"
  printf '  "smollm2_from_f16": {'
  sep=""
  for t in $F16_TYPES; do
    Q "$WORK/f16.gguf" "$WORK/out.gguf" "$t" 2
    printf '%s"%s": "%s"' "$sep" "$t" "$(SHA "$WORK/out.gguf")"
    sep=", "
  done
  echo "},"
  printf '  "gemma3": {'
  sep=""
  for t in Q4_K_M Q8_0; do
    Q --allow-requantize "$CACHE/gemma3-270m.gguf" "$WORK/out.gguf" "$t" 2
    printf '%s"%s": "%s"' "$sep" "$t" "$(SHA "$WORK/out.gguf")"
    sep=", "
  done
  echo "}"
  echo "}"
} > "$WORK/quantize.json"
python3 -m json.tool "$WORK/quantize.json" > /dev/null
mv "$WORK/quantize.json" "$HERE/quantize.json"
echo "wrote $HERE/quantize.json"
