//! Pre-tokenizers: splitting text into words before BPE, as llama.cpp does per `tokenizer.ggml.pre`.
