"""Reference (de)quantization with the Python `gguf` package, for tests/reference.rs.

usage: quants.py dequantize TYPE IN OUT   (IN: raw blocks, OUT: float32)
       quants.py quantize   TYPE IN OUT   (IN: float32, OUT: raw blocks)
"""
import sys

import numpy as np
import gguf

mode, type_name, src, dst = sys.argv[1:5]
qtype = gguf.GGMLQuantizationType[type_name]
block_size, type_size = gguf.GGML_QUANT_SIZES[qtype]
if mode == "dequantize":
    data = np.fromfile(src, dtype=np.uint8)
    if block_size == 1:
        data = data.reshape(-1, type_size)
    else:
        data = data.reshape(-1, type_size)
    out = gguf.quants.dequantize(data, qtype).astype(np.float32, copy=False)
    out.tofile(dst)
else:
    data = np.fromfile(src, dtype=np.float32).reshape(-1, block_size)
    out = gguf.quants.quantize(data, qtype)
    np.ascontiguousarray(out).view(np.uint8).tofile(dst)
