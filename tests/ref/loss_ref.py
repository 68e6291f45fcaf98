#!/usr/bin/env python3
"""Independent reference for the GRPO loss family (formats/loss.md): the
per-token loss written with torch float64 ops the way TRL's GRPOTrainer
writes it (padded [B, T] tensors and a completion mask), aggregated, and
differentiated by autograd. Compared with lib/train/loss.c through the unit
test's driver mode:

  loss_ref.py --bin build/tests/test_loss [--seed S] [--cases N]

generates random cases (every loss kind x token/sequence importance x beta
0/0.04, masked completions, clipping on both sides), writes them as JSON,
runs `BIN --ref-json IN OUT`, and compares. Exit 1 on any difference.

Inputs are float32 values (what the C side takes), widened exactly to
float64 here. Tolerances:
  loss, policy_loss, kl, entropy: 1e-12 relative (both sides compute in
      double from the same inputs; summation order and libm differ);
  clip ratios: exact (counts over the same comparisons);
  dlogp: 1e-6 relative + 1e-12 absolute (ours is rounded to float32, 6e-8);
      masked completions and dead clip branches exactly 0 on both sides.

Multi-turn records: the "turns" cases give completions a completion_mask
(environment tokens 0, the policy's 1) and the reference multiplies it into
TRL's completion mask, as TRL's multi-turn trainers do with their env_mask:
every sum, mean, count, quantile and importance weight is then over the
policy's tokens only, and environment tokens get gradient exactly 0.

Deliberate difference from TRL: masked (truncated) completions are left out
of every denominator; TRL still counts their rows in grpo's and dr_grpo's
completion count.
"""
import argparse
import json
import math
import os
import subprocess
import sys
import tempfile

import numpy as np
import torch

KINDS = ["grpo", "bnpo", "dr_grpo", "dapo"]
LOSS_TOL = 1e-12
GRAD_REL, GRAD_ABS = 1e-6, 1e-12


def f32(x):
    return [float(v) for v in np.asarray(x, dtype=np.float32)]


def gen_case(rng, kind, seq, beta, with_ref, with_entropy):
    n_comp = int(rng.integers(3, 9))
    max_new = 24
    comps = []
    for i in range(n_comp):
        n = int(rng.integers(0 if i == 2 else 1, max_new + 1))
        logp = rng.uniform(-4.0, -0.02, n)
        shift = rng.uniform(-0.4, 0.4)  # moves whole completions outside the range (GSPO)
        old = logp - shift - rng.uniform(-0.45, 0.45, n)
        ref = logp + rng.uniform(-0.3, 0.3, n)
        comps.append({
            "logp": f32(logp),
            "old_logp": f32(old),
            "ref_logp": f32(ref) if with_ref else None,
            "entropy": f32(rng.uniform(0, 3, n)) if with_entropy else None,
            "advantage": float(rng.normal()),
            "masked": bool(i > 0 and rng.random() < 0.2),
        })
    return {"loss": kind, "sequence_level": seq, "epsilon_low": 0.2, "epsilon_high": 0.28, "beta": beta,
            "max_new_tokens": max_new, "completions": comps}


def gen_extra(rng, kind, seq, beta, **extra):
    """A case for the newer terms: sampler log-probs of their own (so the
    off-policy mask and the IS correction have something to measure) and
    entropies for the entropy terms."""
    case = gen_case(rng, kind, seq, beta, beta != 0, True)
    for c in case["completions"]:
        n = len(c["logp"])
        c["sampler_logp"] = f32(np.minimum(np.asarray(c["old_logp"]) + rng.uniform(-0.3, 0.3, n), -1e-3))
    case.update(extra)
    return case


def add_turns(rng, case):
    """The case made multi-turn: in most completions of 4 tokens or more,
    one or two spans of environment tokens (completion_mask 0) after the
    first token; the others stay all 1 (a single-turn record among them)."""
    for c in case["completions"]:
        n = len(c["logp"])
        mask = [1] * n
        if n >= 4 and rng.random() < 0.8:
            for _ in range(int(rng.integers(1, 3))):
                s0 = int(rng.integers(1, n - 1))
                for t in range(s0, min(n - 1, s0 + int(rng.integers(1, 6)))):
                    mask[t] = 0
        c["completion_mask"] = mask
    case["turns"] = True
    return case


def quantile_mask(ent, mask, q):
    """TRL's get_high_entropy_mask with threshold 1 - q (torch.quantile's
    linear interpolation, here in float64 on the float32 values)."""
    kept = ent[mask.bool()]
    if q >= 1 or kept.numel() == 0:
        return torch.ones_like(mask, dtype=torch.bool)
    thr = torch.quantile(kept, 1 - q)
    return (ent >= thr) & mask.bool()


def torch_case(case):
    comps = case["completions"]
    B = len(comps)
    T = max(1, max(len(c["logp"]) for c in comps))
    z = lambda: torch.zeros(B, T, dtype=torch.float64)
    logp_v, old, ref, ent_v, smp, mask = z(), z(), z(), z(), z(), z()
    adv = torch.tensor([c["advantage"] for c in comps], dtype=torch.float64)
    keep = torch.tensor([not c["masked"] for c in comps])
    has_ref = comps[0]["ref_logp"] is not None
    has_ent = comps[0]["entropy"] is not None
    for i, c in enumerate(comps):
        n = len(c["logp"])
        logp_v[i, :n] = torch.tensor(c["logp"], dtype=torch.float64)
        old[i, :n] = torch.tensor(c["old_logp"], dtype=torch.float64)
        smp[i, :n] = torch.tensor(c.get("sampler_logp") or c["old_logp"], dtype=torch.float64)
        if has_ref:
            ref[i, :n] = torch.tensor(c["ref_logp"], dtype=torch.float64)
        if has_ent:
            ent_v[i, :n] = torch.tensor(c["entropy"], dtype=torch.float64)
        if not c["masked"]:
            mask[i, :n] = torch.tensor(c.get("completion_mask") or [1] * n, dtype=torch.float64)
    logp = logp_v.clone().requires_grad_(True)
    ent = ent_v.clone().requires_grad_(True)
    kind, lo, hi = case["loss"], 1 - case["epsilon_low"], 1 + case["epsilon_high"]
    delta = case.get("delta", 0)
    a = adv.unsqueeze(1)

    log_ratio = logp - old
    if case["sequence_level"]:
        log_iw = ((log_ratio * mask).sum(-1) / mask.sum(-1).clamp(min=1.0)).unsqueeze(-1)
    else:
        log_iw = log_ratio
    coef_1 = torch.exp(log_iw)
    if kind == "cispo":  # the weight capped above only, and no gradient through it
        policy = -torch.clamp(coef_1, max=hi).detach() * a * logp
    elif kind == "sapo":
        f64 = lambda x: torch.tensor(x, dtype=torch.float64)  # python scalars would make where() float32
        tau = torch.where(a > 0, f64(case.get("tau_pos", 1.0)), f64(case.get("tau_neg", 1.05)))
        policy = -(torch.sigmoid(tau * (coef_1 - 1)) * 4 / tau) * a
    else:
        coef_2 = torch.clamp(coef_1, lo, hi)
        bounded = torch.clamp(coef_1, max=delta) if delta else coef_1
        policy = -torch.min(bounded * a, coef_2 * a)
    policy = policy.expand(B, T)

    # DeepSeek-V3.2 as TRL: keep A >= 0 or mean(sampler - logp) <= X
    thr_x = case.get("off_policy_threshold", -1)
    if thr_x >= 0:
        seq_kl = ((smp - logp.detach()) * mask).sum(-1, keepdim=True) / mask.sum(-1, keepdim=True).clamp(min=1.0)
        off_keep = ((a >= 0) | (seq_kl <= thr_x)).double()
        policy = policy * off_keep
    q = case.get("top_entropy_quantile", 1.0)
    emask = quantile_mask(ent.detach(), mask, q)
    if q < 1:
        policy = policy * emask
    is_level = case.get("is_level")
    if is_level:
        diff = (old - smp) * mask
        if is_level == "sequence":
            diff = diff.sum(-1, keepdim=True)
        isw = torch.exp(diff)
        cap = case.get("is_cap", 3.0)
        isw = isw.masked_fill(isw > cap, 0.0) if case.get("is_mask") else torch.clamp(isw, max=cap)
        policy = policy * isw
    kl = torch.exp(ref - logp) - (ref - logp) - 1
    per_token = policy + case["beta"] * kl if case["beta"] != 0 else policy
    coef_h = case.get("entropy_coef", 0)
    if coef_h:
        per_token = per_token - coef_h * ent

    n_rows = keep.sum().double()  # masked completions count in no denominator
    n_tok = mask.sum()

    def aggregate(x):
        if kind in ("grpo", "sapo"):
            per_seq = (x * mask).sum(-1) / mask.sum(-1).clamp(min=1.0)
            return per_seq[keep].sum() / n_rows
        if kind in ("bnpo", "dapo", "cispo"):
            return (x * mask).sum() / n_tok.clamp(min=1.0)
        return (x * mask).sum() / (n_rows * case["max_new_tokens"])

    loss = aggregate(per_token)
    policy_loss = aggregate(policy)
    loss.backward()

    def token_mean(x):
        return ((x * mask).sum() / n_tok).item() if n_tok > 0 else None

    if case["sequence_level"]:  # TRL: the plain mean of the one column
        clip = lambda x: x.double().squeeze(-1)[keep].mean().item()
    else:
        clip = lambda x: token_mean(x.double())
    out = {"clip_low": None, "clip_high": None, "clip_region": None, "clip_cispo": None, "clip_delta": None}
    if kind == "cispo":
        out["clip_cispo"] = clip((coef_1 > hi) & (a > 0))
    elif kind != "sapo":
        low, high = (coef_1 < lo) & (a < 0), (coef_1 > hi) & (a > 0)
        out.update(clip_low=clip(low), clip_high=clip(high), clip_region=clip(low | high))
        if delta:
            out["clip_delta"] = clip((coef_1 > delta) & (a < 0))
    out["entropy_masked"] = token_mean((~emask).double()) if q < 1 else None
    out["off_policy_masked"] = (1 - off_keep.squeeze(-1)[keep]).mean().item() if thr_x >= 0 else None
    out.update(is_diff_mean=None, is_diff_max=None, is_w_min=None, is_w_mean=None, is_w_max=None)
    if is_level:
        d = (old - smp).abs()[mask.bool()]
        w = isw.squeeze(-1)[keep] if is_level == "sequence" else isw[mask.bool()]
        out.update(is_diff_mean=d.mean().item(), is_diff_max=d.max().item(), is_w_min=w.min().item(),
                   is_w_mean=w.mean().item(), is_w_max=w.max().item())
    grads = [logp.grad[i, :len(c["logp"])].tolist() for i, c in enumerate(comps)]
    dent = ent.grad if ent.grad is not None else torch.zeros_like(ent)
    dents = [dent[i, :len(c["logp"])].tolist() for i, c in enumerate(comps)]
    out.update({
        "loss": loss.item(), "policy_loss": policy_loss.item(),
        "kl": token_mean(kl.detach()) if has_ref else None,
        "entropy": token_mean(ent.detach()) if has_ent else None,
        "dlogp": grads, "dentropy": dents,
    })
    return out


METRICS = ("loss", "policy_loss", "kl", "entropy", "clip_low", "clip_high", "clip_region", "clip_cispo",
           "clip_delta", "entropy_masked", "off_policy_masked", "is_diff_mean", "is_diff_max", "is_w_min",
           "is_w_mean", "is_w_max")
EXACT = ("clip_low", "clip_high", "clip_region", "clip_cispo", "clip_delta", "entropy_masked", "off_policy_masked")


def describe(case):
    extras = [f"{k} {case[k]}" for k in ("delta", "tau_pos", "tau_neg", "entropy_coef", "top_entropy_quantile",
                                          "off_policy_threshold", "is_level", "is_mask", "is_cap") if k in case]
    level = "sequence" if case["sequence_level"] else "token"
    turns = ", multi-turn" if case.get("turns") else ""
    return f"{case['loss']}, {level}, beta {case['beta']}{turns}" + "".join(", " + e for e in extras)


def compare(idx, case, got, want, problems):
    label = f"case {idx} ({describe(case)})"
    for key in METRICS:
        g, w = got[key], want[key]
        if w is None or g is None:
            if (g is None) != (w is None):
                problems.append(f"{label}: {key}: got {g}, want {w}")
            continue
        tol = 0.0 if key in EXACT else LOSS_TOL * max(1.0, abs(w))
        if abs(g - w) > tol:
            problems.append(f"{label}: {key}: got {g!r}, want {w!r}")
    for name in ("dlogp", "dentropy"):
        for i, (gr, wr) in enumerate(zip(got[name], want[name])):
            if len(gr) != len(wr):
                problems.append(f"{label}: completion {i}: {len(gr)} {name}, want {len(wr)}")
                continue
            for t, (g, w) in enumerate(zip(gr, wr)):
                if w == 0.0 and g != 0.0 or abs(g - w) > GRAD_REL * abs(w) + GRAD_ABS:
                    problems.append(f"{label}: {name}[{i}][{t}]: got {g!r}, want {w!r}")


def extra_cases(rng, reps):
    """The newer losses, bounds, masks and corrections, alone and together,
    at both importance levels."""
    cases = []
    for r in range(reps):
        for seq in (False, True):
            beta = 0.04 if r % 2 else 0.0
            cases.append(gen_extra(rng, "cispo", seq, beta))
            cases.append(gen_extra(rng, "cispo", seq, beta, epsilon_high=4.0))  # ScaleRL's cap of 5
            cases.append(gen_extra(rng, "sapo", seq, beta))
            cases.append(gen_extra(rng, "sapo", seq, beta, tau_pos=float(rng.uniform(0.5, 3)),
                                   tau_neg=float(rng.uniform(0.5, 3))))
            for kind in ("grpo", "dapo", "dr_grpo"):
                cases.append(gen_extra(rng, kind, seq, beta, delta=1.3 if seq else 1.4))
            cases.append(gen_extra(rng, "grpo" if r % 2 else "bnpo", seq, beta, entropy_coef=0.01 * (r + 1)))
            for q in (0.0, 0.2, 0.5):
                cases.append(gen_extra(rng, KINDS[r % 4], seq, beta, top_entropy_quantile=q))
            for x in (0.0, 0.1, 0.3):
                cases.append(gen_extra(rng, "grpo", seq, beta, off_policy_threshold=x))
            for level in ("token", "sequence"):
                for is_mask in (False, True):
                    cases.append(gen_extra(rng, "dapo", seq, beta, is_level=level, is_mask=is_mask,
                                           is_cap=1.2 if level == "token" else 1.5))
            for kind in ("grpo", "cispo", "sapo"):  # everything at once
                cases.append(gen_extra(rng, kind, seq, 0.04, entropy_coef=0.02, top_entropy_quantile=0.3,
                                       off_policy_threshold=0.1, is_level="token", is_mask=r % 2 == 0,
                                       is_cap=1.25, **({"delta": 1.5} if kind == "grpo" else {})))
    return cases


def coverage(cases, wants, problems):
    """Every term must have acted somewhere, or the comparison proves little."""
    def count(pred):
        return sum(1 for c, w in zip(cases, wants) if pred(c, w))
    need = {
        "low clip": count(lambda c, w: (w["clip_low"] or 0) > 0),
        "high clip": count(lambda c, w: (w["clip_high"] or 0) > 0),
        "cispo cap": count(lambda c, w: (w["clip_cispo"] or 0) > 0),
        "delta bound": count(lambda c, w: (w["clip_delta"] or 0) > 0),
        "entropy mask": count(lambda c, w: (w["entropy_masked"] or 0) > 0),
        "off-policy mask": count(lambda c, w: (w["off_policy_masked"] or 0) > 0),
        "off-policy keep": count(lambda c, w: w["off_policy_masked"] is not None and w["off_policy_masked"] < 1),
        "IS cap": count(lambda c, w: c.get("is_level") and not c.get("is_mask") and w["is_w_max"] == c["is_cap"]),
        "IS mask": count(lambda c, w: c.get("is_mask") and w["is_w_min"] == 0),
    }
    for what, n in need.items():
        if n < 2:
            problems.append(f"coverage: only {n} cases exercise the {what}")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--bin", required=True)
    ap.add_argument("--seed", type=int, default=20240901)
    ap.add_argument("--cases", type=int, default=6, help="random cases per kind x level x beta")
    args = ap.parse_args()
    rng = np.random.default_rng(args.seed)
    cases = []
    for kind in KINDS:
        for seq in (False, True):
            for beta in (0.0, 0.04):
                for r in range(args.cases):
                    # beta 0 sometimes still has a reference (kl is measured) or no entropies
                    cases.append(gen_case(rng, kind, seq, beta, beta != 0 or r % 2 == 0, r % 3 != 1))
    n_plain = len(cases)
    cases += extra_cases(rng, max(2, args.cases // 3))
    # multi-turn: every kind x level x beta, and every newer term, again
    # with environment tokens in the completions
    n_single = len(cases)
    for kind in KINDS:
        for seq in (False, True):
            for beta in (0.0, 0.04):
                for r in range(max(1, args.cases // 3)):
                    cases.append(add_turns(rng, gen_case(rng, kind, seq, beta, beta != 0 or r % 2 == 0, True)))
    cases += [add_turns(rng, c) for c in extra_cases(rng, 2)]
    with tempfile.TemporaryDirectory() as tmp:
        src, dst = os.path.join(tmp, "in.json"), os.path.join(tmp, "out.json")
        with open(src, "w") as f:
            json.dump({"cases": cases}, f)
        subprocess.run([args.bin, "--ref-json", src, dst], check=True)
        with open(dst) as f:
            got = json.load(f)["cases"]
    if len(got) != len(cases):
        print(f"got {len(got)} results for {len(cases)} cases")
        return 1
    problems = []
    wants = []
    for idx, (case, g) in enumerate(zip(cases, got)):
        wants.append(torch_case(case))
        compare(idx, case, g, wants[-1], problems)
    clipped = [sum(w["clip_low"] > 0 for w in wants[:n_plain]), sum(w["clip_high"] > 0 for w in wants[:n_plain])]
    if min(clipped) < n_plain // 4:
        problems.append(f"too few cases clip (low in {clipped[0]}, high in {clipped[1]} of {n_plain})")
    coverage(cases, wants, problems)
    coverage(cases[n_single:], wants[n_single:], problems)
    env = sum(1 for c in cases[n_single:] for comp in c["completions"] if 0 in comp["completion_mask"])
    if env < len(cases[n_single:]):
        problems.append(f"only {env} multi-turn completions hold environment tokens")
    for p in problems[:20]:
        print(p)
    if problems:
        print(f"{len(problems)} differences")
        return 1
    print(f"{len(cases)} cases agree ({len(cases) - n_single} of them multi-turn)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
