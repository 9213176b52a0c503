// reference_ppl.c - llama-perplexity's default algorithm re-done against libllama, with more output.
//
// Part of gguf-model's test data; see README.md in this folder.
//
// llama-perplexity prints only the running perplexity after each chunk, with 4 decimals.  This
// program runs the same computation (tools/perplexity/perplexity.cpp, function perplexity(), at
// llama.cpp 0c1e57098, for the case n_batch == n_ctx, n_seq == 1, no --ppl-stride) and prints
// every scored token's negative log-likelihood, so an engine can be compared token by token:
//
//   text    = the file's bytes, minus ONE trailing '\n' if there is one (common/arg.cpp, -f)
//   tokens  = llama_tokenize(text, add_special = true, parse_special = false)
//   n_chunk = floor(n_tokens / n_ctx)                        (the remainder is ignored)
//   first   = n_ctx / 2
//   chunk c = tokens[c*n_ctx .. (c+1)*n_ctx), decoded from an empty KV cache in ONE batch at
//             positions 0..n_ctx-1; if the vocab has add_bos, the first token of the chunk is
//             replaced by BOS for the decode (SmolLM2: add_bos = false, so nothing is replaced);
//             logits are requested only for positions >= first
//   scored  = positions j = first .. n_ctx-2: the logits at j predict tokens[c*n_ctx + j + 1]
//             (n_ctx - first - 1 tokens per chunk; the logits of position n_ctx-1 are unused)
//   nll     = log(sum_i exp(l_i - max)) + max - l_tok       (float logits, double sum, as llama.cpp)
//   ppl     = exp(sum nll / count), printed after every chunk as the running value
//
// Output: JSON on stdout.
//
// Usage: reference_ppl -m MODEL -f TEXT [-c N_CTX] [-t THREADS] [--commit STR]

#include "llama.h"

#include <math.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void quiet_log(enum ggml_log_level level, const char * text, void * user) {
    (void) user;
    if (level == GGML_LOG_LEVEL_ERROR) {
        fputs(text, stderr);
    }
}

static void die(const char * msg) {
    fprintf(stderr, "reference_ppl: %s\n", msg);
    exit(1);
}

static char * read_all(const char * path, size_t * len) {
    FILE * f = fopen(path, "rb");
    if (!f) {
        die("cannot open text file");
    }
    size_t cap = 1 << 16, n = 0;
    char * buf = malloc(cap + 1);
    for (;;) {
        if (n == cap) {
            cap *= 2;
            buf = realloc(buf, cap + 1);
        }
        size_t r = fread(buf + n, 1, cap - n, f);
        if (r == 0) {
            break;
        }
        n += r;
    }
    fclose(f);
    buf[n] = '\0';
    *len = n;
    return buf;
}

// the same arithmetic as log_softmax() in tools/perplexity/perplexity.cpp, returned as -log p
static double nll_of(const float * logits, int n_vocab, int tok) {
    float max_logit = logits[0];
    for (int i = 1; i < n_vocab; ++i) {
        max_logit = logits[i] > max_logit ? logits[i] : max_logit;
    }
    double sum_exp = 0.0;
    for (int i = 0; i < n_vocab; ++i) {
        sum_exp += expf(logits[i] - max_logit);
    }
    return -(logits[tok] - max_logit - log(sum_exp));
}

int main(int argc, char ** argv) {
    const char * model_path = NULL;
    const char * text_path = NULL;
    const char * commit = "unknown";
    int n_ctx = 128;
    int n_threads = 2;

    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "-m") == 0 && i + 1 < argc) {
            model_path = argv[++i];
        } else if (strcmp(argv[i], "-f") == 0 && i + 1 < argc) {
            text_path = argv[++i];
        } else if (strcmp(argv[i], "-c") == 0 && i + 1 < argc) {
            n_ctx = atoi(argv[++i]);
        } else if (strcmp(argv[i], "-t") == 0 && i + 1 < argc) {
            n_threads = atoi(argv[++i]);
        } else if (strcmp(argv[i], "--commit") == 0 && i + 1 < argc) {
            commit = argv[++i];
        } else {
            fprintf(stderr, "usage: %s -m MODEL -f TEXT [-c N_CTX] [-t THREADS] [--commit STR]\n", argv[0]);
            return 1;
        }
    }
    if (!model_path || !text_path || n_ctx < 4 || n_ctx > 512) {
        die("need -m and -f, and 4 <= n_ctx <= 512 (one ubatch per chunk, as llama-perplexity -b N_CTX)");
    }

    size_t text_len = 0;
    char * text = read_all(text_path, &text_len);
    if (text_len > 0 && text[text_len - 1] == '\n') {
        text[--text_len] = '\0'; // common/arg.cpp's -f handler pops one trailing newline
    }

    llama_log_set(quiet_log, NULL);
    llama_backend_init();

    struct llama_model * model = llama_model_load_from_file(model_path, llama_model_default_params());
    if (!model) {
        die("cannot load model");
    }
    const struct llama_vocab * vocab = llama_model_get_vocab(model);
    const int n_vocab = llama_vocab_n_tokens(vocab);
    const bool add_bos = llama_vocab_get_add_bos(vocab);

    // llama-perplexity -c N -b N: n_parallel = 1, context n_ctx = N, n_batch = N, n_ubatch = min(512, N)
    struct llama_context_params cparams = llama_context_default_params();
    cparams.n_ctx = (uint32_t) n_ctx;
    cparams.n_batch = (uint32_t) n_ctx;
    cparams.n_ubatch = (uint32_t) n_ctx;
    cparams.n_seq_max = 1;
    cparams.n_threads = n_threads;
    cparams.n_threads_batch = n_threads;
    struct llama_context * ctx = llama_init_from_model(model, cparams);
    if (!ctx) {
        die("cannot create context");
    }

    int n_tokens = -llama_tokenize(vocab, text, (int32_t) text_len, NULL, 0, true, false);
    llama_token * tokens = malloc(sizeof(llama_token) * (size_t) n_tokens);
    if (llama_tokenize(vocab, text, (int32_t) text_len, tokens, n_tokens, true, false) != n_tokens) {
        die("tokenize failed");
    }
    if (n_tokens < 2 * n_ctx) {
        die("text too short: llama-perplexity needs at least 2*n_ctx tokens");
    }

    const int n_chunk = n_tokens / n_ctx;
    const int first = n_ctx / 2;
    const int per_chunk = n_ctx - first - 1;

    double * nll_tok = malloc(sizeof(double) * (size_t) n_chunk * (size_t) per_chunk);
    double * chunk_sum = malloc(sizeof(double) * (size_t) n_chunk);
    double * running = malloc(sizeof(double) * (size_t) n_chunk);

    struct llama_batch batch = llama_batch_init(n_ctx, 0, 1);
    double nll = 0.0;
    int count = 0;
    for (int c = 0; c < n_chunk; c++) {
        const int start = c * n_ctx;
        llama_memory_clear(llama_get_memory(ctx), true);
        batch.n_tokens = n_ctx;
        for (int k = 0; k < n_ctx; k++) {
            batch.token[k] = (k == 0 && add_bos) ? llama_vocab_bos(vocab) : tokens[start + k];
            batch.pos[k] = k;
            batch.n_seq_id[k] = 1;
            batch.seq_id[k][0] = 0;
            batch.logits[k] = k >= first;
        }
        if (llama_decode(ctx, batch) != 0) {
            die("decode failed");
        }
        double s = 0.0;
        for (int j = first; j < n_ctx - 1; j++) {
            const float * logits = llama_get_logits_ith(ctx, j);
            const double v = nll_of(logits, n_vocab, tokens[start + j + 1]);
            nll_tok[c * per_chunk + (j - first)] = v;
            s += v;
        }
        chunk_sum[c] = s;
        nll += s;
        count += per_chunk;
        running[c] = exp(nll / count);
        fprintf(stderr, "[%d]%.4f,", c + 1, running[c]);
    }
    fprintf(stderr, "\n");

    printf("{\n  \"generator\": \"reference_ppl.c\",\n  \"llama_cpp_commit\": \"%s\",\n", commit);
    printf("  \"n_ctx\": %d,\n  \"n_threads\": %d,\n  \"add_bos\": %s,\n", n_ctx, n_threads, add_bos ? "true" : "false");
    printf("  \"n_tokens\": %d,\n  \"n_chunk\": %d,\n  \"first\": %d,\n  \"scored_per_chunk\": %d,\n",
           n_tokens, n_chunk, first, per_chunk);
    printf("  \"count\": %d,\n  \"mean_nll\": %.17g,\n  \"ppl\": %.17g,\n", count, nll / count, exp(nll / count));
    printf("  \"chunk_nll_sum\": [");
    for (int c = 0; c < n_chunk; c++) {
        printf("%s%.17g", c ? ", " : "", chunk_sum[c]);
    }
    printf("],\n  \"running_ppl\": [");
    for (int c = 0; c < n_chunk; c++) {
        printf("%s%.17g", c ? ", " : "", running[c]);
    }
    printf("],\n  \"tokens\": [");
    for (int k = 0; k < n_tokens; k++) {
        printf("%s%d", k == 0 ? "" : (k % 32 == 0 ? ",\n    " : ", "), tokens[k]);
    }
    printf("],\n  \"token_nll\": [\n");
    for (int c = 0; c < n_chunk; c++) {
        printf("    [");
        for (int k = 0; k < per_chunk; k++) {
            printf("%s%.9g", k ? ", " : "", nll_tok[c * per_chunk + k]);
        }
        printf("]%s\n", c + 1 < n_chunk ? "," : "");
    }
    printf("  ]\n}\n");

    llama_batch_free(batch);
    free(running);
    free(chunk_sum);
    free(nll_tok);
    free(tokens);
    free(text);
    llama_free(ctx);
    llama_model_free(model);
    llama_backend_free();
    return 0;
}
