"""Building a program without ONNX: parameters, literals, mx instructions and a return."""

import numpy as np
import pytest

import mxc


def test_build_compile_and_run():
    p = mxc.program()
    m = p.get_main_module()
    x = m.add_parameter("x", mxc.shape(type="float_type", lens=[2, 3]))
    w = m.add_literal(np.arange(12, dtype=np.float32).reshape(3, 4))
    y = m.add_instruction(mxc.op("matmul"), [x, w])
    z = m.add_instruction(mxc.op("relu"), [y])
    t = m.add_instruction(mxc.op("transpose", perm=[1, 0]), [z])
    assert t.shape().lens() == [4, 2]
    m.add_return([t])
    assert "mx.transpose" in str(p)
    p.compile(mxc.get_target("cpu"))
    data = np.array([[1, -2, 3], [-4, 5, -6]], dtype=np.float32)
    (out,) = p.run({"x": data})
    expected = np.maximum(data @ np.arange(12, dtype=np.float32).reshape(3, 4), 0).T
    np.testing.assert_allclose(np.asarray(out), expected)


def test_wrong_instructions_are_refused_where_added():
    p = mxc.program()
    m = p.get_main_module()
    a = m.add_parameter("a", mxc.shape(type="float_type", lens=[2, 3]))
    b = m.add_parameter("b", mxc.shape(type="float_type", lens=[4, 5]))
    with pytest.raises(mxc.Error, match=r"add_instruction\(mx.matmul\)"):
        m.add_instruction(mxc.op("matmul"), [a, b])
    with pytest.raises(mxc.Error, match="mx has no such op"):
        mxc.op("frobnicate")
    with pytest.raises(mxc.Error, match="no attribute `axes`"):
        mxc.op("relu", axes=[0])
    other = mxc.program().get_main_module()
    c = other.add_parameter("c", mxc.shape(type="float_type", lens=[2, 3]))
    with pytest.raises(mxc.Error, match="instruction of another program"):
        m.add_instruction(mxc.op("add"), [a, c])
