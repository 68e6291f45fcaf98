#!/usr/bin/env python3
"""The GPU benches' prompts (bench/gpu.sh, bench/gpu_grpo_step.sh): N prompt
records of PLEN random token ids 3..96 (the tiny tokenizer's symbols, never
EOS), the same every run (seed 7), ids "b0", "b1", ...

Usage: python3 bench/gpu_prompts.py OUT.jsonl N PLEN
"""
import json
import random
import sys


def main():
    path, n, plen = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
    rnd = random.Random(7)
    with open(path, "w") as f:
        for i in range(n):
            f.write(json.dumps({"id": f"b{i}", "prompt_tokens": [rnd.randrange(3, 97) for _ in range(plen)]}) + "\n")


if __name__ == "__main__":
    main()
