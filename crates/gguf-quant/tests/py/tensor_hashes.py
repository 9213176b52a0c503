"""SHA-256 of every tensor of a GGUF file dequantized to little-endian float32 by the Python
`gguf` package, as JSON {name: hex}; for tests/real_models.rs."""
import hashlib
import json
import sys

import numpy as np
import gguf

reader = gguf.GGUFReader(sys.argv[1])
out = {}
for t in reader.tensors:
    values = gguf.quants.dequantize(t.data, t.tensor_type).astype("<f4", copy=False)
    out[t.name] = hashlib.sha256(np.ascontiguousarray(values).tobytes()).hexdigest()
json.dump(out, sys.stdout)
