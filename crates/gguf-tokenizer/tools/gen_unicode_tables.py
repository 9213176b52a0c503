#!/usr/bin/env python3
"""Generate src/unicode_tables.rs: the code point tables llama.cpp uses for tokenization.

llama.cpp (src/unicode-data.cpp, made by its scripts/gen-unicode-data.py) keeps, per code point:
  * one general-category flag: \\p{N}, \\p{L}, \\p{Z}, \\p{M}, \\p{P}, \\p{S}, \\p{C} or "undefined" (Cn),
    taken from UnicodeData.txt;
  * the White_Space property, a fixed list;
  * the simple lowercase mapping (UnicodeData.txt field 13);
  * an "NFD" map that sends a code point to the FIRST code point of its canonical decomposition
    (this is how llama.cpp strips accents for WordPiece: it is not a full NFD).

The tables in llama.cpp at the commit we follow were generated from Unicode 15.1.0 (CJK Extension I,
U+2EBF0.., is present; U+1C89, new in 16.0, is not). This script therefore insists on 15.1.0: run it
with a Python whose built-in `unicodedata` is 15.1.0 (CPython 3.13), for example

    python3.13 crates/gguf-tokenizer/tools/gen_unicode_tables.py > crates/gguf-tokenizer/src/unicode_tables.rs

`--digest DUMP` prints the digest of llama.cpp's answers that the Rust tests compare against.
Optionally `--verify DUMP` compares the tables against a dump made by `llama_oracle unicode`
(see llama_oracle.cpp) and fails on any difference.
"""

from __future__ import annotations

import sys
import unicodedata

UNICODE_VERSION = "15.1.0"
MAX_CODEPOINTS = 0x110000

# Flag bits, as llama.cpp's unicode_cpt_flags (src/unicode.h).
UNDEFINED = 0x0001
NUMBER = 0x0002
LETTER = 0x0004
SEPARATOR = 0x0008
ACCENT_MARK = 0x0010
PUNCTUATION = 0x0020
SYMBOL = 0x0040
CONTROL = 0x0080
WHITESPACE = 0x0100

CATEGORY_FLAG = {
    "Cn": UNDEFINED,
    "Cc": CONTROL, "Cf": CONTROL, "Co": CONTROL, "Cs": CONTROL,
    "Ll": LETTER, "Lm": LETTER, "Lo": LETTER, "Lt": LETTER, "Lu": LETTER,
    "Mc": ACCENT_MARK, "Me": ACCENT_MARK, "Mn": ACCENT_MARK,
    "Nd": NUMBER, "Nl": NUMBER, "No": NUMBER,
    "Pc": PUNCTUATION, "Pd": PUNCTUATION, "Pe": PUNCTUATION, "Pf": PUNCTUATION,
    "Pi": PUNCTUATION, "Po": PUNCTUATION, "Ps": PUNCTUATION,
    "Sc": SYMBOL, "Sk": SYMBOL, "Sm": SYMBOL, "So": SYMBOL,
    "Zl": SEPARATOR, "Zp": SEPARATOR, "Zs": SEPARATOR,
}

# The White_Space property (PropList.txt); stable since Unicode 6.3 and what llama.cpp lists.
WHITESPACE_CPTS = sorted(
    list(range(0x0009, 0x000D + 1))
    + list(range(0x2000, 0x200A + 1))
    + [0x0020, 0x0085, 0x00A0, 0x1680, 0x2028, 0x2029, 0x202F, 0x205F, 0x3000]
)


def category_flags() -> list[int]:
    return [CATEGORY_FLAG[unicodedata.category(chr(c))] for c in range(MAX_CODEPOINTS)]


def simple_lowercase() -> list[tuple[int, int]]:
    """Simple (one-to-one) lowercase mapping.

    str.lower() gives the full mapping; it differs from the simple one only where SpecialCasing.txt
    has an unconditional lowercase entry, which for lowercasing is U+0130 alone (-> U+0069 U+0307;
    simple: U+0069).
    """
    pairs = []
    for c in range(MAX_CODEPOINTS):
        if 0xD800 <= c <= 0xDFFF:
            continue
        low = chr(c).lower()
        if c == 0x0130:
            assert low == "i\u0307"
            pairs.append((c, 0x69))
            continue
        assert len(low) == 1, hex(c)
        if ord(low) != c:
            pairs.append((c, ord(low)))
    return pairs


def nfd_first() -> list[tuple[int, int]]:
    pairs = []
    for c in range(MAX_CODEPOINTS):
        if 0xD800 <= c <= 0xDFFF:
            continue
        first = ord(unicodedata.normalize("NFD", chr(c))[0])
        if first != c:
            pairs.append((c, first))
    return pairs


def flag_ranges(flags: list[int]) -> list[tuple[int, int]]:
    ranges = [(0, flags[0])]
    for c in range(1, MAX_CODEPOINTS):
        if flags[c] != ranges[-1][1]:
            ranges.append((c, flags[c]))
    return ranges


def nfd_ranges(pairs: list[tuple[int, int]]) -> list[tuple[int, int, int]]:
    # consecutive code points with the same target share one range
    ranges: list[tuple[int, int, int]] = []
    for c, t in pairs:
        if ranges and ranges[-1][1] == c - 1 and ranges[-1][2] == t:
            ranges[-1] = (ranges[-1][0], c, t)
        else:
            ranges.append((c, c, t))
    return ranges


def verify(dump_path: str, flags: list[int], lower: list[tuple[int, int]], nfd: list[tuple[int, int]]) -> None:
    ws = set(WHITESPACE_CPTS)
    full = [f | (WHITESPACE if c in ws else 0) for c, f in enumerate(flags)]
    got_ranges = flag_ranges(full)
    want_ranges, want_lower, want_nfd = [], [], []
    with open(dump_path) as fh:
        for line in fh:
            kind, a, b = line.split()
            if kind == "F":
                if int(a) < MAX_CODEPOINTS:
                    want_ranges.append((int(a), int(b)))
                else:
                    assert int(b) == UNDEFINED, line  # out of range: "undefined"
            elif kind == "L":
                want_lower.append((int(a), int(b)))
            elif kind == "N":
                want_nfd.append((int(a), int(b)))
    problems = 0
    for name, got, want in (("flags", got_ranges, want_ranges), ("lowercase", lower, want_lower), ("nfd", nfd, want_nfd)):
        if got != want:
            problems += 1
            diff = sorted(set(got) ^ set(want))
            print(f"{name}: {len(diff)} differing entries, e.g. {[(hex(x[0]),) + x[1:] for x in diff[:10]]}", file=sys.stderr)
        else:
            print(f"{name}: identical to llama.cpp ({len(got)} entries)", file=sys.stderr)
    if problems:
        sys.exit(1)


def digest(dump_path: str) -> None:
    """Print the FNV-1a-64 digest that unicode.rs's tests recompute from our tables.

    Over every code point 0..0x110000, in order: flags (u16, category and White_Space bits),
    tolower (u32), NFD first code point (u32), little-endian; all taken from a llama_oracle dump,
    so the test checks our tables against llama.cpp's own answers.
    """
    starts, lower, nfd = [], {}, {}
    with open(dump_path) as fh:
        for line in fh:
            kind, a, b = line.split()
            if kind == "F":
                starts.append((int(a), int(b)))
            elif kind == "L":
                lower[int(a)] = int(b)
            elif kind == "N":
                nfd[int(a)] = int(b)
    h = 0xCBF29CE484222325
    k = 0
    for c in range(MAX_CODEPOINTS):
        while k + 1 < len(starts) and starts[k + 1][0] <= c:
            k += 1
        data = starts[k][1].to_bytes(2, "little") + lower.get(c, c).to_bytes(4, "little") + nfd.get(c, c).to_bytes(4, "little")
        for byte in data:
            h = ((h ^ byte) * 0x100000001B3) & 0xFFFFFFFFFFFFFFFF
    print(f"0x{h:016X}")


def main() -> None:
    if len(sys.argv) == 3 and sys.argv[1] == "--digest":
        digest(sys.argv[2])
        return
    if unicodedata.unidata_version != UNICODE_VERSION:
        sys.exit(f"need unicodedata {UNICODE_VERSION} (CPython 3.13), this Python has {unicodedata.unidata_version}")
    flags = category_flags()
    lower = simple_lowercase()
    nfd = nfd_first()
    if len(sys.argv) == 3 and sys.argv[1] == "--verify":
        verify(sys.argv[2], flags, lower, nfd)
        return

    out = []
    w = out.append
    w("// @generated by tools/gen_unicode_tables.py from Unicode " + UNICODE_VERSION + " (do not edit).")
    w("// The same data as llama.cpp's src/unicode-data.cpp; see unicode.rs for how it is used.")
    w("")
    w(f'pub(super) const UNICODE_VERSION: &str = "{UNICODE_VERSION}";')
    w("")
    ws = set(WHITESPACE_CPTS)
    ascii_flags = [flags[c] | (WHITESPACE if c in ws else 0) for c in range(128)]
    w("/// Flags of U+0000..=U+007F, White_Space bit included: the fast path for ASCII.")
    w("#[rustfmt::skip]")
    w("pub(super) static ASCII_FLAGS: [u16; 128] = [")
    for i in range(0, 128, 12):
        w("    " + " ".join(f"0x{f:03X}," for f in ascii_flags[i:i + 12]))
    w("];")
    w("")
    ranges = flag_ranges(flags)
    w("/// `(first code point, category flag)`: each run lasts until the next entry's start, the last")
    w("/// one until U+10FFFF. Sorted by start.")
    w("#[rustfmt::skip]")
    w(f"pub(super) static FLAG_RANGES: [(u32, u16); {len(ranges)}] = [")
    for i in range(0, len(ranges), 6):
        w("    " + " ".join(f"(0x{s:05X}, 0x{f:02X})," for s, f in ranges[i:i + 6]))
    w("];")
    w("")
    w("/// Code points with the White_Space property, sorted.")
    w("#[rustfmt::skip]")
    w(f"pub(super) static WHITESPACE: [u32; {len(WHITESPACE_CPTS)}] = [")
    for i in range(0, len(WHITESPACE_CPTS), 10):
        w("    " + " ".join(f"0x{c:04X}," for c in WHITESPACE_CPTS[i:i + 10]))
    w("];")
    w("")
    w("/// `(code point, simple lowercase)`, sorted by code point.")
    w("#[rustfmt::skip]")
    w(f"pub(super) static LOWERCASE: [(u32, u32); {len(lower)}] = [")
    for i in range(0, len(lower), 6):
        w("    " + " ".join(f"(0x{c:05X}, 0x{t:05X})," for c, t in lower[i:i + 6]))
    w("];")
    w("")
    nr = nfd_ranges(nfd)
    w("/// `(first, last, target)`: code points first..=last map to the first code point of their")
    w("/// canonical decomposition, `target`. Sorted, disjoint.")
    w("#[rustfmt::skip]")
    w(f"pub(super) static NFD_RANGES: [(u32, u32, u32); {len(nr)}] = [")
    for i in range(0, len(nr), 4):
        w("    " + " ".join(f"(0x{a:05X}, 0x{b:05X}, 0x{t:05X})," for a, b, t in nr[i:i + 4]))
    w("];")
    print("\n".join(out))


if __name__ == "__main__":
    main()
