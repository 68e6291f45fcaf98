"""The peer of bench/bench_model.c: the same Llama forward in PyTorch (fp32,
CPU, no autograd) with random weights of SmolLM2-135M's shapes, timed the
same way: prefill of one 128- and one 512-token sequence (logits for the last
row), decode at batch 1/16/64 after a shared 64-token prompt, 32 steps of one
row per sequence with logits for every row, best of 2 after a warm-up.

    python bench/torch_peer.py [--threads 2]

Lines starting "kv " are key=value results for bench/model.sh."""
import argparse
import math
import time

import torch

# SmolLM2-135M (config.json): tied embeddings, no biases.
DIM, HIDDEN, LAYERS, HEADS, KV_HEADS, HEAD_DIM, VOCAB = 576, 1536, 30, 9, 3, 64, 49152
THETA, EPS = 100000.0, 1e-5
PROMPT, STEPS = 64, 32


class Llama:
    def __init__(self):
        g = torch.Generator().manual_seed(0)

        def w(*shape):
            return torch.randn(*shape, generator=g) * 0.02

        qd, kvd = HEADS * HEAD_DIM, KV_HEADS * HEAD_DIM
        self.embd = w(VOCAB, DIM)  # also the LM head (tied)
        # q, k, v fused in one [qd + 2 kvd, dim] matrix as a fair fast path.
        self.layers = [dict(attn_norm=torch.ones(DIM), wqkv=w(qd + 2 * kvd, DIM), wo=w(DIM, qd),
                            ffn_norm=torch.ones(DIM), wgu=w(2 * HIDDEN, DIM), wd=w(DIM, HIDDEN))
                       for _ in range(LAYERS)]
        self.out_norm = torch.ones(DIM)
        self.inv_freq = 1.0 / THETA ** (torch.arange(0, HEAD_DIM, 2, dtype=torch.float32) / HEAD_DIM)

    @staticmethod
    def rmsnorm(x, w):
        return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + EPS) * w

    @staticmethod
    def rope(x, cos, sin):  # x [B, H, T, hd], rotate-half
        h = x.shape[-1] // 2
        x1, x2 = x[..., :h], x[..., h:]
        return torch.cat((x1 * cos - x2 * sin, x2 * cos + x1 * sin), -1)

    def forward(self, tokens, start, cache_k, cache_v, last_only):
        """tokens [B, T] at positions start..start+T-1 of B sequences whose
        cache holds positions < start; cache [L, B, KV_HEADS, max_len, hd]."""
        B, T = tokens.shape
        pos = torch.arange(start, start + T, dtype=torch.float32)
        ang = pos[:, None] * self.inv_freq[None, :]
        cos, sin = ang.cos(), ang.sin()
        S, grp = start + T, HEADS // KV_HEADS
        mask = None
        if T > 1:  # causal within the new rows
            mask = torch.full((T, S), float("-inf")).triu(start + 1)
        x = self.embd[tokens]  # [B, T, dim]
        qd, kvd = HEADS * HEAD_DIM, KV_HEADS * HEAD_DIM
        for li, p in enumerate(self.layers):
            xn = self.rmsnorm(x, p["attn_norm"])
            qkv = xn @ p["wqkv"].t()
            q = qkv[..., :qd].view(B, T, HEADS, HEAD_DIM).transpose(1, 2)
            k = qkv[..., qd:qd + kvd].view(B, T, KV_HEADS, HEAD_DIM).transpose(1, 2)
            v = qkv[..., qd + kvd:].view(B, T, KV_HEADS, HEAD_DIM).transpose(1, 2)
            q, k = self.rope(q, cos, sin), self.rope(k, cos, sin)
            cache_k[li, :B, :, start:S] = k
            cache_v[li, :B, :, start:S] = v
            K, V = cache_k[li, :B, :, :S], cache_v[li, :B, :, :S]  # [B, kvh, S, hd]
            qg = q.reshape(B, KV_HEADS, grp * T, HEAD_DIM)  # GQA: a group's heads share K/V
            sc = (qg @ K.transpose(-1, -2)) / math.sqrt(HEAD_DIM)
            sc = sc.view(B, KV_HEADS, grp, T, S)
            if mask is not None:
                sc = sc + mask
            att = (sc.softmax(-1).view(B, KV_HEADS, grp * T, S) @ V).view(B, HEADS, T, HEAD_DIM)
            x = x + att.transpose(1, 2).reshape(B, T, qd) @ p["wo"].t()
            gu = self.rmsnorm(x, p["ffn_norm"]) @ p["wgu"].t()
            x = x + (torch.nn.functional.silu(gu[..., :HIDDEN]) * gu[..., HIDDEN:]) @ p["wd"].t()
        if last_only:
            x = x[:, -1:]
        return self.rmsnorm(x, self.out_norm) @ self.embd.t()


def best_of(fn, trials):
    fn(warm=True)
    best = float("inf")
    for _ in range(trials):
        t0 = time.perf_counter()
        fn(warm=False)
        best = min(best, time.perf_counter() - t0)
    return best


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--threads", type=int, default=2)
    a = ap.parse_args()
    torch.set_num_threads(a.threads)
    m = Llama()
    gen = torch.Generator().manual_seed(1)
    res = {}
    with torch.no_grad():
        for T in (128, 512):
            ck = torch.zeros(LAYERS, 1, KV_HEADS, T, HEAD_DIM)
            cv = torch.zeros_like(ck)
            toks = torch.randint(0, VOCAB, (1, T), generator=gen)
            dt = best_of(lambda warm: m.forward(toks, 0, ck, cv, True), 2)
            res[f"prefill T={T}"] = T / dt
        for B in (1, 16, 64):
            L = PROMPT + STEPS
            ck = torch.zeros(LAYERS, B, KV_HEADS, L, HEAD_DIM)
            cv = torch.zeros_like(ck)
            m.forward(torch.randint(0, VOCAB, (1, PROMPT), generator=gen), 0, ck, cv, True)
            ck[:, 1:, :, :PROMPT] = ck[:, :1, :, :PROMPT]  # the samples share the prefill
            cv[:, 1:, :, :PROMPT] = cv[:, :1, :, :PROMPT]
            steps = torch.randint(0, VOCAB, (STEPS, B, 1), generator=gen)

            def decode(warm):
                for k in range(2 if warm else STEPS):
                    m.forward(steps[k], PROMPT + k, ck, cv, False)

            dt = best_of(decode, 2)
            res[f"decode B={B}"] = B * STEPS / dt
    print(f"torch {torch.__version__}, {torch.get_num_threads()} threads, random weights of SmolLM2-135M's shapes")
    for k, v in res.items():
        print(f"  {k:<15} {v:10.1f} tokens/s")
    for k, v in res.items():
        print(f"kv {k} tok_s={v:.3f}")


if __name__ == "__main__":
    main()
