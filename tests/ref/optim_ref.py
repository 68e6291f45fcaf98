#!/usr/bin/env python3
"""Independent reference for lib/train/optim.c: torch.optim.AdamW and
torch.optim.SGD steps, torch.nn.utils.clip_grad_norm_, and the learning-rate
schedules written from transformers' definitions
(get_{constant,linear,cosine}_schedule_with_warmup; transformers itself need
not be installed). Runs the unit test's driver:

  optim_ref.py --bin build/tests/test_optim [--seed S]

Tolerances:
  AdamW/SGD parameters and moments after 1-4 steps: 1e-6 relative, with a
      floor of 1e-6 times the array's largest magnitude (elements that
      cancel to near 0 keep the absolute error of their terms); both sides
      step in float32, so the real differences are a few ulps;
  schedules: 1e-15 relative (the same double formula);
  gradient norm: 1e-12 relative against numpy float64 (torch's own is
      float32: 1e-6); clipped gradients 1e-6 relative to torch's.
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

TOL = 1e-6


def f32(x):
    return [float(v) for v in np.asarray(x, dtype=np.float32).ravel()]


# ---- transformers' schedules, from their definitions ------------------------------

def lr_lambda(name, step, warmup, total):
    if step < warmup:
        return float(step) / float(max(1, warmup))
    if name == "constant":
        return 1.0
    if name == "linear":
        return max(0.0, float(total - step) / float(max(1, total - warmup)))
    # cosine, num_cycles = 0.5; transformers' curve rises again past `total`,
    # ours (documented) stays at 0 there
    if step >= total:
        return 0.0
    progress = float(step - warmup) / float(max(1, total - warmup))
    return max(0.0, 0.5 * (1.0 + math.cos(math.pi * 0.5 * 2.0 * progress)))


# ---- cases -------------------------------------------------------------------------

def step_cases(rng):
    cases = []
    specs = [  # optimizer, n steps, weight decay, decay flag, betas, eps
        ("adamw", 1, 0.0, True, (0.9, 0.999), 1e-8),
        ("adamw", 3, 0.1, True, (0.9, 0.999), 1e-8),   # bias correction over 3 steps, with decay
        ("adamw", 3, 0.1, False, (0.9, 0.999), 1e-8),  # a norm or bias: no decay
        ("adamw", 4, 0.01, True, (0.8, 0.95), 1e-6),
        ("adamw", 2, 0.0, True, (0.0, 0.5), 1e-3),
        ("sgd", 3, 0.0, True, (0.9, 0.999), 1e-8),
        ("sgd", 2, 0.05, True, (0.9, 0.999), 1e-8),
    ]
    for opt, n_steps, wd, decay, betas, eps in specs:
        n = int(rng.integers(100, 2000))
        scale = 10 ** rng.uniform(-4, -1)
        cases.append({
            "optimizer": opt,
            "lr": [float(10 ** rng.uniform(-5, -2)) for _ in range(n_steps)],
            "betas": list(betas), "eps": eps, "weight_decay": wd, "decay": decay,
            "param": f32(rng.normal(0, 0.5, n)),
            "grads": [f32(rng.normal(0, scale, n)) for _ in range(n_steps)],
        })
    return cases


def torch_steps(case):
    p = torch.nn.Parameter(torch.tensor(case["param"], dtype=torch.float32))
    wd = case["weight_decay"] if case["decay"] else 0.0
    if case["optimizer"] == "adamw":
        opt = torch.optim.AdamW([p], lr=case["lr"][0], betas=tuple(case["betas"]), eps=case["eps"],
                                weight_decay=wd, amsgrad=False, foreach=False)
    else:
        opt = torch.optim.SGD([p], lr=case["lr"][0])
    for lr, g in zip(case["lr"], case["grads"]):
        for group in opt.param_groups:
            group["lr"] = lr
        if case["optimizer"] == "sgd" and wd:
            with torch.no_grad():
                p.mul_(1 - lr * wd)  # decoupled, as AdamW (torch's SGD would couple it)
        p.grad = torch.tensor(g, dtype=torch.float32)
        opt.step()
    out = {"param": p.detach().tolist()}
    if case["optimizer"] == "adamw":
        st = opt.state[p]
        out["exp_avg"] = st["exp_avg"].tolist()
        out["exp_avg_sq"] = st["exp_avg_sq"].tolist()
    return out


def schedule_cases():
    cases = []
    for name in ("constant", "linear", "cosine"):
        for warmup, total in ((0, 10), (3, 10), (5, 50), (10, 10), (12, 10), (1, 1)):
            cases.append({"name": name, "warmup": warmup, "total": total, "lr": 3e-6,
                          "at": list(range(0, total + 15))})
    cases.append({"name": "constant", "warmup": 4, "total": 0, "lr": 1e-5, "at": list(range(0, 12))})
    return cases


def clip_cases(rng):
    cases = []
    for max_norm in (0.0, 0.5, 1.0, 1e6):
        sizes = [int(rng.integers(1, 70000)) for _ in range(3)] + [5]
        cases.append({"max_norm": max_norm, "grads": [f32(rng.normal(0, 0.01, n)) for n in sizes]})
    return cases


def torch_clip(case):
    grads = [torch.tensor(g, dtype=torch.float32) for g in case["grads"]]
    params = []
    for g in grads:
        p = torch.nn.Parameter(torch.zeros_like(g))
        p.grad = g.clone()
        params.append(p)
    exact = math.sqrt(sum(float(np.sum(np.asarray(g, dtype=np.float64) ** 2)) for g in case["grads"]))
    if case["max_norm"] > 0:
        norm = float(torch.nn.utils.clip_grad_norm_(params, case["max_norm"]))
    else:
        norm = exact
    return {"norm": exact, "torch_norm": norm, "grads": [p.grad.tolist() for p in params]}


# ---- comparing ---------------------------------------------------------------------

def close_arrays(label, got, want, problems):
    got, want = np.asarray(got, dtype=np.float64), np.asarray(want, dtype=np.float64)
    if got.shape != want.shape:
        problems.append(f"{label}: {got.size} values, want {want.size}")
        return
    floor = TOL * float(np.max(np.abs(want))) if want.size else 0.0
    bad = np.abs(got - want) > TOL * np.abs(want) + floor
    if bad.any():
        i = int(np.argmax(bad))
        problems.append(f"{label}: {int(bad.sum())} of {bad.size} differ, e.g. [{i}] got {got[i]!r} want {want[i]!r}")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--bin", required=True)
    ap.add_argument("--seed", type=int, default=20240902)
    args = ap.parse_args()
    rng = np.random.default_rng(args.seed)
    doc = {"steps": step_cases(rng), "schedules": schedule_cases(), "clips": clip_cases(rng)}
    with tempfile.TemporaryDirectory() as tmp:
        src, dst = os.path.join(tmp, "in.json"), os.path.join(tmp, "out.json")
        with open(src, "w") as f:
            json.dump(doc, f)
        subprocess.run([args.bin, "--ref-json", src, dst], check=True)
        with open(dst) as f:
            got = json.load(f)

    problems = []
    for i, (case, g) in enumerate(zip(doc["steps"], got["steps"])):
        want = torch_steps(case)
        label = f"step case {i} ({case['optimizer']}, {len(case['lr'])} steps, wd {case['weight_decay']}, decay {case['decay']})"
        for key in want:
            close_arrays(f"{label}: {key}", g[key], want[key], problems)
    for case, g in zip(doc["schedules"], got["schedules"]):
        for step, lr in zip(case["at"], g):
            w = case["lr"] * lr_lambda(case["name"], step, case["warmup"], case["total"])
            if abs(lr - w) > 1e-15 * abs(w):
                problems.append(f"schedule {case['name']} warmup {case['warmup']} total {case['total']} "
                                f"step {step}: got {lr!r}, want {w!r}")
    for i, (case, g) in enumerate(zip(doc["clips"], got["clips"])):
        want = torch_clip(case)
        if abs(g["norm"] - want["norm"]) > 1e-12 * want["norm"]:
            problems.append(f"clip case {i}: norm {g['norm']!r}, float64 sum gives {want['norm']!r}")
        if abs(g["norm"] - want["torch_norm"]) > TOL * want["torch_norm"]:
            problems.append(f"clip case {i}: norm {g['norm']!r}, torch's {want['torch_norm']!r}")
        for k, (gg, wg) in enumerate(zip(g["grads"], want["grads"])):
            close_arrays(f"clip case {i} (max_norm {case['max_norm']}) tensor {k}", gg, wg, problems)
    counts = (len(doc["steps"]), len(got["steps"]), len(doc["schedules"]), len(got["schedules"]),
              len(doc["clips"]), len(got["clips"]))
    if counts[0] != counts[1] or counts[2] != counts[3] or counts[4] != counts[5]:
        problems.append(f"result counts differ: {counts}")
    for p in problems[:20]:
        print(p)
    if problems:
        print(f"{len(problems)} differences")
        return 1
    print(f"{counts[0]} optimizer cases, {counts[2]} schedules, {counts[4]} clipping cases agree")
    return 0


if __name__ == "__main__":
    sys.exit(main())
