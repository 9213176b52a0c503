"""Dump a GGUF file's metadata and tensor table as JSON using the reference reader (gguf-py).

Used by tests/python_reference.rs to compare our parser with `gguf.GGUFReader`. Values of
nested arrays come out flattened (gguf-py's `contents()` flattens them).
"""
import json
import sys

import gguf

NAMES = {
    "UINT8": "u8", "INT8": "i8", "UINT16": "u16", "INT16": "i16", "UINT32": "u32",
    "INT32": "i32", "FLOAT32": "f32", "BOOL": "bool", "STRING": "string", "ARRAY": "array",
    "UINT64": "u64", "INT64": "i64", "FLOAT64": "f64",
}


def main(path: str) -> None:
    reader = gguf.GGUFReader(path)
    metadata = []
    for field in reader.fields.values():
        if field.name.startswith("GGUF."):
            continue  # the reader's pseudo-fields for the header
        metadata.append({
            "key": field.name,
            "types": [NAMES[t.name] for t in field.types],
            "value": field.contents(),
        })
    tensors = [
        {
            "name": t.name,
            "type": t.tensor_type.name,
            "shape": [int(d) for d in t.shape],
            "offset": int(t.data_offset) - int(reader.data_offset),
            "size": int(t.n_bytes),
        }
        for t in reader.tensors
    ]
    json.dump({
        "byte_order": "big" if reader.byte_order == "S" and sys.byteorder == "little" else "little",
        "alignment": int(reader.alignment),
        "data_offset": int(reader.data_offset),
        "metadata": metadata,
        "tensors": tensors,
    }, sys.stdout)


if __name__ == "__main__":
    main(sys.argv[1])
