#!/usr/bin/env python3
"""Rollout records' routing (formats/rollout.md) against the independent
float64 PyTorch forward of model_ref.py: at every position the sampler ran
the model on (the prompt and completion tokens but the last), in every layer
with a mixture of experts, the recorded experts must be the reference's top
k in its order (most probable first).

Usage: .venv/bin/python tests/ref/check_routing.py MODEL ROLLOUTS.jsonl [MIN_GAP]
MODEL: a tiny HF directory. A position whose reference scores (the router's
probabilities; gpt_oss: its logits) among the k + 1 largest lie closer than
MIN_GAP (default 1e-5: float32 sums differ from float64 by ~1e-7) may be
ordered or chosen otherwise by float32: it is left out and counted; the
check fails when more than 5% of positions are left out (the comparison
would mean little) or when no record has routing. Prints TAP.
"""
import base64
import json
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import model_ref  # noqa: E402


def decode(routing, n_positions):
    """The record's ids as [n_positions][layers][k] lists."""
    raw = base64.b64decode(routing["ids"], validate=True)
    L, k, E = routing["layers"], routing["k"], routing["experts"]
    width = 1 if E <= 256 else 2
    ids = [int.from_bytes(raw[i:i + width], "little") for i in range(0, len(raw), width)]
    if len(ids) != n_positions * L * k:
        raise ValueError(f"{len(ids)} ids for {n_positions} positions of {L} x {k}")
    return [[ids[(p * L + l) * k:(p * L + l + 1) * k] for l in range(L)] for p in range(n_positions)]


def main():
    model, path = sys.argv[1], sys.argv[2]
    min_gap = float(sys.argv[3]) if len(sys.argv) > 3 else 1e-5
    with open(path) as f:
        records = [json.loads(line) for line in f]
    c, W = model_ref.hf_model(model)
    layers = [f"model.layers.{i}." for i in range(c["L"])
              if f"model.layers.{i}.mlp.gate.weight" in W or f"model.layers.{i}.mlp.router.weight" in W]
    bad = compared = skipped = 0
    for n, rec in enumerate(records, 1):
        if "routing" not in rec:
            bad += 1
            print(f"not ok {n} - {rec['id']} sample {rec['sample']}: no routing")
            continue
        fed = rec["prompt_tokens"] + rec["completion_tokens"][:-1]
        try:
            got = decode(rec["routing"], len(fed))
        except ValueError as err:
            bad += 1
            print(f"not ok {n} - {rec['id']} sample {rec['sample']}: {err}")
            continue
        c["routes"] = {}
        model_ref.model_logits(c, W, fed)
        why = ""
        if rec["routing"]["layers"] != len(layers) or rec["routing"]["k"] != c["top_k"]:
            why = f"shape {rec['routing']} for {len(layers)} layers of top {c['top_k']}"
        for p in range(len(fed)):
            near = any(float(c["routes"][lp][1][p]) < min_gap for lp in layers)
            if near:
                skipped += 1
                continue
            compared += 1
            for l, lp in enumerate(layers):
                want = c["routes"][lp][0][p].tolist()
                if not why and got[p][l] != want:
                    why = f"position {p}, layer {l}: recorded {got[p][l]}, reference {want}"
        if why:
            bad += 1
            print(f"not ok {n} - {rec['id']} sample {rec['sample']}: {why}")
        else:
            print(f"ok {n} - {rec['id']} sample {rec['sample']}: {len(fed)} positions x {len(layers)} layers")
    total = compared + skipped
    print(f"# {compared} positions compared, {skipped} left out (scores within {min_gap:g} of each other)")
    extra = 0
    if not records or skipped > 0.05 * max(total, 1):
        extra = 1
        print(f"not ok {len(records) + 1} - {skipped} of {total} positions left out, {len(records)} records")
    print(f"1..{len(records) + extra}")
    return 1 if bad or extra else 0


if __name__ == "__main__":
    sys.exit(main())
