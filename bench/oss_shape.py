#!/usr/bin/env python3
"""A gpt-oss-20b-shaped GGUF with random weights, for bench/moe.sh: the real
configuration (24 layers, 32 experts of which 4 per token, hidden 2880,
expert FFN 2880, 64 query heads and 8 key/value heads of 64, sliding window
128 on every other layer, YaRN factor 32 over 4096, vocabulary 201,088), laid
out as llama.cpp's converter writes gpt-oss: experts MXFP4, attention bf16,
token embedding and head Q8_0, router, norms, biases and sinks f32.

Values are random but of a trained model's magnitudes (so that routing
spreads tokens over the experts and nothing overflows); the speed of a
format does not depend on the values in it. Tensors are written one at a
time (the file is about 12.6 GB; memory stays under one tensor's size).
The vocabulary is 256 byte tokens, gpt-oss's special tokens at their ids,
and fillers, with pre-tokenizer "gpt-4o" as gpt-oss's GGUFs name it.

Usage: oss_shape.py GGUF_PY_DIR OUT.gguf [--layers N]
GGUF_PY_DIR is llama.cpp's gguf-py (build/llama.cpp/src/gguf-py): it knows
the MXFP4 type. --layers writes fewer layers (a quick look at the script).
"""
import os
import sys

import numpy as np

DIM, FFN, LAYERS, EXPERTS, TOPK = 2880, 2880, 24, 32, 4
HEADS, KV_HEADS, HEAD_DIM, VOCAB = 64, 8, 64, 201088
SPECIAL = {199998: "<|startoftext|>", 199999: "<|endoftext|>", 200002: "<|return|>",
           200003: "<|constrain|>", 200005: "<|channel|>", 200006: "<|start|>",
           200007: "<|end|>", 200008: "<|message|>", 200012: "<|call|>", 200018: "<|endofprompt|>"}


def byte_chars():
    """GPT-2's byte-to-character map, the first 256 tokens."""
    bs = list(range(ord("!"), ord("~") + 1)) + list(range(0xA1, 0xAD)) + list(range(0xAE, 0x100))
    cs, n = bs[:], 0
    for b in range(256):
        if b not in bs:
            bs.append(b)
            cs.append(256 + n)
            n += 1
    return [chr(c) for _, c in sorted(zip(bs, cs))]


def add_vocab(w, gguf, vocab, special, pre, bos, eos):
    """A minimal GPT-2 BPE vocabulary: the 256 byte tokens, one merge,
    special tokens (id: text) at their ids, fillers up to vocab."""
    tokens = byte_chars() + ["Ġt"]
    tokens += [f"<|filler_{i}|>" for i in range(len(tokens), vocab)]
    types = [gguf.TokenType.NORMAL] * vocab
    for i, s in special.items():
        tokens[i], types[i] = s, gguf.TokenType.CONTROL
    w.add_tokenizer_model("gpt2")
    w.add_tokenizer_pre(pre)
    w.add_token_list(tokens)
    w.add_token_types(types)
    w.add_token_merges(["Ġ t"])
    w.add_bos_token_id(bos)
    w.add_eos_token_id(eos)


def write_plan(w, plan, out):
    """The tensors of plan, (name, ggml type, the values' shape rows first,
    maker of the values or their bytes), each made when written, one at a
    time; then out.part renamed to out."""
    from gguf import GGMLQuantizationType as T
    from gguf.quants import quant_shape_to_byte_shape

    for name, t, shape, _ in plan:
        if t == T.F32:
            w.add_tensor_info(name, shape, np.dtype(np.float32), 4 * int(np.prod(shape)))
        else:
            nbytes = quant_shape_to_byte_shape(shape, t)
            w.add_tensor_info(name, nbytes, np.dtype(np.uint8), int(np.prod(nbytes)), raw_dtype=t)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_ti_data_to_file()
    for _, t, shape, make in plan:
        x = make(shape)
        w.write_tensor_data(x.view(np.uint8) if t == T.BF16 else x)
    w.close()
    os.replace(out + ".part", out)


def f32(rng, shape, scale):
    return (rng.standard_normal(shape, dtype=np.float32) * scale).astype(np.float32)


def bf16_bytes(rng, rows, cols, scale):
    """bf16 values as their uint16 bits, [rows, cols]."""
    x = f32(rng, (rows, cols), scale)
    return (x.view(np.uint32) >> 16).astype(np.uint16)


def q8_0_bytes(rng, rows, cols, scale):
    """Q8_0 blocks (a float16 scale, 32 int8 codes), [rows, cols / 32 * 34] bytes."""
    nb = cols // 32
    blocks = np.empty((rows, nb, 34), dtype=np.uint8)
    blocks[:, :, 0:2] = np.full((rows, nb), scale / 127, dtype=np.float16).view(np.uint8).reshape(rows, nb, 2)
    blocks[:, :, 2:] = rng.integers(-127, 128, size=(rows, nb, 32), dtype=np.int8).view(np.uint8)
    return blocks.reshape(rows, nb * 34)


def mxfp4_bytes(rng, experts, rows, cols, exp_lo, exp_hi):
    """MXFP4 blocks (an E8M0 scale byte, 16 bytes of 4-bit E2M1 codes),
    [experts, rows, cols / 32 * 17] bytes; scales 2^(e - 127) for e in
    [exp_lo, exp_hi]."""
    nb = cols // 32
    blocks = rng.integers(0, 256, size=(experts, rows, nb, 17), dtype=np.uint8)
    blocks[..., 0] = rng.integers(exp_lo, exp_hi + 1, size=(experts, rows, nb), dtype=np.uint8)
    return blocks.reshape(experts, rows, nb * 17)


def main():
    args = sys.argv[1:]
    layers = LAYERS
    if "--layers" in args:
        i = args.index("--layers")
        layers = int(args[i + 1])
        del args[i:i + 2]
    if len(args) != 2:
        sys.exit(__doc__.strip().split("\n\n")[-2])
    sys.path.insert(0, args[0])
    import gguf
    from gguf import GGMLQuantizationType as T

    out = args[1]
    rng = np.random.default_rng(20)
    w = gguf.GGUFWriter(out + ".part", "gpt-oss")
    w.add_block_count(layers)
    w.add_context_length(131072)
    w.add_embedding_length(DIM)
    w.add_feed_forward_length(FFN)
    w.add_expert_feed_forward_length(FFN)
    w.add_head_count(HEADS)
    w.add_head_count_kv(KV_HEADS)
    w.add_key_length(HEAD_DIM)
    w.add_value_length(HEAD_DIM)
    w.add_rope_freq_base(150000.0)
    w.add_rope_scaling_type(gguf.RopeScalingType.YARN)
    w.add_rope_scaling_factor(32.0)
    w.add_rope_scaling_orig_ctx_len(4096)
    w.add_layer_norm_rms_eps(1e-5)
    w.add_expert_count(EXPERTS)
    w.add_expert_used_count(TOPK)
    w.add_sliding_window(128)
    w.add_file_type(gguf.LlamaFileType.MOSTLY_MXFP4_MOE)

    add_vocab(w, gguf, VOCAB, SPECIAL, "gpt-4o", 199998, 200002)

    # (name, ggml type, the values' shape, rows first; maker of the values or
    # their bytes): made when written, one at a time
    q_dim, kv_dim = HEADS * HEAD_DIM, KV_HEADS * HEAD_DIM
    plan = [("token_embd.weight", T.Q8_0, (VOCAB, DIM), lambda s: q8_0_bytes(rng, *s, 0.05))]
    for l in range(layers):
        b = f"blk.{l}."
        norm = lambda s: 1 + f32(rng, s, 0.1)
        bias = lambda s: f32(rng, s, 0.02)
        attn = lambda s: bf16_bytes(rng, *s, 0.02)
        plan += [
            (b + "attn_norm.weight", T.F32, (DIM,), norm),
            (b + "attn_q.weight", T.BF16, (q_dim, DIM), attn),
            (b + "attn_q.bias", T.F32, (q_dim,), bias),
            (b + "attn_k.weight", T.BF16, (kv_dim, DIM), attn),
            (b + "attn_k.bias", T.F32, (kv_dim,), bias),
            (b + "attn_v.weight", T.BF16, (kv_dim, DIM), attn),
            (b + "attn_v.bias", T.F32, (kv_dim,), bias),
            (b + "attn_output.weight", T.BF16, (DIM, q_dim), attn),
            (b + "attn_output.bias", T.F32, (DIM,), bias),
            (b + "attn_sinks.weight", T.F32, (HEADS,), lambda s: f32(rng, s, 1.0)),
            (b + "post_attention_norm.weight", T.F32, (DIM,), norm),
            (b + "ffn_gate_inp.weight", T.F32, (EXPERTS, DIM), bias),
            (b + "ffn_gate_inp.bias", T.F32, (EXPERTS,), lambda s: f32(rng, s, 0.1)),
            (b + "ffn_gate_exps.weight", T.MXFP4, (EXPERTS, FFN, DIM), lambda s: mxfp4_bytes(rng, *s, 119, 121)),
            (b + "ffn_gate_exps.bias", T.F32, (EXPERTS, FFN), bias),
            (b + "ffn_up_exps.weight", T.MXFP4, (EXPERTS, FFN, DIM), lambda s: mxfp4_bytes(rng, *s, 119, 121)),
            (b + "ffn_up_exps.bias", T.F32, (EXPERTS, FFN), bias),
            (b + "ffn_down_exps.weight", T.MXFP4, (EXPERTS, DIM, FFN), lambda s: mxfp4_bytes(rng, *s, 117, 119)),
            (b + "ffn_down_exps.bias", T.F32, (EXPERTS, DIM), bias),
        ]
    plan += [("output_norm.weight", T.F32, (DIM,), lambda s: 1 + f32(rng, s, 0.1)),
             ("output.weight", T.Q8_0, (VOCAB, DIM), lambda s: q8_0_bytes(rng, *s, 0.05))]

    write_plan(w, plan, out)


if __name__ == "__main__":
    main()
