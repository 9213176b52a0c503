// Asks llama.cpp's `llama_detokenize` for the text of token lists; make_reference.py builds and
// runs it. A development tool only: nothing in the crate builds or links it.
//
//   cc -I$LLAMA/include -I$LLAMA/ggml/include detokenize.c -L$BUILD/bin -lllama -Wl,-rpath,$BUILD/bin
//   detokenize MODEL < requests
//
// Each request line is "<remove_special 0|1> <unparse_special 0|1> <id> <id> ..."; each answer
// line is the text's bytes in hex (an empty line for no text).
#include "llama.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void quiet(enum ggml_log_level level, const char * text, void * user_data) {
    (void) level;
    (void) text;
    (void) user_data;
}

int main(int argc, char ** argv) {
    if (argc != 2) {
        fprintf(stderr, "usage: %s MODEL < requests\n", argv[0]);
        return 2;
    }
    llama_log_set(quiet, NULL);
    llama_backend_init();
    struct llama_model_params params = llama_model_default_params();
    params.vocab_only = true;
    struct llama_model * model = llama_model_load_from_file(argv[1], params);
    if (!model) {
        fprintf(stderr, "cannot load %s\n", argv[1]);
        return 1;
    }
    const struct llama_vocab * vocab = llama_model_get_vocab(model);

    static char line[1 << 20];
    static llama_token ids[1 << 17];
    static char text[1 << 22];
    while (fgets(line, sizeof line, stdin)) {
        char * p = line;
        int remove_special = (int) strtol(p, &p, 10);
        int unparse_special = (int) strtol(p, &p, 10);
        int n = 0;
        for (;;) {
            char * end;
            long id = strtol(p, &end, 10);
            if (end == p) {
                break;
            }
            ids[n++] = (llama_token) id;
            p = end;
        }
        int32_t len = llama_detokenize(vocab, ids, n, text, (int32_t) sizeof text, remove_special != 0,
                                       unparse_special != 0);
        if (len < 0) {
            fprintf(stderr, "text too long\n");
            return 1;
        }
        for (int32_t i = 0; i < len; ++i) {
            printf("%02x", (unsigned char) text[i]);
        }
        printf("\n");
        fflush(stdout);
    }
    llama_model_free(model);
    llama_backend_free();
    return 0;
}
