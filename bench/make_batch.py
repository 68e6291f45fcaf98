#!/usr/bin/env python3
"""An advantaged batch of random tokens for the update benchmarks (the cost
does not depend on which tokens): PROMPTS prompts x K completions, each a
PROMPT_LEN-token prompt and a COMPLETION_LEN-token completion, advantages
+1 and -1 in turn. Each record gets a prompt of its own, so that every row
is computed (grpo-update computes a group's shared prompt once); with
"grouped" the K records of a prompt share it, as grpo-rollout writes them.

  make_batch.py OUT PROMPTS K PROMPT_LEN COMPLETION_LEN [grouped]
"""
import json
import random
import sys


def main(out, prompts, k, prompt_len, completion_len, grouped=False):
    r = random.Random(1)
    with open(out, "w") as f:
        for i in range(prompts * k):
            if not grouped or i % k == 0:
                prompt = [r.randrange(3, 49152) for _ in range(prompt_len)]
            rec = dict(id=f"p{i // k}", prompt_tokens=prompt,
                       completion_tokens=[r.randrange(3, 49152) for _ in range(completion_len)],
                       logprobs=[-r.uniform(0.1, 3) for _ in range(completion_len)], temperature=1.0,
                       finish_reason="length", reward=float(i % 2), advantage=(1.0 if i % 2 else -1.0))
            f.write(json.dumps(rec) + "\n")


if __name__ == "__main__":
    if len(sys.argv) not in (6, 7) or (len(sys.argv) == 7 and sys.argv[6] != "grouped"):
        sys.exit(__doc__)
    main(sys.argv[1], *(int(a) for a in sys.argv[2:6]), grouped=len(sys.argv) == 7)
