#!/usr/bin/env python3
"""grpo-prep --model's prompt_tokens against Hugging Face.

Usage: .venv/bin/python tests/ref/check_prompt_tokens.py GGUF PROMPTS.jsonl raw|auto

Rebuilds SmolLM2's tokenizer in HF `tokenizers` from the GGUF (as
check_tokenizer.py does), renders each record's messages with the GGUF's own
Jinja chat template (add_generation_prompt=True; `raw`: the contents alone)
and requires prompt_tokens to equal HF's encoding (no special tokens added;
those in the text are matched). Prints TAP.
"""
import json
import os
import sys

import jinja2
from gguf import GGUFReader
from tokenizers import pre_tokenizers

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from check_tokenizer import build, read_gguf  # noqa: E402


def main():
    gguf_path, prompts, mode = sys.argv[1], sys.argv[2], sys.argv[3]
    tokens, merges, types = read_gguf(gguf_path)
    pre = pre_tokenizers.Sequence([pre_tokenizers.Digits(individual_digits=True),
                                   pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True)])
    tk = build(tokens, merges, types, pre)
    field = GGUFReader(gguf_path).fields["tokenizer.chat_template"]
    template = jinja2.Environment(trim_blocks=True, lstrip_blocks=True).from_string(
        bytes(field.parts[field.data[0]]).decode())
    with open(prompts) as f:
        records = [json.loads(line) for line in f]
    bad = 0
    for n, rec in enumerate(records, 1):
        if mode == "raw":
            text = "".join(m["content"] for m in rec["messages"])
        else:
            text = template.render(messages=rec["messages"], add_generation_prompt=True)
        want = tk.encode(text, add_special_tokens=False).ids
        if rec.get("prompt_tokens") != want:
            bad += 1
            print(f"not ok {n} - {rec['id']}\n#   text: {text!r}\n#   ours: {rec.get('prompt_tokens')}\n#   hf:   {want}")
        else:
            print(f"ok {n} - {rec['id']}: {len(want)} tokens")
    print(f"1..{len(records)}")
    return 1 if bad or not records else 0


if __name__ == "__main__":
    sys.exit(main())
