#!/usr/bin/env bash
# Regenerates expected.json: llama.cpp's built-in chat templates (llama_chat_apply_template, the
# C++ formatter llama.cpp uses for a template named on its command line) rendering the
# conversations listed below. See README.md.
#
#   LLAMA_SRC   llama.cpp source tree (headers)      default /work/ref/llama_cpp_python-0.3.36/vendor/llama.cpp
#   LLAMA_BIN   llama.cpp build/bin (libllama.so)    default $LLAMA_SRC/build/bin
#
# Needs a C compiler and python3 (standard library only). No model is needed.
set -euo pipefail

LLAMA_SRC=${LLAMA_SRC:-/work/ref/llama_cpp_python-0.3.36/vendor/llama.cpp}
LLAMA_BIN=${LLAMA_BIN:-$LLAMA_SRC/build/bin}
COMMIT=$(git -C "$LLAMA_SRC" rev-parse --short=9 HEAD 2>/dev/null || echo 0c1e57098)

OUT=$(cd "$(dirname "$0")" && pwd)
WORK=$(mktemp -d)
trap 'rm -rf "$WORK"' EXIT

cc -O2 -std=c11 -Wall -Wextra -o "$WORK/reference_chat" "$OUT/reference_chat.c" \
    -I"$LLAMA_SRC/include" -I"$LLAMA_SRC/ggml/include" \
    -L"$LLAMA_BIN" -lllama -lggml -lggml-base -Wl,-rpath,"$LLAMA_BIN"

PROG=$WORK/reference_chat OUT=$OUT COMMIT=$COMMIT python3 - <<'PY'
import json, os, subprocess

# (name, messages). Every conversation is rendered by every template, with and without the
# assistant's turn header at the end.
CASES = [
    ("basic", [("system", "You are a helpful assistant."), ("user", "Hello!"),
               ("assistant", "Hi there. How can I help?"), ("user", "What is the capital of France?")]),
    ("user_only", [("user", "What is the capital of France?")]),
    ("whitespace", [("user", "  \t Hello, \n world!\n\n"), ("assistant", "\n Hi. \r\n"),
                    ("user", "\x0b\x0ccontrol whitespace\x0c\x0b")]),
    ("unicode_whitespace", [("user", "\u00a0non-breaking\u00a0"), ("assistant", "\u2003em space\u3000")]),
    ("two_systems", [("system", " First. "), ("system", "Second."), ("user", "Go.")]),
    ("system_after_user", [("user", "One."), ("assistant", "Two."), ("system", "Be brief."), ("user", "Three.")]),
    ("system_then_assistant", [("system", "Rules."), ("assistant", "I start."), ("user", "Fine.")]),
    ("system_only", [("system", "Nothing else.")]),
    ("other_roles", [("user", "Call it."), ("tool", "{\"ok\": true}"), ("assistant", "Done.")]),
    ("empty_content", [("user", ""), ("assistant", "")]),
    ("unicode", [("user", "Grüße aus Köln! 你好 🌍"), ("assistant", "¡Hola! こんにちは")]),
    ("markers_in_text", [("user", "<start_of_turn>model\n<|im_end|> {{ not jinja }} {% raw %}")]),
]
TEMPLATES = ["chatml", "gemma", "llama3", "phi3"]

out = {"generator": "reference_chat.c (llama_chat_apply_template)", "llama_cpp_commit": os.environ["COMMIT"],
       "templates": TEMPLATES, "cases": []}
for name, msgs in CASES:
    for tmpl in TEMPLATES:
        for add_ass in (True, False):
            args = [os.environ["PROG"], tmpl, "1" if add_ass else "0"]
            for role, content in msgs:
                args += [role, content]
            rendered = subprocess.run(args, check=True, capture_output=True).stdout.decode("utf-8")
            out["cases"].append({"name": name, "template": tmpl, "add_generation_prompt": add_ass,
                                 "messages": [{"role": r, "content": c} for r, c in msgs],
                                 "expected": rendered})
with open(os.path.join(os.environ["OUT"], "expected.json"), "w", encoding="utf-8") as f:
    json.dump(out, f, ensure_ascii=False, indent=1)
    f.write("\n")
print(f"{len(out['cases'])} renderings written")
PY
