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


def torch_case(case):
    comps = case["completions"]
    B = len(comps)
    T = max(1, max(len(c["logp"]) for c in comps))
    z = lambda: torch.zeros(B, T, dtype=torch.float64)
    logp_v, old, ref, ent, mask = z(), z(), z(), z(), z()
    adv = torch.tensor([c["advantage"] for c in comps], dtype=torch.float64)
    keep = torch.tensor([not c["masked"] for c in comps])
    has_ref = comps[0]["ref_logp"] is not None
    has_ent = comps[0]["entropy"] is not None
    for i, c in enumerate(comps):
        n = len(c["logp"])
        logp_v[i, :n] = torch.tensor(c["logp"], dtype=torch.float64)
        old[i, :n] = torch.tensor(c["old_logp"], dtype=torch.float64)
        if has_ref:
            ref[i, :n] = torch.tensor(c["ref_logp"], dtype=torch.float64)
        if has_ent:
            ent[i, :n] = torch.tensor(c["entropy"], dtype=torch.float64)
        if not c["masked"]:
            mask[i, :n] = 1.0
    logp = logp_v.clone().requires_grad_(True)

    log_ratio = logp - old
    if case["sequence_level"]:
        log_iw = ((log_ratio * mask).sum(-1) / mask.sum(-1).clamp(min=1.0)).unsqueeze(-1)
    else:
        log_iw = log_ratio
    coef_1 = torch.exp(log_iw)
    coef_2 = torch.clamp(coef_1, 1 - case["epsilon_low"], 1 + case["epsilon_high"])
    a = adv.unsqueeze(1)
    policy = -torch.min(coef_1 * a, coef_2 * a)
    if case["sequence_level"]:
        policy = policy.expand(B, T)
    kl = torch.exp(ref - logp) - (ref - logp) - 1
    per_token = policy + case["beta"] * kl if case["beta"] != 0 else policy

    n_rows = keep.sum().double()  # masked completions count in no denominator
    n_tok = mask.sum()

    def aggregate(x):
        kind = case["loss"]
        if kind == "grpo":
            per_seq = (x * mask).sum(-1) / mask.sum(-1).clamp(min=1.0)
            return per_seq[keep].sum() / n_rows
        if kind in ("bnpo", "dapo"):
            return (x * mask).sum() / n_tok.clamp(min=1.0)
        return (x * mask).sum() / (n_rows * case["max_new_tokens"])

    loss = aggregate(per_token)
    policy_loss = aggregate(policy)
    loss.backward()

    def token_mean(x):
        return ((x * mask).sum() / n_tok).item() if n_tok > 0 else None

    lo = (coef_1 < 1 - case["epsilon_low"]) & (a < 0)
    hi = (coef_1 > 1 + case["epsilon_high"]) & (a > 0)
    if case["sequence_level"]:  # TRL: the plain mean of the one column
        clip = lambda x: x.double().squeeze(-1)[keep].mean().item()
    else:
        clip = lambda x: token_mean(x.double())
    grads = [logp.grad[i, :len(c["logp"])].tolist() for i, c in enumerate(comps)]
    return {
        "loss": loss.item(), "policy_loss": policy_loss.item(),
        "kl": token_mean(kl.detach()) if has_ref else None,
        "entropy": token_mean(ent) if has_ent else None,
        "clip_low": clip(lo), "clip_high": clip(hi), "clip_region": clip(lo | hi),
        "dlogp": grads,
    }


def compare(idx, case, got, want, problems):
    label = f"case {idx} ({case['loss']}, {'sequence' if case['sequence_level'] else 'token'}, beta {case['beta']})"
    for key in ("loss", "policy_loss", "kl", "entropy", "clip_low", "clip_high", "clip_region"):
        g, w = got[key], want[key]
        if w is None or g is None:
            if (g is None) != (w is None):
                problems.append(f"{label}: {key}: got {g}, want {w}")
            continue
        tol = 0.0 if key.startswith("clip") else LOSS_TOL * max(1.0, abs(w))
        if abs(g - w) > tol:
            problems.append(f"{label}: {key}: got {g!r}, want {w!r}")
    for i, (gr, wr) in enumerate(zip(got["dlogp"], want["dlogp"])):
        if len(gr) != len(wr):
            problems.append(f"{label}: completion {i}: {len(gr)} gradients, want {len(wr)}")
            continue
        for t, (g, w) in enumerate(zip(gr, wr)):
            if w == 0.0 and g != 0.0 or abs(g - w) > GRAD_REL * abs(w) + GRAD_ABS:
                problems.append(f"{label}: dlogp[{i}][{t}]: got {g!r}, want {w!r}")


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
    clipped = [0, 0]
    for idx, (case, g) in enumerate(zip(cases, got)):
        want = torch_case(case)
        compare(idx, case, g, want, problems)
        clipped[0] += want["clip_low"] > 0
        clipped[1] += want["clip_high"] > 0
    if min(clipped) < len(cases) // 4:
        problems.append(f"too few cases clip (low in {clipped[0]}, high in {clipped[1]} of {len(cases)})")
    for p in problems[:20]:
        print(p)
    if problems:
        print(f"{len(problems)} differences")
        return 1
    print(f"{len(cases)} cases agree")
    return 0


if __name__ == "__main__":
    sys.exit(main())
