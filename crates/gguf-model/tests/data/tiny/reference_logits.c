// reference_logits.c - full reference logits of the tiny fixture models from llama.cpp's libllama.
//
// Part of gguf-model's test data; see README.md in this folder (make_reference.sh builds and
// runs it).
//
// For one model and a list of token ids this program:
//   1. loads the model with default model parameters (CPU),
//   2. creates a context with llama_context_default_params() and only n_threads (and
//      n_threads_batch) set to 1: n_ctx 512 (or --n-ctx N), f16 K and V cache, flash attention
//      "auto" (what it resolves to is read from llama.cpp's log and written to the JSON),
//   3. decodes all the tokens in ONE batch (positions 0..n-1, logits requested for every
//      position; --swa below decodes them one at a time instead) and records every position's
//      full logits,
//   4. greedily continues: the argmax of the last logits (lowest id wins a tie) is recorded and
//      decoded alone at the next position, n_predict times (the last pick is not decoded).
//
// Options for the `mistral` fixture, an architecture llama.cpp does not have:
//   --load-as-llama  first tries the file as it is (and records llama.cpp's error), then writes
//                    a copy with general.architecture = "llama" and every `ARCH.*` key renamed
//                    to `llama.*` (tensors unchanged) and loads that.
//   --swa W          emulates sliding-window attention over W positions (a key at position k is
//                    visible to a query at position q when q - k < W, as llama.cpp's
//                    LLAMA_SWA_TYPE_STANDARD masks): tokens are decoded one per llama_decode,
//                    and before decoding position p the cells of positions < p + 1 - W are moved
//                    from sequence 0 to sequence 1 (llama_memory_seq_cp + seq_rm), so the mask
//                    hides them from sequence 0 while they keep their cells (no cell is reused,
//                    so the keys stay in position order for the flash-attention loop). This
//                    needs n_seq_max = 2 and a unified KV cache; nothing else changes.
//
// Conditioning check: the run is repeated in a second context whose eval callback sees every
// place where ggml rounds an activation, and measures how far the value being rounded is from
// the rounding boundary, in float ulps of that value:
//   q8_values    inputs of quantized matrix products (and of the experts' MUL_MAT_ID) scaled for Q8_0/Q8_1 (as ggml's x86 AVX2
//                quantize_row_q8_0/q8_1: scale 127/amax, ties to even) or Q8_K (as
//                quantize_row_q8_K_ref: scale -127/max), against the x.5 boundaries;
//   q8_scales    the Q8_0/Q8_1 block scales amax/127, rounded to f16;
//   q8_sums      the Q8_1 block sums d * sum(q), with d = amax/127 unrounded, rounded to f16 (a
//                one-ulp difference in amax moves d * sum; on a tie that flips the stored sum);
//   f16_qkv      queries (rounded to f16 in flash attention) and keys and values (rounded to f16
//                into the cache);
//   f16_gelu     inputs of GELU and GeGLU, rounded to f16 to look the GELU up in ggml's table
//                (reported only, as f16_qkv: one flip moves one activation by an f16 ulp);
//   q8_attn_out  as q8_values for the input of attn_output, kept apart: ggml accumulates
//                attention outputs in f16 and scales a row by one factor, so values sitting
//                exactly on a boundary (63.5 = half the block maximum) are common there and come
//                out the same in any engine that accumulates as ggml does; only the rounding rule
//                decides them.
// Another engine's activations differ from llama.cpp's by about an ulp (sums in another order).
// A value within a few ulps of a boundary may round the other way there: one step of a quantized
// value or of a block scale moves the logits by far more than the test's tolerance. The smallest
// distance of each kind (with where it is) goes to the JSON under "conditioning"; a fixture whose
// q8_values, q8_scales or q8_sums distance is a few ulps is a coin toss, not a test: pick another
// seed.
//
// Output: one JSON document written to OUT.
//
// Build (see make_reference.sh):
//   cc -O2 -std=c11 -o reference_logits reference_logits.c -I$LLAMA/include -I$LLAMA/ggml/include
//      -L$LLAMA_BUILD -lllama -lggml -lggml-base -lggml-cpu -lm
//
// Usage:
//   reference_logits -m MODEL -o OUT.json --tokens ID,ID,... [-n N_PREDICT] [--commit STR]
//                    [--load-as-llama] [--swa W] [--n-ctx N]
//
// --n-ctx N sets the context length (llama.cpp rounds it up to a multiple of 256); Phi-3 picks
// its LongRoPE factors by it.

#include "ggml-cpu.h"
#include "gguf.h"
#include "llama.h"

#include <math.h>

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

// The whole log, so the flash-attention resolution and load errors can be reported.
static char * g_log = NULL;
static size_t g_log_len = 0;

static void capture_log(enum ggml_log_level level, const char * text, void * user) {
    (void) level;
    (void) user;
    const size_t n = strlen(text);
    g_log = realloc(g_log, g_log_len + n + 1);
    memcpy(g_log + g_log_len, text, n + 1);
    g_log_len += n;
}

static void die(const char * msg) {
    fprintf(stderr, "reference_logits: %s\n", msg);
    if (g_log) {
        fprintf(stderr, "--- llama.cpp log ---\n%s", g_log);
    }
    exit(1);
}

static void json_str(FILE * f, const char * s) {
    fputc('"', f);
    for (; *s; s++) {
        const unsigned char c = (unsigned char) *s;
        if (c == '"' || c == '\\') {
            fputc('\\', f);
            fputc(c, f);
        } else if (c == '\n') {
            fputs("\\n", f);
        } else if (c < 0x20) {
            fprintf(f, "\\u%04x", c);
        } else {
            fputc(c, f);
        }
    }
    fputc('"', f);
}

// The first log line containing `needle` (without its newline), or NULL.
static char * log_line(const char * needle) {
    if (!g_log) {
        return NULL;
    }
    const char * hit = strstr(g_log, needle);
    if (!hit) {
        return NULL;
    }
    const char * start = hit;
    while (start > g_log && start[-1] != '\n') {
        start--;
    }
    const char * end = strchr(hit, '\n');
    const size_t n = end ? (size_t) (end - start) : strlen(start);
    char * line = malloc(n + 1);
    memcpy(line, start, n);
    line[n] = '\0';
    return line;
}

// Writes a copy of `src` whose architecture is "llama": general.architecture replaced and
// every "ARCH.*" key renamed to "llama.*"; tensors copied unchanged.
static void write_as_llama(const char * src, const char * dst, char * arch_out, size_t arch_cap) {
    struct ggml_context * meta = NULL;
    struct gguf_init_params ip = { /*no_alloc*/ false, /*ctx*/ &meta };
    struct gguf_context * in = gguf_init_from_file(src, ip);
    if (!in) {
        die("gguf_init_from_file failed");
    }
    const int64_t arch_id = gguf_find_key(in, "general.architecture");
    if (arch_id < 0) {
        die("no general.architecture");
    }
    const char * arch = gguf_get_val_str(in, arch_id);
    snprintf(arch_out, arch_cap, "%s", arch);
    char prefix[64];
    snprintf(prefix, sizeof prefix, "%s.", arch);
    const size_t plen = strlen(prefix);

    struct gguf_context * out = gguf_init_empty();
    for (int64_t i = 0; i < gguf_get_n_kv(in); i++) {
        const char * key = gguf_get_key(in, i);
        char name[256];
        if (strcmp(key, "general.architecture") == 0) {
            gguf_set_val_str(out, key, "llama");
            continue;
        }
        if (strncmp(key, prefix, plen) == 0) {
            snprintf(name, sizeof name, "llama.%s", key + plen);
        } else {
            snprintf(name, sizeof name, "%s", key);
        }
        switch (gguf_get_kv_type(in, i)) {
            case GGUF_TYPE_UINT32:  gguf_set_val_u32(out, name, gguf_get_val_u32(in, i)); break;
            case GGUF_TYPE_INT32:   gguf_set_val_i32(out, name, gguf_get_val_i32(in, i)); break;
            case GGUF_TYPE_FLOAT32: gguf_set_val_f32(out, name, gguf_get_val_f32(in, i)); break;
            case GGUF_TYPE_BOOL:    gguf_set_val_bool(out, name, gguf_get_val_bool(in, i)); break;
            case GGUF_TYPE_STRING:  gguf_set_val_str(out, name, gguf_get_val_str(in, i)); break;
            case GGUF_TYPE_ARRAY: {
                const enum gguf_type at = gguf_get_arr_type(in, i);
                const size_t n = gguf_get_arr_n(in, i);
                if (at == GGUF_TYPE_STRING) {
                    const char ** strs = malloc(sizeof(char *) * n);
                    for (size_t j = 0; j < n; j++) {
                        strs[j] = gguf_get_arr_str(in, i, j);
                    }
                    gguf_set_arr_str(out, name, strs, n);
                    free(strs);
                } else {
                    gguf_set_arr_data(out, name, at, gguf_get_arr_data(in, i), n);
                }
                break;
            }
            default: die("unexpected metadata type in write_as_llama");
        }
    }
    for (int64_t i = 0; i < gguf_get_n_tensors(in); i++) {
        struct ggml_tensor * t = ggml_get_tensor(meta, gguf_get_tensor_name(in, i));
        if (!t) {
            die("tensor missing from the loaded context");
        }
        gguf_add_tensor(out, t);
    }
    if (!gguf_write_to_file(out, dst, false)) {
        die("gguf_write_to_file failed");
    }
    gguf_free(out);
    gguf_free(in);
    ggml_free(meta);
}

static int argmax(const float * logits, int n_vocab) {
    int best = 0;
    for (int v = 1; v < n_vocab; v++) {
        if (logits[v] > logits[best]) {
            best = v;
        }
    }
    return best;
}

static void decode_one(struct llama_context * ctx, llama_token tok, llama_pos pos) {
    struct llama_batch b = llama_batch_init(1, 0, 1);
    b.n_tokens = 1;
    b.token[0] = tok;
    b.pos[0] = pos;
    b.n_seq_id[0] = 1;
    b.seq_id[0][0] = 0;
    b.logits[0] = 1;
    if (llama_decode(ctx, b) != 0) {
        die("decode (one token) failed");
    }
    llama_batch_free(b);
}

// Hides positions < p + 1 - w from sequence 0 (keeping their cells, under sequence 1).
static void slide_window(struct llama_context * ctx, int p, int w) {
    const int first = p + 1 - w;
    if (first <= 0) {
        return;
    }
    llama_memory_t mem = llama_get_memory(ctx);
    llama_memory_seq_cp(mem, 0, 1, 0, first);
    if (!llama_memory_seq_rm(mem, 0, 0, first)) {
        die("llama_memory_seq_rm failed");
    }
}

// The smallest distance to a rounding boundary, in float ulps of the rounded value.
typedef struct {
    double min_ulps;
    char   where[256];
    long   n_values;
} tie_min;

typedef struct {
    tie_min q8_values;
    tie_min q8_scales;
    tie_min q8_sums;
    tie_min f16_gelu;
    tie_min q8_attn_out;
    tie_min f16_qkv;
    // The last few feed-forward tensors that may be a GELU's input, measured when computed: the
    // GELU may run in place and overwrite its input before the callback sees it.
    const struct ggml_tensor * ffn_t[4];
    tie_min ffn_m[4];
    int ffn_next;
} tie_stats;

static double ulp_of(float v) {
    const float a = fabsf(v);
    return (double) (nextafterf(a, INFINITY) - a);
}

static void tie_note(tie_min * m, double dist_ulps, const char * name, long row, long col, float v) {
    m->n_values++;
    if (dist_ulps < m->min_ulps) {
        m->min_ulps = dist_ulps;
        snprintf(m->where, sizeof m->where, "%s row %ld element %ld: %.9g", name, row, col, (double) v);
    }
}

// Distance of v to the nearest midpoint between f16 values (where f32 -> f16 rounding turns).
static double f16_tie_ulps(float v) {
    const ggml_fp16_t h = ggml_fp32_to_fp16(v);
    const float hv = ggml_fp16_to_fp32(h);
    double best = INFINITY;
    for (int step = -1; step <= 1; step += 2) {
        const float nb = ggml_fp16_to_fp32((ggml_fp16_t) (h + step));
        if (isfinite(nb)) {
            const double mid = ((double) hv + (double) nb) / 2;
            const double d = fabs((double) v - mid) / ulp_of(v);
            if (d < best) {
                best = d;
            }
        }
    }
    return best;
}

static void tie_check_q8_row(tie_stats * st, tie_min * vals, const char * name, long row, const float * x,
                             int64_t n, enum ggml_type act) {
    const int qk = act == GGML_TYPE_Q8_K ? 256 : 32;
    for (int64_t b = 0; b + qk <= n; b += qk) {
        const float * blk = x + b;
        float amax = 0.0f, max = 0.0f;
        for (int j = 0; j < qk; j++) {
            const float ax = fabsf(blk[j]);
            if (ax > amax) {
                amax = ax;
                max = blk[j];
            }
        }
        if (amax == 0.0f) {
            continue;
        }
        if (act != GGML_TYPE_Q8_K) {
            const float d = amax / 127.f;
            tie_note(&st->q8_scales, f16_tie_ulps(d), name, row, (long) b, d);
        }
        const float id = act == GGML_TYPE_Q8_K ? -127.f / max : 127.f / amax;
        int sum = 0;
        for (int j = 0; j < qk; j++) {
            const float v = fabsf(blk[j] * id);
            const double dist = fabs((double) v - floor((double) v) - 0.5) / ulp_of(v);
            tie_note(vals, dist, name, row, (long) (b + j), v);
            sum += (int) nearbyintf(blk[j] * id); // ties to even, as _mm256_round_ps
        }
        if (act == GGML_TYPE_Q8_1) {
            const float s = (amax / 127.f) * (float) sum;
            if (s != 0.0f) {
                tie_note(&st->q8_sums, f16_tie_ulps(s), name, row, (long) b, s);
            }
        }
    }
}

// Every f32 value of `x` that ggml rounds to f16; with `table_only`, only those inside the GELU
// table's range (|v| < 10; outside it GELU needs no lookup).
static void tie_check_f16(tie_min * m, const struct ggml_tensor * x, const char * name, bool table_only) {
    if (x->type != GGML_TYPE_F32) {
        return;
    }
    // Rows of ne[0] values; walk the (possibly permuted) view element by element.
    for (int64_t i3 = 0; i3 < x->ne[3]; i3++) {
        for (int64_t i2 = 0; i2 < x->ne[2]; i2++) {
            for (int64_t i1 = 0; i1 < x->ne[1]; i1++) {
                const char * rowp = (const char *) x->data + i1 * x->nb[1] + i2 * x->nb[2] + i3 * x->nb[3];
                for (int64_t i0 = 0; i0 < x->ne[0]; i0++) {
                    const float v = *(const float *) (rowp + i0 * x->nb[0]);
                    if (table_only && !(fabsf(v) < 10.0f)) {
                        continue;
                    }
                    tie_note(m, f16_tie_ulps(v), name, (long) (i1 + x->ne[1] * (i2 + x->ne[2] * i3)), (long) i0, v);
                }
            }
        }
    }
}

static bool tie_callback(struct ggml_tensor * t, bool ask, void * user) {
    const bool gelu = (t->op == GGML_OP_UNARY && ggml_get_unary_op(t) == GGML_UNARY_OP_GELU) ||
                      (t->op == GGML_OP_GLU && ggml_get_glu_op(t) == GGML_GLU_OP_GEGLU);
    const bool ffn = (t->op == GGML_OP_MUL_MAT || t->op == GGML_OP_ADD) && t->type == GGML_TYPE_F32 &&
                     (strncmp(t->name, "ffn_up", 6) == 0 || strncmp(t->name, "ffn_gate", 8) == 0);
    // MUL_MAT_ID: a mixture of experts' products, whose every input row is quantized as MUL_MAT's.
    const bool wanted = t->op == GGML_OP_MUL_MAT || t->op == GGML_OP_MUL_MAT_ID || t->op == GGML_OP_FLASH_ATTN_EXT ||
                        t->op == GGML_OP_SET_ROWS || gelu || ffn;
    if (ask) {
        return wanted;
    }
    if (!wanted) {
        return true;
    }
    tie_stats * st = user;
    if (ffn) {
        const int k = st->ffn_next++ % 4;
        st->ffn_t[k] = t;
        st->ffn_m[k] = (tie_min) { INFINITY, "", 0 };
        tie_check_f16(&st->ffn_m[k], t, t->name, true);
    }
    if (gelu) {
        // The GELU of src[0] (GeGLU: the gate, src[0] of the split form) is looked up by its f16.
        if (t->src[1] == NULL && t->op == GGML_OP_GLU) {
            die("tie check: a fused GeGLU (one input) is not handled");
        }
        int k = 0;
        while (k < 4 && st->ffn_t[k] != t->src[0]) {
            k++;
        }
        if (k == 4) {
            die("tie check: a GELU's input was not seen computed");
        }
        const tie_min * m = &st->ffn_m[k];
        st->f16_gelu.n_values += m->n_values;
        if (m->min_ulps < st->f16_gelu.min_ulps) {
            st->f16_gelu.min_ulps = m->min_ulps;
            memcpy(st->f16_gelu.where, m->where, sizeof m->where);
        }
        return true;
    }
    if (t->op == GGML_OP_ADD) {
        return true;
    }
    if (t->op == GGML_OP_FLASH_ATTN_EXT) {
        tie_check_f16(&st->f16_qkv, t->src[0], "Q of flash attention", false);
        return true;
    }
    if (t->op == GGML_OP_SET_ROWS) {
        if (t->type == GGML_TYPE_F16) {
            tie_check_f16(&st->f16_qkv, t->src[0], t->name, false);
        }
        return true;
    }
    const struct ggml_tensor * w = t->src[0];
    const struct ggml_tensor * x = t->src[1];
    const enum ggml_type act = ggml_get_type_traits_cpu(w->type)->vec_dot_type;
    if (act != GGML_TYPE_Q8_0 && act != GGML_TYPE_Q8_1 && act != GGML_TYPE_Q8_K) {
        return true;
    }
    // Rows may be strided (latent attention multiplies a permuted view per head), but each
    // row's values must be contiguous f32.
    if (x->type != GGML_TYPE_F32 || x->nb[0] != sizeof(float)) {
        die("tie check: a quantized product's input rows are not contiguous f32");
    }
    const int64_t n = x->ne[0];
    // Attention's output feeds attn_output, or with latent attention first attn_v_b.
    const bool attn_out = strstr(w->name, "attn_output") || strstr(w->name, "attn_v_b");
    tie_min * vals = attn_out ? &st->q8_attn_out : &st->q8_values;
    long r = 0;
    for (int64_t i3 = 0; i3 < x->ne[3]; i3++) {
        for (int64_t i2 = 0; i2 < x->ne[2]; i2++) {
            for (int64_t i1 = 0; i1 < x->ne[1]; i1++, r++) {
                const char * row = (const char *) x->data + i1 * x->nb[1] + i2 * x->nb[2] + i3 * x->nb[3];
                tie_check_q8_row(st, vals, w->name, r, (const float *) row, n, act);
            }
        }
    }
    return true;
}

// A kind of rounding the run never does is written with "min_ulps": null.
static void print_tie(FILE * f, const char * key, const tie_min * m, bool last) {
    if (m->n_values == 0) {
        fprintf(f, "    \"%s\": {\"min_ulps\": null, \"values\": 0, \"where\": \"\"}%s\n", key, last ? "" : ",");
        return;
    }
    fprintf(f, "    \"%s\": {\"min_ulps\": %.3g, \"values\": %ld, \"where\": ", key, m->min_ulps, m->n_values);
    json_str(f, m->where);
    fprintf(f, "}%s\n", last ? "" : ",");
}

// Decodes the prompt (one batch, or one token at a time with the window emulated) and the greedy
// continuation; fills all (n_tokens rows of logits) and greedy.
static void run(struct llama_context * ctx, const llama_token * tokens, int n_tokens, int swa, int n_vocab,
                float * all, int * greedy, int n_predict) {
    llama_memory_clear(llama_get_memory(ctx), true);
    if (swa == 0) {
        struct llama_batch b = llama_batch_init(n_tokens, 0, 1);
        b.n_tokens = n_tokens;
        for (int i = 0; i < n_tokens; i++) {
            b.token[i] = tokens[i];
            b.pos[i] = i;
            b.n_seq_id[i] = 1;
            b.seq_id[i][0] = 0;
            b.logits[i] = 1;
        }
        if (llama_decode(ctx, b) != 0) {
            die("decode (batch) failed");
        }
        llama_batch_free(b);
        for (int i = 0; i < n_tokens; i++) {
            const float * l = llama_get_logits_ith(ctx, i);
            if (!l) {
                die("no logits");
            }
            memcpy(all + (size_t) i * n_vocab, l, sizeof(float) * (size_t) n_vocab);
        }
    } else {
        for (int i = 0; i < n_tokens; i++) {
            slide_window(ctx, i, swa);
            decode_one(ctx, tokens[i], i);
            memcpy(all + (size_t) i * n_vocab, llama_get_logits_ith(ctx, -1), sizeof(float) * (size_t) n_vocab);
        }
    }
    const float * last = all + (size_t) (n_tokens - 1) * n_vocab;
    for (int s = 0; s < n_predict; s++) {
        greedy[s] = argmax(last, n_vocab);
        if (s + 1 == n_predict) {
            break;
        }
        const int pos = n_tokens + s;
        if (swa > 0) {
            slide_window(ctx, pos, swa);
        }
        decode_one(ctx, greedy[s], pos);
        last = llama_get_logits_ith(ctx, -1);
    }
}

static void print_logits(FILE * f, const float * logits, int n_vocab) {
    fputc('[', f);
    for (int v = 0; v < n_vocab; v++) {
        fprintf(f, "%s%.9g", v ? ", " : "", (double) logits[v]);
    }
    fputc(']', f);
}

int main(int argc, char ** argv) {
    const char * model_path = NULL;
    const char * out_path = NULL;
    const char * commit = "unknown";
    const char * token_list = NULL;
    int n_predict = 8;
    bool as_llama = false;
    int swa = 0;
    int n_ctx_req = 0;

    for (int i = 1; i < argc; i++) {
        const char * a = argv[i];
        if (strcmp(a, "-m") == 0 && i + 1 < argc) {
            model_path = argv[++i];
        } else if (strcmp(a, "-o") == 0 && i + 1 < argc) {
            out_path = argv[++i];
        } else if (strcmp(a, "-n") == 0 && i + 1 < argc) {
            n_predict = atoi(argv[++i]);
        } else if (strcmp(a, "--tokens") == 0 && i + 1 < argc) {
            token_list = argv[++i];
        } else if (strcmp(a, "--commit") == 0 && i + 1 < argc) {
            commit = argv[++i];
        } else if (strcmp(a, "--load-as-llama") == 0) {
            as_llama = true;
        } else if (strcmp(a, "--swa") == 0 && i + 1 < argc) {
            swa = atoi(argv[++i]);
        } else if (strcmp(a, "--n-ctx") == 0 && i + 1 < argc) {
            n_ctx_req = atoi(argv[++i]);
            if (n_ctx_req <= 0) {
                die("bad --n-ctx");
            }
        } else {
            fprintf(stderr, "usage: %s -m MODEL -o OUT.json --tokens ID,ID,... [-n N] [--commit S] "
                            "[--load-as-llama] [--swa W] [--n-ctx N]\n", argv[0]);
            return 1;
        }
    }
    if (!model_path || !out_path || !token_list) {
        die("-m, -o and --tokens are required");
    }

    llama_token tokens[256];
    int n_tokens = 0;
    for (const char * s = token_list; *s;) {
        char * end;
        const long v = strtol(s, &end, 10);
        if (end == s || n_tokens == 256) {
            die("bad --tokens");
        }
        tokens[n_tokens++] = (llama_token) v;
        s = *end == ',' ? end + 1 : end;
    }

    llama_log_set(capture_log, NULL);
    llama_backend_init();

    struct llama_model_params mparams = llama_model_default_params();
    const char * load_path = model_path;
    char original_error[1024] = "";
    char arch[64] = "";
    char tmp_path[512] = "";
    if (as_llama) {
        struct llama_model * direct = llama_model_load_from_file(model_path, mparams);
        if (direct) {
            die("--load-as-llama: llama.cpp loaded the file as it is; the option is not needed");
        }
        char * line = log_line("error loading model");
        snprintf(original_error, sizeof original_error, "%s", line ? line : "(no message)");
        free(line);
        snprintf(tmp_path, sizeof tmp_path, "%s.as-llama.gguf", out_path);
        write_as_llama(model_path, tmp_path, arch, sizeof arch);
        load_path = tmp_path;
    }
    struct llama_model * model = llama_model_load_from_file(load_path, mparams);
    if (!model) {
        die("cannot load model");
    }
    if (tmp_path[0]) {
        remove(tmp_path); // the model is in memory (or mapped: unlinking keeps the mapping)
    }
    const struct llama_vocab * vocab = llama_model_get_vocab(model);
    const int n_vocab = llama_vocab_n_tokens(vocab);
    for (int i = 0; i < n_tokens; i++) {
        if (tokens[i] < 0 || tokens[i] >= n_vocab) {
            die("token id out of range");
        }
    }

    struct llama_context_params cparams = llama_context_default_params();
    cparams.n_threads = 1;
    cparams.n_threads_batch = 1;
    if (n_ctx_req > 0) {
        cparams.n_ctx = (uint32_t) n_ctx_req;
    }
    if (swa > 0) {
        cparams.n_seq_max = 2;
        cparams.kv_unified = true;
    }
    const size_t log_before_ctx = g_log_len;
    struct llama_context * ctx = llama_init_from_model(model, cparams);
    if (!ctx) {
        die("cannot create context");
    }
    // What "auto" flash attention resolved to (llama_context: "Flash Attention enabled" or
    // "... not supported, set to disabled").
    const char * fa = "unknown";
    {
        const char * ctx_log = g_log ? g_log + log_before_ctx : "";
        if (strstr(ctx_log, "Flash Attention enabled")) {
            fa = "enabled";
        } else if (strstr(ctx_log, "Flash Attention not supported")) {
            fa = "disabled";
        }
    }

    const int n_ctx = (int) llama_n_ctx(ctx);
    float * all = malloc(sizeof(float) * (size_t) n_vocab * (size_t) n_tokens);
    int * greedy = malloc(sizeof(int) * (size_t) (n_predict > 0 ? n_predict : 1));
    run(ctx, tokens, n_tokens, swa, n_vocab, all, greedy, n_predict);

    // The same run again, with the conditioning check watching every matrix product.
    tie_stats ties = { 0 };
    ties.q8_values.min_ulps = ties.q8_scales.min_ulps = ties.q8_sums.min_ulps = INFINITY;
    ties.f16_gelu.min_ulps = ties.q8_attn_out.min_ulps = ties.f16_qkv.min_ulps = INFINITY;
    {
        struct llama_context_params dparams = cparams;
        dparams.cb_eval = tie_callback;
        dparams.cb_eval_user_data = &ties;
        struct llama_context * dctx = llama_init_from_model(model, dparams);
        if (!dctx) {
            die("cannot create the diagnostic context");
        }
        float * all2 = malloc(sizeof(float) * (size_t) n_vocab * (size_t) n_tokens);
        int * greedy2 = malloc(sizeof(int) * (size_t) (n_predict > 0 ? n_predict : 1));
        run(dctx, tokens, n_tokens, swa, n_vocab, all2, greedy2, n_predict);
        if (memcmp(all, all2, sizeof(float) * (size_t) n_vocab * (size_t) n_tokens) != 0 ||
            memcmp(greedy, greedy2, sizeof(int) * (size_t) n_predict) != 0) {
            die("the diagnostic run computed different logits");
        }
        free(greedy2);
        free(all2);
        llama_free(dctx);
    }

    FILE * f = fopen(out_path, "w");
    if (!f) {
        die("cannot open the output");
    }
    const char * base = strrchr(model_path, '/');
    base = base ? base + 1 : model_path;
    char desc[256];
    fprintf(f, "{\n  \"generator\": \"reference_logits.c\",\n  \"llama_cpp_commit\": ");
    json_str(f, commit);
    fprintf(f, ",\n  \"model\": ");
    json_str(f, base);
    fprintf(f, ",\n  \"loaded_as\": ");
    if (as_llama) {
        snprintf(desc, sizeof desc, "a copy with general.architecture = llama and %s.* keys renamed to llama.*", arch);
        json_str(f, desc);
        fprintf(f, ",\n  \"original_load_error\": ");
        json_str(f, original_error);
    } else {
        json_str(f, "the file as it is");
    }
    fprintf(f, ",\n  \"n_vocab\": %d,\n  \"n_threads\": 1,\n  \"n_ctx\": %d,\n", n_vocab, n_ctx);
    fprintf(f, "  \"kv_cache_type\": \"f16\",\n");
    fprintf(f, "  \"flash_attn\": \"auto, resolved to %s\",\n", fa);
    if (swa > 0) {
        snprintf(desc, sizeof desc,
                 "sliding window of %d emulated: one token per llama_decode, positions < p+1-%d moved out of sequence 0", swa, swa);
    } else {
        snprintf(desc, sizeof desc, "full causal; the %d tokens in one llama_decode batch", n_tokens);
    }
    fprintf(f, "  \"attention\": ");
    json_str(f, desc);
    fprintf(f, ",\n  \"tokens\": [");
    for (int i = 0; i < n_tokens; i++) {
        fprintf(f, "%s%d", i ? ", " : "", tokens[i]);
    }
    fprintf(f, "],\n  \"conditioning\": {\n");
    print_tie(f, "q8_values", &ties.q8_values, false);
    print_tie(f, "q8_scales", &ties.q8_scales, false);
    print_tie(f, "q8_sums", &ties.q8_sums, false);
    print_tie(f, "f16_qkv", &ties.f16_qkv, false);
    print_tie(f, "f16_gelu", &ties.f16_gelu, false);
    print_tie(f, "q8_attn_out", &ties.q8_attn_out, true);
    fprintf(f, "  }");
    fprintf(f, ",\n  \"greedy\": [");
    for (int s = 0; s < n_predict; s++) {
        fprintf(f, "%s%d", s ? ", " : "", greedy[s]);
    }
    fprintf(f, "],\n  \"logits\": [\n");
    for (int i = 0; i < n_tokens; i++) {
        fprintf(f, "    ");
        print_logits(f, all + (size_t) i * n_vocab, n_vocab);
        fprintf(f, "%s\n", i + 1 < n_tokens ? "," : "");
    }
    fprintf(f, "  ]\n}\n");
    fclose(f);

    free(greedy);
    free(all);
    llama_free(ctx);
    llama_model_free(model);
    llama_backend_free();
    free(g_log);
    return 0;
}
