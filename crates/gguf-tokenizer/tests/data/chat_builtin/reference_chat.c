// reference_chat.c - one conversation through llama.cpp's built-in chat templates.
//
// Part of gguf-tokenizer's test data; see README.md in this folder. regenerate.sh runs it once
// per (template, conversation) and collects the results in expected.json.
//
// Usage: reference_chat TEMPLATE ADD_ASS [ROLE CONTENT ...]
//   TEMPLATE  a built-in name of llama_chat_apply_template ("gemma", "chatml", ...)
//   ADD_ASS   1 to end with the assistant's turn header, 0 not to
// Writes the rendered prompt's bytes to stdout, nothing else; exits 1 when llama.cpp refuses.

#include "llama.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int main(int argc, char ** argv) {
    if (argc < 3 || (argc - 3) % 2 != 0) {
        fprintf(stderr, "usage: %s TEMPLATE ADD_ASS [ROLE CONTENT ...]\n", argv[0]);
        return 2;
    }
    const char * tmpl = argv[1];
    const int add_ass = strcmp(argv[2], "1") == 0;
    const size_t n_msg = (size_t) (argc - 3) / 2;
    struct llama_chat_message * msgs = calloc(n_msg ? n_msg : 1, sizeof(*msgs));
    for (size_t i = 0; i < n_msg; i++) {
        msgs[i].role = argv[3 + 2 * i];
        msgs[i].content = argv[4 + 2 * i];
    }
    // the first call sizes the output, the second fills it
    int32_t n = llama_chat_apply_template(tmpl, msgs, n_msg, add_ass, NULL, 0);
    if (n < 0) {
        fprintf(stderr, "reference_chat: llama_chat_apply_template refused (%d)\n", n);
        return 1;
    }
    char * buf = malloc((size_t) n + 1);
    if (llama_chat_apply_template(tmpl, msgs, n_msg, add_ass, buf, n + 1) != n) {
        fprintf(stderr, "reference_chat: the two calls disagree\n");
        return 1;
    }
    fwrite(buf, 1, (size_t) n, stdout);
    free(buf);
    free(msgs);
    return 0;
}
