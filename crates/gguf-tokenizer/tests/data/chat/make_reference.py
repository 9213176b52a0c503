#!/usr/bin/env python3
"""Render every chat template in templates/, and the small inline templates of INLINE, with Hugging
Face transformers itself and store the prompts (or the errors) in expected.json, which
tests/chat_templates.rs compares byte for byte. The inline templates' sources are stored there too.

    python3 -m pip install transformers gguf   # no model is downloaded
    python3 crates/gguf-tokenizer/tests/data/chat/make_reference.py

The pipeline is the one `PreTrainedTokenizerBase.apply_chat_template` runs: the messages go through
`_normalize_chat_messages` (keys whose value is None are dropped), then `render_jinja_template`
with `tools`, `documents=None`, `add_generation_prompt`, the special tokens and the extra keyword
variables. Only the clock is pinned: `strftime_now` renders a fixed date so the output is stable.

The default template of a real model (`tokenizer.chat_template` of SmolLM2-135M) is read from the
cached GGUF file when it is there ($GGUF_CACHE or ~/.cache/gguf) and saved next to the others.
"""

import datetime
import json
import os
import sys
import traceback
from pathlib import Path

import jinja2
import transformers
from transformers.utils import chat_template_utils as ctu

HERE = Path(__file__).resolve().parent
TEMPLATES = HERE / "templates"

# The clock `strftime_now` reads; the Rust test passes the same instant.
NOW = datetime.datetime(2024, 7, 6, 14, 5, 9)

# Real models whose default template is read from the GGUF file.
REAL_MODELS = {"smollm2-135m": "smollm2-135m"}

# name -> (bos_token, eos_token)
TOKENS = {
    "chatml": ("<s>", "</s>"),
    "llama3-instruct": ("<|begin_of_text|>", "<|eot_id|>"),
    "llama3.2-tools": ("<|begin_of_text|>", "<|eot_id|>"),
    "mistral-v0.3-tools": ("<s>", "</s>"),
    "qwen2.5-tools": ("<|endoftext|>", "<|im_end|>"),
    "qwen3-style": ("<|endoftext|>", "<|im_end|>"),
    "phi3": ("<s>", "<|endoftext|>"),
    "deepseek-r1": ("<｜begin▁of▁sentence｜>", "<｜end▁of▁sentence｜>"),
    "gemma3": ("<bos>", "<eos>"),
    "smollm2-135m": ("<|im_start|>", "<|im_end|>"),
    "smollm3-generation": ("<|im_start|>", "<|im_end|>"),
    "features-whitespace": ("<s>", "</s>"),
    "features-values": ("<s>", "</s>"),
    "features-strings": ("<s>", "</s>"),
    "features-control": ("<s>", "</s>"),
    "features-tojson": ("<s>", "</s>"),
    "features-misc": ("<s>", "</s>"),
    "tools-guarded": ("<s>", "</s>"),
    "tools-unguarded": ("<s>", "</s>"),
}

WEATHER_TOOL = {
    "type": "function",
    "function": {
        "name": "get_weather",
        "description": "Get the current weather in a given location",
        "parameters": {
            "type": "object",
            "properties": {
                "location": {"type": "string", "description": "The city and country, e.g. Paris, France"},
                "unit": {"type": "string", "enum": ["celsius", "fahrenheit"]},
                "days": {"type": "integer", "minimum": 1, "maximum": 7.5},
            },
            "required": ["location"],
        },
        "return": {"type": "number"},
    },
}
TIME_TOOL = {
    "type": "function",
    "function": {
        "name": "get_time",
        "description": "Heure locale — «Zeit» 時間",
        "parameters": {"type": "object", "properties": {}},
    },
}

CONVERSATIONS = {
    "system_user": {
        "messages": [
            {"role": "system", "content": "You are a helpful assistant."},
            {"role": "user", "content": "What is the capital of France?"},
        ],
    },
    "user_only": {"messages": [{"role": "user", "content": "Hello!"}]},
    "multi_turn": {
        "messages": [
            {"role": "system", "content": "Be brief."},
            {"role": "user", "content": "Hi there"},
            {"role": "assistant", "content": "Hello! How can I help?"},
            {"role": "user", "content": "Name a colour."},
            {"role": "assistant", "content": "Blue."},
            {"role": "user", "content": "Another one?"},
        ],
    },
    "no_system_multi": {
        "messages": [
            {"role": "user", "content": "2+2?"},
            {"role": "assistant", "content": "4"},
            {"role": "user", "content": "  and 3+3?  "},
        ],
    },
    "unicode": {
        "messages": [
            {"role": "system", "content": "Réponds en français. 日本語もOK 🙂"},
            {
                "role": "user",
                "content": "  Grüße, 世界! 🌍 — «quotes» \"double\" 'single' <b>&amp;</b>\n\tTabbed line\n  ",
            },
            {"role": "assistant", "content": "Ça va? ✓\n\n"},
            {"role": "user", "content": "{{ not a variable }} {% raw %} \\n back\\slash \u0000\u001f end"},
        ],
    },
    "tools": {
        "tools": [WEATHER_TOOL, TIME_TOOL],
        "messages": [
            {"role": "system", "content": "You can call tools."},
            {"role": "user", "content": "What's the weather in Paris?"},
            {
                "role": "assistant",
                "content": "",
                "tool_calls": [
                    {
                        "id": "abc123xyz",
                        "type": "function",
                        "function": {
                            "name": "get_weather",
                            "arguments": {"location": "Paris, France", "unit": "celsius"},
                        },
                    }
                ],
            },
            {
                "role": "tool",
                "tool_call_id": "abc123xyz",
                "name": "get_weather",
                "content": "{\"temperature\": 22, \"unit\": \"celsius\"}",
            },
            {"role": "assistant", "content": "It is 22 °C in Paris."},
            {"role": "user", "content": "Thanks!"},
        ],
    },
    "tools_no_calls": {
        "tools": [WEATHER_TOOL],
        "messages": [
            {"role": "system", "content": "You can call tools."},
            {"role": "user", "content": "Is it sunny in Oslo?"},
        ],
    },
    "tool_calls_string_args": {
        "messages": [
            {"role": "user", "content": "Weather in Rome and Oslo?"},
            {
                "role": "assistant",
                "content": None,
                "tool_calls": [
                    {
                        "id": "call00001",
                        "type": "function",
                        "function": {"name": "get_weather", "arguments": "{\"location\": \"Rome\"}"},
                    },
                    {
                        "id": "call00002",
                        "type": "function",
                        "function": {"name": "get_weather", "arguments": "{\"location\": \"Oslo\"}"},
                    },
                ],
            },
            {"role": "tool", "tool_call_id": "call00001", "content": "sunny"},
            {"role": "tool", "tool_call_id": "call00002", "content": "rain"},
            {"role": "assistant", "content": "Rome is sunny, Oslo rainy."},
        ],
    },
    "reasoning": {
        "messages": [
            {"role": "user", "content": "What is 2+2?"},
            {"role": "assistant", "reasoning_content": "Simple sum.\n2+2=4.", "content": "4"},
            {"role": "user", "content": "And 3+3?"},
            {"role": "assistant", "content": "<think>\nAdd them.\n</think>\n\n6"},
        ],
    },
    "multimodal": {
        "messages": [
            {"role": "system", "content": [{"type": "text", "text": "Describe images."}]},
            {
                "role": "user",
                "content": [{"type": "image"}, {"type": "text", "text": "  What is this?  "}],
            },
        ],
    },
    "alternation_error": {
        "messages": [
            {"role": "user", "content": "one"},
            {"role": "user", "content": "two"},
        ],
    },
}

FEATURE_EXTRA = {"custom": {"k": [1, "v"], "nested": {"z": None, "a": 1.5}}, "flag": False}
ALL = list(CONVERSATIONS)

# Only for the cases about none and undefined values: tools given, but none of them.
CONVERSATIONS["empty_tools"] = {
    "tools": [],
    "messages": [{"role": "user", "content": "Hello!"}],
}

# name -> list of (conversation, extra keyword variables)
PLAN = {
    "chatml": [(c, {}) for c in ALL],
    "smollm2-135m": [(c, {}) for c in ALL],
    "llama3-instruct": [(c, {}) for c in ALL],
    "llama3.2-tools": [(c, {}) for c in ALL]
    + [
        ("tools", {"tools_in_user_message": False}),
        ("system_user", {"date_string": "01 Jan 2025"}),
        ("tools_no_calls", {"custom_tools": [TIME_TOOL]}),
    ],
    "mistral-v0.3-tools": [(c, {}) for c in ALL],
    "qwen2.5-tools": [(c, {}) for c in ALL],
    "qwen3-style": [(c, {}) for c in ALL] + [("reasoning", {"enable_thinking": False}), ("user_only", {"enable_thinking": True})],
    "phi3": [(c, {}) for c in ALL],
    "deepseek-r1": [(c, {}) for c in ALL],
    "gemma3": [(c, {}) for c in ALL],
    "smollm3-generation": [(c, {}) for c in ["system_user", "multi_turn", "unicode"]],
    "features-whitespace": [("system_user", {}), ("unicode", {})],
    "features-values": [("system_user", FEATURE_EXTRA), ("tools_no_calls", FEATURE_EXTRA)],
    "features-strings": [("system_user", {}), ("no_system_multi", {}), ("unicode", {})],
    "features-control": [("multi_turn", FEATURE_EXTRA), ("system_user", FEATURE_EXTRA), ("user_only", FEATURE_EXTRA)],
    "features-tojson": [("tools_no_calls", FEATURE_EXTRA), ("unicode", FEATURE_EXTRA)],
    "features-misc": [("system_user", {}), ("multi_turn", {})],
    # tools none / [] / one / two, and custom_tools absent / none / [] / one
    "tools-guarded": [(c, {}) for c in ["system_user", "empty_tools", "tools_no_calls", "tools"]]
    + [("system_user", {"custom_tools": v}) for v in [None, [], [TIME_TOOL]]],
    # tools none: Jinja2 refuses to iterate it
    "tools-unguarded": [(c, {}) for c in ["system_user", "empty_tools", "tools_no_calls"]],
}

# One point of Jinja2's semantics of none and undefined values each, rendered with `x` set to
# None and with `x` not passed at all (undefined), for the conversation `user_only`. Inline and
# one point per template, so that an error in one does not hide the others.
# name -> source, or (source, [extra keyword variables, ...]) to render with other values of x.
NONE_AND_UNDEFINED = [{"x": None}, {}]
INLINE_TOKENS = ("<s>", "</s>")
INLINE = {
    # tests
    "test-defined": "{{ x is defined }}",
    "test-undefined": "{{ x is undefined }}",
    "test-none": "{{ x is none }}|{{ x is not none }}",
    "test-iterable": "{{ x is iterable }}",
    "test-mapping": "{{ x is mapping }}",
    "test-sequence": "{{ x is sequence }}",
    "test-string": "{{ x is string }}",
    "test-number": "{{ x is number }}",
    "test-boolean": "{{ x is boolean }}",
    "test-true-false": "{{ x is true }}|{{ x is false }}",
    "test-in-list": "{{ x is in [none] }}|{{ x is in [] }}",
    "test-in-x": "{{ 'a' is in x }}",
    "test-in-string": "{{ x is in 'abc' }}",
    "test-eq": "{{ x == none }}|{{ x != none }}|{{ x is sameas none }}",
    # filters
    "filter-length": "{{ x | length }}",
    "filter-count": "{{ x | count }}",
    "filter-default": "[{{ x | default('D') }}][{{ x | d('D') }}][{{ x | default }}]",
    "filter-default-boolean": "[{{ x | default('D', true) }}][{{ x | d('D', boolean=true) }}]",
    "filter-default-length": "{{ x | default([]) | length }}",
    "filter-list": "{{ x | list }}",
    "filter-join": "[{{ x | join(', ') }}]",
    "filter-string": "[{{ x | string }}]",
    "filter-trim": "[{{ x | trim }}]",
    "filter-tojson": "{{ x | tojson }}",
    "filter-items": "{{ x | items | list }}",
    "filter-items-loop": "{% for k, v in x | items %}{{ k }}{% endfor %}end",
    "filter-first": "[{{ x | first }}]",
    "filter-last": "[{{ x | last }}]",
    "filter-selectattr": "{{ x | selectattr('type', 'equalto', 'function') | list }}",
    "filter-rejectattr": "{{ x | rejectattr('type') | list }}",
    "filter-map-attribute": "{{ x | map(attribute='name') | list }}",
    "filter-map-filter": "{{ x | map('upper') | list }}",
    "filter-select": "{{ x | select | list }}|{{ x | reject | list }}",
    "filter-sort": "{{ x | sort }}",
    "filter-unique": "{{ x | unique | list }}",
    "filter-reverse": "{{ x | reverse | list }}",
    "filter-sum": "{{ x | sum }}",
    "filter-min-max": "[{{ x | min }}][{{ x | max }}]",
    "filter-batch": "{{ x | batch(2) | list }}",
    "filter-slice": "{{ x | slice(2) | list }}",
    "filter-groupby": "{{ x | groupby('a') | list }}",
    "filter-int": "{{ x | int }}",
    "filter-float": "{{ x | float }}",
    "filter-upper": "[{{ x | upper }}]",
    # for loops
    "for": "{% for t in x %}[{{ t }}]{% endfor %}end",
    "for-else": "{% for t in x %}[{{ t }}]{% else %}empty{% endfor %}",
    "for-if": "{% for t in x if t %}[{{ t }}]{% endfor %}end",
    "for-unpack": "{% for a, b in x %}[{{ a }}]{% endfor %}end",
    "for-parenthesized": "{%- for t in (x) -%}\n[{{ t }}]\n{%- endfor %}end",
    "for-nested": "{% for m in messages %}{{ m.role }}:{% for t in x %}{{ t }}{% endfor %};{% endfor %}",
    "for-default": "{% for t in x | default([]) %}[{{ t }}]{% endfor %}end",
    "for-or": "{% for t in x or [] %}[{{ t }}]{% endfor %}end",
    "for-guarded": "{% if x %}{% for t in x %}[{{ t }}]{% endfor %}{% endif %}end",
    "for-line": "line one\n{% if true %}\n{% for t in x %}[{{ t }}]{% endfor %}\n{% endif %}",
    # `in`
    "in-x": "{{ 'a' in x }}",
    "not-in-x": "{{ 'a' not in x }}",
    "none-in-x": "{{ none in x }}",
    "x-in-list": "{{ x in [none] }}|{{ x not in [1] }}",
    # truthiness
    "if": "{% if x %}T{% else %}F{% endif %}",
    "not": "{{ not x }}",
    "or-and": "[{{ x or 'O' }}][{{ x and 1 }}]",
    "ternary": "{{ 'a' if x else 'b' }}",
    # printing and concatenation
    "print": "[{{ x }}]",
    "concat": "{{ 'a' ~ x ~ 'b' }}",
    "in-list-print": "{{ [x] }}|{{ {'k': x} }}",
    "in-list-tojson": "{{ [x] | tojson }}",
    # attribute and item access
    "attr": "[{{ x.foo }}]",
    "attr-defined": "{{ x.foo is defined }}",
    "attr-attr": "[{{ x.foo.bar }}]",
    "attr-length": "{{ x.foo | length }}",
    "item": "[{{ x['foo'] }}][{{ x[0] }}]",
    "method": "{{ x.get('a') }}",
    # arithmetic
    "add": "{{ x + 1 }}",
    "neg": "{{ -x }}",
    # real guards
    "guard-iterable": "{{ x is iterable and x | length > 0 }}",
    "guard-not-none": "{{ x is not none and x | length > 0 }}",
    "guard-defined": "{{ x is defined and x | length > 0 }}",
    "guard-defined-none": "{{ x is defined and x is not none }}",
    "guard-iterable-values": (
        "{% if x is iterable and x | length > 0 %}{{ x | length }} tools{% else %}no tools{% endif %}",
        [{"x": None}, {}, {"x": []}, {"x": [TIME_TOOL]}, {"x": "text"}, {"x": {"k": 1}}, {"x": 3}],
    ),
}



def cache_dir() -> Path:
    d = os.environ.get("GGUF_CACHE")
    return Path(d) if d else Path.home() / ".cache" / "gguf"


def extract_real_templates() -> None:
    try:
        import gguf
    except ImportError:
        print("gguf not installed: keeping the saved real-model templates", file=sys.stderr)
        return
    for name, model in REAL_MODELS.items():
        path = cache_dir() / f"{model}.gguf"
        if not path.exists():
            print(f"{path} missing: keeping templates/{name}.jinja", file=sys.stderr)
            continue
        reader = gguf.GGUFReader(str(path))
        field = reader.fields["tokenizer.chat_template"]
        (TEMPLATES / f"{name}.jinja").write_bytes(bytes(field.parts[field.data[0]]))


def render(source: str, conversation: dict, add_generation_prompt: bool, bos: str, eos: str, extra: dict):
    compiled = ctu._compile_jinja_template(source)
    compiled.environment.globals["strftime_now"] = lambda fmt: NOW.strftime(fmt)
    messages = ctu._normalize_chat_messages(conversation["messages"])
    rendered, _ = ctu.render_jinja_template(
        conversations=[messages],
        tools=conversation.get("tools"),
        documents=None,
        chat_template=source,
        add_generation_prompt=add_generation_prompt,
        bos_token=bos,
        eos_token=eos,
        **extra,
    )
    return rendered[0]


def render_case(cases: list, name: str, source: str, tokens: tuple, conv_name: str, agp: bool, extra: dict) -> None:
    bos, eos = tokens
    case = {
        "template": name,
        "conversation": conv_name,
        "add_generation_prompt": agp,
        "extra": extra,
    }
    try:
        case["expected"] = render(source, CONVERSATIONS[conv_name], agp, bos, eos, extra)
    except jinja2.exceptions.TemplateError as e:
        # raise_exception raises exactly TemplateError; its subclasses are engine errors
        kind = "raise_exception" if type(e) is jinja2.exceptions.TemplateError else type(e).__name__
        case["error"] = {"kind": kind, "message": str(e)} | template_line(e)
    except Exception as e:  # TypeError and friends from Python operators
        case["error"] = {"kind": type(e).__name__, "message": str(e)} | template_line(e)
    cases.append(case)


def template_line(e: Exception) -> dict:
    """{"line": n}: the template line the error happened on, from the frames Jinja2 gives the
    template's name ("<template>"), or {} when there is none."""
    lines = [f.lineno for f in traceback.extract_tb(e.__traceback__) if f.filename == "<template>"]
    return {"line": lines[-1]} if lines else {}


def main() -> None:
    extract_real_templates()
    cases = []
    for name, plan in PLAN.items():
        source = (TEMPLATES / f"{name}.jinja").read_text(encoding="utf-8")
        for conv_name, extra in plan:
            for agp in (False, True):
                render_case(cases, name, source, TOKENS[name], conv_name, agp, extra)
    inline = {}
    for slug, spec in INLINE.items():
        source, extras = spec if isinstance(spec, tuple) else (spec, NONE_AND_UNDEFINED)
        name = f"inline-{slug}"
        inline[name] = source
        for extra in extras:
            render_case(cases, name, source, INLINE_TOKENS, "user_only", False, extra)
    out = {
        "generator": f"transformers {transformers.__version__}, jinja2 {jinja2.__version__}",
        "now": [NOW.year, NOW.month, NOW.day, NOW.hour, NOW.minute, NOW.second],
        "templates": {name: {"bos_token": b, "eos_token": e} for name, (b, e) in TOKENS.items()}
        | {
            name: {"bos_token": INLINE_TOKENS[0], "eos_token": INLINE_TOKENS[1], "source": source}
            for name, source in inline.items()
        },
        "conversations": CONVERSATIONS,
        "cases": cases,
    }
    text = json.dumps(out, ensure_ascii=False, indent=1) + "\n"
    (HERE / "expected.json").write_text(text, encoding="utf-8")
    errors = sum(1 for c in cases if "error" in c)
    print(f"{len(cases)} cases ({errors} errors) -> {HERE / 'expected.json'}")


if __name__ == "__main__":
    main()
