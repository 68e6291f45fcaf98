#!/usr/bin/env python3
"""PyTorch autograd reference for the gradient of the GRPO loss (lib/train).

Usage: .venv/bin/python tests/ref/train_ref.py CASE WORKDIR
  CASE names an architecture and a setting, e.g. llama-full, qwen2-lora,
  qwen3-full-seq, llama-tied-full-beta, llama3rope-lora-rslora (see CASES).
  The "turns" cases are multi-turn records: each sequence's completion_mask
  (TURN_MASKS) marks environment tokens, which the reference keeps in the
  forward (context) and masks out of every sum and count of the loss, as
  TRL does with its env_mask.

A tiny random model of the architecture (model_ref.make_tiny) gets a batch
of four sequences (prompt + completion); the reference computes, in float64,
logp of every completion token under logits / temperature, the GRPO loss of
the design brief (token or sequence importance, clip-higher, k3 KL with
beta, the case's aggregation), and its gradient by autograd with respect to
every parameter (full fine-tuning) or every LoRA factor (PEFT semantics:
y = x W^T + scale * x A^T B^T; on gpt_oss's stacked experts PEFT's
ParamWrapper delta of lora_A [r E, in] and lora_B [out, r E], which the
driver writes as PEFT saves them: model_ref.param_wrapper_delta). The old log-probs are the reference's own
logp plus noise large enough that clipping is active on both sides, kept
away from the clip edges so float32 rounding cannot flip a branch.

build/tests/test_train --grad computes the same in float32; every gradient
tensor must agree to a relative error (max |ours - ref| / max |ref|) of at
most 1e-4, and logp to 1e-5 relative to the largest |logp|.

The "-bf16" cases run every matrix product as grpo-update --compute bf16
does (operands rounded to bf16, float32 sums; lib/ops/gemm_bf16.h), against
the same float64 reference. Their tolerances follow from bf16's unit
roundoff 2^-9: a product of two rounded operands is off by up to
U = 2 * 2^-9 = 2^-8 of its size, so
  - logp, as the logits, to 2 U relative to the largest |logp| (the logits'
    sums can cancel, and the hidden states carry the same error from the
    layers below);
  - each loss term weighs its token by exp(logp - old): an absolute logp
    error of U max|logp| moves the weights, the loss and every gradient by
    that fraction: the loss to U max(1, max|logp|) absolute, each gradient
    tensor to U (4 + max|logp|) relative (4: the products along the
    backward themselves).
Measured (2 layers, dim 64): gradients 1.5e-2 to 2.2e-2 relative where
max|logp| is 7 to 9 (tolerance 4.3e-2 to 5e-2), 5.4e-2 on the tied head
(max|logp| 21, tolerance 9.7e-2); logp 2.3e-3 to 3.3e-3 (tolerance 7.8e-3).
The float32 cases stay under 2e-6.

The "base" cases train LoRA over a frozen base packed as grpo-update
--base-weights q8, q4k or bf16 packs it (lib/model/pack.c, model_pack_frozen):
every layer matrix, the embeddings and the LM head (a tied head once, the
embeddings' blocks), which the case requires; the driver writes the packed
matrices as its kernels read them ("base.*", exact), and the float64
reference runs on those values, so the float32 tolerances hold (measured:
gradients 1.0e-6 to 5.8e-6, logp 1.2e-7 to 3.3e-7; a mixture's experts each
packed apart). The "mxfp4" cases keep a
gpt-oss's MXFP4 experts (make_oss_mxfp4.py) as the file's blocks; the
reference takes transformers' dequantization of them (model_ref.hf_model),
which the values the kernels read must equal exactly (gradients 1.7e-6 to
2.0e-6); in the "mxfp4bf16" cases the file holds every other tensor bf16,
and the "mxfp4q8gguf" case is llama.cpp's converter's q8_0 GGUF of one
(needs .venv-peft and the llama.cpp source): the base holds the attention,
the embeddings and the head as the file does (bf16 panels, the file's
Q8_0 blocks), which the case requires, and the reference takes the file's
values (gguf-py's dequantization of the Q8_0 blocks), which the kernels
read exactly (gradients 1.6e-6 to 1.8e-6); the "q4kgguf" case loads a Q4_K GGUF of random blocks
(q4k_gguf.py --random, exported from the tiny model) as grpo-update loads a
q4k base, its blocks as they are, and the reference takes gguf-py's
dequantization of them, which the values the kernels read must equal
exactly (gradients 3.1e-6). A bf16 case must also differ from the
reference by more than BF16_FLOOR (2^-12, twice the float32 tolerance): the
check then fails if the driver ran the products in float32, and a product
that were wrong by more than rounding (a lost pair of k, a swapped panel)
is off by far more than U.
"""
import json
import math
import os
import subprocess
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import model_ref  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
GRAD_TOL = 1e-4
LOGP_TOL = 1e-5
BF16_CLIP_MARGIN = 0.08
BF16_U = 2.0 ** -8
BF16_FLOOR = 2.0 ** -12

CASES = {
    "llama-full": dict(arch="llama"),
    "llama-tied-full-beta": dict(arch="llama", tied=True, beta=0.04),
    "llama3rope-full-dapo": dict(arch="llama", llama3=True, loss="dapo", epsilon_high=0.28),
    "qwen2-full-seq": dict(arch="qwen2", sequence_level=True, loss="bnpo", beta=0.1),
    "qwen3-full-drgrpo": dict(arch="qwen3", loss="dr_grpo", beta=0.04),
    "llama-lora": dict(arch="llama", lora=dict(r=4, alpha=8, targets="all", rslora=False, seed=3)),
    "qwen2-lora-beta": dict(arch="qwen2", beta=0.04, lora=dict(r=4, alpha=8, targets="q,v,down", rslora=False, seed=4)),
    "qwen3-lora-rslora-seq": dict(arch="qwen3", sequence_level=True,
                                  lora=dict(r=8, alpha=16, targets="all", rslora=True, seed=5)),
    "llama-full-micro-recompute": dict(arch="llama", beta=0.04, micro_seqs=1, recompute=True),
    # the entropy bonus reaches the logits through the whole softmax, not logp alone
    "llama-full-entropy": dict(arch="llama", entropy_coef=0.05),
    "qwen2-lora-entropy-dapo-micro": dict(arch="qwen2", loss="dapo", beta=0.04, entropy_coef=0.2, micro_seqs=2,
                                          lora=dict(r=4, alpha=8, targets="all", rslora=False, seed=5)),
    # multi-turn records: environment tokens (completion_mask 0) are context
    # only; every normaliser counts the policy's tokens
    "llama-full-turns": dict(arch="llama", beta=0.04, entropy_coef=0.05, turns=True),
    "qwen2-full-turns-seq-drgrpo": dict(arch="qwen2", sequence_level=True, loss="dr_grpo", turns=True),
    "qwen3-lora-turns-dapo-micro-recompute": dict(arch="qwen3", loss="dapo", beta=0.04, turns=True, micro_seqs=1,
                                                  recompute=True,
                                                  lora=dict(r=4, alpha=8, targets="all", rslora=False, seed=6)),
    # --compute bf16: every matrix product on bf16 operands (BF16 tolerances)
    "llama-full-bf16": dict(arch="llama", beta=0.04, compute="bf16"),
    "qwen2-full-seq-bf16": dict(arch="qwen2", sequence_level=True, loss="bnpo", beta=0.1, compute="bf16"),
    "qwen3-full-entropy-micro-recompute-bf16": dict(arch="qwen3", entropy_coef=0.05, micro_seqs=2, recompute=True,
                                                    compute="bf16"),
    # the tied head of N(0, 1) embeddings gives logp down to -90, where bf16's
    # relative 2^-9 is 0.2 of log-ratio: embeddings of a trained model's scale
    "llama-tied-full-bf16": dict(arch="llama", tied=True, compute="bf16", embed_scale=0.25),
    "llama-lora-bf16": dict(arch="llama", compute="bf16", lora=dict(r=4, alpha=8, targets="all", rslora=False, seed=3)),
    # a frozen base packed as grpo-update --base-weights packs it: the
    # reference runs on the values the kernels read (the driver's "base.*")
    "llama-lora-q8base": dict(arch="llama", base_weights="q8",
                              lora=dict(r=4, alpha=8, targets="all", rslora=False, seed=3)),
    "qwen2-lora-q8base-beta": dict(arch="qwen2", beta=0.04, base_weights="q8",
                                   lora=dict(r=4, alpha=8, targets="q,v,down", rslora=False, seed=4)),
    "llama-lora-q4kbase-beta": dict(arch="llama", beta=0.04, base_weights="q4k",
                                    lora=dict(r=4, alpha=8, targets="all", rslora=False, seed=7)),
    "qwen3-lora-q4kbase-seq-micro-recompute": dict(arch="qwen3", sequence_level=True, base_weights="q4k",
                                                   micro_seqs=2, recompute=True,
                                                   lora=dict(r=4, alpha=8, targets="q,v,down", rslora=False, seed=8)),
    # a tied head: the embeddings packed once, read by the lookup (rows
    # dequantized) and by the head's products (forward and dX) alike; of a
    # trained model's scale, so that rounding them moves logp by less than
    # the old log-probs' noise (N(0, 1) ones: by units, the ratios exp(units))
    "llama-tied-lora-q8base-beta": dict(arch="llama", tied=True, beta=0.04, base_weights="q8", embed_scale=0.25,
                                        lora=dict(r=4, alpha=8, targets="all", rslora=False, seed=3)),
    "llama-tied-lora-q4kbase-micro-recompute": dict(arch="llama", tied=True, base_weights="q4k", embed_scale=0.25,
                                                    micro_seqs=2,
                                                    recompute=True,
                                                    lora=dict(r=4, alpha=8, targets="q,v,down", rslora=False,
                                                              seed=4)),
    "llama-tied-lora-bf16base": dict(arch="llama", tied=True, base_weights="bf16", embed_scale=0.25,
                                     lora=dict(r=4, alpha=8, targets="all", rslora=False, seed=5)),
    # a Q4_K GGUF (tests/ref/q4k_gguf.py --random: every layer matrix in
    # blocks no quantizer wrote) over a q4k base: its blocks taken as they are;
    # the reference on gguf-py's dequantization of them, which the values
    # the kernels read must equal exactly (rows of whole 256-value super-blocks)
    "qwen2-lora-q4kgguf-beta": dict(arch="qwen2", beta=0.04, base_weights="q4k", q4k_gguf=True,
                                    shape=dict(hidden_size=256, intermediate_size=512),
                                    lora=dict(r=4, alpha=8, targets="all", rslora=False, seed=11)),
    "qwen3-lora-bf16base-seq-micro-recompute": dict(arch="qwen3", sequence_level=True, base_weights="bf16",
                                                    micro_seqs=2, recompute=True,
                                                    lora=dict(r=8, alpha=16, targets="all", rslora=False, seed=5)),
    "qwen3-lora-turns-bf16": dict(arch="qwen3", loss="dapo", beta=0.04, turns=True, compute="bf16",
                                  lora=dict(r=4, alpha=8, targets="all", rslora=False, seed=6)),
    # a mixture of experts (Qwen3-MoE): every expert for its tokens, the
    # router through the routing weights (renormalised or not), a dense layer
    # among sparse ones; LoRA on the attention projections. Model seeds whose
    # batches keep each token's k-th and (k+1)-th expert apart (>= 5e-4)
    "qwen3moe-full-beta": dict(arch="qwen3_moe", norm_topk=True, beta=0.04, seed=12),
    "qwen3moe-dense0-full-seq-micro-recompute": dict(arch="qwen3_moe", dense_layers=(0,), sequence_level=True,
                                                     loss="dr_grpo", micro_seqs=1, recompute=True),
    "qwen3moe-full-entropy-turns": dict(arch="qwen3_moe", entropy_coef=0.05, turns=True, seed=12),
    # the router's load-balancing loss (--router-aux-coef; large so that its
    # gradient is not lost beside the policy term's), micro-batches of 2 with
    # their shared prompt, and on gpt-oss's router with its bias
    "qwen3moe-full-balance-micro": dict(arch="qwen3_moe", norm_topk=True, seed=12, router_aux_coef=0.5, micro_seqs=2),
    "gptoss-full-balance": dict(arch="gpt_oss", beta=0.04, router_aux_coef=0.3),
    "qwen3moe-lora-qkvo-dapo": dict(arch="qwen3_moe", norm_topk=True, loss="dapo", beta=0.04, seed=12,
                                    lora=dict(r=4, alpha=8, targets="q,k,v,o", rslora=False, seed=7)),
    # LoRA on the experts: each expert's gate, up and down with its own A_e,
    # B_e over the tokens routed to it (PEFT's names, mlp.experts.X.*); a
    # dense layer's FFN keeps its own (mlp.gate_proj ...)
    "qwen3moe-lora-experts-all-dapo": dict(arch="qwen3_moe", norm_topk=True, loss="dapo", beta=0.04, seed=12,
                                           lora=dict(r=4, alpha=8, targets="all", rslora=False, seed=7)),
    "qwen3moe-lora-experts-gud-seq": dict(arch="qwen3_moe", sequence_level=True, seed=12,
                                          lora=dict(r=4, alpha=8, targets="gate,up,down", rslora=True, seed=8)),
    "qwen3moe-dense0-lora-experts-micro-recompute": dict(arch="qwen3_moe", dense_layers=(0,), beta=0.04, micro_seqs=1,
                                                         recompute=True,
                                                         lora=dict(r=4, alpha=8, targets="all", rslora=False,
                                                                   seed=9)),
    # LoRA over a frozen packed base of a mixture (--base-weights): each
    # expert's matrices packed apart, the router float32 rows; the reference
    # on the values the kernels read (the driver's "base.*")
    "qwen3moe-lora-experts-all-q8base-dapo": dict(arch="qwen3_moe", norm_topk=True, loss="dapo", beta=0.04, seed=12,
                                                  base_weights="q8",
                                                  lora=dict(r=4, alpha=8, targets="all", rslora=False, seed=7)),
    "qwen3moe-lora-experts-all-q4kbase-seq": dict(arch="qwen3_moe", norm_topk=True, sequence_level=True, seed=12,
                                                  base_weights="q4k",
                                                  lora=dict(r=4, alpha=8, targets="all", rslora=False, seed=8)),
    "qwen3moe-dense0-lora-experts-bf16base-micro-recompute": dict(arch="qwen3_moe", dense_layers=(0,), beta=0.04,
                                                                  micro_seqs=1, recompute=True, base_weights="bf16",
                                                                  lora=dict(r=4, alpha=8, targets="all",
                                                                            rslora=False, seed=9)),
    "gptoss-lora-qkvo-q8base-beta": dict(arch="gpt_oss", beta=0.04, base_weights="q8",
                                         lora=dict(r=4, alpha=8, targets="q,k,v,o", rslora=False, seed=9)),
    # gpt-oss's MXFP4 experts (make_oss_mxfp4.py: random codes and scales)
    # kept as the file's blocks (--base-weights mxfp4): the reference on
    # transformers' dequantization of them (model_ref.hf_model), which the
    # values the kernels read must equal exactly
    "gptoss-mxfp4-lora-qkvo-mxfp4base-beta": dict(arch="gpt_oss", mxfp4=True, beta=0.04, base_weights="mxfp4",
                                                  lora=dict(r=4, alpha=8, targets="q,k,v,o", rslora=False, seed=9)),
    "gptoss-mxfp4-lora-qkvo-mxfp4base-dapo-micro-recompute": dict(
        arch="gpt_oss", mxfp4=True, loss="dapo", micro_seqs=1, recompute=True, base_weights="mxfp4",
        lora=dict(r=8, alpha=16, targets="q,k,v,o", rslora=True, seed=10)),
    # PEFT's ParamWrapper on the MXFP4 experts themselves: the blocks kept
    # (the adapter's product beside theirs), and the same model as float32
    "gptoss-mxfp4-lora-experts-mxfp4base-beta": dict(arch="gpt_oss", mxfp4=True, beta=0.04, base_weights="mxfp4",
                                                     lora=dict(r=4, alpha=8, targets="all", rslora=False, seed=9)),
    # the file's other matrices kept as it holds them too: an HF directory
    # written bf16 (gpt-oss's own dtype: bf16 panels), and llama.cpp's
    # converter's --outtype q8_0 GGUF (Q8_0 attention, embeddings and head:
    # q8 blocks, the file's; tests/bats/oss_gguf.bats runs it, it needs the
    # converter). The reference on the file's values, which the kernels must
    # read exactly
    "gptoss-mxfp4bf16-lora-qkvo-mxfp4base-beta": dict(arch="gpt_oss", mxfp4=True, file_dtype="bf16", beta=0.04,
                                                      base_weights="mxfp4",
                                                      lora=dict(r=4, alpha=8, targets="q,k,v,o", rslora=False,
                                                                seed=9)),
    "gptoss-mxfp4bf16-lora-experts-mxfp4base-dapo-micro-recompute": dict(
        arch="gpt_oss", mxfp4=True, file_dtype="bf16", loss="dapo", micro_seqs=1, recompute=True,
        base_weights="mxfp4", lora=dict(r=4, alpha=8, targets="all", rslora=False, seed=10)),
    "gptoss-mxfp4q8gguf-lora-qkvo-mxfp4base-beta": dict(arch="gpt_oss", mxfp4=True, q8_gguf=True, beta=0.04,
                                                        base_weights="mxfp4",
                                                        lora=dict(r=4, alpha=8, targets="q,k,v,o", rslora=False,
                                                                  seed=9)),
    "gptoss-mxfp4-lora-experts-f32-dapo": dict(arch="gpt_oss", mxfp4=True, loss="dapo",
                                               lora=dict(r=4, alpha=8, targets="gate,up,down", rslora=False,
                                                         seed=12)),
    "gptoss-lora-experts-q8base-beta": dict(arch="gpt_oss", beta=0.04, base_weights="q8",
                                            lora=dict(r=4, alpha=8, targets="all", rslora=False, seed=9)),
    # bf16 moves a router's logits by ~1e-2: the top 2 of 8 would flip where
    # float64's gap is below that (here 3e-2 of logp). With every expert
    # chosen nothing can flip: each expert and the router's softmax in bf16
    "qwen3moe-allexperts-full-bf16": dict(arch="qwen3_moe", top_k=8, beta=0.04, compute="bf16"),
    # the sampler's routing replayed (grpo-update --routing replay): random
    # experts (mostly not the router's own top k), fixed for the forward;
    # the weights still the router's probabilities over them (renormalised
    # or not), so the router gets its gradient through them
    "qwen3moe-replay-full-beta": dict(arch="qwen3_moe", norm_topk=True, beta=0.04, seed=12, replay=True),
    "qwen3moe-dense0-replay-seq-micro-recompute": dict(arch="qwen3_moe", dense_layers=(0,), sequence_level=True,
                                                       micro_seqs=1, recompute=True, replay=True),
    "qwen3moe-replay-lora-qkvo-dapo": dict(arch="qwen3_moe", norm_topk=True, loss="dapo", seed=12, replay=True,
                                           lora=dict(r=4, alpha=8, targets="q,k,v,o", rslora=False, seed=7)),
    "gptoss-replay-full-beta": dict(arch="gpt_oss", beta=0.04, replay=True),
    # gpt-oss: sinks, q/k/v/o biases, YaRN, sliding layers, the router's and
    # experts' biases, the clamped SwiGLU; LoRA on the attention projections
    "gptoss-full-beta": dict(arch="gpt_oss", beta=0.04),
    "gptoss-lora-qkvo-dapo": dict(arch="gpt_oss", loss="dapo", beta=0.04,
                                  lora=dict(r=4, alpha=8, targets="q,k,v,o", rslora=False, seed=9)),
    # PEFT's ParamWrapper on the stacked experts (gate_up_proj, down_proj)
    "gptoss-lora-experts-all-dapo": dict(arch="gpt_oss", loss="dapo", beta=0.04,
                                         lora=dict(r=4, alpha=8, targets="all", rslora=False, seed=9)),
    "gptoss-lora-experts-gateup-seq": dict(arch="gpt_oss", sequence_level=True,
                                           lora=dict(r=4, alpha=8, targets="gate,up", rslora=True, seed=10)),
    "gptoss-lora-experts-down-micro-recompute": dict(arch="gpt_oss", beta=0.04, micro_seqs=1, recompute=True,
                                                     lora=dict(r=4, alpha=8, targets="down", rslora=False, seed=11)),
    # gpt-oss's attention options: YaRN RoPE (its factor and betas) and
    # sliding-window layers (window 5, sequences of up to 20 tokens) between full ones
    "qwen2-yarn-window-full-beta": dict(arch="qwen2", yarn=True, window=5, beta=0.04),
    "llama-yarn-window-lora-qkvo-dapo": dict(arch="llama", yarn=True, window=4, loss="dapo",
                                             lora=dict(r=4, alpha=8, targets="q,k,v,o", rslora=False, seed=8)),
}

# completion_mask of each sequence of a "turns" case (completions of 8, 5,
# 11 and 8 tokens): turns in the middle, a single-turn record among them,
# and environment tokens last
TURN_MASKS = [[1, 1, 1, 0, 0, 1, 1, 1], None, [1, 1, 0, 0, 0, 1, 1, 0, 0, 1, 1], [1, 1, 1, 1, 1, 1, 0, 0]]

LORA_TARGETS = {"q": ("self_attn", "q_proj"), "k": ("self_attn", "k_proj"), "v": ("self_attn", "v_proj"),
                "o": ("self_attn", "o_proj"), "gate": ("mlp", "gate_proj"), "up": ("mlp", "up_proj"),
                "down": ("mlp", "down_proj")}


def lora_modules(cfgj, targets):
    """The modules an adapter on targets ("all" or "q,gate,...") sits on, as
    PEFT finds them: a layer with experts has gate, up and down in each of
    its experts (model.layers.L.mlp.experts.X.gate_proj), a dense layer one;
    gpt_oss's experts are no module (lora_parameters)."""
    names = list(LORA_TARGETS) if targets == "all" else targets.split(",")
    out = []
    for i in range(cfgj["num_hidden_layers"]):
        for t in names:
            blk, mod = LORA_TARGETS[t]
            if blk == "mlp" and cfgj["model_type"] == "gpt_oss":
                continue
            if blk == "mlp" and model_ref.moe_layer(cfgj, i):
                E = cfgj["num_experts"]
                out += [f"model.layers.{i}.mlp.experts.{x}.{mod}" for x in range(E)]
            else:
                out.append(f"model.layers.{i}.{blk}.{mod}")
    return out


def lora_parameters(cfgj, targets):
    """gpt_oss's stacked experts an adapter on targets sits on, as PEFT's
    target_parameters (gate and up: gate_up_proj), per layer: (HF name,
    lora_A name, lora_B name) (model_ref.param_wrapper_names)."""
    names = list(LORA_TARGETS) if targets == "all" else targets.split(",")
    if cfgj["model_type"] != "gpt_oss":
        return []
    params = [p for p, t in zip(model_ref.OSS_PARAMS, ("gate", "down")) if t in names]
    return [(f"model.layers.{i}.{p}", a, b) for i in range(cfgj["num_hidden_layers"])
            for p, (a, b) in model_ref.param_wrapper_names(i, params).items()]


def forward_logp(cfg, W, lora, seqs, temperature, entropies=None):
    """Per sequence, logp of its completion tokens (float64 autograd graph);
    their entropies appended to the list entropies when it is given. A
    sequence's "replay" (layer prefix -> [T, k] experts) routes it."""
    import torch
    out = []
    for s in seqs:
        toks, P = s["tokens"], s["n_prompt"]
        cfg["replay"] = s.get("replay")
        logits = model_forward(cfg, W, lora, toks)
        lp = torch.log_softmax(logits / temperature, dim=-1)
        tgt = torch.tensor(toks[P:])
        out.append(lp[P - 1:len(toks) - 1].gather(1, tgt[:, None])[:, 0])
        if entropies is not None:
            rows = lp[P - 1:len(toks) - 1]
            entropies.append(-(rows.exp() * rows).sum(-1))
    return out


def model_forward(c, W, lora, tokens):
    """model_ref.forward with LoRA added to the adapted projections."""
    import torch
    if not lora:
        return model_ref.forward(c, W, tokens)
    # Merging B A into W is exactly x W^T + s x A^T B^T for gradients too
    # (autograd flows into A and B through the sum); a stacked parameter's
    # delta (E experts) is PEFT's ParamWrapper's, as PEFT's forward adds it
    W2 = dict(W)
    for key, (A, B, scale, E) in lora.items():
        W2[key] = W[key] + (scale * (B @ A) if E is None else model_ref.param_wrapper_delta(A, B, E, scale))
    return model_ref.forward(c, W2, tokens)


def grpo_loss(case, logps, seqs, ref_logps, ents):
    """Over every completion token, with TRL's mask (its env_mask: 1 where
    the policy sampled the token) in every sum and count."""
    import torch
    eps_lo, eps_hi = case.get("epsilon", 0.2), case.get("epsilon_high", case.get("epsilon", 0.2))
    beta, kind = case.get("beta", 0.0), case.get("loss", "grpo")
    n_comp = len(seqs)
    masks = [torch.tensor(s.get("mask") or [1] * len(lp), dtype=torch.float64) for lp, s in zip(logps, seqs)]
    n_tok = sum(m.sum() for m in masks)
    total = 0
    for lp, s, ref, h, m in zip(logps, seqs, ref_logps, ents, masks):
        old = torch.tensor([0.0 if v is None else v for v in s["old_logp"]], dtype=torch.float64)
        A = s["advantage"]
        if case.get("sequence_level"):
            rho = torch.exp(((lp - old) * m).sum() / m.sum().clamp(min=1)).expand(len(lp))
        else:
            rho = torch.exp(lp - old)
        per_tok = -torch.min(rho * A, torch.clamp(rho, 1 - eps_lo, 1 + eps_hi) * A)
        if beta:
            d = ref - lp
            per_tok = per_tok + beta * (torch.exp(d) - d - 1)
        per_tok = (per_tok - case.get("entropy_coef", 0.0) * h) * m
        if kind == "grpo":
            total = total + per_tok.sum() / m.sum().clamp(min=1) / n_comp
        elif kind in ("bnpo", "dapo"):
            total = total + per_tok.sum() / n_tok
        else:
            total = total + per_tok.sum() / (n_comp * case.get("max_new_tokens", 16))
    return total


def make_replay(c, W, seqs, g):
    """A recorded routing for each sequence: k different random experts per
    position but the last (which routes itself) and layer with experts, the
    first two sequences' shared prompt routed alike (the trainer then computes
    it once); s["routing"] for the driver, s["replay"] for the reference."""
    import torch
    layers = [f"model.layers.{i}." for i in range(c["L"])
              if f"model.layers.{i}.mlp.gate.weight" in W or f"model.layers.{i}.mlp.router.weight" in W]
    E = W[layers[0] + ("mlp.gate.weight" if layers[0] + "mlp.gate.weight" in W else "mlp.router.weight")].shape[0]
    for s in seqs:
        T = len(s["tokens"])
        ids = torch.stack([torch.stack([torch.randperm(E, generator=g)[:c["top_k"]] for _ in layers])
                           for _ in range(T - 1)])  # [T-1, layers, k]
        s["_ids"] = ids
    seqs[1]["_ids"][:seqs[1]["n_prompt"]] = seqs[0]["_ids"][:seqs[0]["n_prompt"]]
    for s in seqs:
        ids = s.pop("_ids")
        s["routing"] = ids.tolist()
        last = torch.full((1, c["top_k"]), -1, dtype=torch.long)
        s["replay"] = {p: torch.cat([ids[:, l], last]) for l, p in enumerate(layers)}


def balance_loss(case, c, seqs, router_log):
    """grpo-update --router-aux-coef (formats/loss.md): per micro-batch b of
    micro_seqs sequences and MoE layer l, E sum_x f_x P_x over its tokens
    (f_x: the fraction of token choices of expert x, not differentiated;
    P_x: the mean router probability), weighted T_b / T and averaged over
    the layers. router_log: (probs, sel) per sequence, per MoE layer, in order."""
    import torch
    n = len(seqs)
    L = len(router_log) // n
    micro = case.get("micro_seqs", n)
    T = sum(len(s["tokens"]) for s in seqs)
    total = 0
    for s0 in range(0, n, micro):
        group = range(s0, min(n, s0 + micro))
        Tb = sum(len(seqs[s]["tokens"]) for s in group)
        for l in range(L):
            probs = torch.cat([router_log[s * L + l][0] for s in group])
            sel = torch.cat([router_log[s * L + l][1] for s in group])
            E = probs.shape[-1]
            f = torch.zeros(E, dtype=torch.float64).index_add(0, sel.reshape(-1), torch.ones(sel.numel(),
                                                                                               dtype=torch.float64)) / Tb
            total = total + (Tb / T) * E * (f * probs.mean(0)).sum() / L
    return total


def stack_oss_grads(ours):
    """gpt_oss's expert gradients come per slice (grad.NAME:PARAM:EXPERT, our
    [I, dim], [dim, I] or vector): stacked into HF's tensors, gate and up
    interleaved in gate_up_proj's columns, the matrices transposed."""
    parts = {}
    for k in [k for k in ours if k.count(":") == 2]:
        name, param, x = k.split(":")
        parts.setdefault(name, {})[(param, int(x))] = ours.pop(k)
    for name, p in parts.items():
        E = 1 + max(x for _, x in p)
        if name.endswith("gate_up_proj") or name.endswith("gate_up_proj_bias"):
            g0 = p[("exp_gate" if name.endswith("proj") else "exp_gate_b", 0)]
            kind = "" if name.endswith("proj") else "_b"
            out = np.zeros((E,) + (g0.T.shape[:-1] + (2 * g0.T.shape[-1],) if g0.ndim == 2 else (2 * g0.shape[0],)),
                           dtype=np.float32)
            for x in range(E):
                out[x][..., ::2] = p[("exp_gate" + kind, x)].T
                out[x][..., 1::2] = p[("exp_up" + kind, x)].T
        else:
            kind = "exp_down" if name.endswith("proj") else "exp_down_b"
            out = np.stack([p[(kind, x)].T for x in range(E)])
        ours[name] = out
    return ours


GGUF_MATRICES = {"attn_q": "self_attn.q_proj", "attn_k": "self_attn.k_proj", "attn_v": "self_attn.v_proj",
                 "attn_output": "self_attn.o_proj", "ffn_gate": "mlp.gate_proj", "ffn_up": "mlp.up_proj",
                 "ffn_down": "mlp.down_proj"}


def q4k_gguf(mdir, work, W):
    """The model as a GGUF (grpo-export, f32) whose layer matrices
    tests/ref/q4k_gguf.py writes as random Q4_K blocks; W's matrices (HF names; a qwen2's
    rows are stored unpermuted) set to gguf-py's dequantization of those
    blocks. The file's path, or None when it could not be made."""
    import torch
    import gguf
    f32, q4k = os.path.join(work, "model-f32.gguf"), os.path.join(work, "model-q4k.gguf")
    for cmd in ([sys.executable, os.path.join(ROOT, "tests/ref/make_tiny_tokenizer.py"), mdir],
                [os.path.join(ROOT, "bin/grpo-export"), "--model", mdir, "--format", "gguf", "--dtype", "f32",
                 "--out", f32],
                [sys.executable, os.path.join(ROOT, "tests/ref/q4k_gguf.py"), f32, q4k, "--random", "36"]):
        if subprocess.run(cmd).returncode:
            print(f"could not write the Q4_K GGUF: {' '.join(cmd)} failed")
            return None
    n = 0
    for t in gguf.GGUFReader(q4k).tensors:
        if t.tensor_type != gguf.GGMLQuantizationType.Q4_K:
            continue
        _, layer, kind, _ = t.name.split(".")
        x = gguf.quants.dequantize(t.data, t.tensor_type).reshape(int(t.shape[1]), int(t.shape[0]))
        W[f"model.layers.{layer}.{GGUF_MATRICES[kind]}.weight"] = torch.tensor(x.astype(np.float64))
        n += 1
    print(f"{n} matrices of the GGUF are Q4_K blocks")
    return q4k


GGUF_OSS = {"token_embd.weight": "model.embed_tokens.weight", "output.weight": "lm_head.weight"}
GGUF_OSS_LAYER = {"attn_q": "self_attn.q_proj", "attn_k": "self_attn.k_proj", "attn_v": "self_attn.v_proj",
                  "attn_output": "self_attn.o_proj", "ffn_gate_inp": "mlp.router"}


def q8_oss_gguf(mdir, work, W):
    """mdir (a gpt-oss of MXFP4 experts) as llama.cpp's converter writes it
    with --outtype q8_0 (tests/ref/convert_oss_gguf.py, the pinned llama.cpp
    source and .venv-peft); W's matrices the file holds as Q8_0 blocks set
    to gguf-py's dequantization of them. The file's path, or None when it
    could not be made."""
    import torch
    src = os.path.join(ROOT, "build/llama.cpp/src")
    peft = os.environ.get("GRPO_PEFT_PY") or os.path.join(ROOT, ".venv-peft/bin/python")
    out = os.path.join(work, "model-q8_0.gguf")
    for cmd in ([sys.executable, os.path.join(ROOT, "tests/ref/make_tiny_tokenizer.py"), mdir],
                [peft, os.path.join(ROOT, "tests/ref/convert_oss_gguf.py"), src, mdir, out, "q8_0"]):
        if subprocess.run(cmd, stdout=subprocess.DEVNULL).returncode:
            print(f"could not write the Q8_0 GGUF: {' '.join(cmd)} failed")
            return None
    sys.path.insert(0, os.path.join(src, "gguf-py"))  # the test venv's gguf-py has no MXFP4
    import gguf
    n = 0
    for t in gguf.GGUFReader(out).tensors:
        if t.tensor_type != gguf.GGMLQuantizationType.Q8_0:
            continue
        parts = t.name.split(".")
        name = GGUF_OSS.get(t.name) or (f"model.layers.{parts[1]}.{GGUF_OSS_LAYER[parts[2]]}.weight"
                                        if parts[0] == "blk" and parts[2] in GGUF_OSS_LAYER else None)
        if name is None:
            print(f"{t.name}: a Q8_0 tensor the reference has no name for")
            return None
        x = gguf.quants.dequantize(t.data, t.tensor_type).reshape(int(t.shape[1]), int(t.shape[0]))
        W[name] = torch.tensor(x.astype(np.float64))
        n += 1
    print(f"{n} matrices of the GGUF are Q8_0 blocks")
    return out if n else None


def run(case_name, work):
    import torch
    from safetensors.numpy import load_file
    case = CASES[case_name]
    os.makedirs(work, exist_ok=True)
    mdir = os.path.join(work, "model")
    if case.get("mxfp4"):
        import make_oss_mxfp4
        if make_oss_mxfp4.main(["make_oss_mxfp4.py", mdir] + (["--dtype", case["file_dtype"]] if "file_dtype" in case
                                                               else ["--yarn-truncate"] if case.get("q8_gguf")
                                                               else [])):
            return 1
    else:
        model_ref.make_tiny(case["arch"], mdir, tied=case.get("tied", False), llama3=case.get("llama3", False),
                            norm_topk=case.get("norm_topk", False), dense_layers=case.get("dense_layers", ()),
                            seed=case.get("seed", 1234), top_k=case.get("top_k", 2), yarn=case.get("yarn", False),
                            window=case.get("window", 0), shape=case.get("shape"))
    if case.get("embed_scale"):
        from safetensors import safe_open
        from safetensors.torch import load_file as tl, save_file as ts
        path = os.path.join(mdir, "model.safetensors")
        with safe_open(path, "pt") as f:
            meta = f.metadata()
        t = tl(path)
        t["model.embed_tokens.weight"] *= case["embed_scale"]
        ts(t, path, metadata=meta)
    cfgj = json.load(open(os.path.join(mdir, "config.json")))
    c = model_ref.ref_config(cfgj)
    from safetensors.torch import load_file as tload
    if case.get("mxfp4"):  # the experts as transformers dequantizes their blocks
        W = model_ref.hf_model(mdir)[1]
    else:
        W = {k: v.to(torch.float64) for k, v in tload(os.path.join(mdir, "model.safetensors")).items()}
    tied = cfgj.get("tie_word_embeddings", False)
    driver_model = mdir
    if case.get("q4k_gguf"):  # the layer matrices as gguf-py dequantizes the file's Q4_K blocks
        driver_model = q4k_gguf(mdir, work, W)
        if driver_model is None:
            return 1
    if case.get("q8_gguf"):  # the Q8_0 matrices as gguf-py dequantizes the file's blocks
        driver_model = q8_oss_gguf(mdir, work, W)
        if driver_model is None:
            return 1

    g = torch.Generator().manual_seed(99)
    V = cfgj["vocab_size"]
    lens, prompts = [12, 9, 16, 9], [4, 4, 5, 1]
    seqs = [dict(tokens=torch.randint(0, V, (L,), generator=g).tolist(), n_prompt=P) for L, P in zip(lens, prompts)]
    # the first two share their prompt, as a GRPO group's samples do: the
    # trainer computes those rows once (lib/model/layer.h, attn_share)
    seqs[1]["tokens"][:4] = seqs[0]["tokens"][:4]
    temperature = 0.7
    if case.get("replay"):
        make_replay(c, W, seqs, g)
    for i, s in enumerate(seqs):
        s["advantage"] = [1.3, -0.8, 0.5, -1.1][i]
        if case.get("turns") and TURN_MASKS[i]:
            s["mask"] = TURN_MASKS[i]
            assert len(s["mask"]) == lens[i] - prompts[i]

    # reference logp without any adapter (the starting point for old/ref)
    with torch.no_grad():
        Wl = dict(W)
        if tied:
            Wl["lm_head.weight"] = Wl["model.embed_tokens.weight"]
        base = forward_logp(c, Wl, None, seqs, temperature)
    eps = case.get("epsilon", 0.2)
    for s, lp in zip(seqs, base):
        n = len(lp)
        # noise of +-0.35 with a gap around +-eps: both clip sides active, no ties
        u = torch.rand(n, generator=g, dtype=torch.float64)
        noise = torch.where(u < 0.5, -(0.03 + 0.6 * u), 0.03 + 0.6 * (u - 0.5))
        if case.get("compute") == "bf16" or case.get("base_weights"):
            # bf16 log-probs (and a packed base's) are off by up to ~0.02 here: keep each token's
            # log-ratio -noise at least BF16_CLIP_MARGIN from both clip edges,
            # on its side, so that no rounding flips a clip branch
            for edge in (math.log(1 - eps), math.log(1 + case.get("epsilon_high", eps))):
                d = -noise - edge
                near = d.abs() < BF16_CLIP_MARGIN
                noise = torch.where(near, -(edge + torch.where(d < 0, -1.0, 1.0) * BF16_CLIP_MARGIN), noise)
        s["old_logp"] = (lp + noise).tolist()
        s["ref_logp"] = (lp + 0.2 * torch.randn(n, generator=g, dtype=torch.float64)).tolist()
        for t, keep in enumerate(s.get("mask") or []):
            if not keep:  # a record's log-probs are null at environment tokens
                s["old_logp"][t] = None

    batch = dict(seqs=seqs, temperature=temperature, loss=case.get("loss", "grpo"),
                 sequence_level=case.get("sequence_level", False), epsilon=eps,
                 epsilon_high=case.get("epsilon_high", eps), beta=case.get("beta", 0.0),
                 max_new_tokens=case.get("max_new_tokens", 16), lora=case.get("lora"),
                 micro_seqs=case.get("micro_seqs", len(seqs)), recompute=case.get("recompute", False),
                 entropy_coef=case.get("entropy_coef", 0.0), compute=case.get("compute", "f32"),
                 router_aux_coef=case.get("router_aux_coef", 0.0),
                 base_weights=case.get("base_weights", "f32"))
    bpath, opath = os.path.join(work, "batch.json"), os.path.join(work, "out.safetensors")
    with open(bpath, "w") as f:
        json.dump(dict(batch, seqs=[{k: v for k, v in s.items() if k != "replay"} for s in seqs]), f)
    r = subprocess.run([os.path.join(ROOT, "build/tests/test_train"), "--grad", driver_model, bpath, opath])
    if r.returncode:
        print(f"driver failed with {r.returncode}")
        return 1
    ours = stack_oss_grads(load_file(opath))
    if case.get("base_weights"):
        base_keys = [k for k in ours if k.startswith("base.")]
        if not base_keys:
            print("the driver wrote no packed base")
            return 1
        moved = max(float(torch.max(torch.abs(W[k[5:]] - torch.tensor(ours[k], dtype=torch.float64))))
                    for k in base_keys)
        exact = case["base_weights"] == "mxfp4" or case.get("q4k_gguf")  # the file's blocks, as they are
        if moved == 0 and not exact:
            print("the packed base equals the float32 one: nothing was packed")
            return 1
        # the embeddings and the head are the base's too, packed in its format (a tied head
        # once); an mxfp4 base packs its experts only
        globals_ = ["model.embed_tokens.weight"] + ([] if tied else ["lm_head.weight"])
        # an mxfp4 base holds the others as the file does: packed where it holds them bf16 or Q8_0
        held = case["base_weights"] != "mxfp4" or case.get("file_dtype") or case.get("q8_gguf")
        wanted = globals_ + ([f"model.layers.{i}.self_attn.{x}_proj.weight" for i in range(c["L"])
                              for x in "qkvo"] if case["base_weights"] == "mxfp4" else [])
        unpacked = [k for k in wanted if "base." + k not in ours]
        if held and unpacked:
            print(f"not packed with the base: {unpacked}")
            return 1
        if not held and any(k[5:] in wanted for k in base_keys):
            print("an mxfp4 base of a float32 file packed more than its experts")
            return 1
        # the file's blocks (MXFP4 experts, a Q4_K GGUF's layer matrices) are read as they
        # are; a Q4_K GGUF's float embeddings and head are quantized by ours
        file_keys = [k for k in base_keys if k[5:] not in globals_] if case.get("q4k_gguf") else base_keys
        off = max((float(torch.max(torch.abs(W[k[5:]] - torch.tensor(ours[k], dtype=torch.float64))))
                   for k in file_keys), default=0.0)
        if off != 0 and exact:
            print(f"the blocks as the kernels read them differ from the reference's dequantization by {off:.3g}")
            return 1
        for k in base_keys:
            W[k[5:]] = torch.tensor(ours[k], dtype=torch.float64)
        print(f"{len(base_keys)} matrices packed as {case['base_weights']}, moved by up to {moved:.3g}")

    # the reference graph
    params = {}
    for k, v in W.items():
        params[k] = v.clone().requires_grad_(case.get("lora") is None)
    Wg = dict(params)
    if tied:
        Wg["lm_head.weight"] = Wg["model.embed_tokens.weight"]
    lora = None
    if case.get("lora"):
        lc = case["lora"]
        r_ = lc["r"]
        scale = lc["alpha"] / (math.sqrt(r_) if lc["rslora"] else r_)
        lora = {}
        for mod in lora_modules(cfgj, lc["targets"]):
            pre = "base_model.model." + mod
            A = torch.tensor(ours[pre + ".lora_A.weight"], dtype=torch.float64, requires_grad=True)
            B = torch.tensor(ours[pre + ".lora_B.weight"], dtype=torch.float64, requires_grad=True)
            params[pre + ".lora_A.weight"], params[pre + ".lora_B.weight"] = A, B
            lora[mod + ".weight"] = (A, B, scale, None)
        for key, a, b in lora_parameters(cfgj, lc["targets"]):
            A = torch.tensor(ours[a], dtype=torch.float64, requires_grad=True)
            B = torch.tensor(ours[b], dtype=torch.float64, requires_grad=True)
            params[a], params[b] = A, B
            lora[key] = (A, B, scale, W[key].shape[0])
        extra = {k for k in ours if ".lora_" in k and not k.startswith("grad.")} - set(params)
        if extra:
            print(f"factors the reference has no module for: {sorted(extra)[:3]}")
            return 1
    ents = []
    if case.get("router_aux_coef"):
        c["router_log"] = []
    logps = forward_logp(c, Wg, lora, seqs, temperature, ents)
    refs = [torch.tensor(s["ref_logp"], dtype=torch.float64) for s in seqs]
    loss = grpo_loss(dict(case, epsilon=eps), logps, seqs, refs, ents)
    total = loss  # what is differentiated; "loss" stays the GRPO loss the driver reports
    if case.get("router_aux_coef"):
        balance = balance_loss(case, c, seqs, c.pop("router_log"))
        total = loss + case["router_aux_coef"] * balance
        got = float(ours["balance"][0])
        print(f"balance loss {got:.9g}, reference {balance.item():.9g}")
        if abs(got - balance.item()) > 1e-5 * max(1.0, abs(balance.item())):
            print("balance loss differs from the reference")
            return 1
    total.backward()

    bad = 0
    # ours holds the policy's tokens only
    lp_ref = torch.cat([lp.detach()[torch.tensor(s.get("mask") or [1] * len(lp)).bool()]
                        for lp, s in zip(logps, seqs)]).numpy()
    if ours["logp"].shape != lp_ref.shape:
        print(f"{ours['logp'].shape[0]} log-probs, want {lp_ref.shape[0]} (the policy's tokens)")
        return 1
    max_lp = float(np.max(np.abs(lp_ref)))
    dl = float(np.max(np.abs(ours["logp"] - lp_ref))) / max(1.0, max_lp)
    bf16 = case.get("compute") == "bf16"
    grad_tol = BF16_U * (4 + max_lp) if bf16 else GRAD_TOL
    logp_tol = 2 * BF16_U if bf16 else LOGP_TOL
    loss_tol = BF16_U * max(1.0, max_lp) if bf16 else 1e-5 * max(1.0, abs(loss.item()))
    if not dl <= logp_tol:  # NaN fails too
        print(f"logp differs by {dl:.3g} > {logp_tol:.3g}")
        bad += 1
    dloss = abs(float(ours["loss"][0]) - loss.item())
    if not dloss <= loss_tol:
        print(f"loss {float(ours['loss'][0])} vs reference {loss.item()} (tolerance {loss_tol:.3g})")
        bad += 1
    worst, n = 0.0, 0
    for k, p in params.items():
        if not p.requires_grad:
            continue
        if k == "lm_head.weight" and tied:
            continue
        got = ours.get("grad." + k)
        if got is None:
            print(f"missing gradient {k}")
            bad += 1
            continue
        if p.grad is None:  # an expert no token went to: its gradient is 0
            if np.any(got != 0):
                print(f"{k}: gradient {float(np.max(np.abs(got))):.3g} where no token reaches it")
                bad += 1
            continue
        ref = p.grad.numpy()
        scale = float(np.max(np.abs(ref)))
        rel = float(np.max(np.abs(got.reshape(ref.shape) - ref))) / max(scale, 1e-30)
        worst = max(worst, rel)
        n += 1
        if not rel <= grad_tol or scale == 0:
            print(f"{k}: relative error {rel:.3g} (max |grad| {scale:.3g})")
            bad += 1
    clip_lo = sum(1 for s, lp in zip(seqs, base) for o, l in zip(s["old_logp"], lp.tolist())
                  if o is not None and math.exp(l - o) < 1 - eps)
    if bf16 and worst <= BF16_FLOOR:
        print(f"worst relative error {worst:.3g} <= {BF16_FLOOR:.3g}: the products were not bf16")
        bad += 1
    margin = ""
    if "moe_margin" in c:
        # float32 routes as float64 does only where a token's k-th and
        # (k+1)-th expert are apart by more than its rounding (~1e-7)
        margin = f", smallest top-k margin {c['moe_margin']:.2e}"
        if c["moe_margin"] < 1e-5:
            print(f"top-k margin {c['moe_margin']:.2e}: float32 may route otherwise; pick another seed")
            bad += 1
    print(f"{case_name}: {n} gradient tensors, worst relative error {worst:.2e} (tolerance {grad_tol:.2e}), "
          f"logp {dl:.2e} (tolerance {logp_tol:.2e}), loss {loss.item():.6f} (error {dloss:.2e}), "
          f"tokens below the clip range {clip_lo}{margin}")
    return 1 if bad or n == 0 else 0


if __name__ == "__main__":
    sys.exit(run(sys.argv[1], sys.argv[2]))
