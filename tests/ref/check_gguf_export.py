#!/usr/bin/env python3
"""Independent checks of our GGUF writer (lib/formats, lib/export) with gguf-py, llama.cpp's
own Python reader and quantizer.

Usage: .venv/bin/python tests/ref/check_gguf_export.py COMMAND ...

  from-gguf SOURCE.gguf OUT.gguf DTYPE [SOURCE OUT DTYPE ...]
      OUT was exported from the model in SOURCE with SOURCE as tokenizer
      source. Checks: general.* keys (file_type for DTYPE, alignment 32,
      the source's name), every {arch}.* hyper-parameter equal to the
      source's with llama.cpp's value types, every tokenizer.* key of the
      source copied with the same type and value in the same order, the
      tensors' names in GGUF order (token_embd, each block's in order,
      output_norm, output) with the source's shapes, 1-D tensors F32, and
      every tensor's bytes equal to gguf-py's quantize (to DTYPE) of gguf-py's
      dequantize of the source tensor (Q/K rows stay in GGUF order: both
      files are llama.cpp's layout).
  from-hf HF_DIR OUT.gguf DTYPE [HF_DIR OUT.gguf DTYPE ...]
      OUT was exported from the tiny HF model in HF_DIR (model_ref.py
      make-tiny + make_tiny_tokenizer.py). Checks the arch keys against
      config.json, the tokenizer arrays against Hugging Face `tokenizers`
      (tokens by id, types, merges), bos/eos/template against
      tokenizer_config.json, and every tensor's bytes equal to gguf-py's
      quantize of the safetensors weights, llama Q/K permuted with
      convert_hf_to_gguf.py's LlamaModel.permute, a qwen3_moe layer's experts
      stacked as its Qwen2MoeModel.modify_tensors stacks them (torch.stack
      over the experts: GGUF dims {cols, rows, n_experts}) with the expert
      keys of llama.cpp's qwen3moe; with llama3 rope scaling,
      rope_freqs.weight against convert_hf_to_gguf.py's factors.
  same-keys A.gguf B.gguf KEY...
      Each KEY has the same type and value in A and B.

--data-layers 0,29 (before the command) compares the bytes of the global
tensors and of those blocks only (the rest by name, shape and type), to keep
a test on a real model fast.

Prints one line per failed check; exits 1 if any failed.
"""
import json
import math
import os
import sys

import numpy as np
from gguf import GGMLQuantizationType as QT
from gguf import GGUFReader, GGUFValueType as VT
from gguf.quants import dequantize, quantize

FTYPE = {"f32": 0, "f16": 1, "q8_0": 7, "bf16": 32}
QTYPE = {"f32": QT.F32, "f16": QT.F16, "q8_0": QT.Q8_0, "bf16": QT.BF16}
failures = []
data_layers = None  # None: every tensor's bytes are compared


def data_checked(name):
    p = name.split(".")
    return data_layers is None or p[0] != "blk" or int(p[1]) in data_layers


def fail(msg):
    failures.append(msg)
    print("FAIL:", msg)


def check(cond, msg):
    if not cond:
        fail(msg)


def value(f):
    """A field's value: scalar, string, or list (of strings or numbers)."""
    t = f.types[0]
    if t == VT.STRING:
        return bytes(f.parts[f.data[0]]).decode("utf-8", "surrogateescape")
    if t == VT.ARRAY:
        if len(f.types) == 1:  # gguf-py leaves an empty array's element type out
            return []
        if f.types[1] == VT.STRING:
            return [bytes(f.parts[i]) for i in f.data]
        return [f.parts[i].tolist()[0] for i in f.data]
    return f.parts[f.data[0]].tolist()[0]


def expected_order(arch, n_layers, names):
    """llama.cpp's usual order, restricted to the names present."""
    blk = ["attn_norm", "attn_q", "attn_k", "attn_v", "attn_q.bias", "attn_k.bias", "attn_v.bias",
           "attn_q_norm", "attn_k_norm", "attn_output", "ffn_norm", "ffn_gate", "ffn_up", "ffn_down",
           "ffn_gate_inp", "ffn_gate_exps", "ffn_up_exps", "ffn_down_exps"]
    order = ["token_embd.weight", "rope_freqs.weight"]
    for i in range(n_layers):
        for b in blk:
            order.append(f"blk.{i}.{b}" if b.endswith(".bias") else f"blk.{i}.{b}.weight")
    order += ["output_norm.weight", "output.weight"]
    return [n for n in order if n in names]


def out_type(name, t_shape, dtype):
    # vectors, and a mixture of experts' router (its logits choose the experts), as llama.cpp's converter
    if len(t_shape) == 1 or name.endswith("ffn_gate_inp.weight"):
        return QT.F32
    if dtype == "q8_0" and t_shape[0] % 32:
        return QT.F16
    return QTYPE[dtype]


def check_common(r, dtype, arch):
    f = r.fields
    check(value(f["general.architecture"]) == arch, "general.architecture")
    check(value(f["general.file_type"]) == FTYPE[dtype], "general.file_type")
    check(f["general.file_type"].types[0] == VT.UINT32, "general.file_type is u32")
    check(value(f["general.alignment"]) == 32, "general.alignment")
    check(f["GGUF.version"].parts[0].tolist()[0] == 3, "GGUF version 3")
    for t in r.tensors:
        check(t.data_offset % 32 == 0, f"{t.name}: data offset {t.data_offset} not aligned to 32")
        want = out_type(t.name, t.shape.tolist(), dtype)
        check(t.tensor_type == want, f"{t.name}: type {t.tensor_type.name}, expected {want.name}")


def check_bytes(name, got, want_f32, qtype):
    want = quantize(np.ascontiguousarray(want_f32, dtype=np.float32), qtype)
    got_b = np.ascontiguousarray(got).view(np.uint8).reshape(-1)
    want_b = np.ascontiguousarray(want).view(np.uint8).reshape(-1)
    if got_b.shape != want_b.shape or not np.array_equal(got_b, want_b):
        n = int(np.count_nonzero(got_b != want_b)) if got_b.shape == want_b.shape else -1
        fail(f"{name}: {qtype.name} bytes differ from gguf-py's quantize ({n} bytes differ)")


def from_gguf(src_path, out_path, dtype):
    src, out = GGUFReader(src_path), GGUFReader(out_path)
    arch = value(src.fields["general.architecture"])
    check_common(out, dtype, arch)
    check(value(out.fields["general.name"]) == value(src.fields["general.name"]), "general.name")
    hyper = ["block_count", "context_length", "embedding_length", "feed_forward_length",
             "attention.head_count", "attention.head_count_kv", "rope.freq_base",
             "attention.layer_norm_rms_epsilon", "vocab_size", "rope.dimension_count"]
    for h in hyper:
        k = f"{arch}.{h}"
        if k not in src.fields:
            continue
        check(k in out.fields and value(out.fields[k]) == value(src.fields[k]), f"{k} differs")
        check(out.fields[k].types == src.fields[k].types, f"{k}: type differs")
    hd = value(src.fields[f"{arch}.embedding_length"]) // value(src.fields[f"{arch}.attention.head_count"])
    check(value(out.fields[f"{arch}.attention.key_length"]) == hd, "key_length")
    src_tok = [k for k in src.fields if k.startswith("tokenizer.")]
    out_tok = [k for k in out.fields if k.startswith("tokenizer.")]
    check(src_tok == out_tok, f"tokenizer keys differ: {out_tok} vs {src_tok}")
    for k in src_tok:
        if k in out.fields:
            check(out.fields[k].types == src.fields[k].types, f"{k}: type differs")
            check(value(out.fields[k]) == value(src.fields[k]), f"{k}: value differs")
    src_t = {t.name: t for t in src.tensors}
    names = [t.name for t in out.tensors]
    check(names == expected_order(arch, value(src.fields[f"{arch}.block_count"]), set(src_t)),
          "tensor names or order")
    for t in out.tensors:
        s = src_t.get(t.name)
        if s is None:
            fail(f"{t.name}: not in the source")
            continue
        check(t.shape.tolist() == s.shape.tolist(), f"{t.name}: shape {t.shape.tolist()} vs {s.shape.tolist()}")
        if data_checked(t.name):
            check_bytes(t.name, t.data, dequantize(s.data, s.tensor_type).reshape(-1), t.tensor_type)


def llama_permute(w, n_head):
    # convert_hf_to_gguf.py LlamaModel.permute
    return (w.reshape(n_head, 2, w.shape[0] // n_head // 2, *w.shape[1:])
            .swapaxes(1, 2).reshape(w.shape))


def rope_factors(cfg, hd):
    # convert_hf_to_gguf.py LlamaModel.generate_extra_tensors (llama3)
    rs = cfg["rope_scaling"]
    base = cfg.get("rope_theta", 10000.0)
    freqs = 1.0 / (base ** (np.arange(0, hd, 2, dtype=np.float32) / hd))
    factor, lo, hi = rs["factor"], rs["low_freq_factor"], rs["high_freq_factor"]
    old = rs["original_max_position_embeddings"]
    low_wl, high_wl = old / lo, old / hi
    out = []
    for f in freqs:
        wl = 2 * math.pi / f
        if wl < high_wl:
            out.append(1)
        elif wl > low_wl:
            out.append(factor)
        else:
            smooth = (old / wl - lo) / (hi - lo)
            out.append(1 / ((1 - smooth) / factor + smooth))
    return np.array(out, dtype=np.float32)


def from_hf(d, out_path, dtype):
    import torch
    from safetensors.torch import load_file
    from tokenizers import Tokenizer
    cfg = json.load(open(os.path.join(d, "config.json")))
    tcfg = json.load(open(os.path.join(d, "tokenizer_config.json")))
    arch = {"qwen3_moe": "qwen3moe"}.get(cfg["model_type"], cfg["model_type"])
    out = GGUFReader(out_path)
    f = out.fields
    check_common(out, dtype, arch)
    nh = cfg["num_attention_heads"]
    nkv = cfg.get("num_key_value_heads", nh)
    hd = cfg.get("head_dim", cfg["hidden_size"] // nh)
    want = {"block_count": cfg["num_hidden_layers"], "embedding_length": cfg["hidden_size"],
            "feed_forward_length": cfg["intermediate_size"], "attention.head_count": nh,
            "attention.head_count_kv": nkv, "context_length": cfg["max_position_embeddings"],
            "attention.key_length": hd, "attention.value_length": hd, "rope.dimension_count": hd,
            "vocab_size": cfg["vocab_size"]}
    if arch == "qwen3moe":
        want.update({"expert_count": cfg["num_experts"], "expert_used_count": cfg["num_experts_per_tok"],
                     "expert_feed_forward_length": cfg["moe_intermediate_size"]})
    for k, v in want.items():
        key = f"{arch}.{k}"
        check(key in f and value(f[key]) == v and f[key].types[0] == VT.UINT32, f"{key}: expected u32 {v}")
    check(value(f[f"{arch}.rope.freq_base"]) == np.float32(cfg["rope_theta"]), "rope.freq_base")
    check(value(f[f"{arch}.attention.layer_norm_rms_epsilon"]) == np.float32(cfg["rms_norm_eps"]), "rms eps")

    # the tokenizer, against HF tokenizers
    tk = Tokenizer.from_file(os.path.join(d, "tokenizer.json"))
    tj = json.load(open(os.path.join(d, "tokenizer.json")))
    vocab = tk.get_vocab(with_added_tokens=True)
    V = cfg["vocab_size"]
    by_id = {i: t for t, i in vocab.items()}
    added = {a["id"]: a for a in tj["added_tokens"]}
    want_tokens = [(by_id[i] if i in by_id else f"[PAD{i}]").encode() for i in range(V)]
    want_types = [(3 if added[i]["special"] else 4) if i in added else (1 if i in by_id else 5) for i in range(V)]
    check(value(f["tokenizer.ggml.model"]) == "gpt2", "tokenizer.ggml.model")
    check(value(f["tokenizer.ggml.pre"]) == "gpt-2", "tokenizer.ggml.pre")
    check(value(f["tokenizer.ggml.tokens"]) == want_tokens, "tokenizer.ggml.tokens")
    check(value(f["tokenizer.ggml.token_type"]) == want_types, "tokenizer.ggml.token_type")
    check(f["tokenizer.ggml.token_type"].types == [VT.ARRAY, VT.INT32], "token_type is i32[]")
    merges = [m if isinstance(m, str) else " ".join(m) for m in tj["model"]["merges"]]
    check(value(f["tokenizer.ggml.merges"]) == [m.encode() for m in merges], "tokenizer.ggml.merges")
    check(value(f["tokenizer.ggml.bos_token_id"]) == vocab[tcfg["bos_token"]], "bos id")
    check(value(f["tokenizer.ggml.eos_token_id"]) == vocab[tcfg["eos_token"]], "eos id")
    check(value(f["tokenizer.chat_template"]) == tcfg["chat_template"], "chat template")

    # the tensors, against the safetensors weights
    W = {k: v.to(torch.float32).numpy() for k, v in load_file(os.path.join(d, "model.safetensors")).items()}
    hf_of = {"token_embd": "model.embed_tokens", "output_norm": "model.norm", "output": "lm_head",
             "attn_norm": "input_layernorm", "attn_q": "self_attn.q_proj", "attn_k": "self_attn.k_proj",
             "attn_v": "self_attn.v_proj", "attn_output": "self_attn.o_proj", "attn_q_norm": "self_attn.q_norm",
             "attn_k_norm": "self_attn.k_norm", "ffn_norm": "post_attention_layernorm",
             "ffn_gate": "mlp.gate_proj", "ffn_up": "mlp.up_proj", "ffn_down": "mlp.down_proj",
             "ffn_gate_inp": "mlp.gate"}
    exps = {"ffn_gate_exps": "gate_proj", "ffn_up_exps": "up_proj", "ffn_down_exps": "down_proj"}
    expect = set()
    for t in out.tensors:
        if t.name == "rope_freqs.weight":
            got = np.asarray(t.data, dtype=np.float32).reshape(-1)
            ref = rope_factors(cfg, hd)
            check(np.allclose(got, ref, rtol=1e-6, atol=0), f"rope_freqs: {got} vs {ref}")
            continue
        p = t.name.split(".")
        if p[0] == "blk" and p[2] in exps:
            names = [f"model.layers.{p[1]}.mlp.experts.{x}.{exps[p[2]]}.weight" for x in range(cfg["num_experts"])]
            expect.update(names)
            if not all(n in W for n in names):
                fail(f"{t.name}: experts of layer {p[1]} not in the HF model")
                continue
            w = np.stack([W[n] for n in names])
            check(t.shape.tolist() == list(reversed(w.shape)), f"{t.name}: shape {t.shape.tolist()} vs {w.shape}")
            check_bytes(t.name, t.data, w, t.tensor_type)
            continue
        hf = (f"model.layers.{p[1]}.{hf_of[p[2]]}.{p[3]}" if p[0] == "blk" else f"{hf_of[p[0]]}.{p[1]}")
        expect.add(hf)
        if hf not in W:
            fail(f"{t.name}: {hf} not in the HF model")
            continue
        w = W[hf]
        check(t.shape.tolist() == list(reversed(w.shape)), f"{t.name}: shape {t.shape.tolist()} vs {w.shape}")
        if arch == "llama" and p[0] == "blk" and p[2] in ("attn_q", "attn_k"):
            w = llama_permute(w, nh if p[2] == "attn_q" else nkv)
        check_bytes(t.name, t.data, w, t.tensor_type)
    check(expect == set(W), f"tensors missing: {set(W) - expect}")
    check(("rope_freqs.weight" in [t.name for t in out.tensors]) == bool(cfg.get("rope_scaling")),
          "rope_freqs.weight present exactly when rope_scaling is llama3")
    check([t.name for t in out.tensors] == expected_order(arch, cfg["num_hidden_layers"],
                                                          {t.name for t in out.tensors}), "tensor order")


def same_keys(a_path, b_path, keys):
    a, b = GGUFReader(a_path), GGUFReader(b_path)
    for k in keys:
        if k not in a.fields or k not in b.fields:
            fail(f"{k}: missing ({k in a.fields}, {k in b.fields})")
            continue
        check(a.fields[k].types == b.fields[k].types, f"{k}: type differs")
        check(value(a.fields[k]) == value(b.fields[k]), f"{k}: value differs")


def main(argv):
    global data_layers
    argv = list(argv)
    if "--data-layers" in argv:
        i = argv.index("--data-layers")
        data_layers = {int(x) for x in argv[i + 1].split(",")}
        del argv[i:i + 2]
    cmd, args = (argv[1], argv[2:]) if len(argv) > 1 else ("", [])
    if cmd == "same-keys" and len(args) >= 3:
        same_keys(args[0], args[1], args[2:])
    elif cmd in ("from-gguf", "from-hf") and args and len(args) % 3 == 0:
        for i in range(0, len(args), 3):
            before = len(failures)
            (from_gguf if cmd == "from-gguf" else from_hf)(*args[i:i + 3])
            print(f"{args[i + 1]} ({args[i + 2]}): {len(failures) - before} failures")
    else:
        print(__doc__)
        return 64
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
