#!/usr/bin/env python3
"""Writes a Hugging Face tokenizer directory for SmolLM2 rebuilt from its GGUF:
tokenizer.json (HF `tokenizers`), tokenizer_config.json (the GGUF's chat
template, or TEMPLATE_FILE's text), generation_config.json (bos/eos ids).

Usage: .venv/bin/python tests/ref/make_tok_dir.py GGUF OUTDIR [TEMPLATE_FILE]
"""
import json
import os
import sys

from gguf import GGUFReader
from tokenizers import pre_tokenizers

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from check_tokenizer import build, read_gguf  # noqa: E402


def main():
    gguf_path, out = sys.argv[1], sys.argv[2]
    tokens, merges, types = read_gguf(gguf_path)
    tk = build(tokens, merges, types, pre_tokenizers.Sequence(
        [pre_tokenizers.Digits(individual_digits=True),
         pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True)]))
    os.makedirs(out, exist_ok=True)
    tk.save(os.path.join(out, "tokenizer.json"))
    if len(sys.argv) > 3:
        with open(sys.argv[3]) as f:
            template = f.read()
    else:
        field = GGUFReader(gguf_path).fields["tokenizer.chat_template"]
        template = bytes(field.parts[field.data[0]]).decode()
    with open(os.path.join(out, "tokenizer_config.json"), "w") as f:
        json.dump({"chat_template": template, "bos_token": "<|im_start|>", "eos_token": "<|im_end|>"}, f)
    with open(os.path.join(out, "generation_config.json"), "w") as f:
        json.dump({"bos_token_id": 1, "eos_token_id": 2}, f)


if __name__ == "__main__":
    main()
