#!/usr/bin/env python3
"""Independent reference for lib/ops/packed_q4k's values, through the unit
test's driver (build/tests/test_packed_q4k): random GGUF Q4_K blocks (every
scale and code byte, finite f16 d and dmin of many magnitudes, signed zero)
packed and unpacked by ours equal gguf-py's numpy Q4_K.dequantize_blocks
(the pinned llama.cpp's copy) bit for bit.

  q4k_ref.py --bin build/tests/test_packed_q4k --llama build/llama.cpp/src

Exact comparison. TAP on stdout.
"""
import argparse
import os
import subprocess
import sys
import tempfile

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from tap import done, tap  # noqa: E402

N, K = 45, 1024  # rows of W (past two 16-column panels), 4 super-blocks a row


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--bin", required=True)
    ap.add_argument("--llama", required=True, help="llama.cpp's source (gguf-py/)")
    args = ap.parse_args()
    sys.path.insert(0, os.path.join(args.llama, "gguf-py"))
    from gguf import GGMLQuantizationType
    from gguf.quants import dequantize

    rng = np.random.default_rng(36)
    nb = N * (K // 256)
    raw = rng.integers(0, 256, (nb, 144), dtype=np.uint8)
    halves = (rng.standard_normal((nb, 2)) * 2.0 ** rng.integers(-14, 6, (nb, 2))).astype(np.float16)
    halves[::7, 1] = np.float16(-0.0)
    halves[3::11, 0] = np.float16(6.1e-5)  # near f16's smallest normal
    halves[5::13, 0] = np.float16(3e-7)  # f16 subnormal
    raw[:, 0:4] = halves.view(np.uint8).reshape(nb, 4)
    assert np.isfinite(halves.astype(np.float32)).all()
    with tempfile.TemporaryDirectory() as tmp:
        blocks, out = os.path.join(tmp, "q.bin"), os.path.join(tmp, "q.f32")
        raw.tofile(blocks)
        subprocess.run([args.bin, "--gguf", blocks, str(N), str(K), out], check=True)
        ours = np.fromfile(out, dtype=np.float32, count=N * K)
        ref = dequantize(raw.reshape(N, -1), GGMLQuantizationType.Q4_K).reshape(-1).astype(np.float32)
        bad = np.flatnonzero(ours.view(np.uint32) != ref.view(np.uint32))
        why = None if not len(bad) else f"{len(bad)} differ; first at {bad[0]}: ours {ours[bad[0]]!r}, gguf-py {ref[bad[0]]!r}"
        tap(ours.shape == ref.shape and not len(bad),
            f"random Q4_K blocks ({N} x {K}) unpack to gguf-py's dequantize_blocks bit for bit", why)
    done()


if __name__ == "__main__":
    main()
