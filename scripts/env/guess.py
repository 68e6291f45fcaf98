#!/usr/bin/env python3
"""Guess-the-number for grpo-rollout --env (formats/env.md).

Each episode's secret is the record's "secret" (an integer). After every
guess (the last integer in the assistant's message) the environment says
"higher" or "lower"; a correct guess ends the episode with reward 1, and
the last turn grpo-rollout allows (--max-turns) ends it with reward 0. A
message without a number is asked for one.

Usage: grpo-rollout --env 'python3 -u scripts/env/guess.py' ...
       python3 scripts/env/guess.py --prompts N [--seed S] [--max M]  writes N prompt records
"""
import json
import random
import re
import sys

PROMPT = ("I am thinking of a whole number between 1 and {max}. Guess it: answer with one number. "
          "After each guess I will say higher or lower.")


def answer(q):
    a = {"id": q["id"], "sample": q["sample"], "turn": q["turn"]}
    found = re.findall(r"-?\d+", q["messages"][-1]["content"])
    secret = int(q["secret"])
    if found and int(found[-1]) == secret:
        a.update(done=True, reward=1.0)
    elif q.get("last"):
        a.update(done=True, reward=0.0)
    elif not found:
        a["messages"] = [{"role": "user", "content": "Please answer with one number."}]
    else:
        a["messages"] = [{"role": "user", "content": "higher" if int(found[-1]) < secret else "lower"}]
    return a


def prompts(n, seed, top):
    rng = random.Random(seed)
    for i in range(n):
        rec = {"id": f"guess/{seed}/{i}", "task": "guess",
               "messages": [{"role": "user", "content": PROMPT.format(max=top)}], "secret": rng.randint(1, top)}
        print(json.dumps(rec))


def main():
    args = sys.argv[1:]
    if args and args[0] == "--prompts":
        opt = dict(zip(args[2::2], args[3::2]))
        prompts(int(args[1]), int(opt.get("--seed", 0)), int(opt.get("--max", 100)))
        return
    for line in sys.stdin:
        if line.strip():
            print(json.dumps(answer(json.loads(line))), flush=True)


if __name__ == "__main__":
    main()
