"""Which cases of the ONNX backend model sets (simple, pytorch-converted, pytorch-operator)
onnxruntime passes, with the node suite's tolerances (rtol 1e-3, atol 1e-7).

    .cache/venv/bin/python scripts/ort_backend_sets.py [.cache/onnx-backend-tests]

Prints `PASS set/case`, `FAIL set/case` or `ERROR set/case: why` per case and a count per set.
mxc's own list, tests/model_sets_expected_pass.txt, must hold every case this passes
(the `onnx_model_sets` test in tests/suite/node_suite.rs runs them).
"""

import glob
import os
import sys

import numpy as np
import onnx
import onnxruntime as ort
from onnx import numpy_helper

SETS = ["simple", "pytorch-converted", "pytorch-operator"]


def numbered(folder, prefix):
    files = glob.glob(os.path.join(folder, f"{prefix}_*.pb"))
    return sorted(files, key=lambda p: int(p.rsplit("_", 1)[1][:-3]))


def passes(model, case_dir):
    options = ort.SessionOptions()
    options.log_severity_level = 3
    session = ort.InferenceSession(model, options, providers=["CPUExecutionProvider"])
    names = [i.name for i in session.get_inputs()]
    for data in sorted(glob.glob(os.path.join(case_dir, "test_data_set_*"))):
        feed = {n: numpy_helper.to_array(onnx.load_tensor(p)) for n, p in zip(names, numbered(data, "input"))}
        for got, want in zip(session.run(None, feed), numbered(data, "output")):
            want = numpy_helper.to_array(onnx.load_tensor(want))
            if want.dtype == object:  # strings: equal element by element
                if got.shape != want.shape or not all(str(a) == str(b) for a, b in zip(got.flat, want.flat)):
                    return False
            elif not np.allclose(got.astype(np.float64), want.astype(np.float64), rtol=1e-3, atol=1e-7, equal_nan=True):
                return False
    return True


def main():
    root = sys.argv[1] if len(sys.argv) > 1 else ".cache/onnx-backend-tests"
    for s in SETS:
        passed = 0
        cases = sorted(glob.glob(os.path.join(root, s, "*", "model.onnx")))
        for model in cases:
            case_dir = os.path.dirname(model)
            name = f"{s}/{os.path.basename(case_dir)}"
            try:
                ok = passes(model, case_dir)
            except Exception as e:  # onnxruntime refuses the model or its data
                print(f"ERROR {name}: {str(e).splitlines()[0][:120]}")
                continue
            passed += ok
            print(f"{'PASS' if ok else 'FAIL'} {name}")
        print(f"{s}: onnxruntime passes {passed} of {len(cases)}")


if __name__ == "__main__":
    main()
