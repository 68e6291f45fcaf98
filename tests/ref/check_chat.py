#!/usr/bin/env python3
"""Our native chat-template rendering against Jinja itself.

Usage: .venv/bin/python tests/ref/check_chat.py WORKDIR [GGUF]

Templates: SmolLM2's own (read from the GGUF, when given) and templates of
the ChatML and Llama 3 / 3.1 families written here. Jinja renders them as
Hugging Face does (trim_blocks, lstrip_blocks, bos_token); the C side is
build/tests/test_chat in its driver mode ($GRPO_CHAT_TEST_BIN overrides).
Every conversation is rendered with and without the generation prompt and
the strings must be identical. Prints TAP.
"""
import json
import os
import subprocess
import sys

import jinja2

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


def jinja_render(template, messages, gen):
    env = jinja2.Environment(trim_blocks=True, lstrip_blocks=True)
    return env.from_string(template).render(messages=messages, add_generation_prompt=gen,
                                            bos_token="<|begin_of_text|>")


def main():
    work = sys.argv[1]
    templates = [("chatml-default", CHATML_DEFAULT), ("chatml-plain", CHATML_PLAIN),
                 ("llama3", LLAMA3), ("llama3.1", LLAMA31)]
    if len(sys.argv) > 2 and os.path.exists(sys.argv[2]):
        from gguf import GGUFReader
        field = GGUFReader(sys.argv[2]).fields["tokenizer.chat_template"]
        templates.insert(0, ("smollm2", bytes(field.parts[field.data[0]]).decode()))
    msgs_path = os.path.join(work, "messages.jsonl")
    with open(msgs_path, "w") as f:
        for conv in CONVERSATIONS:
            f.write(json.dumps(conv) + "\n")
    failed = 0
    print(f"1..{len(templates)}")
    for n, (name, template) in enumerate(templates, 1):
        tpath = os.path.join(work, name + ".jinja")
        out = os.path.join(work, name + ".out")
        with open(tpath, "w") as f:
            f.write(template)
        env = dict(os.environ, GRPO_CHAT_TEMPLATE=tpath, GRPO_CHAT_MESSAGES=msgs_path, GRPO_CHAT_OUT=out)
        r = subprocess.run([BIN], env=env, capture_output=True, text=True)
        if r.returncode != 0:
            print(f"not ok {n} - {name}: driver failed: {r.stderr.strip()}")
            failed += 1
            continue
        with open(out) as f:
            ours = [json.loads(line) for line in f]
        want = [jinja_render(template, conv, gen) for conv in CONVERSATIONS for gen in (False, True)]
        bad = [(i, a, b) for i, (a, b) in enumerate(zip(ours, want)) if a != b]
        if bad or len(ours) != len(want):
            failed += 1
            print(f"not ok {n} - {name}")
            for i, a, b in bad[:2]:
                print(f"#   case {i}:\n#   ours:  {a!r}\n#   jinja: {b!r}")
        else:
            print(f"ok {n} - {name}: {len(want)} renderings identical to Jinja")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
