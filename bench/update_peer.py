"""The peer of bench/update.sh: one GRPO update step in PyTorch eager (fp32,
CPU, autograd) on a Llama of SmolLM2-135M's shapes with random weights, over
the batch file update.sh writes, timed per mode: full fine-tuning and LoRA,
each with and without per-layer recomputation.

    python bench/update_peer.py --batch build/bench/update-batch.jsonl [--threads N]
        [--trials 2] [--layers 30] [--seqs N] [--modes full,full-recompute,lora,lora-recompute]

Lines starting "kv " are key=value results for bench/update.sh, one per mode,
named as update.sh names its rows ("kv LoRA r=16 --recompute tok_s=...").

What one step computes, as grpo-update does with update.sh's flags (--lr 1e-6
--beta 0, every other flag at its default):
  - the records' sequences (prompt + completion) packed into micro-batches in
    order, each as many whole consecutive sequences as fit in --micro-batch
    tokens (2048, at least one sequence), gradients accumulated over them;
  - per micro-batch the 30 layers over every row, then the final RMSNorm and
    the tied LM head only on the rows that predict a completion token; the
    log-probability of each completion token under logits / temperature (the
    records' temperature), and each token's entropy (a metric, no gradient);
  - the loss of --loss grpo at token level, beta 0: ratio = exp(logp - the
    records' logprobs), per token -min(ratio A, clip(ratio, 0.8, 1.2) A),
    averaged over each completion's tokens, then over all N completions of
    the batch (the 1/N is the whole batch's, not the micro-batch's);
  - the global gradient norm clipped to 1 (--max-grad-norm), one AdamW step
    (betas 0.9, 0.999, eps 1e-8, weight decay 0).
Full fine-tuning trains all 134,515,008 parameters (the embedding matrix is
also the LM head); LoRA r=16 (alpha 32, scale 2) trains A [r, in] and
B [out, r] on q, k, v, o, gate, up and down of every layer (grpo-update's
--lora-targets default), A uniform in +-1/sqrt(in) and B zero, everything
else frozen. --recompute: torch.utils.checkpoint around every layer, which
keeps each layer's input only, as grpo-update --recompute does.

The same as grpo-update: the batch (read from the same file), the shapes and
parameter count, the sequence lengths, micro-batch packing (every sequence
of the bench is 192 tokens, so a micro-batch is a [10, 192] tensor with no
padding), the rows the LM head runs on, the loss, its aggregation, clipping
and the optimizer, threads (--threads, default every core).
Not the same:
  - the weights are random, not the GGUF's, so losses differ (no loss is
    compared; this measures time);
  - q, k, v (and gate, up) are one matmul each on fused base weights, as
    bench/torch_peer.py does: fewer, larger sgemm calls than ours;
  - attention computes the whole [T, T] score matrix and masks it, the usual
    eager way, where ours visits only the causal half: about 3% more FLOPs;
  - the LM head computes every completion row's logits of a micro-batch at
    once ([1280, 49152], 250 MB) and autograd keeps them for the backward;
    ours runs it in chunks of 64 rows and recomputes each chunk's logits in
    the backward (one more head matmul, about 5% more FLOPs than the peer);
  - log-softmax sums in float32 (ours in double); the step time excludes
    model creation and batch reading (grpo-update's metrics "seconds"
    includes its model load and batch read).
Timing: a warm-up step over the first micro-batch alone (forward, backward,
clipping, AdamW: every buffer and the optimizer state allocated once), then
the best of --trials whole steps."""
import argparse
import ctypes
import gc
import json
import math
import os
import sys
import time

import torch
from torch.utils.checkpoint import checkpoint

import torch_peer  # the forward peer: SmolLM2-135M's shapes, RMSNorm and RoPE
from torch_peer import DIM, HEAD_DIM, HEADS, HIDDEN, KV_HEADS, LAYERS, THETA, VOCAB

QD, KVD, GRP = HEADS * HEAD_DIM, KV_HEADS * HEAD_DIM, HEADS // KV_HEADS
TARGETS = ("q", "k", "v", "o", "gate", "up", "down")
TARGET_SHAPES = {"q": (DIM, QD), "k": (DIM, KVD), "v": (DIM, KVD), "o": (QD, DIM),
                 "gate": (DIM, HIDDEN), "up": (DIM, HIDDEN), "down": (HIDDEN, DIM)}  # (in, out)
# name as bench/update.sh prints it -> (LoRA, recompute)
MODES = {"full": ("full", False, False), "full-recompute": ("full --recompute", False, True),
         "lora": ("LoRA r=16", True, False), "lora-recompute": ("LoRA r=16 --recompute", True, True)}


def die(code, msg):
    print(f"update_peer.py: {msg}", file=sys.stderr)
    sys.exit(code)


def read_batch(path, n_max):
    recs = []
    try:
        with open(path) as f:
            for line in f:
                if line.strip():
                    recs.append(json.loads(line))
    except OSError as e:
        die(66, f"{path}: {e.strerror}")
    except ValueError as e:
        die(65, f"{path}: not JSONL ({e})")
    recs = [r for r in recs if r.get("advantage") is not None][:n_max or None]
    if not recs:
        die(65, f"{path}: no record with an advantage")
    temps = {r.get("temperature") or 1.0 for r in recs}
    if len(temps) != 1:
        die(65, f"{path}: one batch, one temperature (got {sorted(temps)})")
    for r in recs:
        if len(r["logprobs"]) != len(r["completion_tokens"]) or not r["prompt_tokens"]:
            die(65, f"{path}: a record without prompt tokens or one logprob per completion token")
    return recs, temps.pop()


def micro_batches(recs, budget):
    """grpo-update's packing: consecutive sequences up to budget tokens, at least one."""
    out, s0 = [], 0
    while s0 < len(recs):
        ns, used = 0, 0
        while s0 + ns < len(recs):
            n = len(recs[s0 + ns]["prompt_tokens"]) + len(recs[s0 + ns]["completion_tokens"])
            if ns > 0 and used + n > budget:
                break
            ns, used = ns + 1, used + n
        mb = recs[s0:s0 + ns]
        if len({(len(r["prompt_tokens"]), len(r["completion_tokens"])) for r in mb}) != 1:
            die(65, "the peer takes micro-batches of sequences of one prompt and completion length (no padding)")
        out.append(dict(tokens=torch.tensor([r["prompt_tokens"] + r["completion_tokens"] for r in mb]),
                        n_prompt=len(mb[0]["prompt_tokens"]),
                        old=torch.tensor([r["logprobs"] for r in mb], dtype=torch.float32),
                        adv=torch.tensor([float(r["advantage"]) for r in mb], dtype=torch.float32)))
        s0 += ns
    return out


class Llama(torch_peer.Llama):
    """The forward peer's model with trainable weights (or a LoRA adapter)."""

    def __init__(self, n_layers, lora_r, lora_alpha, seed=0):
        g = torch.Generator().manual_seed(seed)
        full = lora_r == 0

        def w(*shape):
            return (torch.randn(*shape, generator=g) * 0.02).requires_grad_(full)

        def ones(n):
            return torch.ones(n).requires_grad_(full)

        self.embd = w(VOCAB, DIM)  # also the LM head (tied)
        self.layers = [dict(attn_norm=ones(DIM), wqkv=w(QD + 2 * KVD, DIM), wo=w(DIM, QD),
                            ffn_norm=ones(DIM), wgu=w(2 * HIDDEN, DIM), wd=w(DIM, HIDDEN))
                       for _ in range(n_layers)]
        self.out_norm = ones(DIM)
        self.lora, self.scale = [], 0.0
        if not full:
            self.scale = lora_alpha / lora_r
            for _ in range(n_layers):
                ad = {}
                for t in TARGETS:
                    i, o = TARGET_SHAPES[t]
                    bound = 1.0 / math.sqrt(i)
                    a = ((torch.rand(lora_r, i, generator=g) * 2 - 1) * bound).requires_grad_()
                    ad[t] = (a, torch.zeros(o, lora_r, requires_grad=True))
                self.lora.append(ad)
        self.inv_freq = 1.0 / THETA ** (torch.arange(0, HEAD_DIM, 2, dtype=torch.float32) / HEAD_DIM)

    def trained(self):
        if self.lora:
            return [m for ad in self.lora for ab in ad.values() for m in ab]
        return [self.embd, self.out_norm] + [p for lay in self.layers for p in lay.values()]

    def delta(self, li, x, *targets):
        """scale * x A^T B^T of each target, concatenated (LoRA), or None."""
        if not self.lora:
            return None
        ds = [(x @ self.lora[li][t][0].t()) @ self.lora[li][t][1].t() for t in targets]
        return (ds[0] if len(ds) == 1 else torch.cat(ds, -1)) * self.scale

    def layer(self, li, x, cos, sin, mask):
        p = self.layers[li]
        B, T, _ = x.shape
        xn = self.rmsnorm(x, p["attn_norm"])
        qkv = xn @ p["wqkv"].t()
        d = self.delta(li, xn, "q", "k", "v")
        if d is not None:
            qkv = qkv + d
        q = qkv[..., :QD].view(B, T, HEADS, HEAD_DIM).transpose(1, 2)
        k = qkv[..., QD:QD + KVD].view(B, T, KV_HEADS, HEAD_DIM).transpose(1, 2)
        v = qkv[..., QD + KVD:].view(B, T, KV_HEADS, HEAD_DIM).transpose(1, 2)
        q, k = self.rope(q, cos, sin), self.rope(k, cos, sin)
        qg = q.reshape(B, KV_HEADS, GRP * T, HEAD_DIM)  # GQA: a group's heads share K/V
        sc = ((qg @ k.transpose(-1, -2)) / math.sqrt(HEAD_DIM)).view(B, KV_HEADS, GRP, T, T) + mask
        att = (sc.softmax(-1).view(B, KV_HEADS, GRP * T, T) @ v).view(B, HEADS, T, HEAD_DIM)
        att = att.transpose(1, 2).reshape(B, T, QD)
        o = att @ p["wo"].t()
        d = self.delta(li, att, "o")
        x = x + (o if d is None else o + d)
        xn = self.rmsnorm(x, p["ffn_norm"])
        gu = xn @ p["wgu"].t()
        d = self.delta(li, xn, "gate", "up")
        if d is not None:
            gu = gu + d
        h = torch.nn.functional.silu(gu[..., :HIDDEN]) * gu[..., HIDDEN:]
        dn = h @ p["wd"].t()
        d = self.delta(li, h, "down")
        return x + (dn if d is None else dn + d)

    def hidden(self, tokens, recompute):
        B, T = tokens.shape
        ang = torch.arange(T, dtype=torch.float32)[:, None] * self.inv_freq[None, :]
        cos, sin = ang.cos(), ang.sin()
        mask = torch.full((T, T), float("-inf")).triu(1)
        x = self.embd[tokens]
        for li in range(len(self.layers)):
            if recompute:
                x = checkpoint(self.layer, li, x, cos, sin, mask, use_reentrant=False, preserve_rng_state=False)
            else:
                x = self.layer(li, x, cos, sin, mask)
        return x


def micro_step(m, mb, n_total, temp, eps, recompute):
    """Forward and backward of one micro-batch; returns its share of the loss."""
    toks, np_ = mb["tokens"], mb["n_prompt"]
    x = m.hidden(toks, recompute)
    h = m.rmsnorm(x[:, np_ - 1:-1], m.out_norm)  # the rows that predict completion tokens
    logits = h @ m.embd.t()
    logits.div_(temp)
    lse = torch.logsumexp(logits, -1)
    logp = logits.gather(-1, toks[:, np_:, None]).squeeze(-1) - lse
    with torch.no_grad():  # grpo-update's entropy metric
        ent = lse - (logits.softmax(-1) * logits).sum(-1)
    ratio = torch.exp(logp - mb["old"])
    a = mb["adv"][:, None]
    per_tok = -torch.min(ratio * a, ratio.clamp(1 - eps, 1 + eps) * a)
    loss = per_tok.mean(-1).sum() / n_total
    loss.backward()
    return loss.item(), ent.mean().item()


def step(m, opt, mbs, n_total, a):
    opt.zero_grad(set_to_none=True)
    loss = 0.0
    for mb in mbs:
        loss += micro_step(m, mb, n_total, a.temp, a.epsilon, a.recompute)[0]
    norm = torch.nn.utils.clip_grad_norm_(m.trained(), a.max_grad_norm)
    opt.step()
    return loss, float(norm)


def blas_core():
    try:
        f = ctypes.CDLL("libopenblas.so.0").openblas_get_corename
        f.restype = ctypes.c_char_p
        return "OpenBLAS " + f().decode()
    except (OSError, AttributeError):
        return "BLAS unknown"


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--batch", required=True, help="advantaged records (bench/update.sh writes them)")
    ap.add_argument("--threads", type=int, default=len(os.sched_getaffinity(0)))
    ap.add_argument("--trials", type=int, default=2, help="timed steps after the warm-up; the best is kept")
    ap.add_argument("--layers", type=int, default=LAYERS, help="fewer layers for a quick check")
    ap.add_argument("--seqs", type=int, default=0, help="only the first N records (0: all)")
    ap.add_argument("--modes", default=",".join(MODES))
    ap.add_argument("--micro-batch", type=int, default=2048, help="tokens per micro-batch")
    ap.add_argument("--lora-r", type=int, default=16)
    ap.add_argument("--lr", type=float, default=1e-6)
    ap.add_argument("--epsilon", type=float, default=0.2)
    ap.add_argument("--max-grad-norm", type=float, default=1.0)
    a = ap.parse_args()
    modes = a.modes.split(",")
    for k in modes:
        if k not in MODES:
            die(64, f"--modes: expected some of {','.join(MODES)}, got '{k}'")
    if a.threads < 1 or a.trials < 1 or a.layers < 1 or a.seqs < 0 or a.micro_batch < 1 or a.lora_r < 1:
        die(64, "--threads, --trials, --layers, --micro-batch and --lora-r must be >= 1, --seqs >= 0")
    torch.set_num_threads(a.threads)
    recs, a.temp = read_batch(a.batch, a.seqs)
    mbs = micro_batches(recs, a.micro_batch)
    n_tokens = sum(len(r["prompt_tokens"]) + len(r["completion_tokens"]) for r in recs)
    n_params = sum(p.numel() for p in Llama(a.layers, 0, 0).trained())
    print(f"torch {torch.__version__}, {torch.get_num_threads()} threads, {blas_core()}, random weights of "
          f"SmolLM2-135M's shapes (layers: {a.layers}, parameters: {n_params})")
    print(f"{len(recs)} sequences, {n_tokens} tokens, {len(mbs)} micro-batches of <= {a.micro_batch} tokens "
          f"({mbs[0]['tokens'].shape[0]} x {mbs[0]['tokens'].shape[1]} first); LM head: full logits per "
          f"micro-batch over the completion rows; warm-up on one micro-batch, best of {a.trials}")
    print(f"  {'mode':<22} {'seconds':>9} {'tokens/s':>9} {'loss':>10} {'grad norm':>10}")
    res = []
    for k in modes:
        name, lora, a.recompute = MODES[k]
        m = Llama(a.layers, a.lora_r if lora else 0, 2.0 * a.lora_r)
        opt = torch.optim.AdamW(m.trained(), lr=a.lr, betas=(0.9, 0.999), eps=1e-8, weight_decay=0.0)
        step(m, opt, mbs[:1], len(mbs[0]["tokens"]), a)  # warm-up
        best = math.inf
        for _ in range(a.trials):
            t0 = time.perf_counter()
            loss, norm = step(m, opt, mbs, len(recs), a)
            best = min(best, time.perf_counter() - t0)
        print(f"  {name:<22} {best:9.2f} {n_tokens / best:9.1f} {loss:10.4g} {norm:10.4g}", flush=True)
        res.append((name, n_tokens / best, best))
        del m, opt
        gc.collect()
    for name, tps, secs in res:
        print(f"kv {name} tok_s={tps:.3f} seconds={secs:.3f}")


if __name__ == "__main__":
    main()
