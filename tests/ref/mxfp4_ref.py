#!/usr/bin/env python3
"""Independent references for lib/ops/packed_mxfp4's packing and
dequantization, through the unit test's driver (build/tests/test_packed_mxfp4):

  - GGUF MXFP4 blocks written by gguf-py's quantizer (gguf.quants.MXFP4 of the
    pinned llama.cpp, whose gguf-py has the type; the test venv's release does
    not) from random rows, and random blocks of every scale byte: our unpacked
    values equal gguf-py's dequantize_blocks bit for bit;
  - gpt-oss's `_blocks`/`_scales` (random bytes, every scale byte but the
    NaN 255): our values
    equal transformers' convert_moe_packed_tensors, transcribed below in
    float32 (its dtype argument), except that its code 8 is -0 where ggml's
    and ours is +0 (compared as values);
  - the same HF blocks repacked to GGUF by llama.cpp's own converter
    (GptOssModel.transform_nibble_layout in conversion/gpt_oss.py, taken from
    the file: its module needs transformers): mx4w_pack_gguf of those and
    mx4w_pack_hf of the originals give the same bytes.

  mxfp4_ref.py --bin build/tests/test_packed_mxfp4 --llama build/llama.cpp/src

All comparisons are exact (the formats are exact in float32). TAP on stdout.
"""
import argparse
import ast
import math
import os
import subprocess
import sys
import tempfile

import numpy as np
import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from tap import done, tap  # noqa: E402

N, K = 37, 288  # rows of W, values per row: 9 blocks of 32, the panels' tail
FP4_VALUES = [+0.0, +0.5, +1.0, +1.5, +2.0, +3.0, +4.0, +6.0, -0.0, -0.5, -1.0, -1.5, -2.0, -3.0, -4.0, -6.0]


def convert_moe_packed_tensors(blocks, scales, dtype=torch.float32):
    """transformers.integrations.mxfp4.convert_moe_packed_tensors, without its
    move to a GPU, its row chunks and its final transpose (which turns [out,
    in] into gpt-oss's [in, out]; the packed layout keeps [out, in])."""
    scales = scales.to(torch.int32) - 127
    assert blocks.shape[:-1] == scales.shape
    lut = torch.tensor(FP4_VALUES, dtype=dtype)
    *prefix_shape, G, B = blocks.shape
    rows_total = math.prod(prefix_shape) * G
    blocks = blocks.reshape(rows_total, B)
    scales = scales.reshape(rows_total, 1)
    out = torch.empty(rows_total, B * 2, dtype=dtype)
    idx_lo = (blocks & 0x0F).to(torch.long)
    idx_hi = (blocks >> 4).to(torch.long)
    out[:, 0::2] = lut[idx_lo]
    out[:, 1::2] = lut[idx_hi]
    torch.ldexp(out, scales, out=out)
    return out.reshape(*prefix_shape, G, B * 2).view(*prefix_shape, G * B * 2)


def llama_transform_nibble_layout(llama_src):
    """GptOssModel.transform_nibble_layout from llama.cpp's converter source."""
    path = os.path.join(llama_src, "conversion", "gpt_oss.py")
    tree = ast.parse(open(path).read(), path)
    for cls in tree.body:
        if isinstance(cls, ast.ClassDef) and cls.name == "GptOssModel":
            for fn in cls.body:
                if isinstance(fn, ast.FunctionDef) and fn.name == "transform_nibble_layout":
                    ns = {"torch": torch}
                    exec(compile(ast.Module(body=[fn], type_ignores=[]), path, "exec"), ns)
                    return lambda t: ns["transform_nibble_layout"](None, t)
    raise SystemExit(f"{path}: no GptOssModel.transform_nibble_layout")


def run(bin_path, args, out, count, dtype):
    subprocess.run([bin_path] + args + [out], check=True)
    return np.fromfile(out, dtype=dtype, count=count)


def same_bits(a, b):
    return a.shape == b.shape and np.array_equal(a.view(np.uint32), b.view(np.uint32))


def describe(ours, ref):
    bad = np.flatnonzero(ours.view(np.uint32) != ref.view(np.uint32))
    if not len(bad):
        return None
    i = bad[0]
    return f"{len(bad)} values differ; first at {i}: ours {ours[i]!r}, reference {ref[i]!r}"


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--bin", required=True)
    ap.add_argument("--llama", required=True, help="llama.cpp's source (gguf-py/, conversion/)")
    args = ap.parse_args()
    sys.path.insert(0, os.path.join(args.llama, "gguf-py"))
    from gguf import GGMLQuantizationType
    from gguf.quants import dequantize, quantize

    rng = np.random.default_rng(7)
    nb = N * (K // 32)
    with tempfile.TemporaryDirectory() as tmp:
        def path(name):
            return os.path.join(tmp, name)

        # gguf-py's quantizer on rows of several magnitudes, zeros and ties
        rows = rng.standard_normal((N, K)).astype(np.float32) * np.float32(2.0) ** rng.integers(-8, 8, (N, 1))
        rows[3, :64] = 0
        rows[5, 32:64] = np.float32(1.25)  # halfway between codes 1 and 1.5 after scaling
        blocks = quantize(rows, GGMLQuantizationType.MXFP4)
        blocks.tofile(path("q.gguf"))
        ours = run(args.bin, ["--gguf", path("q.gguf"), str(N), str(K)], path("q.f32"), N * K, np.float32)
        ref = dequantize(blocks, GGMLQuantizationType.MXFP4).reshape(-1).astype(np.float32)
        tap(same_bits(ours, ref), "blocks from gguf-py's MXFP4 quantizer unpack to its dequantize_blocks bit for bit",
            describe(ours, ref))

        # random GGUF blocks: every scale byte 0..255, every code
        raw = rng.integers(0, 256, (nb, 17), dtype=np.uint8)
        raw[:, 0] = np.arange(nb) % 256
        raw.tofile(path("r.gguf"))
        ours = run(args.bin, ["--gguf", path("r.gguf"), str(N), str(K)], path("r.f32"), N * K, np.float32)
        with np.errstate(over="ignore"):  # scale bytes from 253 up overflow, in ggml too
            ref = dequantize(raw.reshape(N, -1), GGMLQuantizationType.MXFP4).reshape(-1).astype(np.float32)
        tap(same_bits(ours, ref), "random GGUF blocks, scale bytes 0..255: gguf-py's values bit for bit",
            describe(ours, ref))

        # gpt-oss's layout: blocks [N, K/32, 16], scales [N, K/32]; scale bytes
        # 0..254: 255, OCP's NaN, which loaders refuse, is NaN or infinite in
        # torch (its ldexp's 2^128 overflows) and 2^127 in ggml and here
        hf_blocks = rng.integers(0, 256, (N, K // 32, 16), dtype=np.uint8)
        hf_scales = (np.arange(nb) * 7 % 255).astype(np.uint8).reshape(N, K // 32)
        hf_blocks.tofile(path("b.hf"))
        hf_scales.tofile(path("s.hf"))
        ours = run(args.bin, ["--hf", path("b.hf"), path("s.hf"), str(N), str(K)], path("h.f32"), N * K, np.float32)
        ref = convert_moe_packed_tensors(torch.from_numpy(hf_blocks), torch.from_numpy(hf_scales)).numpy().reshape(-1)
        same = np.array_equal(ours, ref) and not np.isnan(ours).any()  # -0 == +0: code 8
        tap(same, "gpt-oss _blocks/_scales, scale bytes 0..254: transformers' convert_moe_packed_tensors in float32 (code 8 as +0)",
            None if same else f"{int(np.sum(ours != ref))} values differ")

        # the same weights converted to GGUF by llama.cpp: the same packed bytes
        transform = llama_transform_nibble_layout(args.llama)
        gguf_codes = transform(torch.from_numpy(hf_blocks.copy()).reshape(1, N, K // 32, 16)).numpy().reshape(N, K // 32, 16)
        np.concatenate([hf_scales[..., None], gguf_codes], axis=-1).tofile(path("c.gguf"))
        size = (N + 15) // 16 * ((K // 32 + 3) // 4 * 64 + K // 32 * 256)
        a = run(args.bin, ["--packed-gguf", path("c.gguf"), str(N), str(K)], path("a.bin"), size, np.uint8)
        b = run(args.bin, ["--packed-hf", path("b.hf"), path("s.hf"), str(N), str(K)], path("b.bin"), size, np.uint8)
        tap(len(a) == size and np.array_equal(a, b),
            "llama.cpp's gpt-oss converter's GGUF blocks and the HF blocks they came from pack to the same bytes")
    return done()


if __name__ == "__main__":
    sys.exit(main())
