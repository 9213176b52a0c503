// reference_greedy.c - greedy (argmax) reference generations from llama.cpp's libllama.
//
// Part of gguf-model's test data; see README.md in this folder for how it is built and run.
//
// For every (name, prompt) pair on the command line this program:
//   1. clears the KV cache,
//   2. tokenizes the prompt exactly like llama-completion does
//      (llama_tokenize with add_special = true, parse_special = true; for SmolLM2 this adds
//      no BOS because tokenizer.ggml.add_bos_token = false),
//   3. decodes the whole prompt in ONE batch (positions 0..n-1, logits for the last token only),
//   4. repeats n_predict times: take the logits of the last decoded token, record the top-5
//      (id, logit) pairs, pick the argmax (lowest id wins a tie), and decode that single token
//      at the next position.  The token chosen at the last step is not decoded.
//
// End of generation: by default generation stops as soon as the argmax is an end-of-generation
// token (llama_vocab_is_eog), like llama-completion without --ignore-eos; the EOG id is kept as
// the last generated id and stop_reason is "eog".  With --ignore-eos the EOG tokens are excluded
// from the argmax (like llama-completion --ignore-eos, which gives them a -inf logit bias), and
// the top-5 lists still show the raw logits.
//
// Output: one JSON document on stdout.  With --first-logits NAME=PATH the full logits vector of
// the first generation step of prompt NAME is written to PATH as n_vocab little-endian f32.
//
// Build:
//   cc -O2 -std=c11 -o reference_greedy reference_greedy.c -I$LLAMA/include -I$LLAMA/ggml/include
//      -L$LLAMA_BUILD -lllama -lggml -lggml-base -lm        (one command line; see regenerate.sh)
//
// Usage:
//   reference_greedy -m MODEL [-t THREADS] [-n N_PREDICT] [-c N_CTX] [--ignore-eos]
//                    [--commit STR] [--first-logits NAME=PATH] NAME PROMPT [NAME PROMPT ...]
//   diagnostics (not used for the committed data): --no-flash-attn, --prompt-one-by-one, --kv-f32

#include "llama.h"

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
    fprintf(stderr, "reference_greedy: %s\n", msg);
    exit(1);
}

// JSON string with the bytes copied as they are except for the characters JSON requires to be
// escaped.  Bytes >= 0x80 are copied verbatim (the caller makes sure the text is valid UTF-8,
// see piece handling below).
static void json_str(FILE * f, const char * s, size_t n) {
    fputc('"', f);
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char) s[i];
        switch (c) {
            case '"':  fputs("\\\"", f); break;
            case '\\': fputs("\\\\", f); break;
            case '\n': fputs("\\n", f);  break;
            case '\r': fputs("\\r", f);  break;
            case '\t': fputs("\\t", f);  break;
            default:
                if (c < 0x20) {
                    fprintf(f, "\\u%04x", c);
                } else {
                    fputc(c, f);
                }
        }
    }
    fputc('"', f);
}

// token -> bytes, exactly as llama-completion prints it (special = false, lstrip = 0)
static int piece(const struct llama_vocab * vocab, llama_token t, char * buf, int cap) {
    int n = llama_token_to_piece(vocab, t, buf, cap, 0, false);
    if (n < 0) {
        die("token piece too long");
    }
    return n;
}

typedef struct {
    int   id;
    float logit;
} pair_t;

// top-k by logit (descending), ties broken by the lower id; k is small so insertion is fine
static void topk(const float * logits, int n_vocab, pair_t * out, int k) {
    int have = 0;
    for (int i = 0; i < n_vocab; i++) {
        const float l = logits[i];
        if (have == k && !(l > out[k - 1].logit)) {
            continue;
        }
        int pos = have < k ? have : k - 1;
        while (pos > 0 && l > out[pos - 1].logit) {
            if (pos < k) {
                out[pos] = out[pos - 1];
            }
            pos--;
        }
        out[pos].id = i;
        out[pos].logit = l;
        if (have < k) {
            have++;
        }
    }
}

int main(int argc, char ** argv) {
    const char * model_path = NULL;
    const char * commit = "unknown";
    const char * first_logits_name = NULL;
    const char * first_logits_path = NULL;
    int n_threads = 1;
    int n_predict = 32;
    int n_ctx = 512;
    bool ignore_eos = false;
    bool no_flash_attn = false;  // diagnostic: flash_attn_type = DISABLED instead of AUTO (= enabled on CPU)
    bool one_by_one = false;     // diagnostic: decode the prompt one token per llama_decode call
    bool kv_f32 = false;         // diagnostic: f32 KV cache instead of the default f16

    int i = 1;
    for (; i < argc; i++) {
        const char * a = argv[i];
        if (strcmp(a, "-m") == 0 && i + 1 < argc) {
            model_path = argv[++i];
        } else if (strcmp(a, "-t") == 0 && i + 1 < argc) {
            n_threads = atoi(argv[++i]);
        } else if (strcmp(a, "-n") == 0 && i + 1 < argc) {
            n_predict = atoi(argv[++i]);
        } else if (strcmp(a, "-c") == 0 && i + 1 < argc) {
            n_ctx = atoi(argv[++i]);
        } else if (strcmp(a, "--commit") == 0 && i + 1 < argc) {
            commit = argv[++i];
        } else if (strcmp(a, "--ignore-eos") == 0) {
            ignore_eos = true;
        } else if (strcmp(a, "--no-flash-attn") == 0) {
            no_flash_attn = true;
        } else if (strcmp(a, "--prompt-one-by-one") == 0) {
            one_by_one = true;
        } else if (strcmp(a, "--kv-f32") == 0) {
            kv_f32 = true;
        } else if (strcmp(a, "--first-logits") == 0 && i + 1 < argc) {
            char * spec = argv[++i];
            char * eq = strchr(spec, '=');
            if (!eq) {
                die("--first-logits wants NAME=PATH");
            }
            *eq = '\0';
            first_logits_name = spec;
            first_logits_path = eq + 1;
        } else if (strcmp(a, "--") == 0) {
            i++;
            break;
        } else if (a[0] == '-' && a[1] == '-') {
            die("unknown option");
        } else {
            break;
        }
    }
    if (!model_path || (argc - i) < 2 || (argc - i) % 2 != 0) {
        fprintf(stderr, "usage: %s -m MODEL [-t N] [-n N] [-c N] [--ignore-eos] [--commit S] "
                        "[--first-logits NAME=PATH] NAME PROMPT [NAME PROMPT ...]\n", argv[0]);
        return 1;
    }

    llama_log_set(quiet_log, NULL);
    llama_backend_init();

    struct llama_model_params mparams = llama_model_default_params();
    struct llama_model * model = llama_model_load_from_file(model_path, mparams);
    if (!model) {
        die("cannot load model");
    }
    const struct llama_vocab * vocab = llama_model_get_vocab(model);
    const int n_vocab = llama_vocab_n_tokens(vocab);

    // the same context parameters llama-completion ends up with for `-c N_CTX -t N`
    // (n_batch is clamped to n_ctx there too; flash attention "auto" -> enabled on CPU; f16 KV cache)
    struct llama_context_params cparams = llama_context_default_params();
    cparams.n_ctx           = (uint32_t) n_ctx;
    cparams.n_batch         = (uint32_t) n_ctx;
    cparams.n_ubatch        = 512;
    cparams.n_threads       = n_threads;
    cparams.n_threads_batch = n_threads;
    if (no_flash_attn) {
        cparams.flash_attn_type = LLAMA_FLASH_ATTN_TYPE_DISABLED;
    }
    if (kv_f32) {
        cparams.type_k = GGML_TYPE_F32;
        cparams.type_v = GGML_TYPE_F32;
    }
    struct llama_context * ctx = llama_init_from_model(model, cparams);
    if (!ctx) {
        die("cannot create context");
    }

    FILE * out = stdout;
    fprintf(out, "{\n");
    fprintf(out, "  \"generator\": \"reference_greedy.c\",\n");
    fprintf(out, "  \"llama_cpp_commit\": ");
    json_str(out, commit, strlen(commit));
    fprintf(out, ",\n  \"model\": ");
    {
        const char * base = strrchr(model_path, '/');
        base = base ? base + 1 : model_path;
        json_str(out, base, strlen(base));
    }
    fprintf(out, ",\n  \"n_vocab\": %d,\n", n_vocab);
    fprintf(out, "  \"n_threads\": %d,\n", n_threads);
    fprintf(out, "  \"n_ctx\": %d,\n", n_ctx);
    fprintf(out, "  \"n_predict\": %d,\n", n_predict);
    fprintf(out, "  \"ignore_eos\": %s,\n", ignore_eos ? "true" : "false");
    fprintf(out, "  \"add_bos\": %s,\n", llama_vocab_get_add_bos(vocab) ? "true" : "false");
    fprintf(out, "  \"flash_attn\": \"%s\",\n", no_flash_attn ? "disabled" : "auto (enabled on CPU)");
    fprintf(out, "  \"prompt_decode\": \"%s\",\n", one_by_one ? "one token per llama_decode" : "one batch");
    fprintf(out, "  \"kv_cache_type\": \"%s\",\n", kv_f32 ? "f32" : "f16");
    fprintf(out, "  \"results\": [\n");

    const int max_prompt = n_ctx;
    llama_token * prompt_ids = malloc(sizeof(llama_token) * (size_t) max_prompt);
    llama_token * gen = malloc(sizeof(llama_token) * (size_t) (n_predict + 1));
    pair_t (*top)[5] = malloc(sizeof(pair_t[5]) * (size_t) (n_predict + 1));
    size_t text_cap = 1 << 16;
    char * text = malloc(text_cap);

    for (int p = i; p < argc; p += 2) {
        const char * name = argv[p];
        const char * prompt = argv[p + 1];

        llama_memory_clear(llama_get_memory(ctx), true);

        const int n_prompt = llama_tokenize(vocab, prompt, (int32_t) strlen(prompt), prompt_ids, max_prompt,
                                            /*add_special*/ true, /*parse_special*/ true);
        if (n_prompt <= 0) {
            die("tokenize failed or empty prompt");
        }
        if (n_prompt + n_predict > n_ctx) {
            die("prompt + n_predict does not fit in the context");
        }

        if (!one_by_one) {
            if (llama_decode(ctx, llama_batch_get_one(prompt_ids, n_prompt)) != 0) {
                die("decode (prompt) failed");
            }
        } else {
            for (int k = 0; k < n_prompt; k++) {
                if (llama_decode(ctx, llama_batch_get_one(prompt_ids + k, 1)) != 0) {
                    die("decode (prompt token) failed");
                }
            }
        }

        int n_gen = 0;
        const char * stop_reason = "n_predict";
        for (int step = 0; step < n_predict; step++) {
            const float * logits = llama_get_logits_ith(ctx, -1);
            if (!logits) {
                die("no logits");
            }
            if (step == 0 && first_logits_name && strcmp(first_logits_name, name) == 0) {
                FILE * lf = fopen(first_logits_path, "wb");
                if (!lf) {
                    die("cannot open --first-logits file");
                }
                // x86-64 is little-endian, so the in-memory floats are already the file format
                if (fwrite(logits, sizeof(float), (size_t) n_vocab, lf) != (size_t) n_vocab) {
                    die("short write");
                }
                fclose(lf);
            }
            topk(logits, n_vocab, top[step], 5);

            int best = -1;
            float best_l = 0.0f;
            for (int v = 0; v < n_vocab; v++) {
                if (ignore_eos && llama_vocab_is_eog(vocab, v)) {
                    continue;
                }
                if (best < 0 || logits[v] > best_l) {
                    best = v;
                    best_l = logits[v];
                }
            }
            gen[n_gen++] = best;

            if (!ignore_eos && llama_vocab_is_eog(vocab, best)) {
                stop_reason = "eog";
                break;
            }
            if (step + 1 == n_predict) {
                break; // llama-completion does not decode the last sampled token either
            }
            llama_token t = best;
            if (llama_decode(ctx, llama_batch_get_one(&t, 1)) != 0) {
                die("decode (token) failed");
            }
        }

        // text = concatenated pieces of the generated tokens, EOG tokens render as "" (special = false)
        size_t text_len = 0;
        for (int g = 0; g < n_gen; g++) {
            if (text_len + 256 > text_cap) {
                text_cap *= 2;
                text = realloc(text, text_cap);
            }
            text_len += (size_t) piece(vocab, gen[g], text + text_len, 256);
        }

        fprintf(out, "    {\n      \"name\": ");
        json_str(out, name, strlen(name));
        fprintf(out, ",\n      \"prompt\": ");
        json_str(out, prompt, strlen(prompt));
        fprintf(out, ",\n      \"prompt_ids\": [");
        for (int k = 0; k < n_prompt; k++) {
            fprintf(out, "%s%d", k ? ", " : "", prompt_ids[k]);
        }
        fprintf(out, "],\n      \"generated_ids\": [");
        for (int k = 0; k < n_gen; k++) {
            fprintf(out, "%s%d", k ? ", " : "", gen[k]);
        }
        fprintf(out, "],\n      \"n_generated\": %d,\n", n_gen);
        fprintf(out, "      \"stop_reason\": \"%s\",\n", stop_reason);
        fprintf(out, "      \"text\": ");
        json_str(out, text, text_len);
        fprintf(out, ",\n      \"top5\": [\n");
        for (int s = 0; s < n_gen; s++) {
            fprintf(out, "        [");
            for (int k = 0; k < 5; k++) {
                fprintf(out, "%s[%d, %.9g]", k ? ", " : "", top[s][k].id, (double) top[s][k].logit);
            }
            fprintf(out, "]%s\n", s + 1 < n_gen ? "," : "");
        }
        fprintf(out, "      ]\n    }%s\n", p + 2 < argc ? "," : "");
    }
    fprintf(out, "  ]\n}\n");

    free(text);
    free(top);
    free(gen);
    free(prompt_ids);
    llama_free(ctx);
    llama_model_free(model);
    llama_backend_free();
    return 0;
}
