#!/usr/bin/env bash
# Regenerates quantize_imatrix.json: the SHA-256 of what llama-quantize writes with an importance
# matrix, for tests/quantize.rs.
#
#   LLAMA_BIN   llama.cpp build/bin with llama-quantize   default /opt/llama-ref/build/bin
#   GGUF_CACHE  the real models (smollm2-135m.gguf)        default ~/.cache/gguf
#
# The matrices beside this script were made by llama-imatrix of the same build from SmolLM2
# requantized to F32, on the first 8 chunks of 128 tokens of ../../../gguf-model/tests/data/ppl_text.txt:
#   llama-imatrix -m f32.gguf -f ppl_text.txt -o smollm2.imatrix.gguf -c 128 --chunks 8 -t 1
#   (and again with --output-format dat -o smollm2.imatrix.dat)
# llama-quantize runs in this folder and names them relatively, as the test does, because it
# writes the name it was given into the output (quantize.imatrix.file).
set -euo pipefail
# The three the issue names (Q4_K_M, IQ4_XS, IQ2_XS), one file type for each other
# importance-matrix quantizer family: Q5_0, Q4_1 (with Q5_1 inside), Q2_K, Q3_K_M, Q5_K_M
# (Q4_K, Q6_K inside), and every file type of the grid i-quants (IQ1_S ... IQ3_M).
TYPES_GGUF="Q4_K_M IQ4_XS IQ2_XS Q5_0 Q4_1 Q2_K Q3_K_M Q5_K_M IQ1_S IQ1_M IQ2_XXS IQ2_S IQ2_M IQ3_XXS IQ3_XS IQ3_S IQ3_M"
TYPES_DAT="Q4_K_M"
LLAMA_BIN=${LLAMA_BIN:-/opt/llama-ref/build/bin}
CACHE=${GGUF_CACHE:-$HOME/.cache/gguf}
HERE=$(cd "$(dirname "$0")" && pwd)
WORK=$(mktemp -d)
trap 'rm -rf "$WORK"' EXIT
Q() { "$LLAMA_BIN/llama-quantize" "$@" > "$WORK/log" 2>&1 || { tail -5 "$WORK/log" >&2; return 1; }; }
SHA() { sha256sum "$1" | cut -d' ' -f1; }
cd "$HERE"
Q --allow-requantize "$CACHE/smollm2-135m.gguf" "$WORK/f32.gguf" F32 2
{
  echo "{"
  echo "  \"generator\": \"regenerate_quantize_imatrix.sh\","
  echo "  \"llama_quantize\": \"$LLAMA_BIN/llama-quantize (llama.cpp 0c1e57098)\","
  printf '  "gguf": {'
  sep=""
  for t in $TYPES_GGUF; do
    Q --imatrix smollm2.imatrix.gguf "$WORK/f32.gguf" "$WORK/out.gguf" "$t" 2
    printf '%s"%s": "%s"' "$sep" "$t" "$(SHA "$WORK/out.gguf")"
    sep=", "
  done
  echo "},"
  printf '  "dat": {'
  sep=""
  for t in $TYPES_DAT; do
    Q --imatrix smollm2.imatrix.dat "$WORK/f32.gguf" "$WORK/out.gguf" "$t" 2
    printf '%s"%s": "%s"' "$sep" "$t" "$(SHA "$WORK/out.gguf")"
    sep=", "
  done
  echo "},"
  Q --imatrix smollm2.imatrix.gguf --exclude-weights ffn_down "$WORK/f32.gguf" "$WORK/out.gguf" Q4_K_M 2
  echo "  \"gguf_exclude_ffn_down_Q4_K_M\": \"$(SHA "$WORK/out.gguf")\""
  echo "}"
} > "$WORK/quantize_imatrix.json"
python3 -m json.tool "$WORK/quantize_imatrix.json" > /dev/null
mv "$WORK/quantize_imatrix.json" "$HERE/quantize_imatrix.json"
echo "wrote $HERE/quantize_imatrix.json"
