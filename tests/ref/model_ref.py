#!/usr/bin/env python3
"""Independent PyTorch reference for the model forward (lib/model).

Usage: .venv/bin/python tests/ref/model_ref.py COMMAND ...

  make-tiny ARCH OUTDIR [--tied] [--llama3-rope] [--dtype f32|bf16] [--seed S]
            [--norm-topk] [--dense-layers L,L...] [--sparse-step N] [--yarn] [--yarn-truncate]
            [--window W] [--experts E] [--top-k K]
      A tiny random Hugging Face directory (config.json, model.safetensors,
      generation_config.json, tokens.txt) for ARCH = llama | qwen2 | qwen3 |
      qwen3_moe. qwen2 has q/k/v biases; qwen3 has q/k norms and an explicit
      head_dim (24) that differs from hidden_size / heads (16); qwen3_moe is
      qwen3 with a mixture of 8 experts (top 2, width 32; --experts, --top-k) in its FFNs:
      norm_topk_prob with --norm-topk, mlp_only_layers and
      decoder_sparse_step from the last two. --yarn: gpt-oss's YaRN
      rope_scaling (factor 32) on an original context of 512 (truncate
      false as gpt-oss's; --yarn-truncate: true, as llama.cpp computes
      every YaRN); --window W:
      layer_types sliding, full, ... with sliding_window W. Weights are random from a fixed
      seed, never zero; norm weights are around 1.
  tiny-suite OUTROOT
      Every tiny variant the tests use, each with ref.f64 (the reference
      logits for its tokens.txt), in one process (torch imports once).
  logits DIR TOKENS_FILE OUT
      Logits at every position, float64 raw [T, vocab], from the HF directory.
  gguf-logits GGUF TOKENS_FILE OUT
      The same forward on the weights of a GGUF file as gguf-py dequantizes
      them (GGUFReader + gguf.quants.dequantize), with llama-arch Q/K rows
      un-permuted here and a qwen3moe layer's stacked experts sliced,
      independently of the C loader.
  compare OURS.f32 REF.f64 TOL
      Prints the max abs difference and exits 1 when it exceeds TOL.

The forward is written from the Hugging Face semantics (modeling_llama,
modeling_qwen2, modeling_qwen3, modeling_qwen3_moe), not from our C code:
RMSNorm x * rsqrt(mean(x^2) + eps) * w, rotate_half RoPE with cos/sin of
position * inv_freq (llama3 scaling as _compute_llama3_parameters), GQA by
repeat_kv, causal softmax attention scaled by 1/sqrt(head_dim), SwiGLU MLP;
Qwen3MoeSparseMoeBlock's router (softmax over all experts, top-k,
renormalised with norm_topk_prob) and experts summed by index_add_; all in
float64. The experts chosen can be kept (c["routes"]: check_routing.py
compares a rollout's recorded routing with them) or given (c["replay"]:
train_ref.py's replayed routing). A mixture's logits print the smallest gap between a token's k-th
and (k+1)-th expert probability: below about 1e-5 float32 may route
differently and the comparison means nothing.
"""
import json
import math
import os
import struct
import sys

import numpy as np

TINY = dict(hidden_size=64, intermediate_size=96, num_hidden_layers=2, num_attention_heads=4,
            num_key_value_heads=2, vocab_size=97, max_position_embeddings=128, rms_norm_eps=1e-5,
            rope_theta=10000.0)
N_TOKENS = 20
MOE = dict(num_experts=8, moe_intermediate_size=32, decoder_sparse_step=1,
           norm_topk_prob=False, mlp_only_layers=[], router_aux_loss_coef=0.001, output_router_logits=False)


# ---- tiny random models --------------------------------------------------------------------------

def moe_layer(cfg, i):
    """Qwen3MoeDecoderLayer's rule: a sparse block unless mlp_only_layers names the layer."""
    return cfg.get("num_experts", 0) > 0 and i not in cfg.get("mlp_only_layers", []) and \
        (i + 1) % cfg.get("decoder_sparse_step", 1) == 0


def make_tiny(arch, outdir, tied=False, llama3=False, dtype="f32", seed=1234, norm_topk=False, dense_layers=(),
              sparse_step=1, top_k=2, yarn=False, window=0, experts=8, yarn_truncate=False, shape=None):
    import torch
    from safetensors.torch import save_file
    cfg = dict(TINY)
    cfg["architectures"] = {"llama": ["LlamaForCausalLM"], "qwen2": ["Qwen2ForCausalLM"],
                            "qwen3": ["Qwen3ForCausalLM"], "qwen3_moe": ["Qwen3MoeForCausalLM"],
                            "gpt_oss": ["GptOssForCausalLM"]}[arch]
    cfg["model_type"] = arch
    cfg["tie_word_embeddings"] = tied
    cfg["hidden_act"] = "silu"
    cfg["bos_token_id"] = 1
    cfg["eos_token_id"] = 2
    cfg["torch_dtype"] = "float32" if dtype == "f32" else "bfloat16"
    if arch in ("qwen3", "qwen3_moe"):
        cfg["head_dim"] = 24
    if arch == "gpt_oss":
        # GptOssConfig's keys: 8 experts of width 32 (intermediate_size), top 2;
        # gpt-oss's attention: sinks, biases, YaRN, sliding layers of window 5
        cfg.update(num_local_experts=experts, num_experts_per_tok=top_k, experts_per_token=top_k, intermediate_size=32,
                   swiglu_limit=7.0, router_aux_loss_coef=0.9, output_router_logits=False, attention_bias=True,
                   head_dim=16)
        yarn, window = True, window or 5
    if arch == "qwen3_moe":
        cfg.update(MOE, norm_topk_prob=norm_topk, mlp_only_layers=list(dense_layers), decoder_sparse_step=sparse_step,
                   num_experts_per_tok=top_k, num_experts=experts)
    if shape:  # config.json keys over the tiny ones (a larger model for a measurement)
        cfg.update(shape)
    if llama3:
        # original context 32 puts head_dim 16's wavelengths (6.3 .. 19000)
        # in all three bands: high (< 8), medium, low (> 32).
        cfg["rope_scaling"] = {"rope_type": "llama3", "factor": 8.0, "low_freq_factor": 1.0,
                               "high_freq_factor": 4.0, "original_max_position_embeddings": 32}
    if yarn:
        # gpt-oss's settings (factor 32, beta 32 / 1, truncate false) on an
        # original context of 512 that puts head_dim 16's ramp at 0.81 .. 3.82:
        # pair 0 kept, 1 .. 3 mixed, 4 .. 7 divided by the factor (truncated
        # to 0 .. 4: pairs 1 .. 3 mixed otherwise)
        cfg["rope_scaling"] = {"rope_type": "yarn", "factor": 32.0, "beta_fast": 32.0, "beta_slow": 1.0,
                               "original_max_position_embeddings": 512, "truncate": yarn_truncate}
    if window:
        # gpt-oss's pattern: sliding, full, sliding, ...
        cfg["sliding_window"] = window
        cfg["layer_types"] = ["sliding_attention" if i % 2 == 0 else "full_attention"
                              for i in range(cfg["num_hidden_layers"])]
    d, h, L = cfg["hidden_size"], cfg["intermediate_size"], cfg["num_hidden_layers"]
    nh, nkv, V = cfg["num_attention_heads"], cfg["num_key_value_heads"], cfg["vocab_size"]
    hd = cfg.get("head_dim", d // nh)
    g = torch.Generator().manual_seed(seed)

    def mat(rows, cols):  # scaled so activations stay O(1)
        return torch.randn(rows, cols, generator=g) / math.sqrt(cols)

    def norm(n):
        return 1.0 + 0.1 * torch.randn(n, generator=g)

    def bias(n):
        return 0.1 * torch.randn(n, generator=g)

    t = {"model.embed_tokens.weight": torch.randn(V, d, generator=g)}
    for i in range(L):
        p = f"model.layers.{i}."
        t[p + "input_layernorm.weight"] = norm(d)
        t[p + "self_attn.q_proj.weight"] = mat(nh * hd, d)
        t[p + "self_attn.k_proj.weight"] = mat(nkv * hd, d)
        t[p + "self_attn.v_proj.weight"] = mat(nkv * hd, d)
        if arch in ("qwen2", "gpt_oss"):
            t[p + "self_attn.q_proj.bias"] = bias(nh * hd)
            t[p + "self_attn.k_proj.bias"] = bias(nkv * hd)
            t[p + "self_attn.v_proj.bias"] = bias(nkv * hd)
        if arch in ("qwen3", "qwen3_moe"):
            t[p + "self_attn.q_norm.weight"] = norm(hd)
            t[p + "self_attn.k_norm.weight"] = norm(hd)
        t[p + "self_attn.o_proj.weight"] = mat(d, nh * hd)
        t[p + "post_attention_layernorm.weight"] = norm(d)
        if arch == "gpt_oss":
            t[p + "self_attn.o_proj.bias"] = bias(d)
            t[p + "self_attn.sinks"] = torch.randn(nh, generator=g)  # logits of the scores' order
            E, I = cfg["num_local_experts"], cfg["intermediate_size"]
            t[p + "mlp.router.weight"] = 2 * mat(E, d)
            t[p + "mlp.router.bias"] = bias(E)
            # gate and up of spread ~5, so that some cross the clamp at 7
            t[p + "mlp.experts.gate_up_proj"] = 5 * torch.randn(E, d, 2 * I, generator=g) / math.sqrt(d)
            t[p + "mlp.experts.gate_up_proj_bias"] = bias(E * 2 * I).view(E, 2 * I)
            t[p + "mlp.experts.down_proj"] = torch.randn(E, I, d, generator=g) / math.sqrt(I) / 4
            t[p + "mlp.experts.down_proj_bias"] = bias(E * d).view(E, d)
            continue
        if moe_layer(cfg, i):
            E, I = cfg["num_experts"], cfg["moe_intermediate_size"]
            # logits of spread ~2 so that tokens go to different experts
            t[p + "mlp.gate.weight"] = 2 * mat(E, d)
            for x in range(E):
                t[p + f"mlp.experts.{x}.gate_proj.weight"] = mat(I, d)
                t[p + f"mlp.experts.{x}.up_proj.weight"] = mat(I, d)
                t[p + f"mlp.experts.{x}.down_proj.weight"] = mat(d, I)
            continue
        t[p + "mlp.gate_proj.weight"] = mat(h, d)
        t[p + "mlp.up_proj.weight"] = mat(h, d)
        t[p + "mlp.down_proj.weight"] = mat(d, h)
    t["model.norm.weight"] = norm(d)
    if not tied:
        t["lm_head.weight"] = mat(V, d)
    tdt = torch.float32 if dtype == "f32" else torch.bfloat16
    t = {k: v.to(tdt).contiguous() for k, v in t.items()}
    os.makedirs(outdir, exist_ok=True)
    save_file(t, os.path.join(outdir, "model.safetensors"), metadata={"format": "pt"})
    with open(os.path.join(outdir, "config.json"), "w") as f:
        json.dump(cfg, f, indent=2)
    with open(os.path.join(outdir, "generation_config.json"), "w") as f:
        json.dump({"bos_token_id": 1, "eos_token_id": [2, 5]}, f)
    toks = torch.randint(0, V, (N_TOKENS,), generator=g).tolist()
    with open(os.path.join(outdir, "tokens.txt"), "w") as f:
        f.write(" ".join(map(str, toks)) + "\n")


# ---- the reference forward (float64) ---------------------------------------------------------------

def yarn_of(hd, theta, rs, max_pos):
    """transformers' _compute_yarn_parameters: (inv_freq, attention factor)."""
    import torch
    factor = rs["factor"]
    old = rs.get("original_max_position_embeddings") or max_pos

    def mscale(m=1.0):
        return 1.0 if factor <= 1 else 0.1 * m * math.log(factor) + 1.0

    att = rs.get("attention_factor")
    if att is None:
        att = mscale(rs["mscale"]) / mscale(rs["mscale_all_dim"]) if rs.get("mscale") and rs.get("mscale_all_dim") \
            else mscale()

    def corr_dim(n):
        return hd * math.log(old / (n * 2 * math.pi)) / (2 * math.log(theta))

    low, high = corr_dim(rs.get("beta_fast") or 32), corr_dim(rs.get("beta_slow") or 1)
    if rs.get("truncate", True):
        low, high = math.floor(low), math.ceil(high)
    low, high = max(low, 0), min(high, hd - 1)
    if low == high:
        high += 0.001
    ramp = ((torch.arange(hd // 2, dtype=torch.float64) - low) / (high - low)).clamp(0, 1)
    pos = theta ** (torch.arange(0, hd, 2, dtype=torch.float64) / hd)
    extra = 1 - ramp  # the share of the plain frequency
    return (1 / (factor * pos)) * (1 - extra) + (1 / pos) * extra, att


def inv_freq_of(hd, theta, rope_scaling):
    import torch
    inv = 1.0 / (theta ** (torch.arange(0, hd, 2, dtype=torch.float64) / hd))
    if rope_scaling:
        factor = rope_scaling["factor"]
        lo, hi = rope_scaling["low_freq_factor"], rope_scaling["high_freq_factor"]
        old = rope_scaling["original_max_position_embeddings"]
        low_wl, high_wl = old / lo, old / hi
        wl = 2 * math.pi / inv
        out = torch.where(wl > low_wl, inv / factor, inv)
        smooth = (old / wl - lo) / (hi - lo)
        smoothed = (1 - smooth) * out / factor + smooth * out
        medium = (wl >= high_wl) & (wl <= low_wl)
        inv = torch.where(medium, smoothed, out)
    return inv


def rms_norm(x, w, eps):
    import torch
    return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps) * w


def rotate_half(x):
    import torch
    half = x.shape[-1] // 2
    return torch.cat((-x[..., half:], x[..., :half]), dim=-1)


def forward(c, W, tokens):
    """c: dict with dim, hidden, L, nh, nkv, hd, eps, theta, rope_scaling, qk_norm;
    W: HF tensor names -> float64 tensors (lm_head.weight present). Optional
    c["linear"](NAME, x) runs attention's projection NAME
    ("model.layers.L.self_attn.q_proj") instead of W's, and c["moe"](p, h) a
    layer's mixture (p its prefix "model.layers.L."): a module tree's own
    (peft_oss_logits.py)."""
    import torch
    T = len(tokens)
    nh, nkv, hd, eps = c["nh"], c["nkv"], c["hd"], c["eps"]
    x = W["model.embed_tokens.weight"][torch.tensor(tokens)]
    rs, att_factor = c.get("rope_scaling"), 1.0
    if rs and rs.get("rope_type") == "yarn":
        inv, att_factor = yarn_of(hd, c["theta"], rs, c.get("max_pos"))
    else:
        inv = inv_freq_of(hd, c["theta"], rs)
    freqs = torch.outer(torch.arange(T, dtype=torch.float64), inv)
    emb = torch.cat((freqs, freqs), dim=-1)
    cos, sin = emb.cos() * att_factor, emb.sin() * att_factor  # [T, hd]
    mask = torch.full((T, T), float("-inf"), dtype=torch.float64).triu(1)
    # sliding_window_overlay: key j seen from query i when j > i - window
    idx = torch.arange(T)
    types = c.get("layer_types") or ["full_attention"] * c["L"]
    window_mask = mask.masked_fill(idx[None, :] <= idx[:, None] - (c.get("window") or T + 1), float("-inf"))
    for i in range(c["L"]):
        p = f"model.layers.{i}."
        h = rms_norm(x, W[p + "input_layernorm.weight"], eps)

        def proj(name, h):
            if "linear" in c:
                return c["linear"](p + f"self_attn.{name}_proj", h)
            y = h @ W[p + f"self_attn.{name}_proj.weight"].T
            b = W.get(p + f"self_attn.{name}_proj.bias")
            return y if b is None else y + b

        q = proj("q", h).view(T, nh, hd).transpose(0, 1)
        k = proj("k", h).view(T, nkv, hd).transpose(0, 1)
        v = proj("v", h).view(T, nkv, hd).transpose(0, 1)
        if c["qk_norm"]:
            q = rms_norm(q, W[p + "self_attn.q_norm.weight"], eps)
            k = rms_norm(k, W[p + "self_attn.k_norm.weight"], eps)
        q = q * cos + rotate_half(q) * sin
        k = k * cos + rotate_half(k) * sin
        k = k.repeat_interleave(nh // nkv, dim=0)  # repeat_kv
        v = v.repeat_interleave(nh // nkv, dim=0)
        scores = q @ k.transpose(1, 2) / math.sqrt(hd) + (window_mask if types[i] == "sliding_attention"
                                                          else mask)
        if p + "self_attn.sinks" in W:  # gpt_oss: the sink's logit joins the softmax, then is dropped
            sinks = W[p + "self_attn.sinks"].view(nh, 1, 1).expand(nh, T, 1)
            att = torch.softmax(torch.cat((scores, sinks), dim=-1), dim=-1)[..., :-1]
        else:
            att = torch.softmax(scores, dim=-1)
        x = x + proj("o", (att @ v).transpose(0, 1).reshape(T, nh * hd))
        h = rms_norm(x, W[p + "post_attention_layernorm.weight"], eps)
        if "moe" in c:
            x = x + c["moe"](p, h)
            continue
        if p + "mlp.gate.weight" in W:
            x = x + sparse_moe(c, W, p, h)
            continue
        if p + "mlp.router.weight" in W:
            x = x + oss_moe(c, W, p, h)
            continue
        gate = h @ W[p + "mlp.gate_proj.weight"].T
        up = h @ W[p + "mlp.up_proj.weight"].T
        x = x + (torch.nn.functional.silu(gate) * up) @ W[p + "mlp.down_proj.weight"].T
    x = rms_norm(x, W["model.norm.weight"], eps)
    return x @ W["lm_head.weight"].T


def choose(c, p, scores):
    """The k experts of largest score per token, most first; with c["replay"]
    (layer prefix -> [T, k] ids, a row of -1s: its own) the given ones instead.
    c["moe_margin"] keeps the smallest gap between the k-th and (k+1)-th score
    of the tokens that chose their own. With c["routes"] (a dict) each layer's
    choice is kept there with each token's smallest gap between its k + 1
    largest scores (below it float32 may order or choose otherwise)."""
    import torch
    k, E = c["top_k"], scores.shape[-1]
    top = torch.topk(scores.detach(), k + 1 if k < E else k, dim=-1)
    sel = top.indices[:, :k]
    own = torch.ones(sel.shape[0], dtype=torch.bool)
    if c.get("replay") is not None and p in c["replay"]:
        rep = torch.as_tensor(c["replay"][p], dtype=torch.long)
        own = rep[:, 0] < 0
        sel = torch.where(own[:, None], sel, rep)
    if k < E and own.any():
        gap = (top.values[own, k - 1] - top.values[own, k]).min().item()
        c["moe_margin"] = min(c.get("moe_margin", 1.0), gap)
    if c.get("routes") is not None:
        c["routes"][p] = (sel, (top.values[:, :-1] - top.values[:, 1:]).min(dim=-1).values)
    return sel


def sparse_moe(c, W, p, h):
    """Qwen3MoeSparseMoeBlock: softmax over every expert, the top k, renormalised
    with norm_topk_prob; each expert over the tokens routed to it, weighted,
    added up with index_add_. The choice of experts carries no gradient."""
    import torch
    F = torch.nn.functional
    probs = torch.softmax(h @ W[p + "mlp.gate.weight"].T, dim=-1)
    sel = choose(c, p, probs)
    if "router_log" in c:  # for a load-balancing loss (train_ref.py): the layer's softmax and choice
        c["router_log"].append((probs, sel))
    w = probs.gather(-1, sel)
    if c["norm_topk"]:
        w = w / w.sum(dim=-1, keepdim=True)
    out = torch.zeros_like(h)
    for x in range(probs.shape[-1]):
        rows, j = torch.where(sel == x)
        if rows.numel() == 0:
            continue
        e = p + f"mlp.experts.{x}."
        hx = h[rows]
        y = (F.silu(hx @ W[e + "gate_proj.weight"].T) * (hx @ W[e + "up_proj.weight"].T)) @ W[e + "down_proj.weight"].T
        out = out.index_add(0, rows, y * w[rows, j, None])
    return out


def oss_moe(c, W, p, h):
    """GptOssMLP: GptOssTopKRouter (logits with a bias, the top k, a softmax over
    those k) and GptOssExperts (gate_up = x gate_up_proj + bias, gate the even
    columns and up the odd, gate clamped above and up both sides at
    swiglu_limit, (up + 1) gate sigmoid(1.702 gate), then down_proj + bias),
    weighted and summed. The choice of experts carries no gradient."""
    import torch
    logits = h @ W[p + "mlp.router.weight"].T + W[p + "mlp.router.bias"]
    E = logits.shape[-1]
    sel = choose(c, p, logits)
    if "router_log" in c:
        c["router_log"].append((torch.softmax(logits, dim=-1), sel))
    w = torch.softmax(logits.gather(-1, sel), dim=-1)
    limit, e = c.get("swiglu_limit", 7.0), p + "mlp.experts."
    out = torch.zeros_like(h)
    for x in range(E):
        rows, j = torch.where(sel == x)
        if rows.numel() == 0:
            continue
        gu = h[rows] @ W[e + "gate_up_proj"][x] + W[e + "gate_up_proj_bias"][x]
        gate, up = gu[..., ::2].clamp(max=limit), gu[..., 1::2].clamp(min=-limit, max=limit)
        y = ((up + 1) * gate * torch.sigmoid(gate * 1.702)) @ W[e + "down_proj"][x] + W[e + "down_proj_bias"][x]
        out = out.index_add(0, rows, y * w[rows, j, None])
    return out


def read_tokens(path):
    with open(path) as f:
        return [int(t) for t in f.read().split()]


def model_logits(c, W, tokens):
    """forward without autograd: logits at every position, float64 [T, vocab]."""
    import torch
    with torch.no_grad():
        return forward(c, W, tokens)


# gpt-oss's stacked experts as PEFT's target_parameters name them, in the
# order GptOssExperts registers them (PEFT wraps them in that order: the
# first innermost)
OSS_PARAMS = ("mlp.experts.gate_up_proj", "mlp.experts.down_proj")


def oss_target_params(entries):
    """The OSS_PARAMS a target_parameters list names (an entry is the name
    or its last dot-separated parts, as PEFT matches it), in OSS_PARAMS order."""
    return [p for p in OSS_PARAMS if any(p == e or p.endswith("." + e) for e in entries or [])]


def param_wrapper_names(layer, params):
    """PEFT's ParamWrapper factor names (lora_A, lora_B) of each of params
    (oss_target_params) in layer: each wrapper around the one before, so the
    first is under one "base_layer." per wrapper after it."""
    out = {}
    for i, p in enumerate(params):
        pre = f"base_model.model.model.layers.{layer}.mlp.experts." + "base_layer." * (len(params) - 1 - i)
        out[p] = (pre + "lora_A.weight", pre + "lora_B.weight")
    return out


def param_wrapper_delta(A, B, E, scale):
    """PEFT's ParamWrapper delta for a stacked parameter [E, in, out] (as its
    get_delta_weight defines it): lora_A [r E, in] read as [E, r, in],
    lora_B [out, r E] as [out, r, E], delta[e, i, o] = scale sum_k
    B[o, k, e] A[e, k, i]."""
    import torch
    a = A.reshape(E, -1, A.shape[-1])
    b = B.reshape(B.shape[0], -1, E)
    return scale * torch.einsum("oke,eki->eio", b, a)


def merge_adapter(W, adapter_dir):
    """W (HF names, float64) with a PEFT LoRA adapter merged as PEFT's
    merge_and_unload does: each module's weight + scale B A, the module
    named by the factor's name (base_model.model.NAME.lora_A.weight: an
    expert's NAME is model.layers.L.mlp.experts.X.gate_proj); gpt-oss's
    stacked experts (target_parameters) + param_wrapper_delta. A new dict."""
    import torch
    from safetensors.torch import load_file
    ac = json.load(open(os.path.join(adapter_dir, "adapter_config.json")))
    A = {k: v.to(torch.float64) for k, v in load_file(os.path.join(adapter_dir, "adapter_model.safetensors")).items()}
    scale = ac["lora_alpha"] / (ac["r"] ** 0.5 if ac.get("use_rslora") else ac["r"])
    prefix, W = "base_model.model.", dict(W)
    params = oss_target_params(ac.get("target_parameters"))
    for k in A:
        if k.endswith(".lora_A.weight") and ".mlp.experts.lora_" not in k and ".experts.base_layer." not in k:
            target = k[len(prefix):-len(".lora_A.weight")] + ".weight"
            W[target] = W[target] + scale * (A[k.replace("lora_A", "lora_B")] @ A[k])
    layer = 0
    while params and f"model.layers.{layer}.mlp.experts.gate_up_proj" in W:
        for p, (a, b) in param_wrapper_names(layer, params).items():
            key = f"model.layers.{layer}.{p}"
            W[key] = W[key] + param_wrapper_delta(A[a], A[b], W[key].shape[0], scale)
        layer += 1
    return W


def hf_model(d):
    """The forward's config and float64 weights of an HF directory; gpt-oss's
    MXFP4 experts (NAME_blocks, NAME_scales) as transformers dequantizes them
    into NAME: convert_moe_packed_tensors (mxfp4_ref.py's transcription),
    then [E, out, in] transposed to the bf16 layout's [E, in, out]. An
    adapter directory (adapter_config.json, no weights of its own): the base
    it names with the adapter merged (merge_adapter)."""
    import torch
    from safetensors.torch import load_file
    from mxfp4_ref import convert_moe_packed_tensors
    if os.path.exists(os.path.join(d, "adapter_config.json")) and not os.path.exists(os.path.join(d, "model.safetensors")):
        base = json.load(open(os.path.join(d, "adapter_config.json")))["base_model_name_or_path"]
        c, W = hf_model(base if os.path.isabs(base) else os.path.join(d, base))
        return c, merge_adapter(W, d)
    cfg = json.load(open(os.path.join(d, "config.json")))
    raw = load_file(os.path.join(d, "model.safetensors"))
    W = {k: v.to(torch.float64) for k, v in raw.items() if not k.endswith(("_blocks", "_scales"))}
    for k in raw:
        if k.endswith("_blocks"):
            base = k[:-len("_blocks")]
            w = convert_moe_packed_tensors(raw[k], raw[base + "_scales"], dtype=torch.float32)
            W[base] = w.transpose(1, 2).to(torch.float64)
    if cfg.get("tie_word_embeddings", False):
        W["lm_head.weight"] = W["model.embed_tokens.weight"]
    return ref_config(cfg), W


def ref_config(cfg):
    """The forward's settings from a config.json dict."""
    arch = cfg["model_type"]
    nh = cfg["num_attention_heads"]
    return dict(L=cfg["num_hidden_layers"], nh=nh, nkv=cfg.get("num_key_value_heads", nh),
                hd=cfg.get("head_dim", cfg["hidden_size"] // nh), eps=cfg["rms_norm_eps"],
                theta=cfg["rope_theta"], rope_scaling=cfg.get("rope_scaling"), qk_norm=arch in ("qwen3", "qwen3_moe"),
                top_k=cfg.get("num_experts_per_tok", 0), norm_topk=cfg.get("norm_topk_prob", False),
                max_pos=cfg.get("max_position_embeddings"), window=cfg.get("sliding_window"),
                layer_types=cfg.get("layer_types") or ["full_attention"] * cfg["num_hidden_layers"],
                swiglu_limit=cfg.get("swiglu_limit", 7.0))


def hf_logits(d, tokens):
    return model_logits(*hf_model(d), tokens)


def write_f64(path, t):
    t.detach().numpy().astype("<f8").tofile(path)


# ---- GGUF (gguf-py) --------------------------------------------------------------------------------

def gguf_hf_weights(path, dtype=np.float64):
    """A GGUF file as gguf-py reads it, named as Hugging Face names it: HF name ->
    torch tensor of dtype (dequantized by gguf.quants.dequantize, llama-arch Q/K
    rows un-permuted here), and the config.json fields its metadata gives."""
    import torch
    from gguf import GGUFReader
    from gguf.quants import dequantize
    r = GGUFReader(path)

    def field(key, default=None):
        f = r.fields.get(key)
        if f is None:
            return default
        v = f.parts[f.data[0]]
        if f.types[0].name == "STRING":
            return bytes(v).decode()
        return v.tolist()[0]

    arch = field("general.architecture")
    nh = field(f"{arch}.attention.head_count")
    nkv = field(f"{arch}.attention.head_count_kv", nh)
    d = field(f"{arch}.embedding_length")
    hd = field(f"{arch}.attention.key_length", d // nh)
    names = {"token_embd": "model.embed_tokens", "output_norm": "model.norm", "output": "lm_head",
             "attn_norm": "input_layernorm", "attn_q": "self_attn.q_proj", "attn_k": "self_attn.k_proj",
             "attn_v": "self_attn.v_proj", "attn_output": "self_attn.o_proj",
             "attn_q_norm": "self_attn.q_norm", "attn_k_norm": "self_attn.k_norm",
             "ffn_norm": "post_attention_layernorm", "ffn_gate": "mlp.gate_proj", "ffn_up": "mlp.up_proj",
             "ffn_down": "mlp.down_proj", "ffn_gate_inp": "mlp.gate"}
    experts = {"ffn_gate_exps": "gate_proj", "ffn_up_exps": "up_proj", "ffn_down_exps": "down_proj"}
    W = {}
    for t in r.tensors:
        if t.name == "rope_freqs.weight":  # llama3 scaling's table: HF computes it from config.json
            continue
        parts = t.name.split(".")
        if parts[0] == "blk" and parts[2] in experts:
            # a layer's experts stacked: dims {cols, rows, n_experts}
            a = dequantize(t.data, t.tensor_type).astype(dtype)
            a = a.reshape([int(n) for n in reversed(t.shape.tolist())])
            for x in range(a.shape[0]):
                hf = f"model.layers.{parts[1]}.mlp.experts.{x}.{experts[parts[2]]}.weight"
                W[hf] = torch.from_numpy(np.ascontiguousarray(a[x]))
            continue
        if parts[0] == "blk":
            hf = f"model.layers.{parts[1]}.{names[parts[2]]}.{parts[3]}"
            base = parts[2]
        else:
            hf = f"{names[parts[0]]}.{parts[1]}"
            base = parts[0]
        a = dequantize(t.data, t.tensor_type).astype(dtype)
        a = a.reshape([int(n) for n in reversed(t.shape.tolist())]) if len(t.shape) > 1 else a.reshape(-1)
        if arch == "llama" and base in ("attn_q", "attn_k"):
            # llama.cpp stored row (head, i, j) = HF row (head, j, i), i < hd/2, j < 2:
            # view rows as [heads, hd/2, 2] and swap back to [heads, 2, hd/2].
            heads = nh if base == "attn_q" else nkv
            shp = a.shape
            a = a.reshape(heads, hd // 2, 2, -1).transpose(0, 2, 1, 3).reshape(shp)
        W[hf] = torch.from_numpy(np.ascontiguousarray(a))
    cfg = dict(arch=arch, num_attention_heads=nh, num_key_value_heads=nkv, head_dim=hd, hidden_size=d,
               intermediate_size=field(f"{arch}.feed_forward_length"),
               num_hidden_layers=field(f"{arch}.block_count"),
               max_position_embeddings=field(f"{arch}.context_length"),
               rope_theta=field(f"{arch}.rope.freq_base", 10000.0),
               rms_norm_eps=field(f"{arch}.attention.layer_norm_rms_epsilon"),
               tie_word_embeddings="lm_head.weight" not in W,
               # llama.cpp's qwen3moe renormalises its top k always
               num_experts_per_tok=field(f"{arch}.expert_used_count", 0), norm_topk_prob=True)
    return W, cfg


def gguf_model(path):
    """The forward's config and float64 weights of a GGUF file, as gguf-py reads it."""
    W, cfg = gguf_hf_weights(path)
    c = dict(L=cfg["num_hidden_layers"], nh=cfg["num_attention_heads"], nkv=cfg["num_key_value_heads"],
             hd=cfg["head_dim"], eps=cfg["rms_norm_eps"], theta=cfg["rope_theta"], rope_scaling=None,
             qk_norm=cfg["arch"] in ("qwen3", "qwen3moe"), top_k=cfg["num_experts_per_tok"],
             norm_topk=cfg["norm_topk_prob"])
    if cfg["tie_word_embeddings"]:
        W["lm_head.weight"] = W["model.embed_tokens.weight"]
    return c, W


# ---- the suite the bats test uses -----------------------------------------------------------------

VARIANTS = [  # name, arch, tied, llama3, dtype
    ("llama", "llama", False, False, "f32"),
    ("llama-tied-llama3", "llama", True, True, "f32"),
    ("llama-bf16", "llama", False, False, "bf16"),
    ("qwen2", "qwen2", False, False, "f32"),
    ("qwen2-tied-bf16", "qwen2", True, False, "bf16"),
    ("qwen3", "qwen3", False, False, "f32"),
    ("qwen3-tied", "qwen3", True, False, "f32"),
]


def tiny_suite(root):
    for i, (name, arch, tied, llama3, dtype) in enumerate(VARIANTS):
        d = os.path.join(root, name)
        make_tiny(arch, d, tied=tied, llama3=llama3, dtype=dtype, seed=1000 + i)
        write_f64(os.path.join(d, "ref.f64"), hf_logits(d, read_tokens(os.path.join(d, "tokens.txt"))))
        print(name)


def compare(ours, ref, tol):
    a = np.fromfile(ours, dtype="<f4").astype(np.float64)
    b = np.fromfile(ref, dtype="<f8")
    if a.shape != b.shape:
        print(f"size mismatch: {a.size} vs {b.size} values")
        return 1
    diff = float(np.max(np.abs(a - b)))
    print(f"max abs diff {diff:.3g} (tol {tol:g}, max |ref| {float(np.max(np.abs(b))):.3g}, {a.size} values)")
    return 0 if diff <= tol else 1


def main(argv):
    if len(argv) < 2:
        print(__doc__)
        return 64
    cmd, args = argv[1], argv[2:]
    if cmd == "make-tiny":
        opts = dict(tied="--tied" in args, llama3="--llama3-rope" in args)
        if "--dtype" in args:
            opts["dtype"] = args[args.index("--dtype") + 1]
        if "--seed" in args:
            opts["seed"] = int(args[args.index("--seed") + 1])
        opts["norm_topk"] = "--norm-topk" in args
        opts["yarn"] = "--yarn" in args
        opts["yarn_truncate"] = "--yarn-truncate" in args
        if "--window" in args:
            opts["window"] = int(args[args.index("--window") + 1])
        if "--dense-layers" in args:
            opts["dense_layers"] = [int(x) for x in args[args.index("--dense-layers") + 1].split(",")]
        if "--sparse-step" in args:
            opts["sparse_step"] = int(args[args.index("--sparse-step") + 1])
        for flag, key in (("--experts", "experts"), ("--top-k", "top_k")):
            if flag in args:
                opts[key] = int(args[args.index(flag) + 1])
        make_tiny(args[0], args[1], **opts)
    elif cmd == "tiny-suite":
        tiny_suite(args[0])
    elif cmd == "logits":
        c, W = hf_model(args[0])
        write_f64(args[2], model_logits(c, W, read_tokens(args[1])))
        if "moe_margin" in c:
            print(f"min top-k margin {c['moe_margin']:.3g}")
    elif cmd == "gguf-logits":
        c, W = gguf_model(args[0])
        write_f64(args[2], model_logits(c, W, read_tokens(args[1])))
        if "moe_margin" in c:
            print(f"min top-k margin {c['moe_margin']:.3g}")
    elif cmd == "compare":
        return compare(args[0], args[1], float(args[2]))
    else:
        print(__doc__)
        return 64
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
