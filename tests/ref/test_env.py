#!/usr/bin/env python3
"""An environment for grpo-rollout --env tests: answers each request by a
fixed script, or misbehaves on purpose.

Usage: test_env.py MODE [ARG]
  script      turn 0: a tool message and a user message; turn 1: a user
              message; turn 2: done with reward 1.5 (every answer carries
              "reward": turn, so env_reward shows the last one)
  reverse     as script, but answers the requests that came together (within
              0.2 s of one another) in reverse order
  sleep S     as script, after sleeping S seconds per answer
  malformed   answers "this is not JSON"
  unknown     answers a request with turn 99
  badrole     answers messages with role "assistant"
  die         exits with status 3 at the first request
  silent      reads and never answers
  extra       as script, then writes one more line when its input ends
  log F       as script, writing each request line to F
  slow0 S F   as log F, but answers sample 0's first request S seconds late
              (while the others are answered at once)
"""
import json
import os
import select
import sys
import threading
import time


def answer(q):
    a = {"id": q["id"], "sample": q["sample"], "turn": q["turn"]}
    t = q["turn"]
    if t == 0:
        a["messages"] = [{"role": "tool", "content": "result: 42"}, {"role": "user", "content": "now check it"}]
        a["reward"] = 0
    elif t == 1:
        a["messages"] = [{"role": "user", "content": "one more time, briefly"}]
        a["reward"] = 1
    else:
        a["done"] = True
        a["reward"] = 1.5
    return a


def lines_in_batches():
    """Lists of request lines: each list what arrived within 0.2 s."""
    buf = b""
    while True:
        batch = []
        timeout = None
        while True:
            ready, _, _ = select.select([0], [], [], timeout)
            if not ready:
                break
            chunk = os.read(0, 65536)
            if not chunk:
                if batch:
                    yield batch
                return
            buf += chunk
            *done, buf = buf.split(b"\n")
            batch += [d.decode() for d in done if d]
            timeout = 0.2
        yield batch


def main():
    mode = sys.argv[1]
    arg = sys.argv[2] if len(sys.argv) > 2 else None
    log = open(arg if mode == "log" else sys.argv[3], "a") if mode in ("log", "slow0") else None
    out_lock = threading.Lock()

    def say(a):
        with out_lock:
            print(json.dumps(a), flush=True)
    timers = []
    if mode == "reverse":
        for batch in lines_in_batches():
            for line in reversed(batch):
                print(json.dumps(answer(json.loads(line))), flush=True)
        return
    for line in sys.stdin:
        q = json.loads(line)
        if log:
            log.write(line)
            log.flush()
        if mode == "die":
            sys.exit(3)
        if mode == "silent":
            continue
        if mode == "malformed":
            print("this is not JSON", flush=True)
            continue
        a = answer(q)
        if mode == "unknown":
            a["turn"] = 99
        if mode == "badrole" and "messages" in a:
            a["messages"][0]["role"] = "assistant"
        if mode == "sleep":
            time.sleep(float(arg))
        if mode == "slow0" and q["sample"] == 0 and q["turn"] == 0:
            timers.append(threading.Timer(float(arg), say, [a]))
            timers[-1].start()
            continue
        say(a)
    for t in timers:
        t.join()
    if mode == "extra":
        print(json.dumps({"id": "x", "sample": 0, "turn": 0, "done": True}), flush=True)


if __name__ == "__main__":
    main()
