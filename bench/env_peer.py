#!/usr/bin/env python3
"""The environment of bench/multiturn.sh: answers every request with a short
user message until the episode's last turn, then done. --delay S: each
answer is sent S seconds after its request came (latency, answered
concurrently as an HTTP-backed environment would), not one after another.

Usage: env_peer.py TURNS [--delay S]
"""
import json
import sys
import threading


def main():
    turns = int(sys.argv[1])
    delay = float(sys.argv[3]) if len(sys.argv) > 3 and sys.argv[2] == "--delay" else 0.0
    lock = threading.Lock()

    def say(a):
        with lock:
            print(json.dumps(a), flush=True)
    timers = []
    for line in sys.stdin:
        q = json.loads(line)
        a = {"id": q["id"], "sample": q["sample"], "turn": q["turn"]}
        if q["turn"] + 1 >= turns:
            a["done"] = True
        else:
            a["messages"] = [{"role": "user", "content": "Go on."}]
        if delay > 0:
            timers.append(threading.Timer(delay, say, [a]))
            timers[-1].start()
        else:
            say(a)
    for t in timers:
        t.join()


if __name__ == "__main__":
    main()
