#!/usr/bin/env python3
"""A simulated user behind any OpenAI-compatible chat-completions endpoint,
for grpo-rollout --env (formats/env.md): after each assistant turn, the
user model is shown the conversation from the user's side (its roles
swapped, under a system message describing the user) and its reply is the
next user message. A reply containing [DONE], or the last turn grpo-rollout
allows, ends the episode (no reward: score it with grpo-reward, e.g. the
judge with {turns}).

The user's description is the record's "user" field, else --persona. The
endpoint follows grpo-reward's judge conventions: --url (the API base, e.g.
http://127.0.0.1:8000/v1), --model, the API key from the environment
variable --key-env names (default OPENAI_API_KEY; sent as a Bearer token,
never printed), --retries more attempts after a failure (429, 5xx, a
timeout, a broken connection), with 0.5, 1, 2 ... s between them. Requests
are answered concurrently (--parallel at once), so a slow endpoint does not
hold up the episodes of others. A request still failing after its retries
ends the program with status 75 and a message on stderr: grpo-rollout then
stops with the episode named.

Usage: grpo-rollout --env 'python3 -u scripts/env/sim_user.py --url URL --model NAME' ...
"""
import argparse
import concurrent.futures
import json
import os
import sys
import threading
import time
import urllib.error
import urllib.request

PERSONA = ("You are a customer talking to a support assistant. Stay in character, reply briefly, and write "
           "[DONE] when your problem is solved or the assistant cannot help.")


def user_view(messages, persona):
    """The conversation as the user model sees it: assistant and user swapped, system left out."""
    view = [{"role": "system", "content": persona}]
    swap = {"assistant": "user", "user": "assistant", "tool": "assistant"}
    for m in messages:
        if m["role"] in swap:
            view.append({"role": swap[m["role"]], "content": m["content"]})
    return view


def complete(args, key, messages):
    body = json.dumps({"model": args.model, "messages": messages, "temperature": args.temperature}).encode()
    headers = {"Content-Type": "application/json"}
    if key:
        headers["Authorization"] = "Bearer " + key
    url = args.url.rstrip("/") + "/chat/completions"
    for attempt in range(args.retries + 1):
        try:
            req = urllib.request.Request(url, data=body, headers=headers, method="POST")
            with urllib.request.urlopen(req, timeout=args.timeout) as r:
                return json.loads(r.read())["choices"][0]["message"]["content"]
        except urllib.error.HTTPError as e:
            if e.code not in (408, 429) and e.code < 500:
                raise RuntimeError(f"{url}: HTTP {e.code} (not retried)") from None
            why = f"HTTP {e.code}"
        except (urllib.error.URLError, TimeoutError, ConnectionError, ValueError, KeyError, IndexError) as e:
            why = type(e).__name__
        if attempt < args.retries:
            time.sleep(min(0.5 * 2 ** attempt, 30))
    raise RuntimeError(f"{url}: still failing after {args.retries + 1} attempts ({why})")


def answer(args, key, q):
    a = {"id": q["id"], "sample": q["sample"], "turn": q["turn"]}
    if q.get("last"):
        a["done"] = True
        return a
    reply = complete(args, key, user_view(q["messages"], q.get("user") or args.persona))
    if "[DONE]" in reply:
        a["done"] = True
    else:
        a["messages"] = [{"role": "user", "content": reply.strip()}]
    return a


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--url", required=True)
    p.add_argument("--model", required=True)
    p.add_argument("--key-env", default="OPENAI_API_KEY")
    p.add_argument("--persona", default=PERSONA)
    p.add_argument("--temperature", type=float, default=0.0)
    p.add_argument("--retries", type=int, default=4)
    p.add_argument("--timeout", type=float, default=60)
    p.add_argument("--parallel", type=int, default=16)
    args = p.parse_args()
    key = os.environ.get(args.key_env, "")
    out_lock = threading.Lock()
    failed = threading.Event()

    def handle(q):
        try:
            a = answer(args, key, q)
        except Exception as e:  # any failure ends the run: grpo-rollout names the episode
            print(f"sim_user.py: record {q['id']!r}, sample {q['sample']}, turn {q['turn']}: {e}", file=sys.stderr)
            failed.set()
            os._exit(75)
        with out_lock:
            print(json.dumps(a), flush=True)

    with concurrent.futures.ThreadPoolExecutor(args.parallel) as pool:
        for line in sys.stdin:
            if line.strip() and not failed.is_set():
                pool.submit(handle, json.loads(line))


if __name__ == "__main__":
    main()
