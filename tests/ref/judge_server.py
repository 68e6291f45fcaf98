#!/usr/bin/env python3
"""A local OpenAI-compatible chat-completions server for the judge tests.

Stdlib only (asyncio protocols, HTTP/1.1 keep-alive), one process, one core.

Usage: judge_server.py [--port-file F] [--port N] [--retry-after V] [--slow S]
                       [--slow-body S] [--delay S] [--always FAULT] [--fail-after N]
                       [--fault-mix LIST] [--fault-mix-max N]
                       [--reply-format TEXT] [--log F] [--sold F]

Prints the port it listens on (127.0.0.1) as one line on stdout, and writes
it to --port-file (renamed into place, so a reader never sees half of it).

POST .../chat/completions answers {"choices":[{"message":{"content":...}}],
"usage":{...}}. The reply is deterministic: --reply-format (default
"{score}") with {score} = 1 + (the first 4 bytes of sha256(user message),
big-endian) mod 10, where "user message" is the content of the last message
whose role is "user". Markers in that message change the answer:
  [[score:X]]      {score} is X
  [[reply:TEXT]]   the reply content is TEXT exactly
  [[F]] [[FxN]] [[Fx*]]  fault F on the first N attempts of this request
                   (1 when xN is left out; * = every attempt). Several
                   markers apply one after the other: [[429x2]][[500]] is two
                   429s, one 500, then the answer. An attempt is counted per
                   distinct request body. F is one of:
      429 500 502 503 400 401 404   that status (429 carries Retry-After;
                  401's error message quotes the Authorization header)
      slow        sleep --slow seconds before answering (beyond a timeout)
      malformed   200 with a body that is not JSON
      nochoices   200 with JSON that has no "choices"
      reset       close the connection without answering
      truncated   200 whose body stops at half its Content-Length, then the
                  connection is reset (not an answer)
      slowbody    200 whose head and body come in 4 pieces over --slow-body
                  seconds (an answer, only slow)
--always F: every chat request gets fault F (until POST /control changes it).
--fail-after N: after N answered requests, every request gets --always's
fault (500 when --always is not given).
--delay S: every answer waits S seconds first (for kill -9 mid-run tests).
--fault-mix LIST (comma-separated faults, e.g. 429,500,reset,truncated,slowbody):
a request without markers gets, on its first n attempts, faults from LIST,
n = (byte 0 of sha256(body)) mod (--fault-mix-max + 1), fault i being LIST[(byte
i+1) mod len]: the same body meets the same faults in the same order, and is
answered from attempt n on.
--log F: one line per chat request, "SHA256(body) STATUS", flushed.
--sold F: one line per answer sold, "SHA256(body)", flushed once its last
byte was handed to the socket (after a slowbody's last piece): what a paid
endpoint would have charged for.

GET /stats: {"requests": chat requests, "answered": 200 answers with a
score, "by_body": {sha256(body): requests}, "auth": [distinct Authorization
headers], "connections": accepted connections, "faults": {F: count},
"max_in_flight": the most chat requests open at once}.
POST /control with {"always": F or null, "fail_after": N or null,
"delay": S}: changes the fault settings; answers the new settings.
"""
import argparse
import asyncio
import hashlib
import json
import os
import re
import socket
import struct
import sys

FAULTS = "429|500|502|503|400|401|404|slow|malformed|nochoices|reset|truncated|slowbody"
MARKER = re.compile(r"\[\[(" + FAULTS + r")(?:x(\d+|\*))?\]\]")
SCORE = re.compile(r"\[\[score:([^\]]*)\]\]")
REPLY = re.compile(r"\[\[reply:(.*?)\]\]", re.S)
REASONS = {200: "OK", 400: "Bad Request", 401: "Unauthorized", 404: "Not Found", 429: "Too Many Requests",
           500: "Internal Server Error", 502: "Bad Gateway", 503: "Service Unavailable"}


class State:
    def __init__(self, args):
        self.args = args
        self.always = args.always
        self.fail_after = args.fail_after
        self.delay = args.delay
        self.requests = 0
        self.answered = 0
        self.by_body = {}
        self.auth = set()
        self.connections = 0
        self.faults = {}
        self.in_flight = 0
        self.max_in_flight = 0
        self.log = open(args.log, "a") if args.log else None
        self.sold = open(args.sold, "a") if args.sold else None
        self.mix = [f for f in args.fault_mix.split(",") if f] if args.fault_mix else []
        bad = [f for f in self.mix if not re.fullmatch(FAULTS, f)]
        if bad:
            raise SystemExit(f"judge_server.py: --fault-mix: unknown fault {bad[0]}")

    def stats(self):
        return {"requests": self.requests, "answered": self.answered, "by_body": self.by_body,
                "auth": sorted(self.auth), "connections": self.connections, "faults": self.faults,
                "max_in_flight": self.max_in_flight}


def mixed_fault(state, digest, attempt):
    """--fault-mix: the fault of this body's attempt (0-based), or None."""
    if not state.mix:
        return None
    h = bytes.fromhex(digest)
    if attempt >= h[0] % (state.args.fault_mix_max + 1):
        return None
    return state.mix[h[1 + attempt] % len(state.mix)]


class Reply:
    """An answer to send: its bytes, in pieces with a pause between them
    (slowbody), cut short and reset (truncated), and whether it is sold."""
    def __init__(self, data, pieces=1, pause=0.0, truncate=False, sold=None):
        self.data, self.pieces, self.pause, self.truncate, self.sold = data, pieces, pause, truncate, sold


def fault_for(user, attempt):
    """The fault of this attempt (0-based) from the markers, or None."""
    for m in MARKER.finditer(user):
        n = m.group(2)
        if n == "*":
            return m.group(1)
        n = int(n) if n else 1
        if attempt < n:
            return m.group(1)
        attempt -= n
    return None


def response(status, body, headers=()):
    head = [f"HTTP/1.1 {status} {REASONS.get(status, 'Status')}", "Content-Type: application/json",
            f"Content-Length: {len(body)}"]
    head.extend(headers)
    return ("\r\n".join(head) + "\r\n\r\n").encode() + body


class Conn(asyncio.Protocol):
    def __init__(self, state):
        self.state = state
        self.buf = b""
        self.transport = None
        self.busy = False  # a request is being answered; later ones wait in buf
        self.closed = False

    def connection_made(self, transport):
        self.transport = transport
        self.state.connections += 1

    def connection_lost(self, exc):
        self.closed = True

    def data_received(self, data):
        self.buf += data
        if not self.busy:
            self.next_request()

    def next_request(self):
        while not self.busy and not self.closed:
            end = self.buf.find(b"\r\n\r\n")
            if end < 0:
                return
            head = self.buf[:end].decode("latin-1").split("\r\n")
            headers = {}
            for line in head[1:]:
                k, _, v = line.partition(":")
                headers[k.strip().lower()] = v.strip()
            length = int(headers.get("content-length", "0"))
            if len(self.buf) < end + 4 + length:
                return
            body = self.buf[end + 4:end + 4 + length]
            self.buf = self.buf[end + 4 + length:]
            parts = head[0].split(" ")
            method, path = parts[0], parts[1] if len(parts) > 1 else "/"
            reply = self.handle(method, path, headers, body)
            if isinstance(reply, bytes):
                self.transport.write(reply)
            else:
                self.busy = True
                asyncio.ensure_future(self.finish(reply))

    async def finish(self, coro):
        reply = await coro
        if self.closed:
            self.busy = False
            return
        if reply is None:
            self.busy = False
            self.reset()
            return
        if isinstance(reply, Reply):
            data = reply.data[:len(reply.data) - (len(reply.data) - reply.data.find(b"\r\n\r\n") - 4) // 2] \
                if reply.truncate else reply.data
            step = -(-len(data) // reply.pieces)
            for i in range(0, len(data), step):
                if i:
                    await asyncio.sleep(reply.pause)
                if self.closed:
                    self.busy = False
                    return
                self.transport.write(data[i:i + step])
            self.busy = False
            if reply.truncate:
                self.reset()
                return
            if reply.sold and self.state.sold:
                self.state.sold.write(reply.sold + "\n")
                self.state.sold.flush()
        else:
            self.busy = False
            self.transport.write(reply)
        self.next_request()

    def reset(self):
        # SO_LINGER 0: the close sends RST, as a dying server would
        sock = self.transport.get_extra_info("socket")
        if sock is not None:
            try:
                sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
            except OSError:
                pass
        self.transport.abort()
        self.closed = True

    def handle(self, method, path, headers, body):
        st = self.state
        if method == "GET" and path == "/stats":
            return response(200, json.dumps(st.stats()).encode())
        if method == "POST" and path == "/control":
            c = json.loads(body or b"{}")
            for k in ("always", "fail_after", "delay"):
                if k in c:
                    setattr(st, k, c[k])
            return response(200, json.dumps({"always": st.always, "fail_after": st.fail_after,
                                             "delay": st.delay}).encode())
        if method != "POST" or not path.endswith("/chat/completions"):
            return response(404, b'{"error":{"message":"no such route"}}')
        return self.chat(headers, body)

    async def chat(self, headers, body):
        st = self.state
        st.requests += 1
        st.in_flight += 1
        st.max_in_flight = max(st.max_in_flight, st.in_flight)
        try:
            return await self.chat_answer(headers, body)
        finally:
            st.in_flight -= 1

    async def chat_answer(self, headers, body):
        st = self.state
        if "authorization" in headers:
            st.auth.add(headers["authorization"])
        digest = hashlib.sha256(body).hexdigest()
        attempt = st.by_body.get(digest, 0)
        st.by_body[digest] = attempt + 1
        req = json.loads(body)
        user = ""
        for m in req["messages"]:
            if m.get("role") == "user":
                user = m.get("content", "")
        fault = fault_for(user, attempt) if MARKER.search(user) else mixed_fault(st, digest, attempt)
        if fault is None and (st.always or (st.fail_after is not None and st.answered >= st.fail_after)):
            fault = st.always or "500"
        status = 200 if fault in (None, "slow", "malformed", "nochoices", "truncated", "slowbody") \
            else (0 if fault == "reset" else int(fault))
        if st.log:
            st.log.write(f"{digest} {fault or 200}\n")
            st.log.flush()
        if fault:
            st.faults[fault] = st.faults.get(fault, 0) + 1
        if st.delay:
            await asyncio.sleep(st.delay)
        if fault == "reset":
            return None
        if fault == "slow":
            await asyncio.sleep(st.args.slow)
        if fault == "malformed":
            return response(200, b'{"choices": [ this is not json')
        if fault == "nochoices":
            return response(200, b'{"object": "chat.completion"}')
        if status != 200:
            extra = [f"Retry-After: {st.args.retry_after}"] if status == 429 else []
            # a 401 quotes the Authorization header back, as careless servers do: the
            # client must not print it
            said = f"injected {status}" + (f" for {headers.get('authorization', '')}" if status == 401 else "")
            return response(status, json.dumps({"error": {"message": said}}).encode(), extra)
        r = REPLY.search(user)
        if r:
            content = r.group(1)
        else:
            s = SCORE.search(user)
            score = s.group(1) if s else str(1 + int.from_bytes(hashlib.sha256(user.encode()).digest()[:4], "big") % 10)
            content = st.args.reply_format.replace("{score}", score)
        if fault != "truncated":
            st.answered += 1
        out = {"id": "chatcmpl-" + digest[:12], "object": "chat.completion", "model": req.get("model"),
               "choices": [{"index": 0, "message": {"role": "assistant", "content": content},
                            "finish_reason": "stop"}],
               "usage": {"prompt_tokens": len(user) // 4 + 1, "completion_tokens": len(content) // 4 + 1,
                         "total_tokens": len(user) // 4 + len(content) // 4 + 2}}
        data = response(200, json.dumps(out).encode())
        if fault == "truncated":
            return Reply(data, truncate=True)
        if fault == "slowbody":
            return Reply(data, pieces=4, pause=st.args.slow_body / 3, sold=digest)
        return Reply(data, sold=digest)


async def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--port", type=int, default=0)
    ap.add_argument("--port-file")
    ap.add_argument("--retry-after", default="1")
    ap.add_argument("--slow", type=float, default=30.0)
    ap.add_argument("--slow-body", type=float, default=0.3)
    ap.add_argument("--delay", type=float, default=0.0)
    ap.add_argument("--fault-mix")
    ap.add_argument("--fault-mix-max", type=int, default=2)
    ap.add_argument("--always")
    ap.add_argument("--fail-after", type=int)
    ap.add_argument("--reply-format", default="{score}")
    ap.add_argument("--log")
    ap.add_argument("--sold")
    args = ap.parse_args()
    state = State(args)
    loop = asyncio.get_running_loop()
    server = await loop.create_server(lambda: Conn(state), "127.0.0.1", args.port, backlog=1024)
    port = server.sockets[0].getsockname()[1]
    if args.port_file:
        tmp = args.port_file + ".tmp"
        with open(tmp, "w") as f:
            f.write(f"{port}\n")
        os.rename(tmp, args.port_file)
    print(port, flush=True)
    async with server:
        await server.serve_forever()


if __name__ == "__main__":
    try:
        asyncio.run(main())
    except KeyboardInterrupt:
        sys.exit(0)
