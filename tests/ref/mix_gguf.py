#!/usr/bin/env python3
"""A GGUF mixing tensor types, as llama.cpp's quantize writes them (some
matrices kept at higher precision), made from one of ours.

Usage: .venv/bin/python tests/ref/mix_gguf.py SRC OUT NAME...

Writes OUT as SRC with the named tensors dequantized by
gguf.quants.dequantize and stored as F16; the header and metadata are
SRC's bytes (GGUFWriter cannot write the empty arrays a tiny tokenizer
has), the other tensors keep their type and bytes, every tensor aligned to
general.alignment. (tests/bats/rollout_weights.bats: a Q8_0 GGUF with F16
matrices mixed in.)
"""
import struct
import sys

import numpy as np
import gguf
from gguf import GGMLQuantizationType, GGUFReader


def main():
    if len(sys.argv) < 4:
        sys.exit(__doc__)
    src, out, names = sys.argv[1], sys.argv[2], set(sys.argv[3:])
    r = GGUFReader(src)
    missing = names - {t.name for t in r.tensors}
    if missing:
        sys.exit(f"mix_gguf.py: no tensor {', '.join(sorted(missing))} in {src}")
    align = int(r.fields["general.alignment"].contents()) if "general.alignment" in r.fields else 32
    # the header and the metadata: everything up to the end of the last key/value
    kv_end = max(f.offset + sum(p.nbytes for p in f.parts) for f in r.fields.values())
    head = bytearray(r.data[:kv_end].tobytes())
    blobs, infos = [], bytearray()
    offset = 0
    for t in r.tensors:
        if t.name in names:
            ttype = GGMLQuantizationType.F16
            blob = gguf.quants.dequantize(t.data, t.tensor_type).astype(np.float16).tobytes()
        else:
            ttype, blob = t.tensor_type, t.data.tobytes()
        name = t.name.encode()
        infos += struct.pack("<Q", len(name)) + name + struct.pack("<I", len(t.shape))
        infos += b"".join(struct.pack("<Q", int(d)) for d in t.shape)
        infos += struct.pack("<IQ", int(ttype), offset)
        blobs.append(blob)
        offset += (len(blob) + align - 1) // align * align
    with open(out, "wb") as f:
        f.write(head + infos)
        f.write(b"\0" * (-f.tell() % align))
        for blob in blobs:
            f.write(blob + b"\0" * (-len(blob) % align))


if __name__ == "__main__":
    main()
