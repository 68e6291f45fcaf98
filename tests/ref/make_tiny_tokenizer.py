#!/usr/bin/env python3
"""A 97-token byte-level tokenizer for the tiny random models of
model_ref.py (vocab_size 97), written with Hugging Face `tokenizers`:
ids 0-2 are <|endoftext|>, <|im_start|>, <|im_end|> (special), then the
byte-level symbols of space (Ġ), newline (Ċ) and the printable bytes
0x21..0x7C. No merges. Also writes tokenizer_config.json with a ChatML
template (default system message "Be brief.") and generation_config.json
(eos 2).

Usage: .venv/bin/python tests/ref/make_tiny_tokenizer.py OUTDIR
"""
import json
import os
import sys

from tokenizers import AddedToken, Tokenizer, decoders, models, pre_tokenizers


def byte_to_unicode():
    bs = list(range(ord("!"), ord("~") + 1)) + list(range(ord("\xa1"), ord("\xac") + 1)) + \
        list(range(ord("\xae"), ord("\xff") + 1))
    cs = bs[:]
    n = 0
    for b in range(256):
        if b not in bs:
            bs.append(b)
            cs.append(256 + n)
            n += 1
    return dict(zip(bs, map(chr, cs)))


def main():
    out = sys.argv[1]
    b2u = byte_to_unicode()
    specials = ["<|endoftext|>", "<|im_start|>", "<|im_end|>"]
    symbols = [b2u[0x20], b2u[0x0A]] + [b2u[b] for b in range(0x21, 0x7D)]
    vocab = {t: i for i, t in enumerate(specials + symbols)}
    assert len(vocab) == 97
    tk = Tokenizer(models.BPE(vocab=vocab, merges=[]))
    tk.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True)
    tk.decoder = decoders.ByteLevel()
    tk.add_special_tokens([AddedToken(s, special=True, normalized=False) for s in specials])
    os.makedirs(out, exist_ok=True)
    tk.save(os.path.join(out, "tokenizer.json"))
    template = ("{% for message in messages %}{% if loop.first and messages[0]['role'] != 'system' %}"
                "{{ '<|im_start|>system\\nBe brief.<|im_end|>\\n' }}{% endif %}"
                "{{ '<|im_start|>' + message['role'] + '\\n' + message['content'] + '<|im_end|>\\n' }}"
                "{% endfor %}{% if add_generation_prompt %}{{ '<|im_start|>assistant\\n' }}{% endif %}")
    with open(os.path.join(out, "tokenizer_config.json"), "w") as f:
        json.dump({"chat_template": template, "bos_token": "<|im_start|>", "eos_token": "<|im_end|>"}, f)
    with open(os.path.join(out, "generation_config.json"), "w") as f:
        json.dump({"bos_token_id": 1, "eos_token_id": 2}, f)


if __name__ == "__main__":
    main()
