#!/usr/bin/env python3
"""The peer of make bench-gpu's training rows (bench/gpu_train.sh): a PyTorch
eager GRPO update of the same model on the same batch as grpo-update
--device cuda: float32 master weights under bf16 autocast (as grpo-update's
bf16 products with float32 sums and float32 weights), sdpa attention, the
whole batch in one forward (right-padded to its longest sequence, pads
masked out of attention and loss), per-token log-probs of the completion
tokens at temperature 1, GRPO's clipped surrogate (epsilon 0.2, no KL, each
sequence's mean over its tokens, then the mean over sequences:
formats/loss.md's `grpo`), gradient clipping at 1.0 and torch.optim.AdamW
(lr 1e-6). STEPS steps; the first is a warm-up, the rest are timed.

Also measures the card's bf16 GEMM rate through cuBLAS (torch.matmul of
8192-square bf16 matrices), the ceiling make bench-gpu reports MFU against,
and the model's FLOPs per trained token (6 x the parameters of every
matrix product, the LM head's included, plus attention's score and value
products, 12 x layers x q_dim x the mean causal context).

Prints `kv name=value` lines.
Usage: python3 bench/gpu_train_peer.py MODEL_DIR BATCH.jsonl [STEPS]
"""
import json
import sys
import time

import torch
import torch.nn.functional as F
from transformers import AutoConfig, AutoModelForCausalLM


def gemm_tflops(dev):
    n = 8192
    a = torch.randn(n, n, device=dev, dtype=torch.bfloat16)
    b = torch.randn(n, n, device=dev, dtype=torch.bfloat16)
    for _ in range(3):
        a @ b
    torch.cuda.synchronize()
    reps = 20
    t0 = time.perf_counter()
    for _ in range(reps):
        a @ b
    torch.cuda.synchronize()
    return 2 * n ** 3 * reps / (time.perf_counter() - t0) / 1e12


def flops_per_token(cfg, mean_ctx):
    d, h, L, V = cfg.hidden_size, cfg.intermediate_size, cfg.num_hidden_layers, cfg.vocab_size
    hd = d // cfg.num_attention_heads
    qd, kvd = cfg.num_attention_heads * hd, cfg.num_key_value_heads * hd
    matmul = L * (d * qd + 2 * d * kvd + qd * d + 3 * d * h) + V * d
    return 6 * matmul + 12 * L * qd * mean_ctx


def main():
    model_dir, batch_path = sys.argv[1], sys.argv[2]
    steps = int(sys.argv[3]) if len(sys.argv) > 3 else 3
    recs = [json.loads(line) for line in open(batch_path)]
    dev = torch.device("cuda")
    seqs = [r["prompt_tokens"] + r["completion_tokens"] for r in recs]
    T = max(len(s) for s in seqs)
    B = len(seqs)
    ids = torch.zeros(B, T, dtype=torch.long)
    attn = torch.zeros(B, T, dtype=torch.long)
    comp = torch.zeros(B, T - 1)  # position t predicts token t + 1
    old = torch.zeros(B, T - 1)
    for i, (r, s) in enumerate(zip(recs, seqs)):
        ids[i, : len(s)] = torch.tensor(s)
        attn[i, : len(s)] = 1
        p, c = len(r["prompt_tokens"]), len(r["completion_tokens"])
        comp[i, p - 1 : p - 1 + c] = 1
        old[i, p - 1 : p - 1 + c] = torch.tensor(r["logprobs"], dtype=torch.float32)
    adv = torch.tensor([r["advantage"] for r in recs], dtype=torch.float32, device=dev)
    ids, attn, comp, old = ids.to(dev), attn.to(dev), comp.to(dev), old.to(dev)
    trained_tokens = int(attn.sum())

    cfg = AutoConfig.from_pretrained(model_dir)
    model = AutoModelForCausalLM.from_pretrained(model_dir, torch_dtype=torch.float32,
                                                 attn_implementation="sdpa").to(dev)
    model.train()
    opt = torch.optim.AdamW(model.parameters(), lr=1e-6, betas=(0.9, 0.999), eps=1e-8, weight_decay=0.0)
    torch.cuda.synchronize()
    torch.cuda.reset_peak_memory_stats()
    times = []
    for step in range(steps):
        t0 = time.perf_counter()
        opt.zero_grad(set_to_none=True)
        with torch.autocast("cuda", dtype=torch.bfloat16):
            logits = model(input_ids=ids, attention_mask=attn).logits[:, :-1]
        logp = torch.gather(F.log_softmax(logits.float(), dim=-1), 2, ids[:, 1:, None]).squeeze(2)
        ratio = torch.exp(logp - old)
        a = adv[:, None]
        per_tok = -torch.min(ratio * a, torch.clamp(ratio, 0.8, 1.2) * a)
        loss = ((per_tok * comp).sum(1) / comp.sum(1).clamp(min=1)).mean()
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        torch.cuda.synchronize()
        times.append(time.perf_counter() - t0)
    timed = times[1:] if len(times) > 1 else times
    secs = sum(timed) / len(timed)
    mean_ctx = sum(len(s) * (len(s) + 1) / 2 for s in seqs) / trained_tokens
    print(f"kv torch_step tokens={trained_tokens} secs={secs:.4f} tok_s={trained_tokens / secs:.1f} "
          f"peak_mib={torch.cuda.max_memory_allocated() / 2**20:.0f}")
    print(f"kv flops_per_token value={flops_per_token(cfg, mean_ctx):.0f}")
    print(f"kv gemm_bf16 tflops={gemm_tflops(dev):.1f}")


if __name__ == "__main__":
    main()
