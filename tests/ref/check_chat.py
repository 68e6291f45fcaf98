#!/usr/bin/env python3
"""Our native chat-template rendering against Jinja itself.

Usage: .venv/bin/python tests/ref/check_chat.py WORKDIR [GGUF [GPT_OSS_TEMPLATE]]

Templates: SmolLM2's own (read from the GGUF, when given) and templates of
the ChatML and Llama 3 / 3.1 families written here. Jinja renders them as
Hugging Face does (trim_blocks, lstrip_blocks, bos_token); the C side is
build/tests/test_chat in its driver mode ($GRPO_CHAT_TEST_BIN overrides).
Every conversation is rendered with and without the generation prompt and
the strings must be identical. Prints TAP.

GPT_OSS_TEMPLATE, when given: gpt-oss's own chat_template.jinja (the pinned
llama.cpp carries it as models/templates/openai-gpt-oss-120b.jinja), run as
transformers' apply_chat_template runs it (a sandboxed environment, its
tojson, raise_exception, strftime_now answering the date ours was given), on
conversations with system and developer messages, reasoning, tool calls and
results, under the default settings, another reasoning level and date, and
tool schemas of every kind the template writes.
"""
import json
import os
import subprocess
import sys
import time

import jinja2
import jinja2.ext

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
BIN = os.environ.get("GRPO_CHAT_TEST_BIN", os.path.join(ROOT, "build", "tests", "test_chat"))

CHATML_DEFAULT = (
    "{% for message in messages %}{% if loop.first and message['role'] != 'system' %}"
    "{{ '<|im_start|>system\\nYou are a careful assistant. Answer briefly.<|im_end|>\\n' }}{% endif %}"
    "{{ '<|im_start|>' + message['role'] + '\\n' + message['content'] + '<|im_end|>\\n' }}{% endfor %}"
    "{% if add_generation_prompt %}{{ '<|im_start|>assistant\\n' }}{% endif %}"
)
CHATML_PLAIN = (
    "{%- for message in messages %}\n"
    "    {{- '<|im_start|>' + message.role + '\\n' + message.content + '<|im_end|>\\n' }}\n"
    "{%- endfor %}\n"
    "{%- if add_generation_prompt %}\n    {{- '<|im_start|>assistant\\n' }}\n{%- endif %}\n"
)
LLAMA3 = (
    "{{ bos_token }}{% for message in messages %}"
    "{{ '<|start_header_id|>' + message['role'] + '<|end_header_id|>\\n\\n' + message['content'] | trim + '<|eot_id|>' }}"
    "{% endfor %}{% if add_generation_prompt %}{{ '<|start_header_id|>assistant<|end_header_id|>\\n\\n' }}{% endif %}"
)
LLAMA31 = (
    "{{- bos_token }}\n"
    "{%- if messages[0]['role'] == 'system' %}\n"
    "    {%- set system_message = messages[0]['content'] | trim %}\n"
    "    {%- set loop_messages = messages[1:] %}\n"
    "{%- else %}\n    {%- set system_message = '' %}\n    {%- set loop_messages = messages %}\n{%- endif %}\n"
    "{{- '<|start_header_id|>system<|end_header_id|>\\n\\n' }}\n"
    "{{- 'Cutting Knowledge Date: December 2023\\n' }}\n"
    "{{- 'Today Date: 26 Jul 2024\\n\\n' }}\n"
    "{{- system_message }}\n{{- '<|eot_id|>' }}\n"
    "{%- for message in loop_messages %}\n"
    "    {{- '<|start_header_id|>' + message['role'] + '<|end_header_id|>\\n\\n' + message['content'] | trim + '<|eot_id|>' }}\n"
    "{%- endfor %}\n"
    "{%- if add_generation_prompt %}\n    {{- '<|start_header_id|>assistant<|end_header_id|>\\n\\n' }}\n{%- endif %}\n"
)

CONVERSATIONS = [
    [{"role": "user", "content": "What is 2 + 3?"}],
    [{"role": "system", "content": "Think step by step."}, {"role": "user", "content": "What is 2 + 3?"}],
    [{"role": "user", "content": "  padded\n\n"}, {"role": "assistant", "content": "\tok "},
     {"role": "user", "content": "again"}],
    [{"role": "system", "content": " sys with spaces \n"}, {"role": "user", "content": "caf\u00e9 \u6f22\u5b57 \U0001F600"}],
    [{"role": "user", "content": ""}],
    [{"role": "user", "content": "line1\nline2\r\nline3"}, {"role": "assistant", "content": "<answer>5</answer>"}],
]


HARMONY_TOOLS = [
    {"type": "function", "function": {
        "name": "calc", "description": "Evaluates an arithmetic expression.",
        "parameters": {"type": "object", "properties": {"expr": {"type": "string", "description": "the expression"}},
                       "required": ["expr"]}}},
    {"type": "function", "function": {"name": "now", "description": "The time.", "parameters": {}}},
    {"type": "function", "function": {
        "name": "find", "description": "Finds places \u00e0 la carte.",
        "parameters": {"type": "object", "required": ["q", "loc"], "properties": {
            "q": {"type": "string", "description": "what"}, "n": {"type": "integer", "default": 10},
            "exact": {"type": "boolean", "default": False, "description": "exact match"},
            "unit": {"type": "string", "enum": ["km", "mi"], "default": "km"},
            "note": {"type": "string", "nullable": True, "default": "a \"b\""},
            "tags": {"type": "array", "items": {"type": "string"}}, "any": {"type": "array"},
            "pts": {"type": "array", "items": {"type": "object", "properties": {"x": {"type": "number"}},
                                               "required": ["x"]}},
            "loc": {"type": "object", "properties": {"lat": {"type": "number"}, "lon": {"type": "number"}},
                    "required": ["lat"]},
            "raw": {"type": "object"}, "either": {"type": ["string", "number"]},
            "one": {"oneOf": [{"type": "string", "description": "a name"}, {"type": "number", "default": 5}]},
            "free": {}}}}},
]
HARMONY_CONVERSATIONS = CONVERSATIONS + [
    [{"role": "developer", "content": "Answer in riddles."}, {"role": "user", "content": "Q"},
     {"role": "assistant", "content": "A", "thinking": "T"}, {"role": "user", "content": "Q2"},
     {"role": "assistant", "content": "B", "thinking": "U"}],
    [{"role": "system", "content": ""}, {"role": "user", "content": "Q"}, {"role": "assistant", "content": "4"}],
    [{"role": "user", "content": "6*7?"},
     {"role": "assistant", "content": "", "thinking": "Use calc.",
      "tool_calls": [{"type": "function", "function": {"name": "calc", "arguments": {"expr": "6*7"}}}]},
     {"role": "tool", "content": "42 \"exactly\"\n\u00e9"}],
    [{"role": "user", "content": "6*7?"},
     {"role": "assistant", "content": "Calling.", "tool_calls": [{"name": "calc", "arguments": "{\"expr\": \"6*7\"}"}]},
     {"role": "tool", "content": "42"}, {"role": "tool", "content": "again"},
     {"role": "assistant", "content": "42", "thinking": "done"}, {"role": "user", "content": "thanks"},
     {"role": "system", "content": "a late system message"}],
]
# (name, reasoning, date, tools): date None is the default, CHAT_HARMONY_DATE in lib/chat/chat.h
HARMONY_SETTINGS = [("harmony", None, None, None), ("harmony-low-date", "low", "2026-01-02", None),
                    ("harmony-tools", "high", None, HARMONY_TOOLS)]
HARMONY_DATE = "2025-06-28"


def jinja_render(template, messages, gen):
    env = jinja2.Environment(trim_blocks=True, lstrip_blocks=True)
    return env.from_string(template).render(messages=messages, add_generation_prompt=gen,
                                            bos_token="<|begin_of_text|>")


def hf_environment():
    """Jinja set up as transformers' apply_chat_template sets it up."""
    from jinja2.sandbox import ImmutableSandboxedEnvironment

    def raise_exception(message):
        raise jinja2.exceptions.TemplateError(message)

    def tojson(x, ensure_ascii=False, indent=None, separators=None, sort_keys=False):
        return json.dumps(x, ensure_ascii=ensure_ascii, indent=indent, separators=separators, sort_keys=sort_keys)

    env = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True,
                                        extensions=[jinja2.ext.loopcontrols])
    env.filters["tojson"] = tojson
    env.globals["raise_exception"] = raise_exception
    return env


def harmony_render(template, reasoning, date, tools):
    env = hf_environment()
    day = date or HARMONY_DATE
    # the day our rendering was told, as the template asks the clock for it
    env.globals["strftime_now"] = lambda fmt: time.strftime(fmt, time.strptime(day, "%Y-%m-%d"))
    compiled = env.from_string(template)
    kwargs = {"reasoning_effort": reasoning} if reasoning else {}
    if tools:
        kwargs["tools"] = tools
    return lambda messages, gen: compiled.render(messages=messages, add_generation_prompt=gen, **kwargs)


def compare(n, name, work, template, conversations, render, env_extra=None):
    """Our driver's renderings of every conversation against render's; prints one TAP line."""
    msgs_path = os.path.join(work, name + ".messages.jsonl")
    with open(msgs_path, "w") as f:
        for conv in conversations:
            f.write(json.dumps(conv) + "\n")
    tpath = os.path.join(work, name + ".jinja")
    out = os.path.join(work, name + ".out")
    with open(tpath, "w") as f:
        f.write(template)
    env = dict(os.environ, GRPO_CHAT_TEMPLATE=tpath, GRPO_CHAT_MESSAGES=msgs_path, GRPO_CHAT_OUT=out,
               **(env_extra or {}))
    r = subprocess.run([BIN], env=env, capture_output=True, text=True)
    if r.returncode != 0:
        print(f"not ok {n} - {name}: driver failed: {r.stderr.strip()}")
        return False
    with open(out) as f:
        ours = [json.loads(line) for line in f]
    want = [render(conv, gen) for conv in conversations for gen in (False, True)]
    bad = [(i, a, b) for i, (a, b) in enumerate(zip(ours, want)) if a != b]
    if bad or len(ours) != len(want):
        print(f"not ok {n} - {name}")
        for i, a, b in bad[:2]:
            print(f"#   case {i}:\n#   ours:  {a!r}\n#   jinja: {b!r}")
        return False
    print(f"ok {n} - {name}: {len(want)} renderings identical to Jinja")
    return True


def main():
    work = sys.argv[1]
    templates = [("chatml-default", CHATML_DEFAULT), ("chatml-plain", CHATML_PLAIN),
                 ("llama3", LLAMA3), ("llama3.1", LLAMA31)]
    if len(sys.argv) > 2 and os.path.exists(sys.argv[2]):
        from gguf import GGUFReader
        field = GGUFReader(sys.argv[2]).fields["tokenizer.chat_template"]
        templates.insert(0, ("smollm2", bytes(field.parts[field.data[0]]).decode()))
    harmony = None
    if len(sys.argv) > 3 and os.path.exists(sys.argv[3]):
        with open(sys.argv[3]) as f:
            harmony = f.read()
    print(f"1..{len(templates) + (len(HARMONY_SETTINGS) if harmony else 0)}")
    ok = True
    for n, (name, template) in enumerate(templates, 1):
        ok &= compare(n, name, work, template, CONVERSATIONS, lambda m, g, t=template: jinja_render(t, m, g))
    if harmony:
        for n, (name, reasoning, date, tools) in enumerate(HARMONY_SETTINGS, len(templates) + 1):
            extra = {}
            if reasoning:
                extra["GRPO_CHAT_REASONING"] = reasoning
            if date:
                extra["GRPO_CHAT_DATE"] = date
            if tools:
                extra["GRPO_CHAT_TOOLS"] = os.path.join(work, name + ".tools.json")
                with open(extra["GRPO_CHAT_TOOLS"], "w") as f:
                    json.dump(tools, f)
            ok &= compare(n, name, work, harmony, HARMONY_CONVERSATIONS, harmony_render(harmony, reasoning, date, tools),
                          extra)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
