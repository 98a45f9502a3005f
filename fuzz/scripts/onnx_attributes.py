"""Writes fuzz_targets/onnx_graph/attributes.rs: each ONNX operator's attributes (every
version's, by name) and their types, from the onnx package's operator schemas, for the
structure-aware fuzz target. Run from fuzz/: ../.cache/venv/bin/python scripts/onnx_attributes.py
"""
import collections
import pathlib

from onnx import defs

KINDS = {
    "INT": "Int", "INTS": "Ints", "FLOAT": "Float", "FLOATS": "Floats", "STRING": "Str",
    "STRINGS": "Strs", "TENSOR": "Tensor", "GRAPH": "Graph",
}

by_op = collections.defaultdict(dict)
for schema in defs.get_all_schemas_with_history():
    for name, attr in schema.attributes.items():
        kind = KINDS.get(str(attr.type).split(".")[-1])
        if kind:
            by_op[(schema.domain, schema.name)][name] = kind

lines = [
    "//! Each ONNX operator's attributes and their kinds (every version's, by name), written by",
    "//! `fuzz/scripts/onnx_attributes.py` from the onnx package's operator schemas. Do not edit.",
    "",
    "use super::AttrKind::{self, *};",
    "",
    "/// (domain, op type, [(attribute, kind)]), sorted by domain and op type.",
    "#[rustfmt::skip]",
    "pub const ATTRIBUTES: &[(&str, &str, &[(&str, AttrKind)])] = &[",
]
for (domain, op), attrs in sorted(by_op.items()):
    body = ", ".join(f'("{n}", {k})' for n, k in sorted(attrs.items()))
    lines.append(f'    ("{domain}", "{op}", &[{body}]),')
lines.append("];")
out = pathlib.Path(__file__).resolve().parent.parent / "fuzz_targets/onnx_graph/attributes.rs"
out.write_text("\n".join(lines) + "\n")
print(f"{out}: {len(by_op)} operators")
