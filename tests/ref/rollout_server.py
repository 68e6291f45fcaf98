#!/usr/bin/env python3
"""A stand-in inference server for grpo-rollout --server's tests: it speaks
vLLM's, SGLang's or llama.cpp's generation API (--kind) over HTTP on
127.0.0.1, checks that each request has the fields grpo-rollout must send,
serves vLLM's and SGLang's LoRA adapter endpoints, and misbehaves on request
(--fault). Not a reference: vLLM and SGLang cannot run here (they need a GPU
and Python packages this project does not install), so their request and
reply shapes are played from their documentation and source; the real
server test is tests/bats/rollout_server.bats (llama.cpp's llama-server).

Usage: rollout_server.py --kind vllm|sglang|llamacpp --port-file F | --port P
                         [--fault none|429|count|nologprobs|notjson|foreign|loadfail]
                         [--times N] [--log F] [--serving NAME] [--delay S] [--replies F]

--port P listens on P (a SERVER_CMD's fixed URL), --port-file F on a free
port written to F. GET /v1/models: {"object": "list", "data": [{"id":
NAME or "fake", "owned_by": KIND, "max_model_len": 4096}]}. The generation
endpoint (/v1/completions, /generate, /completion) answers, after S
seconds, 400 naming the field when the request lacks one grpo-rollout
sends (token-id prompt, max tokens, seed, log-probabilities asked for,
token ids asked for), else up to max-tokens of the tokens [3 + X mod 90,
40, 41, 2], X the seed, or crc32(NAME) with --serving: the first token
says which model answered (2 ends a turn in tests/fixtures/tiny-tokenizer),
each with log-probability -0.5 - i/10, finish "stop" at token 2, else "length".
--replies F: a JSON object {"ID": [[token ids], ...]}: a request whose prompt
starts with token ID gets the next list of ID's (in turn: a multi-turn
episode's turns), up to max-tokens of it, finish "stop" when all of it fit.
Faults, on the first --times generation requests (default 1; 0 = all):
  429         status 429 with Retry-After: 0
  count       one log-probability fewer than tokens
  nologprobs  no log-probabilities at all
  notjson     200 with a body that is not JSON
  foreign     a token id beyond the tiny tokenizer's 97
  loadfail    the adapter load answers 400 (vLLM: an error object; SGLang:
              {"success": false, "error_message"}) on every attempt
LoRA adapters (vllm, sglang; llama.cpp's server has no such endpoint: 404):
  vllm    POST /v1/load_lora_adapter, a body of exactly {"lora_name",
          "lora_path", "load_inplace": true}: 200 with a text body; a name
          already loaded without load_inplace true is 400, as vLLM answers.
          A completion's "model" must be "fake" or a loaded adapter's name.
  sglang  POST /load_lora_adapter {"lora_name", "lora_path"[, "pinned"]}: a
          name already loaded is 400 {"success": false, ...}, as SGLang
          answers (it replaces nothing in place); POST /unload_lora_adapter
          {"lora_name"}: 400 when the name is not loaded. A /generate's
          "lora_path", when present, must name a loaded adapter.
  lora_path must be an absolute path to a directory holding
  adapter_config.json (the server reads the client's filesystem); else 400.
GET /stats: {"generate": requests to the endpoint, "by_status": {code: n},
"loads": [[name, path], ...] in order, "unloads": n, "adapters": {name: path},
"generated_with": {the path of the adapter each request named, or "" for
the model itself: n}}.
--log F: each generation request body, one line each.
"""
import argparse
import json
import os
import threading
import time
import zlib
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

ENDPOINT = {"vllm": "/v1/completions", "sglang": "/generate", "llamacpp": "/completion"}


class State:
    def __init__(self, args):
        self.args = args
        self.lock = threading.Lock()
        self.generate = 0
        self.by_status = {}
        self.adapters = {}
        self.loads = []
        self.unloads = 0
        self.generated_with = {}
        self.replies = {}
        if args.replies:
            with open(args.replies) as f:
                self.replies = json.load(f)


def missing(kind, req, adapters):
    """The first field grpo-rollout must send that the request lacks (or names wrong)."""
    def ids(v):
        return isinstance(v, list) and len(v) > 0 and all(isinstance(x, int) for x in v)
    if kind == "vllm":
        need = [("prompt", ids(req.get("prompt"))), ("max_tokens", isinstance(req.get("max_tokens"), int)),
                ("seed", isinstance(req.get("seed"), int)), ("logprobs", req.get("logprobs") == 0),
                ("return_token_ids", req.get("return_token_ids") is True),
                ("model", req.get("model") == "fake" or req.get("model") in adapters)]
    elif kind == "sglang":
        sp = req.get("sampling_params") or {}
        need = [("input_ids", ids(req.get("input_ids"))), ("return_logprob", req.get("return_logprob") is True),
                ("sampling_params.max_new_tokens", isinstance(sp.get("max_new_tokens"), int)),
                ("sampling_params.sampling_seed", isinstance(sp.get("sampling_seed"), int)),
                ("lora_path", "lora_path" not in req or req["lora_path"] in adapters)]
    else:
        need = [("prompt", ids(req.get("prompt"))), ("n_predict", isinstance(req.get("n_predict"), int)),
                ("seed", isinstance(req.get("seed"), int)), ("n_probs", req.get("n_probs", 0) > 0),
                ("return_tokens", req.get("return_tokens") is True)]
    return next((name for name, ok in need if not ok), None)


def answer(kind, req, fault, serving=None, scripted=None):
    if kind == "vllm":
        n, seed = req["max_tokens"], req["seed"]
    elif kind == "sglang":
        n, seed = req["sampling_params"]["max_new_tokens"], req["sampling_params"]["sampling_seed"]
    else:
        n, seed = req["n_predict"], req["seed"]
    toks = [3 + (zlib.crc32(serving.encode()) if serving else seed) % 90, 40, 41, 2]
    if fault == "foreign":
        toks[1] = 500
    stop = 2 in toks[:n]
    toks = toks[:toks.index(2) + 1] if stop else toks[:n]
    if scripted is not None:
        stop = len(scripted) <= n
        toks = scripted[:n]
    lps = [-0.5 - i / 10 for i in range(len(toks))]
    if fault == "count":
        lps = lps[:-1]
    if kind == "vllm":
        choice = {"index": 0, "text": "", "finish_reason": "stop" if stop else "length", "stop_reason": None,
                  "token_ids": toks, "prompt_token_ids": req["prompt"]}
        if fault != "nologprobs":
            choice["logprobs"] = {"text_offset": [0] * len(lps), "token_logprobs": lps, "tokens": [""] * len(lps),
                                  "top_logprobs": [{} for _ in lps]}
        return {"id": "cmpl-1", "object": "text_completion", "created": 0, "model": "fake", "choices": [choice],
                "usage": {"prompt_tokens": len(req["prompt"]), "completion_tokens": len(toks)}}
    if kind == "sglang":
        meta = {"id": "1", "finish_reason": {"type": "stop", "matched": 2} if stop else {"type": "length",
                                                                                       "length": len(toks)},
                "prompt_tokens": len(req["input_ids"]), "completion_tokens": len(toks)}
        if fault != "nologprobs":
            meta["output_token_logprobs"] = [[lp, t, None] for lp, t in zip(lps, toks)]
        return {"text": "", "output_ids": toks, "meta_info": meta}
    out = {"index": 0, "content": "", "tokens": toks, "stop": True, "stop_type": "eos" if stop else "limit"}
    if fault != "nologprobs":
        out["completion_probabilities"] = [{"id": t, "token": "", "bytes": [], "logprob": lp, "top_logprobs": []}
                                           for lp, t in zip(lps, toks)]
    return out


LORA_LOAD = {"vllm": "/v1/load_lora_adapter", "sglang": "/load_lora_adapter"}
LORA_UNLOAD = {"vllm": "/v1/unload_lora_adapter", "sglang": "/unload_lora_adapter"}


def adapter_named(kind, req):
    """The adapter a generation request asks for, or None for the model itself."""
    if kind == "vllm":
        return None if req.get("model") == "fake" else req.get("model")
    return req.get("lora_path") if kind == "sglang" else None


def lora_error(kind, status, message):
    if kind == "vllm":
        return status, {"error": {"message": message, "type": "BadRequestError", "param": None, "code": status}}
    return status, {"success": False, "error_message": message, "loaded_adapters": {}}


def lora_load(state, kind, req, fault):
    """vLLM's or SGLang's answer to a load: (status, body)."""
    want = {"lora_name", "lora_path", "load_inplace"} if kind == "vllm" else {"lora_name", "lora_path"}
    keys = set(req) - ({"pinned"} if kind == "sglang" else set())
    if keys != want:
        return lora_error(kind, 400, "expected the fields %s, got %s" % (sorted(want), sorted(req)))
    name, path = req["lora_name"], req["lora_path"]
    if not isinstance(name, str) or not name or not isinstance(path, str) or not os.path.isabs(path):
        return lora_error(kind, 400, "lora_name must be a name and lora_path an absolute path")
    if kind == "vllm" and req["load_inplace"] is not True:
        return lora_error(kind, 400, "load_inplace is not true")
    if fault == "loadfail":
        return lora_error(kind, 400, "Loading lora %s failed: the adapter's rank exceeds --max-lora-rank" % name)
    if not os.path.isfile(os.path.join(path, "adapter_config.json")):
        return lora_error(kind, 400, "No adapter found for %s" % path)
    with state.lock:
        if name in state.adapters and kind == "sglang":
            return lora_error(kind, 400, "LoRA with name %s already exists. Loaded LoRAs: %s" %
                              (name, list(state.adapters)))
        state.adapters[name] = path
        state.loads.append([name, path])
        loaded = dict(state.adapters)
    if kind == "vllm":
        return 200, ("Success: LoRA adapter '%s' added successfully." % name).encode()
    return 200, {"success": True, "error_message": "", "loaded_adapters": loaded}


def lora_unload(state, kind, req):
    if set(req) != {"lora_name"}:
        return lora_error(kind, 400, "expected the field lora_name, got %s" % sorted(req))
    with state.lock:
        if req["lora_name"] not in state.adapters:
            return lora_error(kind, 400 if kind == "sglang" else 404,
                              "LoRA with name %s does not exist. Loaded LoRAs: %s" %
                              (req["lora_name"], list(state.adapters)))
        del state.adapters[req["lora_name"]]
        state.unloads += 1
    if kind == "vllm":
        return 200, ("Success: LoRA adapter '%s' removed successfully." % req["lora_name"]).encode()
    return 200, {"success": True, "error_message": "", "loaded_adapters": dict(state.adapters)}


def handler(state):
    args = state.args

    class H(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, *a):
            pass

        def send(self, status, body, headers=()):
            data = body if isinstance(body, bytes) else json.dumps(body).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            for k, v in headers:
                self.send_header(k, v)
            self.end_headers()
            self.wfile.write(data)

        def do_GET(self):
            if self.path == "/v1/models":
                self.send(200, {"object": "list", "data": [{"id": args.serving or "fake", "object": "model",
                                                            "owned_by": args.kind,
                                                            "max_model_len": 4096}]})
            elif self.path == "/stats":
                with state.lock:
                    self.send(200, {"generate": state.generate, "by_status": state.by_status,
                                    "loads": state.loads, "unloads": state.unloads, "adapters": state.adapters,
                                    "generated_with": state.generated_with})
            else:
                self.send(404, {"error": {"message": "not found"}})

        def do_POST(self):
            body = self.rfile.read(int(self.headers.get("Content-Length", 0)))
            if self.path in (LORA_LOAD.get(args.kind), LORA_UNLOAD.get(args.kind)):
                req = json.loads(body)
                if self.path == LORA_LOAD[args.kind]:
                    status, reply = lora_load(state, args.kind, req, args.fault)
                else:
                    status, reply = lora_unload(state, args.kind, req)
                self.send(status, reply)
                return
            if self.path != ENDPOINT[args.kind]:
                self.send(404, {"error": {"message": "File Not Found"}})
                return
            if args.delay:
                time.sleep(args.delay)
            with state.lock:
                state.generate += 1
                nth = state.generate
                if args.log:
                    with open(args.log, "ab") as f:
                        f.write(body + b"\n")
            fault = args.fault if args.times == 0 or nth <= args.times else "none"
            req = json.loads(body)
            with state.lock:  # the adapter the request asks for, as loaded now
                field = missing(args.kind, req, state.adapters)
                used = state.adapters.get(adapter_named(args.kind, req), "")
            if field:
                status, reply, headers = 400, {"error": {"message": "request without " + field}}, ()
            elif fault == "429":
                status, reply, headers = 429, {"error": {"message": "slow down"}}, (("Retry-After", "0"),)
            elif fault == "notjson":
                status, reply, headers = 200, b"<html>not json</html>", ()
            else:
                prompt = req.get("prompt") or req.get("input_ids")
                with state.lock:  # the next scripted reply for a prompt starting with this token
                    queue = state.replies.get(str(prompt[0]))
                    scripted = queue.pop(0) if queue else None
                status, reply, headers = 200, answer(args.kind, req, fault, args.serving, scripted), ()
            with state.lock:
                state.by_status[str(status)] = state.by_status.get(str(status), 0) + 1
                if status == 200:
                    state.generated_with[used] = state.generated_with.get(used, 0) + 1
            self.send(status, reply, headers)

    return H


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--kind", required=True, choices=sorted(ENDPOINT))
    ap.add_argument("--port-file")
    ap.add_argument("--port", type=int, default=0)
    ap.add_argument("--serving")
    ap.add_argument("--delay", type=float, default=0)
    ap.add_argument("--fault", default="none",
                    choices=["none", "429", "count", "nologprobs", "notjson", "foreign", "loadfail"])
    ap.add_argument("--times", type=int, default=1)
    ap.add_argument("--log")
    ap.add_argument("--replies")
    args = ap.parse_args()
    server = ThreadingHTTPServer(("127.0.0.1", args.port), handler(State(args)))
    if args.port_file:
        tmp = args.port_file + ".tmp"
        with open(tmp, "w") as f:
            f.write("%d\n" % server.server_address[1])
        os.replace(tmp, args.port_file)
    server.serve_forever()


if __name__ == "__main__":
    main()
