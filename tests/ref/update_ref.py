#!/usr/bin/env python3
"""Helpers for the grpo-update tests (tests/bats/update.bats).

  make-batch OUT N VOCAB [--seed S] [--temperature T] [--null-adv K] [--truncated K]
      N advantaged records: ids in groups of 4, prompt_tokens (3..8 tokens)
      and completion_tokens (2..10) in [3, VOCAB), logprobs in [-3, -0.05],
      rewards and advantages (group-normalised), finish_reason stop or
      length; the first K records get a null advantage (--null-adv), K
      records finish with length (--truncated).
  make-turns IN OUT VOCAB [--seed S]
      The records of IN made multi-turn (formats/rollout.md): 2..5
      environment tokens in [3, VOCAB) inserted into each completion after
      its first token, with completion_mask 0 and a null log-prob there,
      `turns` and finish_reason "env"; every other field as in IN.
  close A.safetensors B.safetensors TOL
      Every tensor of A equals B's within TOL relative to the largest |B|
      of that tensor (exit 1 otherwise); prints the worst.
  close-each A.safetensors B.safetensors TOL
      Every element of A equals B's within TOL relative to the larger of the
      two magnitudes (1e-30 absolute where both are 0); prints the worst.
  close-delta BASE A B TOL
      The updates A - BASE and B - BASE agree within TOL relative to the
      largest |B - BASE| of each tensor (runs that differ only in how the
      batch was split into micro-batches).
  differ A.safetensors B.safetensors
      Exit 0 when some tensor differs (the update moved the weights).
"""
import json
import random
import sys

import numpy as np


def make_batch(out, n, vocab, seed=1, temperature=1.0, null_adv=0, truncated=0):
    rnd = random.Random(seed)
    recs = []
    for i in range(n):
        gid = f"p{i // 4}"
        np_ = rnd.randint(3, 8)
        nc = rnd.randint(2, 10)
        recs.append(dict(id=gid, task="test", sample=i % 4,
                         prompt_tokens=[rnd.randrange(3, vocab) for _ in range(np_)],
                         completion_tokens=[rnd.randrange(3, vocab) for _ in range(nc)],
                         logprobs=[round(-rnd.uniform(0.05, 3.0), 6) for _ in range(nc)],
                         temperature=temperature,
                         finish_reason="length" if i < truncated else "stop",
                         reward=float(rnd.randint(0, 3))))
    for g in range(0, n, 4):
        grp = recs[g:g + 4]
        rs = [r["reward"] for r in grp]
        mean = sum(rs) / len(rs)
        sd = (sum((x - mean) ** 2 for x in rs) / max(1, len(rs) - 1)) ** 0.5
        for r in grp:
            r["advantage"] = (r["reward"] - mean) / (sd + 1e-4)
    for r in recs[:null_adv]:
        r["advantage"] = None
    with open(out, "w") as f:
        for r in recs:
            f.write(json.dumps(r) + "\n")


def make_turns(src, out, vocab, seed=1):
    rnd = random.Random(seed)
    with open(src) as f:
        recs = [json.loads(line) for line in f]
    with open(out, "w") as f:
        for r in recs:
            c, lp = r["completion_tokens"], r["logprobs"]
            env = [rnd.randrange(3, vocab) for _ in range(rnd.randint(2, 5))]
            r["completion_tokens"] = c[:1] + env + c[1:]
            r["completion_mask"] = [1] + [0] * len(env) + [1] * (len(c) - 1)
            r["logprobs"] = lp[:1] + [None] * len(env) + lp[1:]
            r["turns"] = [{"role": "assistant", "content": "a"}, {"role": "user", "content": "e"},
                          {"role": "assistant", "content": "b"}]
            r["finish_reason"] = "env"
            f.write(json.dumps(r) + "\n")


def load(path):
    from safetensors.numpy import load_file
    return load_file(path)


def close(a, b, tol):
    A, B = load(a), load(b)
    if set(A) != set(B):
        print("tensor names differ")
        return 1
    worst = 0.0
    for k in A:
        scale = max(float(np.max(np.abs(B[k]))), 1e-30)
        worst = max(worst, float(np.max(np.abs(A[k] - B[k]))) / scale)
    print(f"worst relative difference {worst:.3g}")
    return 0 if worst <= tol else 1


def close_each(a, b, tol):
    A, B = load(a), load(b)
    if set(A) != set(B):
        print("tensor names differ")
        return 1
    worst, where = 0.0, ""
    for k in A:
        x, y = A[k].astype(np.float64), B[k].astype(np.float64)
        rel = np.abs(x - y) / np.maximum(np.maximum(np.abs(x), np.abs(y)), 1e-30)
        if rel.size and float(rel.max()) > worst:
            worst, where = float(rel.max()), k
    print(f"worst elementwise relative difference {worst:.3g} {where}")
    return 0 if worst <= tol else 1


def close_delta(base, a, b, tol):
    Z, A, B = load(base), load(a), load(b)
    worst = 0.0
    for k in B:
        db = B[k].astype(np.float64) - Z[k]
        da = A[k].astype(np.float64) - Z[k]
        scale = float(np.max(np.abs(db)))
        if scale == 0:
            continue
        worst = max(worst, float(np.max(np.abs(da - db))) / scale)
    print(f"worst relative difference of the updates {worst:.3g}")
    return 0 if worst <= tol else 1


def differ(a, b):
    A, B = load(a), load(b)
    return 0 if any(not np.array_equal(A[k], B[k]) for k in A) else 1


def main(argv):
    cmd = argv[1]
    if cmd == "make-batch":
        args = argv[2:]
        opts = dict(seed=1, temperature=1.0, null_adv=0, truncated=0)
        pos = [a for a in args if not a.startswith("--")]
        for i, a in enumerate(args):
            if a == "--seed": opts["seed"] = int(args[i + 1])
            if a == "--temperature": opts["temperature"] = float(args[i + 1])
            if a == "--null-adv": opts["null_adv"] = int(args[i + 1])
            if a == "--truncated": opts["truncated"] = int(args[i + 1])
        vals = [a for j, a in enumerate(args) if not a.startswith("--") and not (j > 0 and args[j - 1].startswith("--"))]
        make_batch(vals[0], int(vals[1]), int(vals[2]), **opts)
        return 0
    if cmd == "make-turns":
        seed = int(argv[argv.index("--seed") + 1]) if "--seed" in argv else 1
        make_turns(argv[2], argv[3], int(argv[4]), seed)
        return 0
    if cmd == "close":
        return close(argv[2], argv[3], float(argv[4]))
    if cmd == "close-each":
        return close_each(argv[2], argv[3], float(argv[4]))
    if cmd == "close-delta":
        return close_delta(argv[2], argv[3], argv[4], float(argv[5]))
    if cmd == "differ":
        return differ(argv[2], argv[3])
    print(__doc__)
    return 64


if __name__ == "__main__":
    sys.exit(main(sys.argv))
