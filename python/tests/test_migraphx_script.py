"""A script written against MIGraphX's documented Python API (parse_onnx -> compile -> run)
runs unchanged with `import mxc as migraphx`, but for the target's name."""

import numpy as np
import onnxruntime as ort


def test_migraphx_script(tiny_cnn):
    import mxc as migraphx

    model = migraphx.parse_onnx(str(tiny_cnn))
    model.compile(migraphx.get_target("cpu"))  # MIGraphX: migraphx.get_target("gpu")
    params = {}
    for name, shape in model.get_parameter_shapes().items():
        params[name] = migraphx.generate_argument(shape)
    result = np.array(model.run(params)[-1])

    feeds = {name: np.array(arg) for name, arg in params.items()}
    session = ort.InferenceSession(str(tiny_cnn), providers=["CPUExecutionProvider"])
    np.testing.assert_allclose(result, session.run(None, feeds)[0], rtol=1e-4, atol=1e-5)
