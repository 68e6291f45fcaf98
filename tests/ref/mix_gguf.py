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


def rewrite(src, out, convert):
    """Writes OUT as SRC with each tensor's type and bytes as convert(tensor)
    gives them ((type, bytes), or None to keep the tensor's): SRC's header
    and metadata bytes, the tensor infos with new offsets, every tensor
    aligned to general.alignment. Returns the reader of SRC."""
    r = GGUFReader(src)
    align = int(r.fields["general.alignment"].contents()) if "general.alignment" in r.fields else 32
    # the header and the metadata: everything up to the end of the last key/value
    kv_end = max(f.offset + sum(p.nbytes for p in f.parts) for f in r.fields.values())
    head = bytearray(r.data[:kv_end].tobytes())
    blobs, infos = [], bytearray()
    offset = 0
    for t in r.tensors:
        ttype, blob = convert(t) or (t.tensor_type, t.data.tobytes())
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
    return r


def main():
    if len(sys.argv) < 4:
        sys.exit(__doc__)
    src, out, names = sys.argv[1], sys.argv[2], set(sys.argv[3:])
    missing = names - {t.name for t in GGUFReader(src).tensors}
    if missing:
        sys.exit(f"mix_gguf.py: no tensor {', '.join(sorted(missing))} in {src}")

    def f16(t):
        if t.name not in names:
            return None
        return GGMLQuantizationType.F16, gguf.quants.dequantize(t.data, t.tensor_type).astype(np.float16).tobytes()
    rewrite(src, out, f16)


if __name__ == "__main__":
    main()
