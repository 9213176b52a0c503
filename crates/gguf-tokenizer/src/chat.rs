//! Chat templates (minijinja), Hugging Face conventions.
