#!/usr/bin/env python3
"""A GGUF rewritten with some metadata or tensors changed, for the tests of
malformed and unsupported files (tests/bats/oss_gguf.bats).

Usage: .venv/bin/python tests/ref/edit_gguf.py LLAMA_SRC SRC OUT CODE

Runs the Python CODE with
  kv: key -> [value, GGUFValueType, element type or None] (general.architecture
      and GGUF.* left out: the writer makes them)
  t:  tensor name -> [numpy data as GGUFReader gives it (a quantized tensor:
      its bytes, uint8 rows), GGMLQuantizationType]
  np, GT (GGUFValueType), QT (GGMLQuantizationType)
then writes OUT with GGUFWriter: the same keys in order, then the tensors
(an entry deleted from kv or t is left out, one added is written). The
gguf-py is LLAMA_SRC's (build/llama.cpp/src/gguf-py: the test venv's
release has no MXFP4); every array must have an element (gguf-py writes no
empty array).
"""
import os
import sys

import numpy as np


def main(argv):
    if len(argv) != 5:
        print(__doc__)
        return 64
    src_dir, src, out, code = argv[1:]
    sys.path.insert(0, os.path.join(src_dir, "gguf-py"))
    from gguf import GGMLQuantizationType as QT
    from gguf import GGUFReader, GGUFValueType as GT, GGUFWriter
    r = GGUFReader(src)
    arch = r.fields["general.architecture"].contents()
    kv = {}
    for k, f in r.fields.items():
        if k.startswith("GGUF.") or k == "general.architecture":
            continue
        kv[k] = [f.contents(), f.types[0], f.types[-1] if f.types[0] == GT.ARRAY else None]
    t = {x.name: [np.array(x.data), x.tensor_type] for x in r.tensors}
    exec(code, {"kv": kv, "t": t, "np": np, "GT": GT, "QT": QT})
    w = GGUFWriter(out, arch)
    for k, (value, vtype, sub) in kv.items():
        w.add_key_value(k, value, vtype, sub_type=sub)
    for name, (data, ttype) in t.items():
        if ttype in (QT.F32, QT.F16):
            w.add_tensor(name, data)
        else:
            w.add_tensor(name, data, raw_dtype=ttype)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
