#!/usr/bin/env python3
"""model_ref.py's mixture-of-experts block against transformers' own.

Usage: .venv-peft/bin/python tests/ref/check_moe_block.py

The pinned transformers (4.46.3, the .venv-peft venv) predates Qwen3-MoE,
but its Qwen2MoeSparseMoeBlock routes as Qwen3MoeSparseMoeBlock does
(softmax over every expert, top k, renormalised with norm_topk_prob,
experts summed by index_add_), plus a shared expert, whose down projection
is zeroed here so that it adds exactly 0. Random weights and 40 tokens in
float64, with norm_topk_prob off and on: model_ref.sparse_moe must give the
block's output. transformers takes the softmax in float32 (dtype=torch.float),
so the two differ by float32's rounding of the routing weights: 1e-6 of the
largest output (measured 3e-8 to 9e-8 relative), while a wrong renormalisation,
expert or weight is off by 1e-2 or more. Prints TAP.
"""
import os
import sys

import torch
from transformers import Qwen2MoeConfig
from transformers.models.qwen2_moe.modeling_qwen2_moe import Qwen2MoeSparseMoeBlock

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import model_ref  # noqa: E402

TOL = 1e-6


def main():
    torch.manual_seed(0)
    bad = 0
    for n, norm in enumerate((False, True), 1):
        cfg = Qwen2MoeConfig(hidden_size=64, num_experts=8, num_experts_per_tok=2, moe_intermediate_size=32,
                             shared_expert_intermediate_size=16, norm_topk_prob=norm)
        blk = Qwen2MoeSparseMoeBlock(cfg).double()
        with torch.no_grad():
            for p in blk.parameters():
                p.normal_(0, 0.3)
            blk.shared_expert.down_proj.weight.zero_()
        W = {"m.mlp.gate.weight": blk.gate.weight.detach()}
        for x, e in enumerate(blk.experts):
            for name in ("gate_proj", "up_proj", "down_proj"):
                W[f"m.mlp.experts.{x}.{name}.weight"] = getattr(e, name).weight.detach()
        h = torch.randn(40, 64, dtype=torch.float64)
        with torch.no_grad():
            want = blk(h[None])[0][0]
            c = dict(top_k=2, norm_topk=norm)
            got = model_ref.sparse_moe(c, W, "m.", h)
        rel = float((got - want).abs().max() / want.abs().max())
        ok = rel <= TOL and c["moe_margin"] > 1e-6
        bad += not ok
        print(f"{'' if ok else 'not '}ok {n} - norm_topk_prob {norm}: relative difference {rel:.2g} "
              f"(tolerance {TOL:g}), smallest top-k margin {c['moe_margin']:.2g}")
    print("1..2")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
