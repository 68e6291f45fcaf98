#!/usr/bin/env python3
"""Independent check of our safetensors reader and writer against the Python
`safetensors` package (the reference implementation's bindings).

Usage: .venv/bin/python tests/ref/check_safetensors.py WORKDIR
       (run from anywhere; the C side is build/tests/test_safetensors, or the
       binary named by $GRPO_ST_TEST_BIN; make it with `make unit`)

How: both sides generate the same values from a deterministic rule, so no
data file has to be shared or checked in.
  1. C writes:  GRPO_ST_OUT=WORKDIR/c_written.safetensors test_safetensors
     Python reads it with safetensors (numpy API for every dtype numpy has,
     the torch API for BF16, which numpy lacks) and compares every value
     bit for bit, the metadata, and the layout we promise in
     formats/checkpoint.md: header padded with spaces to a multiple of 8,
     tensors in the order added, contiguous from offset 0.
  2. Python writes WORKDIR/py_written.safetensors with safetensors.torch
     (the one API that can write all seven dtypes), then
     GRPO_ST_IN=... test_safetensors reads it and checks every value; its
     exit status and TAP lines are reported here.
Values: element i of tensor k has raw bits splitmix64(((k+1) << 32) + i) cut
to the dtype's width, with an all-ones float exponent flipped so nothing is
inf or NaN (cross_bits in tests/unit/test_safetensors.c).

Prints TAP; exits 0 when everything matches.
"""
import json
import os
import struct
import subprocess
import sys

import numpy as np
import torch
from safetensors import safe_open
from safetensors.torch import save_file

M64 = (1 << 64) - 1

# name, dtype, shape: the order tests/unit/test_safetensors.c writes (cross_specs).
CROSS_TENSORS = [
    ("model.embed.weight", "F32", (3, 5)),
    ("a.half", "F16", (2, 3, 4)),
    ("b.bfloat", "BF16", (7,)),
    ("c.double", "F64", (2, 2)),
    ("d.int32", "I32", (4, 3)),
    ("e.int64", "I64", (5,)),
    ("f.bytes", "U8", (3, 1, 2, 2)),
    ("g.scalar", "F32", ()),
    ("h.empty", "F32", (0, 3)),
]
CROSS_META = {"format": "pt", "grpo.note": 'cross-check \u2713 "quoted" back\\slash\ttab'}

# dtype -> (unsigned view for bit comparison, width in bytes)
BITS = {"F32": (np.uint32, 4), "F16": (np.uint16, 2), "BF16": (np.uint16, 2), "F64": (np.uint64, 8),
        "I32": (np.uint32, 4), "I64": (np.uint64, 8), "U8": (np.uint8, 1)}
NUMPY_DTYPE = {"F32": np.float32, "F16": np.float16, "F64": np.float64, "I32": np.int32,
               "I64": np.int64, "U8": np.uint8}


def splitmix64(x):
    z = (x + 0x9E3779B97F4A7C15) & M64
    z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & M64
    z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & M64
    return z ^ (z >> 31)


def cross_bits(k, i, dtype):
    u = splitmix64(((k + 1) << 32) + i)
    if dtype == "F32":
        u &= 0xFFFFFFFF
        if (u >> 23) & 0xFF == 0xFF:
            u ^= 1 << 30
    elif dtype == "F16":
        u &= 0xFFFF
        if (u >> 10) & 0x1F == 0x1F:
            u ^= 1 << 14
    elif dtype == "BF16":
        u &= 0xFFFF
        if (u >> 7) & 0xFF == 0xFF:
            u ^= 1 << 14
    elif dtype == "F64":
        if (u >> 52) & 0x7FF == 0x7FF:
            u ^= 1 << 62
    elif dtype == "I32":
        u &= 0xFFFFFFFF
    elif dtype == "U8":
        u &= 0xFF
    return u


def expected_bits(k):
    """The unsigned bit pattern array of tensor k."""
    _, dtype, shape = CROSS_TENSORS[k]
    n = int(np.prod(shape, dtype=np.int64))
    view, _ = BITS[dtype]
    return np.array([cross_bits(k, i, dtype) for i in range(n)], dtype=view).reshape(shape)


class Tap:
    def __init__(self):
        self.n = 0
        self.failed = 0

    def ok(self, cond, name, why=""):
        self.n += 1
        if not cond:
            self.failed += 1
            print(f"not ok {self.n} - {name}")
            if why:
                print(f"#   {why}")
        else:
            print(f"ok {self.n} - {name}")
        sys.stdout.flush()


def test_binary():
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    return os.environ.get("GRPO_ST_TEST_BIN") or os.path.join(root, "build", "tests", "test_safetensors")


def run_c(binary, env_name, path):
    env = dict(os.environ)
    env.pop("GRPO_ST_OUT", None)
    env.pop("GRPO_ST_IN", None)
    env[env_name] = path
    return subprocess.run([binary], env=env, capture_output=True, text=True)


def check_layout(tap, path):
    """What formats/checkpoint.md promises about the bytes we write."""
    with open(path, "rb") as f:
        raw = f.read()
    (n,) = struct.unpack("<Q", raw[:8])
    header_bytes = raw[8:8 + n]
    text = header_bytes.decode("utf-8")
    tap.ok(n % 8 == 0, "header length is a multiple of 8", f"header length {n}")
    stripped = text.rstrip(" ")
    tap.ok(len(text) - len(stripped) < 8 and stripped.endswith("}"),
           "header padding is spaces only, fewer than 8")
    header = json.loads(text, object_pairs_hook=lambda pairs: pairs)  # keeps order
    keys = [k for k, _ in header]
    tap.ok(keys[0] == "__metadata__", "__metadata__ comes first", f"keys {keys}")
    names = [k for k in keys if k != "__metadata__"]
    tap.ok(names == [t[0] for t in CROSS_TENSORS], "tensors in the order added", f"got {names}")
    pos, contiguous = 0, True
    for key, entry in header:
        if key == "__metadata__":
            continue
        begin, end = dict(entry)["data_offsets"]
        contiguous &= begin == pos
        pos = end
    tap.ok(contiguous and pos == len(raw) - 8 - n, "tensors contiguous from offset 0 to the end")


def check_c_written(tap, path):
    check_layout(tap, path)
    with safe_open(path, framework="np") as f:
        tap.ok(f.metadata() == CROSS_META, "metadata reads back", f"got {f.metadata()!r}")
        tap.ok(list(f.keys()) == sorted(t[0] for t in CROSS_TENSORS), "every tensor name present",
               f"got {list(f.keys())}")
    for k, (name, dtype, shape) in enumerate(CROSS_TENSORS):
        view, _ = BITS[dtype]
        if dtype == "BF16":  # numpy has no bfloat16: read through torch
            with safe_open(path, framework="pt") as f:
                t = f.get_tensor(name)
            ok_dtype = t.dtype == torch.bfloat16
            arr = t.view(torch.int16).numpy().view(np.uint16)
        else:
            with safe_open(path, framework="np") as f:
                a = f.get_tensor(name)
            ok_dtype = a.dtype == NUMPY_DTYPE[dtype]
            arr = a.view(view)
        want = expected_bits(k)
        same = ok_dtype and arr.shape == tuple(shape) and np.array_equal(arr, want)
        tap.ok(same, f"C-written {name} ({dtype} {list(shape)}) matches bit for bit",
               f"dtype ok {ok_dtype}, shape {arr.shape}, want {tuple(shape)}")


def write_py(path):
    tensors = {}
    for k, (name, dtype, shape) in enumerate(CROSS_TENSORS):
        bits = expected_bits(k)
        if dtype == "BF16":
            t = torch.from_numpy(bits.view(np.int16).copy()).view(torch.bfloat16)
        else:
            t = torch.from_numpy(bits.view(NUMPY_DTYPE[dtype]).copy())
        tensors[name] = t.reshape(shape)
    save_file(tensors, path, metadata=CROSS_META)


def main():
    if len(sys.argv) != 2:
        sys.exit("usage: check_safetensors.py WORKDIR")
    work = sys.argv[1]
    os.makedirs(work, exist_ok=True)
    binary = test_binary()
    if not os.access(binary, os.X_OK):
        sys.exit(f"check_safetensors.py: {binary}: not built (run `make unit`)")
    tap = Tap()

    c_path = os.path.join(work, "c_written.safetensors")
    r = run_c(binary, "GRPO_ST_OUT", c_path)
    tap.ok(r.returncode == 0 and os.path.exists(c_path), "C writer ran",
           (r.stdout + r.stderr).strip().replace("\n", " | "))
    if r.returncode == 0:
        check_c_written(tap, c_path)

    py_path = os.path.join(work, "py_written.safetensors")
    write_py(py_path)
    r = run_c(binary, "GRPO_ST_IN", py_path)
    for line in r.stdout.splitlines():
        if line.startswith("not ok") or line.startswith("#"):
            print(f"#   C: {line}")
    tap.ok(r.returncode == 0, "C reader reads the Python-written file, every value equal",
           f"exit {r.returncode}: {r.stderr.strip()}")

    print(f"1..{tap.n}")
    sys.exit(1 if tap.failed else 0)


if __name__ == "__main__":
    main()
