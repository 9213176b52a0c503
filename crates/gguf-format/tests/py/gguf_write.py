"""Write a GGUF file with the reference writer (gguf-py's GGUFWriter), for tests/python_reference.rs."""
import sys

import numpy as np
import gguf

path = sys.argv[1]
w = gguf.GGUFWriter(path, arch="llama")
w.add_custom_alignment(64)
w.add_name("written by gguf-py")
w.add_uint8("t.u8", 7)
w.add_int16("t.i16", -5)
w.add_uint32("t.u32", 123456)
w.add_int64("t.i64", -(2**40))
w.add_float32("t.f32", 0.1)
w.add_float64("t.f64", 2.5e-300)
w.add_bool("t.bool", False)
w.add_string("t.str", "caf\u00e9 \U0001F600")
w.add_array("t.strs", ["x", "yy", "\u00fc"])
w.add_array("t.ints", [1, -2, 3])
w.add_array("t.floats", [0.25, 1.5])
w.add_tensor("a", np.arange(12, dtype=np.float32).reshape(3, 4))
w.add_tensor("b", np.arange(5, dtype=np.float16))
w.add_tensor("c", np.array([[1, 2], [3, 4]], dtype=np.int32))
w.write_header_to_file()
w.write_kv_data_to_file()
w.write_tensors_to_file()
w.close()
