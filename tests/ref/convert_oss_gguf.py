#!/usr/bin/env python3
"""A gpt-oss GGUF as llama.cpp writes one: the pinned llama.cpp's own
convert_hf_to_gguf.py (its GptOssModel, with the gguf-py beside it) run on
a tiny gpt_oss Hugging Face directory (model_ref.py make-tiny gpt_oss,
make_oss_mxfp4.py; with make_tiny_tokenizer.py's tokenizer), so that the
GGUF loader is checked on a file our code did not write.

Usage: .venv-peft/bin/python tests/ref/convert_oss_gguf.py LLAMA_SRC HF_DIR OUT.gguf [OUTTYPE]

LLAMA_SRC is llama.cpp's source (build/llama.cpp/src); the venv needs torch
and transformers (.venv-peft). OUTTYPE is the converter's --outtype (f32
by default); MXFP4 experts (HF_DIR's _blocks and _scales) stay MXFP4, GGML
type 39, as the converter keeps them.

Around the converter, none of it touching a weight or a hyper-parameter:
  - Debian's torch 1.13 lacks the float8 and wide unsigned dtypes the
    converter's tables name: stand-ins that nothing here uses;
  - llama.cpp's gpt2 vocabulary needs tokenizer.ggml.merges and gguf-py
    writes no empty array, while the tiny tokenizer has no merges: HF_DIR's
    tokenizer.json gets one ("Ġ t", the token "Ġt" in place of "|", id 96)
    before converting, so the directory and the GGUF keep one tokenizer;
    its tokenizer_config.json gets tokenizer_class (transformers 4.46 has
    no gpt_oss config to find it by);
  - the converter names a BPE pre-tokenizer from a hash of known
    tokenizers' output: the tiny one is GPT-2's (ByteLevel with its regex,
    checked here), "gpt-2".
"""
import json
import os
import runpy
import sys


def one_tokenizer(d):
    """The tiny tokenizer with one merge, and the class transformers loads it as."""
    p = os.path.join(d, "tokenizer.json")
    t = json.load(open(p, encoding="utf-8"))
    pre = t.get("pre_tokenizer") or {}
    if pre.get("type") != "ByteLevel" or not pre.get("use_regex", True):
        sys.exit(f"convert_oss_gguf.py: {p}: not a GPT-2 byte-level pre-tokenizer")
    vocab, merges = t["model"]["vocab"], t["model"]["merges"]
    if not merges:
        if vocab.get("|") != 96:
            sys.exit(f"convert_oss_gguf.py: {p}: not make_tiny_tokenizer.py's vocabulary")
        del vocab["|"]
        vocab["Ġt"] = 96
        t["model"]["merges"] = ["Ġ t"]
        json.dump(t, open(p, "w", encoding="utf-8"), ensure_ascii=False)
    p = os.path.join(d, "tokenizer_config.json")
    c = json.load(open(p, encoding="utf-8"))
    c["tokenizer_class"] = "PreTrainedTokenizerFast"
    json.dump(c, open(p, "w", encoding="utf-8"))


def main(argv):
    if len(argv) < 4:
        print(__doc__)
        return 64
    src, hf, out = argv[1], argv[2], argv[3]
    outtype = argv[4] if len(argv) > 4 else "f32"
    import torch
    for name in ("float8_e4m3fn", "float8_e5m2", "float8_e4m3fnuz", "float8_e5m2fnuz", "uint16", "uint32", "uint64"):
        if not hasattr(torch, name):
            setattr(torch, name, type(name, (), {})())
    one_tokenizer(hf)
    script = os.path.join(src, "convert_hf_to_gguf.py")
    sys.path.insert(0, src)
    sys.path.insert(1, os.path.join(src, "gguf-py"))
    import conversion.base
    conversion.base.TextModel.get_vocab_base_pre = lambda self, tokenizer: "gpt-2"
    sys.argv = [script, hf, "--outfile", out, "--outtype", outtype]
    runpy.run_path(script, run_name="__main__")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
