#!/usr/bin/env python3
"""A GGUF of a dense qwen2 model's shape with random weights, for
bench/qlora.sh: Qwen2.5-1.5B (hidden 1536, 28 layers, 12 query heads and 2
key/value heads of 128, FFN 8960, vocabulary 151,936, tied embeddings) or
Qwen2.5-7B (hidden 3584, 28 layers, 28 and 4 heads of 128, FFN 18944,
vocabulary 152,064, its own LM head), both with q, k and v biases, RoPE base
1e6, RMSNorm eps 1e-6, as their published configs say.

Every matrix (embeddings and head included) is Q8_0, as llama.cpp's
converter writes with --outtype q8_0; norms and biases float32. The files
are 1.6 GB and 8.1 GB. Values are random but of a trained model's
magnitudes (a matrix's entries about 0.5 / sqrt(its inputs), embeddings
about 0.03); the speed of a format does not depend on the values in it.
Tensors are written one at a time (memory stays under one tensor's size).
The vocabulary is 256 byte tokens, Qwen2's special tokens at their ids and
fillers, with pre-tokenizer "qwen2"; batches come as token ids.

Usage: dense_shape.py GGUF_PY_DIR OUT.gguf qwen2.5-1.5b|qwen2.5-7b [--layers N]
GGUF_PY_DIR is llama.cpp's gguf-py (build/llama.cpp/src/gguf-py). --layers
writes fewer layers (a quick look at the script).
"""
import sys

import numpy as np

from oss_shape import add_vocab, f32, q8_0_bytes, write_plan

SHAPES = {  # hidden, FFN, layers, heads, kv heads, head dim, vocabulary, tied
    "qwen2.5-1.5b": (1536, 8960, 28, 12, 2, 128, 151936, True),
    "qwen2.5-7b": (3584, 18944, 28, 28, 4, 128, 152064, False),
}
SPECIAL = {151643: "<|endoftext|>", 151644: "<|im_start|>", 151645: "<|im_end|>"}


def main():
    args = sys.argv[1:]
    layers = None
    if "--layers" in args:
        i = args.index("--layers")
        layers = int(args[i + 1])
        del args[i:i + 2]
    if len(args) != 3 or args[2] not in SHAPES:
        sys.exit(__doc__.strip().split("\n\n")[-2])
    sys.path.insert(0, args[0])
    import gguf
    from gguf import GGMLQuantizationType as T

    out, name = args[1], args[2]
    dim, ffn, n_layers, heads, kv_heads, head_dim, vocab, tied = SHAPES[name]
    layers = layers or n_layers
    rng = np.random.default_rng(36)
    w = gguf.GGUFWriter(out + ".part", "qwen2")
    w.add_block_count(layers)
    w.add_context_length(32768)
    w.add_embedding_length(dim)
    w.add_feed_forward_length(ffn)
    w.add_head_count(heads)
    w.add_head_count_kv(kv_heads)
    w.add_rope_freq_base(1000000.0)
    w.add_layer_norm_rms_eps(1e-6)
    w.add_file_type(gguf.LlamaFileType.MOSTLY_Q8_0)

    add_vocab(w, gguf, vocab, SPECIAL, "qwen2", 151643, 151645)

    # Q8_0 codes are uniform in [-127, 127]: scale s gives a spread of s / sqrt(3)
    def mat(s):
        return q8_0_bytes(rng, s[0], s[1], 0.5 * np.sqrt(3.0 / s[1]))

    def norm(s):
        return 1 + f32(rng, s, 0.1)

    def bias(s):
        return f32(rng, s, 0.1)

    def embd(s):
        return q8_0_bytes(rng, *s, 0.03 * np.sqrt(3.0))

    q_dim, kv_dim = heads * head_dim, kv_heads * head_dim
    plan = [("token_embd.weight", T.Q8_0, (vocab, dim), embd)]
    for layer in range(layers):
        b = f"blk.{layer}."
        plan += [
            (b + "attn_norm.weight", T.F32, (dim,), norm),
            (b + "attn_q.weight", T.Q8_0, (q_dim, dim), mat),
            (b + "attn_q.bias", T.F32, (q_dim,), bias),
            (b + "attn_k.weight", T.Q8_0, (kv_dim, dim), mat),
            (b + "attn_k.bias", T.F32, (kv_dim,), bias),
            (b + "attn_v.weight", T.Q8_0, (kv_dim, dim), mat),
            (b + "attn_v.bias", T.F32, (kv_dim,), bias),
            (b + "attn_output.weight", T.Q8_0, (dim, q_dim), mat),
            (b + "ffn_norm.weight", T.F32, (dim,), norm),
            (b + "ffn_gate.weight", T.Q8_0, (ffn, dim), mat),
            (b + "ffn_up.weight", T.Q8_0, (ffn, dim), mat),
            (b + "ffn_down.weight", T.Q8_0, (dim, ffn), mat),
        ]
    plan.append(("output_norm.weight", T.F32, (dim,), norm))
    if not tied:
        plan.append(("output.weight", T.Q8_0, (vocab, dim), mat))

    write_plan(w, plan, out)


if __name__ == "__main__":
    main()
