#!/usr/bin/env python3
"""Writes the seed corpora of the fuzz targets that read model and config
files, from real files cut down to a size a fuzzer mutates quickly:

  fuzz_tokenizer_json   SmolLM2's tokenizer (from its GGUF) cut to its first
                        N tokens and the merges among them, saved by HF
                        `tokenizers` with each pre-tokenizer family we read
  fuzz_gguf_text        the same cut vocabulary in a GGUF holding only
                        metadata, written by the `gguf` package (llama and
                        qwen2 hyper-parameters, chat template, special ids)
  fuzz_hf_config        config.json of the tiny models of every architecture
                        (tests/ref/model_ref.py)

Usage: .venv/bin/python tests/fuzz/make_seeds.py models/SmolLM2-135M-Instruct.Q4_1.gguf
"""
import json
import os
import subprocess
import sys
import tempfile

import gguf

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "ref"))
from check_tokenizer import read_gguf, variants  # noqa: E402

N_TOKENS = 600


def cut(tokens, merges, types):
    keep = tokens[:N_TOKENS]
    have = set(keep)
    kept_merges = [m for m in merges if all(p in have for p in m.split(" ")) and m.replace(" ", "") in have]
    return keep, kept_merges, types[:N_TOKENS]


def corpus(name):
    d = os.path.join(HERE, "corpus", name)
    os.makedirs(d, exist_ok=True)
    return d


def tokenizer_seeds(tokens, merges, types):
    d = corpus("fuzz_tokenizer_json")
    for name, tk in variants(tokens, merges, types):
        tk.save(os.path.join(d, f"{name}.json"))


def gguf_seeds(tokens, merges, types, template):
    d = corpus("fuzz_gguf_text")
    for arch, pre in (("llama", "smollm"), ("qwen2", "qwen2")):
        w = gguf.GGUFWriter(os.path.join(d, f"{arch}.gguf"), arch)
        w.add_block_count(2)
        w.add_embedding_length(64)
        w.add_feed_forward_length(96)
        w.add_head_count(4)
        w.add_head_count_kv(2)
        w.add_context_length(128)
        w.add_layer_norm_rms_eps(1e-5)
        w.add_rope_freq_base(10000.0)
        w.add_tokenizer_model("gpt2")
        w.add_tokenizer_pre(pre)
        w.add_token_list(tokens)
        w.add_token_merges(merges)
        w.add_token_types(types)
        w.add_bos_token_id(1)
        w.add_eos_token_id(2)
        w.add_chat_template(template)
        w.write_header_to_file()
        w.write_kv_data_to_file()
        w.write_tensors_to_file()
        w.close()


def config_seeds():
    d = corpus("fuzz_hf_config")
    with tempfile.TemporaryDirectory() as tmp:
        for name, arch, extra in (("llama", "llama", []), ("llama-llama3-rope", "llama", ["--tied", "--llama3-rope"]),
                                  ("qwen2", "qwen2", ["--tied"]), ("qwen3", "qwen3", [])):
            out = os.path.join(tmp, name)
            subprocess.run([sys.executable, os.path.join(HERE, "..", "ref", "model_ref.py"), "make-tiny", arch, out]
                           + extra, check=True, stdout=subprocess.DEVNULL)
            with open(os.path.join(out, "config.json")) as f:
                cfg = json.load(f)
            with open(os.path.join(d, f"{name}.json"), "w") as f:
                json.dump(cfg, f, indent=2)


def main():
    tokens, merges, types = cut(*read_gguf(sys.argv[1]))
    field = gguf.GGUFReader(sys.argv[1]).fields["tokenizer.chat_template"]
    template = bytes(field.parts[field.data[0]]).decode()
    tokenizer_seeds(tokens, merges, types)
    gguf_seeds(tokens, merges, types, template)
    config_seeds()


if __name__ == "__main__":
    main()
