"""shape, dynamic_dimension and argument: their queries, numpy in and out without copies,
and the argument makers."""

import numpy as np
import pytest

import mxc


def test_shape_queries():
    s = mxc.shape(type="float_type", lens=[2, 3])
    assert (s.lens(), s.strides(), s.elements(), s.bytes(), s.type_size(), s.ndim()) == ([2, 3], [3, 1], 6, 24, 4, 2)
    assert s.standard() and s.packed() and not s.transposed() and not s.broadcasted() and not s.dynamic()
    t = mxc.shape(type="float_type", lens=[2, 3], strides=[1, 2])
    assert t.packed() and t.transposed() and not t.standard()
    b = mxc.shape(type="int64_type", lens=[4, 3], strides=[0, 1])
    assert b.broadcasted() and not b.packed()
    assert mxc.shape(type="float_type", lens=[3], strides=[0]).scalar()
    assert mxc.shape(type="f16", lens=[1]).type_string() == "half_type"
    # type() numbers the types; a shape made from the number has the same type
    for name in ("float_type", "int64_type", "bool_type", "bf16_type"):
        number = mxc.shape(type=name, lens=[1]).type()
        assert mxc.shape(type=number, lens=[1]).type_string() == name
    with pytest.raises(mxc.Error, match="not an element type"):
        mxc.shape(type="complex_type", lens=[1])


def test_symbolic_shapes_and_dynamic_dimensions():
    s = mxc.shape(type="float_type", dyn_dims=["n[1..8]{2, 4}", "3"])
    assert s.dynamic() and s.symbolic() and s.ndim() == 2
    assert s.dyn_strides() == ["3", "1"]
    assert [str(d) for d in s.dyn_dims()] == ["n[1..8]{2, 4}", "3"]
    with pytest.raises(mxc.Error, match="is dynamic"):
        s.lens()
    d = mxc.dynamic_dimension(1, 8, [2, 4])
    assert (d.min, d.max, d.optimals, d.is_fixed(), d.is_symbolic(), d.expression) == (1, 8, {2, 4}, False, False, None)
    e = mxc.dynamic_dimension("n[1..8] * 3 + 1")
    assert (e.min, e.max, e.is_symbolic(), e.expression) == (4, 25, True, "n[1..8] * 3 + 1")
    assert mxc.dynamic_dimension(3, 3).is_fixed()
    with pytest.raises(mxc.Error, match=r"the optimal size 9 is outside \[1..8\]"):
        mxc.dynamic_dimension(1, 8, [9])


def test_numpy_in_and_out_without_copies():
    x = np.arange(12, dtype=np.float32).reshape(3, 4)
    a = mxc.argument(x)
    assert a.data_ptr() == x.ctypes.data
    assert a.get_shape().lens() == [3, 4]
    view = np.asarray(a)
    assert np.shares_memory(view, x)
    np.testing.assert_array_equal(np.array(a), x)
    assert a.tolist() == list(range(12))
    strided = mxc.argument(x[:, ::2])
    np.testing.assert_array_equal(np.asarray(strided), x[:, ::2])
    assert mxc.argument(np.array([True, False])).tolist() == [True, False]
    with pytest.raises(mxc.Error, match="no mxc element type"):
        mxc.argument(np.array([1 + 2j]))


def test_argument_makers():
    s = mxc.shape(type="int32_type", lens=[2, 2])
    assert mxc.fill_argument(s, 7).tolist() == [7, 7, 7, 7]
    assert mxc.create_argument(s, [1, 2, 3, 4]).tolist() == [1, 2, 3, 4]
    g = mxc.generate_argument(mxc.shape(type="float_type", lens=[100]), seed=5)
    values = np.asarray(g)
    assert values.min() >= -1 and values.max() < 1 and len(set(values.tolist())) > 50
    assert g == mxc.generate_argument(mxc.shape(type="float_type", lens=[100]), seed=5)
    assert g != mxc.generate_argument(mxc.shape(type="float_type", lens=[100]), seed=6)
    x = np.arange(6, dtype=np.float64)
    p = mxc.argument_from_pointer(mxc.shape(type="double_type", lens=[6]), x.ctypes.data)
    assert p.tolist() == x.tolist()
    with pytest.raises(mxc.Error, match="4 values for the 2 elements"):
        mxc.create_argument(mxc.shape(type="float_type", lens=[2]), [1, 2, 3, 4])
