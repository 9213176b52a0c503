// ggml's CPU flash attention (ggml_flash_attn_ext, f16 K/V, f32 Q, F32 precision) on deterministic
// data, for gguf-model's tiled-attention test (forward.rs, `tiled_attention_equals_ggml_bit_for_bit`).
// 200 cache cells (positions 0..199), 100 queries at positions 100..199 (>= 64: ggml's tiled kernel),
// causal mask, optional sliding window and soft-cap.
// Usage: reference_flash_attn HEAD_DIM N_HEAD N_HEAD_KV WINDOW(0 = none) SOFTCAP THREADS
// Writes /tmp/fa/in.bin (inputs as f32, the test regenerates them) and /tmp/fa/out.bin
// (the output, [token][head][dim] f32). Build against the reference tree's ggml:
//   gcc -O2 reference_flash_attn.c -I$LLAMA_SRC/ggml/include -L$LLAMA_BIN -lggml -lggml-base -lggml-cpu -lm
#include <stdio.h>
#include <stdint.h>
#include <math.h>
#include <string.h>
#include "ggml.h"
#include "ggml-cpu.h"
static uint64_t seed = 0x1234567890ABCDEFull;
static float rnd(void) { seed ^= seed << 13; seed ^= seed >> 7; seed ^= seed << 17; return (float)(seed >> 40) / (float)(1u << 23) - 1.0f; }
#include <stdlib.h>
int main(int argc, char ** argv) {
    const int dk = atoi(argv[1]), dv = dk, hq = atoi(argv[2]), hkv = atoi(argv[3]), nkv = 200, nq = 100, pos0 = 100;
    const int window = atoi(argv[4]); const float softcap = atof(argv[5]); const int nth = atoi(argv[6]);
    struct ggml_init_params ip = { 64u << 20, NULL, false };
    struct ggml_context * ctx = ggml_init(ip);
    struct ggml_tensor * q = ggml_new_tensor_4d(ctx, GGML_TYPE_F32, dk, nq, hq, 1);
    struct ggml_tensor * k = ggml_new_tensor_4d(ctx, GGML_TYPE_F16, dk, nkv, hkv, 1);
    struct ggml_tensor * v = ggml_new_tensor_4d(ctx, GGML_TYPE_F16, dv, nkv, hkv, 1);
    struct ggml_tensor * m = ggml_new_tensor_4d(ctx, GGML_TYPE_F16, nkv, nq, 1, 1);
    FILE * f = fopen("/tmp/fa/in.bin", "wb");
    // keys and values by position (f32 before rounding), then queries by (token, head)
    for (int p = 0; p < nkv; p++) for (int d = 0; d < dk * hkv; d++) { float x = rnd() * 3.0f; fwrite(&x, 4, 1, f); int hh = d / dk, dd = d % dk; ((ggml_fp16_t *) k->data)[(hh * nkv + p) * dk + dd] = ggml_fp32_to_fp16(x); }
    for (int p = 0; p < nkv; p++) for (int d = 0; d < dv * hkv; d++) { float x = rnd(); fwrite(&x, 4, 1, f); int hh = d / dv, dd = d % dv; ((ggml_fp16_t *) v->data)[(hh * nkv + p) * dv + dd] = ggml_fp32_to_fp16(x); }
    for (int i = 0; i < nq; i++) for (int h = 0; h < hq; h++) for (int d = 0; d < dk; d++) { float x = rnd(); fwrite(&x, 4, 1, f); ((float *) q->data)[(h * nq + i) * dk + d] = x; }
    fclose(f);
    for (int i = 0; i < nq; i++) for (int c = 0; c < nkv; c++) ((ggml_fp16_t *) m->data)[i * nkv + c] = ggml_fp32_to_fp16((c <= pos0 + i && (window == 0 || c + window > pos0 + i)) ? 0.0f : -INFINITY);
    struct ggml_tensor * out = ggml_flash_attn_ext(ctx, q, k, v, m, 1.0f / sqrtf(dk), 0.0f, softcap);
        struct ggml_cgraph * gf = ggml_new_graph(ctx);
    ggml_build_forward_expand(gf, out);
    ggml_graph_compute_with_ctx(ctx, gf, nth);
    // out: [dv, hq, nq]
    f = fopen("/tmp/fa/out.bin", "wb");
    fwrite(out->data, 4, dv * hq * nq, f);
    fclose(f);
    printf("ok %f\n", ((float *) out->data)[0]);
    return 0;
}
