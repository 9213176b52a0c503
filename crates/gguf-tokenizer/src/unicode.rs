//! Unicode code point properties used by the pre-tokenizers.
