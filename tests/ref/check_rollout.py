#!/usr/bin/env python3
"""Rollout records against the independent float64 PyTorch forward of
model_ref.py: for every completion token, the recorded log-probability must
equal log_softmax(logits / T) of the reference at that position (T = the
record's temperature; T = 0 is greedy: the token must be the reference's
argmax and its log-probability is taken at T = 1).

Usage: .venv/bin/python tests/ref/check_rollout.py MODEL ROLLOUTS.jsonl [TOL [MEAN_TOL]]
MODEL: a tiny HF directory, or a .gguf (then the GGUF reference forward).
TOL defaults to 1e-4: fp32 logits of a small model differ from float64 by
~1e-6, log-softmax keeps that scale. MEAN_TOL, when given, bounds the mean
|diff| over every token of the file too (weights rounded to bf16 or 8 bits
move every token a little and a few much). Prints TAP.
"""
import json
import os
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import model_ref  # noqa: E402


def log_softmax(x):
    m = x.max()
    return x - m - np.log(np.exp(x - m).sum())


def main():
    model, path = sys.argv[1], sys.argv[2]
    tol = float(sys.argv[3]) if len(sys.argv) > 3 else 1e-4
    mean_tol = float(sys.argv[4]) if len(sys.argv) > 4 else None
    total, count = 0.0, 0
    with open(path) as f:
        records = [json.loads(line) for line in f]
    bad = 0
    # the weights once: reading and dequantizing a GGUF is most of the work
    c, W = (model_ref.gguf_model if model.endswith(".gguf") else model_ref.hf_model)(model)
    for n, rec in enumerate(records, 1):
        prompt, comp, lps = rec["prompt_tokens"], rec["completion_tokens"], rec["logprobs"]
        tokens = prompt + comp
        logits = model_ref.model_logits(c, W, tokens[:-1])
        t = rec["temperature"]
        worst, why = 0.0, ""
        for j, tok in enumerate(comp):
            row = np.asarray(logits[len(prompt) - 1 + j], dtype=np.float64)
            if t == 0:
                if int(np.argmax(row)) != tok and row.max() - row[tok] > 1e-4:
                    why = f"token {j}: greedy chose {tok}, reference argmax {int(np.argmax(row))}"
                ref = log_softmax(row)[tok]
            else:
                ref = log_softmax(row / t)[tok]
            worst = max(worst, abs(ref - lps[j]))
            total, count = total + abs(ref - lps[j]), count + 1
        if len(lps) != len(comp):
            why = f"{len(lps)} logprobs for {len(comp)} tokens"
        if why or worst > tol:
            bad += 1
            print(f"not ok {n} - {rec['id']} sample {rec['sample']}: {why or f'max |diff| {worst:.3g} > {tol}'}")
        else:
            print(f"ok {n} - {rec['id']} sample {rec['sample']}: {len(comp)} tokens, max |diff| {worst:.2g}")
    mean = total / count if count else 0.0
    print(f"# mean |diff| {mean:.3g} over {count} tokens")
    if mean_tol is not None and mean > mean_tol:
        bad += 1
        print(f"not ok {len(records) + 1} - mean |diff| {mean:.3g} > {mean_tol}")
        print(f"1..{len(records) + 1}")
    else:
        print(f"1..{len(records)}")
    return 1 if bad or not records else 0


if __name__ == "__main__":
    sys.exit(main())
