#!/usr/bin/env python3
"""Independent check of our GGUF reader and dequantizers against gguf-py
(the `gguf` package's GGUFReader and numpy gguf.quants.dequantize).

Usage: .venv/bin/python tests/ref/check_gguf.py GGUF_PATH WORKDIR
       (the C side is build/tests/test_gguf, or the binary named by
       $GRPO_GGUF_TEST_BIN; make it with `make unit`)

  1. The real model (GGUF_PATH, SmolLM2-135M-Instruct Q4_1): our dump of a
     few tensors (token_embd Q8_0, Q4_1 matrices, F32 norms) against
     gguf-py's dequantization, and our metadata reading against GGUFReader's.
  2. A file written here with gguf.GGUFWriter holding one tensor of every
     type we support: F32, F16 and BF16 from random data; Q8_0, Q4_0, Q4_1,
     Q5_0, Q5_1 quantized by gguf.quants.quantize; Q4_K and Q6_K (which
     gguf-py cannot quantize) as random raw blocks with finite f16 scales.
     Every tensor is dequantized by both and compared.

Tolerance: none. Every value must be bit for bit equal (our dequantizers do
the arithmetic in the same order and precision as gguf-py's numpy code).
Random data comes from numpy's default_rng with fixed seeds.

Prints TAP; exits 0 when everything matches.
"""
import json
import os
import subprocess
import sys

import numpy as np
import gguf
from gguf import GGMLQuantizationType as QT
from gguf import GGUFReader, GGUFWriter

from tap import done, tap

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
BIN = os.environ.get("GRPO_GGUF_TEST_BIN", os.path.join(ROOT, "build", "tests", "test_gguf"))


def c_dump(path, outdir, tensors=None):
    os.makedirs(outdir, exist_ok=True)
    env = dict(os.environ, GRPO_GGUF_DUMP=path, GRPO_GGUF_DUMP_OUT=outdir)
    if tensors:
        env["GRPO_GGUF_DUMP_TENSORS"] = ",".join(tensors)
    r = subprocess.run([BIN], env=env, capture_output=True, text=True)
    if r.returncode != 0:
        raise RuntimeError(f"{BIN} dump of {path} exited {r.returncode}: {r.stderr.strip()}")
    with open(os.path.join(outdir, "meta.json"), encoding="utf-8") as f:
        return json.load(f)


def field(reader, key):
    """A scalar or string field's value, or None."""
    fl = reader.fields.get(key)
    if fl is None:
        return None
    return fl.contents()


def compare_tensor(reader_tensor, outdir, meta):
    t = reader_tensor
    name = f"{t.name} ({t.tensor_type.name}, {list(int(d) for d in t.shape)})"
    mine = meta["tensors"].get(t.name)
    if mine is None:
        tap(False, name, "not in our dump")
        return
    ref = gguf.quants.dequantize(t.data, t.tensor_type).astype(np.float32, copy=False).ravel()
    got = np.fromfile(os.path.join(outdir, t.name + ".f32"), dtype="<f4")
    diag = ""
    ok = mine["type"] == t.tensor_type.name and mine["dims"] == [int(d) for d in t.shape]
    if not ok:
        diag = f"type/dims: ours {mine['type']} {mine['dims']}"
    elif got.size != ref.size:
        ok, diag = False, f"sizes differ: ours {got.size}, gguf-py {ref.size}"
    else:
        same = got.view(np.uint32) == ref.view(np.uint32)
        ok = bool(same.all())
        if not ok:
            i = int(np.argmin(same))
            diff = float(np.nanmax(np.abs(got.astype(np.float64) - ref)))
            diag = (f"{int((~same).sum())} of {got.size} values differ; first at {i}: "
                    f"{got[i]!r} vs {ref[i]!r}; max abs diff {diff}")
        elif not np.any(ref != 0):
            ok, diag = False, "all values are zero: nothing was compared"
    tap(ok, f"dequantized bit for bit: {name}", diag)


def check_model(path, work):
    reader = GGUFReader(path)
    by_name = {t.name: t for t in reader.tensors}
    want = ["token_embd.weight", "blk.0.attn_q.weight", "blk.0.attn_k.weight",
            "blk.29.ffn_down.weight", "blk.0.attn_norm.weight", "output_norm.weight"]
    want = [w for w in want if w in by_name]
    outdir = os.path.join(work, "model")
    meta = c_dump(path, outdir, want)

    n_kv = sum(1 for k in reader.fields if not k.startswith("GGUF."))  # less the header fields
    tap(meta["n_tensors"] == len(reader.tensors) and meta["n_kv"] == n_kv
        and meta["version"] == field(reader, "GGUF.version"),
        "model: version, tensor and KV counts agree with GGUFReader",
        f"ours v{meta['version']}, {meta['n_tensors']} tensors, {meta['n_kv']} KVs; gguf-py "
        f"{len(reader.tensors)} tensors, {n_kv} KVs")
    arch = field(reader, "general.architecture")
    pairs = [("architecture", arch)]
    for k in ["block_count", "embedding_length", "feed_forward_length", "context_length",
              "attention.head_count", "attention.head_count_kv", "rope.freq_base",
              "attention.layer_norm_rms_epsilon", "rope.dimension_count", "vocab_size"]:
        v = field(reader, f"{arch}.{k}")
        pairs.append((k, None if v is None else float(np.float32(v)) if isinstance(v, float) else v))
    for k in ["bos_token_id", "eos_token_id", "padding_token_id"]:
        pairs.append((k, field(reader, f"tokenizer.ggml.{k}")))
    tmpl = reader.fields.get("tokenizer.chat_template")
    pairs.append(("chat_template_length", None if tmpl is None else int(tmpl.parts[tmpl.data[0]].size)))
    pairs.append(("pre", field(reader, "tokenizer.ggml.pre")))
    pairs.append(("model", field(reader, "tokenizer.ggml.model")))
    bad = []
    for k, v in pairs:
        got = meta.get(k)
        if isinstance(v, float) and isinstance(got, (int, float)):
            same = np.float32(got) == np.float32(v)
        else:
            same = got == v
        if not same:
            bad.append(f"{k}: ours {got!r}, gguf-py {v!r}")
    tap(not bad, "model: metadata values agree with GGUFReader", "\n".join(bad))
    bad = []
    for key in ["tokenizer.ggml.tokens", "tokenizer.ggml.merges", "tokenizer.ggml.token_type",
                "tokenizer.ggml.scores"]:
        fl = reader.fields.get(key)
        mine = meta.get(key)
        if fl is None:
            if mine is not None:
                bad.append(f"{key}: we see it, gguf-py does not")
            continue
        n = len(fl.data)
        at = [0, n // 2, n - 1] if n else []
        ref = [fl.contents(i) for i in at]
        ref = [float(np.float32(x)) if isinstance(x, float) else x for x in ref]
        if mine is None or mine["count"] != n or [
                float(np.float32(x)) if isinstance(x, float) else x for x in mine["sample"]] != ref:
            bad.append(f"{key}: ours {mine}, gguf-py count {n} sample {ref}")
    tap(not bad, "model: tokenizer arrays (count, first/middle/last) agree", "\n".join(bad))
    print("# model facts: " + json.dumps({k: meta.get(k) for k, _ in pairs}))
    for k in ["tokenizer.ggml.tokens", "tokenizer.ggml.merges", "tokenizer.ggml.token_type",
              "tokenizer.ggml.scores"]:
        if meta.get(k):
            print(f"# {k}: {meta[k]['count']} x {meta[k]['type']}")
    print("# tensor types: " + json.dumps(
        {q: sum(1 for t in reader.tensors if t.tensor_type.name == q)
         for q in sorted({t.tensor_type.name for t in reader.tensors})}))
    for w in want:
        compare_tensor(by_name[w], outdir, meta)


def half_scales(rng, n):
    """n finite, non-zero f16 scales as raw bytes, shape (n, 2)."""
    s = (rng.uniform(0.001, 0.05, n) * rng.choice([-1.0, 1.0], n)).astype(np.float16)
    return s.view(np.uint8).reshape(n, 2)


def k_blocks(qtype, rng, n_blocks):
    """Random raw Q4_K / Q6_K blocks with finite f16 super-block scales."""
    size = gguf.GGML_QUANT_SIZES[qtype][1]
    b = rng.integers(0, 256, (n_blocks, size), dtype=np.uint8)
    if qtype == QT.Q4_K:
        b[:, 0:2] = half_scales(rng, n_blocks)   # d
        b[:, 2:4] = half_scales(rng, n_blocks)   # dmin
    else:
        b[:, 208:210] = half_scales(rng, n_blocks)  # d, at the end of Q6_K's block
    return b


def check_all_types(work):
    rng = np.random.default_rng(20240611)
    path = os.path.join(work, "types.gguf")
    w = GGUFWriter(path, "llama")
    w.add_block_count(2)
    w.add_embedding_length(64)
    w.add_head_count(4)
    w.add_head_count_kv(2)
    w.add_rope_freq_base(10000.0)
    w.add_layer_norm_rms_eps(1e-6)
    w.add_tokenizer_model("gpt2")
    w.add_token_list(["a", "b", "\u00e9t\u00e9", ""])
    w.add_token_types([1, 1, 3, 1])
    w.add_bos_token_id(0)
    w.add_eos_token_id(2)
    rows, cols = 6, 512  # cols: a multiple of 256 for the K-quants
    expect = {}
    data = rng.standard_normal((rows, cols)).astype(np.float32) * 3
    w.add_tensor("t.f32", data)
    expect["t.f32"] = QT.F32
    w.add_tensor("t.f16", data.astype(np.float16))
    expect["t.f16"] = QT.F16
    for qt in [QT.BF16, QT.Q8_0, QT.Q4_0, QT.Q4_1, QT.Q5_0, QT.Q5_1]:
        q = gguf.quants.quantize(data, qt)
        w.add_tensor(f"t.{qt.name.lower()}", q, raw_dtype=qt)
        expect[f"t.{qt.name.lower()}"] = qt
    for qt in [QT.Q4_K, QT.Q6_K]:
        b = k_blocks(qt, rng, rows * cols // 256).reshape(rows, -1)
        w.add_tensor(f"t.{qt.name.lower()}", b, raw_dtype=qt)
        expect[f"t.{qt.name.lower()}"] = qt
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()

    reader = GGUFReader(path)
    outdir = os.path.join(work, "types")
    meta = c_dump(path, outdir)
    got_types = {t.name: t.tensor_type for t in reader.tensors}
    tap(got_types == expect, "every supported type is in the file gguf-py wrote",
        f"{got_types} vs {expect}")
    tap(meta["block_count"] == 2 and meta["attention.head_count_kv"] == 2
        and np.float32(meta["attention.layer_norm_rms_epsilon"]) == np.float32(1e-6)
        and meta["tokenizer.ggml.tokens"]["count"] == 4
        and meta["tokenizer.ggml.tokens"]["sample"] == ["a", "\u00e9t\u00e9", ""],
        "metadata written by GGUFWriter reads back", json.dumps(meta)[:600])
    for t in reader.tensors:
        compare_tensor(t, outdir, meta)


def main():
    if len(sys.argv) != 3:
        print(__doc__, file=sys.stderr)
        return 64
    path, work = sys.argv[1], sys.argv[2]
    os.makedirs(work, exist_ok=True)
    from importlib.metadata import version
    print(f"# gguf-py {version('gguf')}, binary {BIN}")
    check_all_types(work)
    if os.path.exists(path):
        check_model(path, work)
    else:
        tap(False, f"model file {path} exists (make models)")
    return done()


if __name__ == "__main__":
    sys.exit(main())
