#!/usr/bin/env python3
"""A tiny random gpt_oss Hugging Face directory whose experts are MXFP4, laid
out as transformers' integrations/mxfp4.py reads gpt-oss's checkpoints
(Mxfp4GptOssExperts, convert_moe_packed_tensors):

  model.layers.L.mlp.experts.gate_up_proj_blocks  uint8 [E, 2I, dim/32, 16]
  model.layers.L.mlp.experts.gate_up_proj_scales  uint8 [E, 2I, dim/32]
  model.layers.L.mlp.experts.down_proj_blocks     uint8 [E, dim, I/32, 16]
  model.layers.L.mlp.experts.down_proj_scales     uint8 [E, dim, I/32]

(byte j of a block: value 2j in its low nibble, 2j + 1 in its high one; a
value is FP4_VALUES[code] * 2^(scale - 127)), the biases and every other
tensor as model_ref.py's make-tiny gpt_oss writes them, and config.json's
quantization_config as gpt-oss's own ({"quant_method": "mxfp4", ...}).

  make_oss_mxfp4.py OUTDIR [--seed S] [--yarn-truncate] [--shape KEY=N,...] [--dtype bf16]

(--yarn-truncate: model_ref.py's, YaRN's ramp truncated as llama.cpp
computes it; --shape: config.json keys over the tiny ones, e.g.
hidden_size=512,intermediate_size=512,num_local_experts=32,num_hidden_layers=4
for the peak-RSS measurement of bench/README.md; --dtype bf16: every other
tensor written bf16, as gpt-oss's own checkpoints hold them, float32 by
default.)

The codes are random (every one of the 16); the scale bytes are random
around the exponents that give weights of model_ref's bf16 magnitudes
(gate_up up to 1.5, down up to 0.09), and one block per layer has scale
byte 0 (values down to 2^-128, subnormal in float32). model_ref.py's logits command reads such a directory as
transformers dequantizes it (mxfp4_ref.py's convert_moe_packed_tensors,
then its transpose to [E, in, out]).
"""
import json
import os
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import model_ref  # noqa: E402


def mxfp4(rng, experts, rows, cols, exponent):
    """Random blocks [E, rows, cols/32, 16] and scales [E, rows, cols/32]."""
    blocks = rng.integers(0, 256, (experts, rows, cols // 32, 16), dtype=np.uint8)
    scales = (127 + exponent + rng.integers(-1, 2, (experts, rows, cols // 32))).astype(np.uint8)
    scales[0, 0, 0] = 0
    return blocks, scales


def main(argv):
    if len(argv) < 2:
        print(__doc__)
        return 64
    out = argv[1]
    seed = int(argv[argv.index("--seed") + 1]) if "--seed" in argv else 1234
    import torch
    from safetensors.torch import load_file, save_file
    shape = None
    if "--shape" in argv:
        shape = {k: int(v) for k, v in (kv.split("=") for kv in argv[argv.index("--shape") + 1].split(","))}
    dtype = argv[argv.index("--dtype") + 1] if "--dtype" in argv else "f32"
    if dtype not in ("f32", "bf16"):
        print(f"make_oss_mxfp4.py: --dtype {dtype}: expected f32 or bf16")
        return 64
    model_ref.make_tiny("gpt_oss", out, seed=seed, yarn_truncate="--yarn-truncate" in argv, shape=shape, dtype=dtype)
    path = os.path.join(out, "model.safetensors")
    t = load_file(path)
    cfg = json.load(open(os.path.join(out, "config.json")))
    E, I, d = cfg["num_local_experts"], cfg["intermediate_size"], cfg["hidden_size"]
    rng = np.random.default_rng(seed)
    for layer in range(cfg["num_hidden_layers"]):
        p = f"model.layers.{layer}.mlp.experts."
        for name, rows, cols, exponent in (("gate_up_proj", 2 * I, d, -3), ("down_proj", d, I, -7)):
            del t[p + name]
            blocks, scales = mxfp4(rng, E, rows, cols, exponent)
            t[p + name + "_blocks"] = torch.from_numpy(blocks)
            t[p + name + "_scales"] = torch.from_numpy(scales)
    save_file(t, path, metadata={"format": "pt"})
    cfg["quantization_config"] = {"quant_method": "mxfp4",
                                  "modules_to_not_convert": ["model.layers.*.self_attn", "model.layers.*.mlp.router",
                                                             "model.embed_tokens", "lm_head"]}
    with open(os.path.join(out, "config.json"), "w") as f:
        json.dump(cfg, f, indent=2)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
