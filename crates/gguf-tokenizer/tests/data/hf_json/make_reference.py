#!/usr/bin/env python3
"""Tokenizer.json files and Hugging Face `tokenizers` reference ids for `tests/hf_json.rs`.

Two steps:

  python3 make_reference.py --train   # (re)train tokenizers/*.json on the shared corpus
  python3 make_reference.py           # write inputs.json and reference/*.json from them

Training is only needed to change the tokenizers; the committed `tokenizers/*.json` are the
source of truth (`cargo xtask fixtures` embeds each in `fixtures/tokenizer-hf-NAME.gguf`, and
the reference is computed from those exact files). Needs `tokenizers` (made with 0.23.3).

Every tokenizer is trained with the `tokenizers` trainers on the valid-UTF-8 files of
`../corpus/` plus the TRAIN_TEXT below, then given the normalizer, pre-tokenizer, added tokens,
post-processor and decoder of a real model family:

  gpt2        ByteLevel(use_regex) byte-level BPE, merges written as "a b" strings, an
              lstrip+rstrip special token, a single_word added token, added tokens past the
              model vocabulary
  llama3      Split(Llama 3 regex) + ByteLevel(use_regex=false), ignore_merges, Llama 3
              special tokens, TemplateProcessing "<|begin_of_text|> $A"
  qwen2       NFC + Split(Qwen2 regex) + ByteLevel(use_regex=false), ChatML tokens,
              non-special `<think>` tokens
  smollm      Digits(individual) + ByteLevel(use_regex), StarCoder/SmolLM style
  llama2      SentencePiece-style BPE: Prepend("▁") + Replace(" ", "▁") normalizer, no
              pre-tokenizer, byte_fallback with <0xNN> tokens, fuse_unk, "<s> $A"
  metaspace   Metaspace(prepend_scheme=first, split=true) + Lowercase normalizer, no byte
              fallback (unknown characters become <unk>), "<s> $A </s>"
  bert        BertNormalizer + BertPreTokenizer + WordPiece, "[CLS] $A [SEP]"

and variants of those with other parts (same vocabulary and merges):

  bytelevel-prefix  gpt2 with NFD + StripAccents + Strip(right), ByteLevel(add_prefix_space),
                    RobertaProcessing
  spm-always        llama2 with Replace("  ", " ") + NFC + Lowercase, Punctuation(merged with
                    previous) + Digits + Metaspace(always, split=false), ignore_merges,
                    BertProcessing
  bert-cased        bert with BertNormalizer(cased, strip_accents, no Chinese handling),
                    WhitespaceSplit + CharDelimiterSplit + Split("'", merged with next) +
                    Punctuation(contiguous), no post-processor

Inputs: the valid-UTF-8 corpus files, INPUTS below and RANDOM_COUNT random strings (fixed seed),
all but the corpus written to inputs.json.

Modes recorded per input (the input is the file's text, so only valid UTF-8):
  default           encode(text, add_special_tokens=True)
  no_special        encode(text, add_special_tokens=False)
  no_parse_special  encode_special_tokens = True (special added tokens are not matched),
                    add_special_tokens=True
plus `decoded`: decode(no_special ids, skip_special_tokens=False).
"""

from __future__ import annotations

import argparse
import hashlib
import json
import random
from pathlib import Path

import tokenizers
from tokenizers import (
    AddedToken,
    Regex,
    Tokenizer,
    decoders,
    models,
    normalizers,
    pre_tokenizers,
    processors,
    trainers,
)

HERE = Path(__file__).resolve().parent
CORPUS = HERE.parent / "corpus"
TOKENIZERS = HERE / "tokenizers"
REFERENCE = HERE / "reference"

LLAMA3_REGEX = (
    r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*"
    r"|\s*[\r\n]+|\s+(?!\S)|\s+"
)
QWEN2_REGEX = (
    r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*"
    r"|\s*[\r\n]+|\s+(?!\S)|\s+"
)

TRAIN_TEXT = """\
The quick brown fox jumps over the lazy dog. It's a test of the tokenizer, isn't it?
Hello world! Hello, World. HELLO WORLD. hello there, general Kenobi.
In 2024, the model was trained on 1,234,567 tokens; it scored 98.6% on the benchmark.
def main():
    print("hello world")
    return 0
The café serves crème brûlée and naïve piñatas. Über straße, déjà vu.
Привет, мир! Как дела? 你好，世界。こんにちは世界。안녕하세요 세계.
They're going to the store, we'll see what they've got. I'm sure you'd like it.
""" * 3

# Inputs of our own (the corpus files are read from ../corpus/).
INPUTS: dict[str, str] = {
    "empty": "",
    "one_space": " ",
    "spaces": "   leading and trailing   ",
    "space_runs": "a  b   c    d\t\te\n\n\nf \n g",
    "hello": "Hello world",
    "hello_lower": "hello world",
    "newlines": "line one\nline two\r\nline three\n\n",
    "contractions": "I'm you're we'll they've DON'T it'S O'Neill 'tis",
    "numbers": "1 12 123 1234 12345 3.14159 1,000,000 ٣٤٥ ４５６",
    "accents_nfc": "café naïve résumé",
    "accents_nfd": "cafe\u0301 nai\u0308ve re\u0301sume\u0301 A\u030a \u212b",
    "hangul_jamo": "\u1100\u1161\u11a8 \uac01 \u1112\u1161\u11ab",
    "cjk": "中文字符和English混合123",
    "emoji": "I ❤️ 🦀 and 👨‍👩‍👧",
    "unknown_chars": "ⓐⓑⓒ ∮ ⅷ 𝔘𝔫𝔦𝔠𝔬𝔡𝔢 ꙮ",
    "bos_eos": "<s>Hello</s> <s> </s>",
    "unk_text": "<unk> <unk><unk>",
    "endoftext": "Hello<|endoftext|>world <|endoftext|> <|endoftext|>",
    "chatml": "<|im_start|>user\nHi there<|im_end|>\n<|im_start|>assistant\n",
    "llama3_chat": "<|begin_of_text|><|start_header_id|>user<|end_header_id|>\n\nHi<|eot_id|>",
    "mask_strip": "The capital is   <mask>   , or <mask>.",
    "single_word": "hello world, ahello world, hello worlds, hello world",
    "user_tokens": "<|tool|>call<|tool|> <think>hmm</think> [INST] do it [/INST]",
    "normalized_added": "ABC XYZ then abc xyz then ABC XYZ",
    "overlap": "<|im_start|im_end|> <|end_of_text|> <<s>> </s/>",
    "bert_specials": "[CLS] hello [SEP] [MASK] [PAD] [UNK]",
    "bert_text": "Héllo, WORLD! Don't. 中文 über-cool (test) résumé",
    "long_word": "a" * 120 + " " + "antidisestablishmentarianism" * 5,
    "controls": "a\u0000b\u0007c\u200bd\ufeffe\u00adf",
    "punctuation": "Wait... what?! \"Quoted\" (parens) [brackets] {braces} -- em—dash",
    "code": "fn main() {\n    let x = vec![1, 2, 3];\n    println!(\"{x:?}\");\n}\n",
    "tabs": "\tindented\n\t\tmore\n    spaces",
}


# Random inputs: pieces of text, special-token texts and odd characters glued together.
RANDOM_COUNT = 200
RANDOM_CHARS = (
    list("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789")
    + list(" \t\n\r  ") * 4
    + list(".,!?'\"()-_:;/\\@#$%^&*[]{}<>|~`=+")
    + ["é", "ü", "ß", "ẞ", "İ", "ı", "ſ", "\u212a", "Å", "\u212b", "\u0301", "\u0308", "\u0327",
       "\u0323", "\u05b0", "ा", "ि", "क", "中", "文", "日", "本", "가", "\u1100", "\u1161", "\u11a8",
       "한", "ㄱ", "😀", "👨\u200d👩\u200d👧", "🇫🇷", "\u200b", "\u200d", "\ufeff", "\u00a0", "\u3000",
       "\u2028", "\u0085", "½", "²", "①", "٣", "４", "Ⅷ", "ﬁ", "Ω", "\u2126", "ǅ", "ᾈ", "\u0345",
       "\u0000", "\u0007", "\u00ad", "\ufffd", "\U0001d518", "ꙮ", "\u0e01", "\u0e33"]
)
RANDOM_WORDS = [
    "hello", "world", "Hello", "HELLO", "the", "The", "'s", "'t", "'re", "I'm", "don't", "DON'T",
    "café", "naïve", "123", "4567", "  ", "   ", "\n\n", "<s>", "</s>", "<unk>", "<|endoftext|>",
    "<|im_start|>", "<|im_end|>", "<|begin_of_text|>", "<|eot_id|>", "<mask>", "hello world",
    "<|tool|>", "<think>", "</think>", "[INST]", "[/INST]", "ABC XYZ", "abc xyz", "[CLS]", "[SEP]",
    "[MASK]", "[PAD]", "[UNK]", " <mask> ", "<<s>>", "<|im_start|im_end|>",
]


def random_inputs() -> dict[str, str]:
    rng = random.Random(20240611)
    out = {}
    for i in range(RANDOM_COUNT):
        parts = [
            rng.choice(RANDOM_WORDS) if rng.random() < 0.3 else rng.choice(RANDOM_CHARS)
            for _ in range(rng.randint(0, 40))
        ]
        out[f"random_{i:03}"] = "".join(parts)
    return out


def corpus_texts() -> dict[str, str]:
    out = {}
    for p in sorted(CORPUS.iterdir()):
        if p.name.startswith("."):
            continue
        try:
            out[p.name] = p.read_bytes().decode("utf-8")
        except UnicodeDecodeError:
            continue  # Hugging Face takes str: invalid UTF-8 has no reference
    return out


def training_texts() -> list[str]:
    texts = list(corpus_texts().values())
    texts.extend(TRAIN_TEXT.splitlines(keepends=True))
    return texts


def added(content: str, special: bool, **kw) -> AddedToken:
    return AddedToken(content, special=special, normalized=kw.pop("normalized", not special), **kw)


def with_byte_tokens(tok: Tokenizer, specials: list[str]) -> Tokenizer:
    """Rebuilds a trained BPE with `specials`, then <0x00>..<0xFF>, then the trained vocabulary
    (the layout of Llama's tokenizer.json)."""
    j = json.loads(tok.to_str())
    vocab: dict[str, int] = j["model"]["vocab"]
    order = specials + [f"<0x{b:02X}>" for b in range(256)]
    order += [t for t, _ in sorted(vocab.items(), key=lambda kv: kv[1]) if t not in order]
    j["model"]["vocab"] = {t: i for i, t in enumerate(order)}
    j["added_tokens"] = []
    return Tokenizer.from_str(json.dumps(j))


def byte_level_bpe(pre, vocab_size: int, specials: list[str], **model_kw) -> Tokenizer:
    tok = Tokenizer(models.BPE(**model_kw))
    tok.pre_tokenizer = pre
    tr = trainers.BpeTrainer(
        vocab_size=vocab_size,
        special_tokens=specials,
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    tok.train_from_iterator(training_texts(), tr)
    tok.decoder = decoders.ByteLevel()
    return tok


def train_gpt2() -> Tokenizer:
    pre = pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True)
    tok = byte_level_bpe(pre, 700, ["<|endoftext|>"])
    tok.post_processor = processors.ByteLevel(trim_offsets=False)
    tok.add_special_tokens([added("<mask>", True, lstrip=True, rstrip=True)])
    tok.add_tokens([
        added("hello world", False, single_word=True),
        added("<|tool|>", False, normalized=False),
    ])
    return tok


def train_llama3() -> Tokenizer:
    pre = pre_tokenizers.Sequence([
        pre_tokenizers.Split(Regex(LLAMA3_REGEX), behavior="isolated", invert=False),
        pre_tokenizers.ByteLevel(add_prefix_space=False, trim_offsets=True, use_regex=False),
    ])
    specials = ["<|begin_of_text|>", "<|end_of_text|>", "<|start_header_id|>",
                "<|end_header_id|>", "<|eot_id|>", "<|reserved_special_token_0|>"]
    tok = byte_level_bpe(pre, 800, [], ignore_merges=True)
    tok.add_special_tokens([added(s, True) for s in specials])
    tok.post_processor = processors.Sequence([
        processors.ByteLevel(trim_offsets=False),
        processors.TemplateProcessing(
            single="<|begin_of_text|> $A",
            pair="<|begin_of_text|> $A <|begin_of_text|> $B:1",
            special_tokens=[("<|begin_of_text|>", tok.token_to_id("<|begin_of_text|>"))],
        ),
    ])
    return tok


def train_qwen2() -> Tokenizer:
    pre = pre_tokenizers.Sequence([
        pre_tokenizers.Split(Regex(QWEN2_REGEX), behavior="isolated", invert=False),
        pre_tokenizers.ByteLevel(add_prefix_space=False, trim_offsets=False, use_regex=False),
    ])
    tok = byte_level_bpe(pre, 650, [])
    tok.normalizer = normalizers.NFC()
    tok.add_special_tokens([added(s, True) for s in ["<|endoftext|>", "<|im_start|>", "<|im_end|>"]])
    tok.add_tokens([added("<think>", False), added("</think>", False)])
    tok.post_processor = processors.ByteLevel(trim_offsets=False)
    return tok


def train_smollm() -> Tokenizer:
    pre = pre_tokenizers.Sequence([
        pre_tokenizers.Digits(individual_digits=True),
        pre_tokenizers.ByteLevel(add_prefix_space=False, trim_offsets=True, use_regex=True),
    ])
    tok = byte_level_bpe(pre, 600, ["<|endoftext|>", "<|im_start|>", "<|im_end|>"])
    return tok


def spm_bpe(pre, vocab_size: int, limit_alphabet: int, **model_kw) -> Tokenizer:
    tok = Tokenizer(models.BPE(**model_kw))
    tok.pre_tokenizer = pre
    tr = trainers.BpeTrainer(
        vocab_size=vocab_size,
        special_tokens=["<unk>", "<s>", "</s>"],
        limit_alphabet=limit_alphabet,
        show_progress=False,
    )
    tok.train_from_iterator(training_texts(), tr)
    return tok


def train_llama2() -> Tokenizer:
    # Trained on Metaspace words (as SentencePiece splits on whitespace), then given Llama 2's
    # tokenizer.json pipeline: the normalizer does the ▁ work and there is no pre-tokenizer.
    pre = pre_tokenizers.Metaspace(replacement="▁", prepend_scheme="always", split=True)
    tok = spm_bpe(pre, 700, 150, byte_fallback=True, unk_token="<unk>", fuse_unk=True)
    tok = with_byte_tokens(tok, ["<unk>", "<s>", "</s>"])
    tok.normalizer = normalizers.Sequence([normalizers.Prepend("▁"), normalizers.Replace(" ", "▁")])
    tok.pre_tokenizer = None
    tok.decoder = decoders.Sequence([
        decoders.Replace("▁", " "), decoders.ByteFallback(), decoders.Fuse(), decoders.Strip(" ", 1, 0),
    ])
    tok.add_special_tokens([added(s, True) for s in ["<unk>", "<s>", "</s>"]])
    tok.add_special_tokens([added("[INST]", True), added("[/INST]", True)])
    tok.add_tokens([added("ABC XYZ", False, normalized=True), added("<|tool|>", False, normalized=False)])
    tok.post_processor = processors.TemplateProcessing(
        single="<s> $A", pair="<s> $A $B", special_tokens=[("<s>", 1)]
    )
    return tok


def train_metaspace() -> Tokenizer:
    pre = pre_tokenizers.Metaspace(replacement="▁", prepend_scheme="first", split=True)
    tok = spm_bpe(pre, 500, 120, byte_fallback=False, unk_token="<unk>", fuse_unk=False)
    tok.normalizer = normalizers.Lowercase()
    tok.decoder = decoders.Metaspace(replacement="▁", prepend_scheme="first", split=True)
    tok.add_special_tokens([added(s, True) for s in ["<unk>", "<s>", "</s>"]])
    tok.add_special_tokens([added("<mask>", True, lstrip=True)])
    tok.add_tokens([added("ABC XYZ", False, normalized=True)])
    tok.post_processor = processors.TemplateProcessing(
        single="<s> $A </s>", pair="<s> $A </s> $B </s>", special_tokens=[("<s>", 1), ("</s>", 2)]
    )
    return tok


def train_bert() -> Tokenizer:
    tok = Tokenizer(models.WordPiece(unk_token="[UNK]", max_input_chars_per_word=100))
    tok.normalizer = normalizers.BertNormalizer(
        clean_text=True, handle_chinese_chars=True, strip_accents=None, lowercase=True
    )
    tok.pre_tokenizer = pre_tokenizers.BertPreTokenizer()
    specials = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]
    tr = trainers.WordPieceTrainer(
        vocab_size=600, special_tokens=specials, limit_alphabet=300, show_progress=False
    )
    tok.train_from_iterator(training_texts(), tr)
    tok.decoder = decoders.WordPiece(prefix="##", cleanup=True)
    tok.post_processor = processors.TemplateProcessing(
        single="[CLS] $A [SEP]",
        pair="[CLS] $A [SEP] $B:1 [SEP]:1",
        special_tokens=[("[CLS]", tok.token_to_id("[CLS]")), ("[SEP]", tok.token_to_id("[SEP]"))],
    )
    return tok


def variant(base: str, **parts) -> Tokenizer:
    """A trained tokenizer with other pipeline parts (objects, or None to remove one)."""
    j = json.loads((TOKENIZERS / f"{base}.json").read_text(encoding="utf-8"))
    for key, value in parts.items():
        if key == "model":
            j["model"].update(value)
        else:
            j[key] = None if value is None else json.loads(value.__getstate__())
    return Tokenizer.from_str(json.dumps(j))


def variant_bytelevel_prefix() -> Tokenizer:
    # ByteLevel with add_prefix_space, a RoBERTa post-processor, and normalizers that strip.
    return variant(
        "gpt2",
        normalizer=normalizers.Sequence([
            normalizers.NFD(), normalizers.StripAccents(), normalizers.Strip(left=False, right=True),
        ]),
        pre_tokenizer=pre_tokenizers.ByteLevel(add_prefix_space=True, use_regex=True),
        post_processor=processors.RobertaProcessing(("<|endoftext|>", 0), ("<mask>", 700)),
    )


def variant_spm_always() -> Tokenizer:
    # Metaspace(always, split=false) after punctuation and digit splits; Bert-style processor.
    return variant(
        "llama2",
        normalizer=normalizers.Sequence([
            normalizers.Replace("  ", " "), normalizers.NFC(), normalizers.Lowercase(),
        ]),
        pre_tokenizer=pre_tokenizers.Sequence([
            pre_tokenizers.Punctuation(behavior="merged_with_previous"),
            pre_tokenizers.Digits(individual_digits=False),
            pre_tokenizers.Metaspace(replacement="▁", prepend_scheme="always", split=False),
        ]),
        post_processor=processors.BertProcessing(("</s>", 2), ("<s>", 1)),
        model={"ignore_merges": True},
    )


def variant_bert_cased() -> Tokenizer:
    return variant(
        "bert",
        normalizer=normalizers.BertNormalizer(
            clean_text=True, handle_chinese_chars=False, strip_accents=True, lowercase=False
        ),
        pre_tokenizer=pre_tokenizers.Sequence([
            pre_tokenizers.WhitespaceSplit(),
            pre_tokenizers.CharDelimiterSplit("-"),
            pre_tokenizers.Split("'", behavior="merged_with_next"),
            pre_tokenizers.Punctuation(behavior="contiguous"),
        ]),
    )


TRAINERS = {
    "gpt2": train_gpt2,
    "llama3": train_llama3,
    "qwen2": train_qwen2,
    "smollm": train_smollm,
    "llama2": train_llama2,
    "metaspace": train_metaspace,
    "bert": train_bert,
}

# Made from the trained ones above (so after them).
VARIANTS = {
    "bytelevel-prefix": variant_bytelevel_prefix,
    "spm-always": variant_spm_always,
    "bert-cased": variant_bert_cased,
}


def merges_as_strings(path: Path) -> None:
    """GPT-2's tokenizer.json writes merges as "a b" strings; the others keep pairs."""
    j = json.loads(path.read_text(encoding="utf-8"))
    j["model"]["merges"] = [" ".join(m) if isinstance(m, list) else m for m in j["model"]["merges"]]
    path.write_text(json.dumps(j, ensure_ascii=False, indent=1) + "\n", encoding="utf-8")


def train() -> None:
    TOKENIZERS.mkdir(exist_ok=True)
    for name, fn in TRAINERS.items():
        tok = fn()
        path = TOKENIZERS / f"{name}.json"
        j = json.loads(tok.to_str())
        path.write_text(json.dumps(j, ensure_ascii=False, indent=1) + "\n", encoding="utf-8")
        if name == "gpt2":
            merges_as_strings(path)
        print(f"wrote {path} ({tok.get_vocab_size()} tokens)")
    variants()


def variants() -> None:
    for name, fn in VARIANTS.items():
        tok = fn()
        path = TOKENIZERS / f"{name}.json"
        path.write_text(json.dumps(json.loads(tok.to_str()), ensure_ascii=False, indent=1) + "\n",
                        encoding="utf-8")
        print(f"wrote {path} (variant)")


def fnv1a64(data: bytes) -> str:
    h = 0xCBF29CE484222325
    for b in data:
        h = ((h ^ b) * 0x100000001B3) & 0xFFFFFFFFFFFFFFFF
    return f"{h:016x}"


def all_inputs() -> dict[str, str]:
    out = {f"corpus/{k}": v for k, v in corpus_texts().items()}
    out.update({f"input/{k}": v for k, v in own_inputs().items()})
    return out


def own_inputs() -> dict[str, str]:
    return {**INPUTS, **random_inputs()}


def reference() -> None:
    REFERENCE.mkdir(exist_ok=True)
    (HERE / "inputs.json").write_text(
        json.dumps(own_inputs(), ensure_ascii=False, indent=1) + "\n", encoding="utf-8"
    )
    inputs = all_inputs()
    for path in sorted(TOKENIZERS.glob("*.json")):
        name = path.stem
        raw = path.read_bytes()
        tok = Tokenizer.from_str(raw.decode("utf-8"))
        samples = {}
        for key, text in inputs.items():
            tok.encode_special_tokens = False
            default = tok.encode(text, add_special_tokens=True).ids
            no_special = tok.encode(text, add_special_tokens=False).ids
            tok.encode_special_tokens = True
            no_parse = tok.encode(text, add_special_tokens=True).ids
            tok.encode_special_tokens = False
            samples[key] = {
                "default": default,
                "no_special": no_special,
                "no_parse_special": no_parse,
                "decoded": tok.decode(no_special, skip_special_tokens=False),
            }
        head = {
            "tokenizers_version": tokenizers.__version__,
            "tokenizer_json_sha256": hashlib.sha256(raw).hexdigest(),
            "tokenizer_json_fnv1a64": fnv1a64(raw),
            "vocab_size": tok.get_vocab_size(),
        }
        # One line per sample keeps the file small and its diffs readable.
        lines = [f" {json.dumps(k)}: {json.dumps(v, ensure_ascii=False)}," for k, v in head.items()]
        lines.append(' "samples": {')
        items = [f"  {json.dumps(k, ensure_ascii=False)}: {json.dumps(v, ensure_ascii=False, separators=(',', ':'))}"
                 for k, v in samples.items()]
        lines.append(",\n".join(items))
        lines.append(" }")
        dest = REFERENCE / f"{name}.json"
        dest.write_text("{\n" + "\n".join(lines) + "\n}\n", encoding="utf-8")
        print(f"wrote {dest} ({len(samples)} samples)")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--train", action="store_true", help="retrain tokenizers/*.json first")
    ap.add_argument("--variants", action="store_true", help="rewrite the variants only")
    args = ap.parse_args()
    if args.train:
        train()
    elif args.variants:
        variants()
    reference()


if __name__ == "__main__":
    main()
