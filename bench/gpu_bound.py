#!/usr/bin/env python3
"""The memory-bandwidth bound of grpo-rollout's decode on the card: a
decode step of B sequences must read every bf16 weight matrix once (the
embedding rows it gathers are few) and each sequence's K and V so far (fp32
or bf16 in our cache, bf16 in transformers'), so at a measured bandwidth of
BW bytes/s it makes at most B tokens per (weights + B * kv_per_seq) / BW.
The context is taken at its mean over the run (prompt + new / 2).
Prints `kv` lines: the measured device-to-device copy bandwidth (torch) and
the bound for our fp32 cache and for a bf16 one.

Usage: python3 bench/gpu_bound.py MODEL_DIR BATCH PROMPT_LEN NEW_TOKENS
"""
import json
import os
import sys

import torch


def bandwidth():
    n = 1 << 28  # 1 GiB of fp32 each way
    a = torch.empty(n, device="cuda")
    b = torch.empty_like(a)
    a.uniform_()
    for _ in range(3):
        b.copy_(a)
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    times = []
    for _ in range(10):
        start.record()
        b.copy_(a)
        end.record()
        end.synchronize()
        times.append(start.elapsed_time(end) / 1e3)
    times.sort()
    return 2 * a.numel() * 4 / times[len(times) // 2]  # bytes read plus written, median


def main():
    d, B, plen, new = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
    with open(os.path.join(d, "config.json")) as f:
        c = json.load(f)
    dim, hid, L, V = c["hidden_size"], c["intermediate_size"], c["num_hidden_layers"], c["vocab_size"]
    hd = c.get("head_dim", dim // c["num_attention_heads"])
    qd, kvd = c["num_attention_heads"] * hd, c["num_key_value_heads"] * hd
    matrices = L * (dim * qd + 2 * dim * kvd + qd * dim + 3 * dim * hid) + V * dim  # layers and the head
    ctx = plen + new / 2
    bw = bandwidth()
    print(f"kv bandwidth_gb_s={bw / 1e9:.0f}")
    for name, kv_bytes in (("fp32", 4), ("bf16", 2)):
        step = 2 * matrices + B * 2 * L * kvd * kv_bytes * ctx
        print(f"kv bound_{name}_kv tok_s={B * bw / step:.0f} step_ms={step / bw * 1e3:.2f}")


if __name__ == "__main__":
    main()
