#!/usr/bin/env python3
"""A Q4_K GGUF, as llama.cpp's quantize writes one (the layer matrices in
4-bit k-quant blocks), made from one of ours, by a quantizer of its own.

Usage: .venv/bin/python tests/ref/q4k_gguf.py SRC OUT [--random SEED] [--keep NAME...]

Writes OUT as SRC with every layer matrix (blk.N.attn_q, attn_k, attn_v,
attn_output, ffn_gate, ffn_up, ffn_down) whose rows are whole super-blocks
of 256 stored as Q4_K, except the ones --keep names (left in their type, as
a Q4_K_M file keeps some matrices in Q6_K). The other tensors keep their
type and bytes (tests/ref/mix_gguf.py's rewrite: SRC's header and metadata
bytes); gguf-py (the venv's gguf) reads SRC and dequantizes the blocks
back.

The quantizer is deliberately not ours (lib/ops/packed_q4k.h's least
squares): per sub-block of 32 the range's scale (max - min) / 15 and its
min, then d and dmin (f16) the largest of each over 63, the 6-bit scale
and min rounded under them, each code the nearest under those (ggml's
block_q4_K layout; get_scale_min_k4's packing of the 12 scale bytes). A
loader that took these blocks as they are holds gguf-py's dequantization
of them (the values of blocks of a range's scale are linear in their codes
over the whole code range, so ours often gives those back: --random).
Checked here: gguf-py's dequantization of every written matrix is within
10% relative RMS of its values.

--random SEED: instead, blocks no quantizer wrote, of the matrix's size:
random codes, 6-bit scales and mins, and per super-block d about
rms / 250 and dmin 7.5 d (values about as large as the matrix's, centred),
from numpy's generator seeded SEED. Their values quantized again (by ours,
for one) are not theirs (some sub-blocks' codes miss 0 or 15, and a least
squares fit moves such scales), so a loader that does so is caught.
"""
import os
import sys

import numpy as np
import gguf
from gguf import GGMLQuantizationType as T, GGUFReader

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from mix_gguf import rewrite  # noqa: E402

MATRICES = ("attn_q", "attn_k", "attn_v", "attn_output", "ffn_gate", "ffn_up", "ffn_down")


def quantize_q4k(x):
    """float32 rows (a multiple of 256 long) into Q4_K blocks: uint8 [rows, cols / 256 * 144]."""
    rows = x.shape[0]
    sub = x.reshape(-1, 8, 32).astype(np.float32)
    lo = np.minimum(sub.min(axis=-1), 0)
    scale = (sub.max(axis=-1) - lo) / 15
    mins = -lo
    d = (scale.max(axis=-1) / 63).astype(np.float16)
    dmin = (mins.max(axis=-1) / 63).astype(np.float16)
    df, dminf = d.astype(np.float32)[:, None], dmin.astype(np.float32)[:, None]
    with np.errstate(divide="ignore", invalid="ignore"):
        sc = np.where(df > 0, np.clip(np.rint(scale / df), 0, 63), 0).astype(np.uint8)
        mn = np.where(dminf > 0, np.clip(np.rint(mins / dminf), 0, 63), 0).astype(np.uint8)
        ds, ms = (df * sc)[..., None], (dminf * mn)[..., None]
        q = np.where(ds > 0, np.clip(np.rint((sub + ms) / ds), 0, 15), 0).astype(np.uint8)
    nb = sub.shape[0]
    scales = np.zeros((nb, 12), np.uint8)
    scales[:, 0:4] = sc[:, 0:4] | (sc[:, 4:8] >> 4) << 6
    scales[:, 4:8] = mn[:, 0:4] | (mn[:, 4:8] >> 4) << 6
    scales[:, 8:12] = (sc[:, 4:8] & 15) | (mn[:, 4:8] & 15) << 4
    codes = (q[:, 0::2, :] | q[:, 1::2, :] << 4).reshape(nb, 128)
    head = np.stack([d, dmin], axis=-1).view(np.uint8).reshape(nb, 4)
    return np.concatenate([head, scales, codes], axis=1).reshape(rows, -1)


def random_q4k(rows, cols, rms, rng):
    """Random Q4_K blocks [rows, cols / 256 * 144] whose values are about rms."""
    nb = rows * cols // 256
    d = (rms / 250 * rng.uniform(0.5, 1.5, nb)).astype(np.float16)
    dmin = (d.astype(np.float32) * 7.5).astype(np.float16)
    head = np.stack([d, dmin], axis=-1).view(np.uint8).reshape(nb, 4)
    rest = rng.integers(0, 256, (nb, 140), dtype=np.uint8)
    return np.concatenate([head, rest], axis=1).reshape(rows, -1)


def main():
    args = sys.argv[1:]
    keep, rng = set(), None
    if "--keep" in args:
        i = args.index("--keep")
        keep, args = set(args[i + 1:]), args[:i]
    if "--random" in args:
        i = args.index("--random")
        rng = np.random.default_rng(int(args[i + 1]))
        del args[i:i + 2]
    if len(args) != 2:
        sys.exit(__doc__.strip().split("\n\n")[1])
    src, out = args
    missing = keep - {t.name for t in GGUFReader(src).tensors}
    if missing:
        sys.exit(f"q4k_gguf.py: no tensor {', '.join(sorted(missing))} in {src}")
    converted = []

    def q4k(t):
        parts = t.name.split(".")
        if not (len(parts) == 4 and parts[0] == "blk" and parts[2] in MATRICES and t.name not in keep
                and len(t.shape) == 2 and int(t.shape[0]) % 256 == 0):
            return None
        x = gguf.quants.dequantize(t.data, t.tensor_type).reshape(int(t.shape[1]), int(t.shape[0]))
        converted.append(t.name)
        if rng is not None:
            return T.Q4_K, random_q4k(x.shape[0], x.shape[1], float(np.sqrt(np.mean(x.astype(np.float64) ** 2))),
                                      rng).tobytes()
        blocks = quantize_q4k(x)
        back = gguf.quants.dequantize(blocks, T.Q4_K).reshape(x.shape)
        err = np.sqrt(np.mean((back - x) ** 2) / max(np.mean(x.astype(np.float64) ** 2), 1e-30))
        if not err < 0.1:
            sys.exit(f"q4k_gguf.py: {t.name}: relative RMS error {err:.3g} of the Q4_K blocks")
        return T.Q4_K, blocks.tobytes()
    rewrite(src, out + ".part", q4k)
    if not converted:
        os.remove(out + ".part")
        sys.exit(f"q4k_gguf.py: no layer matrix of {src} has rows of whole 256-value super-blocks")
    os.replace(out + ".part", out)
    print(f"{len(converted)} matrices written as Q4_K{' (random blocks)' if rng is not None else ''}")


if __name__ == "__main__":
    main()
