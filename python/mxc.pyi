"""mxc: compile an ONNX model once, run it from numpy.

The API follows MIGraphX's Python API (``import mxc as migraphx`` runs scripts written for
it, with the target named ``"cpu"`` or ``"ref"``): ``parse_onnx`` -> ``program.compile`` ->
``program.run``; ``save`` and ``load`` read and write the ``.mxr`` files of the ``mxc``
command line. Every failure raises ``mxc.Error`` with the command line's message.
"""

from os import PathLike
from typing import Any, Dict, List, Mapping, Optional, Sequence, Set, Union

import numpy

__version__: str

_Path = Union[str, PathLike]
_Value = Union["argument", numpy.ndarray, Any]
_Dim = Union[int, str, "dynamic_dimension"]

class Error(RuntimeError):
    """A model, program or value mxc refuses, or a failure compiling or running."""

class dynamic_dimension:
    """A dimension: a size, a range with optimal sizes, or a symbolic expression."""

    def __init__(self, min: Union[int, str], max: Optional[int] = None, optimals: Optional[Sequence[int]] = None) -> None:
        """``dynamic_dimension(1, 8, {2, 4})`` or ``dynamic_dimension("n[1..8]{2, 4}")``."""
    def is_fixed(self) -> bool: ...
    def is_symbolic(self) -> bool:
        """Whether it is an expression of named symbols (not a size or a bare range)."""
    @property
    def min(self) -> int: ...
    @property
    def max(self) -> int: ...
    @property
    def optimals(self) -> Set[int]: ...
    @property
    def expression(self) -> Optional[str]:
        """The expression (``"n[1..8] * 3 + 1"``), or None for a size or a range."""

class shape:
    """A tensor's element type and dimensions (fixed, or symbolic in the ``dim`` notation)."""

    def __init__(
        self,
        type: Union[str, int, None] = None,
        lens: Optional[Sequence[int]] = None,
        strides: Optional[Sequence[int]] = None,
        dyn_dims: Optional[Sequence[_Dim]] = None,
        dyn_strides: Optional[Sequence[str]] = None,
    ) -> None:
        """``shape(type="float_type", lens=[1, 3])`` or ``shape(type="float_type", dyn_dims=["n[1..8]", "3"])``.
        ``dyn_strides`` is refused: symbolic shapes are packed row-major."""
    def type(self) -> int:
        """The element type's number (``type_string()`` names it)."""
    def type_string(self) -> str:
        """The element type's MIGraphX name: ``"float_type"``."""
    def lens(self) -> List[int]:
        """The sizes; raises for a dynamic shape (see ``min_lens``, ``max_lens``)."""
    def min_lens(self) -> List[int]: ...
    def max_lens(self) -> List[int]: ...
    def strides(self) -> List[int]: ...
    def elements(self) -> int: ...
    def bytes(self) -> int: ...
    def type_size(self) -> int: ...
    def ndim(self) -> int: ...
    def packed(self) -> bool: ...
    def transposed(self) -> bool: ...
    def broadcasted(self) -> bool: ...
    def standard(self) -> bool: ...
    def scalar(self) -> bool: ...
    def dynamic(self) -> bool: ...
    def symbolic(self) -> bool: ...
    def dyn_dims(self) -> List[dynamic_dimension]: ...
    def dyn_strides(self) -> List[str]: ...

class argument:
    """A tensor value. numpy arrays come in without a copy when C-contiguous; ``np.asarray(arg)``
    views an argument's bytes (read-only), ``np.array(arg)`` copies them."""

    def __init__(self, data: _Value) -> None: ...
    def get_shape(self) -> shape: ...
    def data_ptr(self) -> int: ...
    def tolist(self) -> List[Any]:
        """The elements in row-major order, flat (as MIGraphX gives them)."""
    @property
    def __array_interface__(self) -> Dict[str, Any]: ...

def generate_argument(s: shape, seed: int = 0) -> argument:
    """Seeded values: floats uniform in [-1, 1), integers and bools 0 or 1."""

def fill_argument(s: shape, value: float) -> argument: ...
def create_argument(s: shape, values: Sequence[float]) -> argument: ...
def argument_from_pointer(shape: shape, address: int) -> argument:
    """An argument over memory the caller keeps alive and unchanged while it is used."""

class target:
    def name(self) -> str: ...

def get_target(name: str) -> target:
    """``"ref"`` (the oracle), ``"cpu"`` or ``"gpu"``."""

class op:
    """An mx op with its attributes (``mxc.op(...)`` makes one)."""

    def name(self) -> str: ...

class instruction:
    """A value of a module."""

    def shape(self) -> shape: ...

class module:
    """A program's main graph, to build without ONNX."""

    def add_parameter(self, name: str, shape: shape) -> instruction: ...
    def add_literal(self, data: _Value) -> instruction: ...
    def add_instruction(self, op: op, args: Sequence[instruction], mod_args: Optional[Sequence[Any]] = None) -> instruction:
        """The op's result, typed by its rule; ``mod_args`` is refused (regions come from ONNX)."""
    def add_return(self, args: Sequence[instruction]) -> None: ...
    def print(self) -> None: ...

def op(name: str, **attrs: Any) -> op:
    """The mx op ``name`` (``"add"``, ``"matmul"``, ``"transpose"``, ...) with attributes:
    ints, floats, strings, lists, element types (``to="float_type"``) and arrays."""

class program:
    """A program to compile and run."""

    def __init__(self) -> None:
        """An empty program, to build with ``get_main_module()``."""
    def compile(
        self,
        t: target,
        offload_copy: bool = True,
        fast_math: bool = True,
        exhaustive_tune: bool = False,
        advance_backend_options: Optional[Mapping[str, Any]] = None,
        progress: bool = False,
    ) -> None:
        """Compiles for ``t`` (the GIL released). ``advance_backend_options``: ``rules`` (rule
        files), ``fusion``, ``library_calls``, ``kernel_cache``, ``opt_level`` (0-2),
        ``gpu_arch``, ``half_as_f32`` (f16 and bf16 values computed in f32); anything else is
        refused, as are ``offload_copy=False``, ``fast_math=False`` and ``exhaustive_tune=True``."""
    def run(self, params: Mapping[str, _Value]) -> List[argument]:
        """The outputs in order, for inputs by name (the GIL released while it runs)."""
    def set_threads(self, threads: int) -> None:
        """Threads that run the kernels (default: every core)."""
    def get_parameter_names(self) -> List[str]: ...
    def get_parameter_shapes(self) -> Dict[str, shape]: ...
    def get_output_shapes(self) -> List[shape]: ...
    def print(self) -> None: ...
    def clone(self) -> "program": ...
    def sort(self) -> None:
        """Checks the instructions are in an order that runs (mxc keeps every graph so)."""
    def get_main_module(self) -> module: ...

def parse_onnx(
    filename: _Path,
    default_dim_value: Optional[int] = 1,
    map_input_dims: Optional[Mapping[str, Sequence[int]]] = None,
    default_dyn_dim_value: Optional[_Dim] = None,
    map_dyn_input_dims: Optional[Mapping[str, Sequence[_Dim]]] = None,
    skip_unknown_operators: bool = False,
    print_program_on_error: bool = False,
    max_loop_iterations: int = 10,
    limit_max_iterations: int = 65535,
) -> program:
    """Imports an ONNX model. Open dimensions take ``default_dyn_dim_value`` when given, else
    ``default_dim_value`` (None keeps mxc's symbols in [1..4096]); inputs with symbolic
    dimensions compile one program per optimal size (docs/shapes.md)."""

def save(p: program, filename: _Path, format: str = "mxr") -> None:
    """Writes a compiled program as an ``.mxr`` file (``format="msgpack"`` names it too)."""

def load(filename: _Path, format: str = "mxr", trust: Optional[Sequence[_Path]] = None) -> program:
    """Reads an ``.mxr`` file; with ``trust`` (public key files, else ``$MXC_TRUSTED_KEYS``) only
    one signed by one of them."""

def quantize_fp16(prog: program, ins_names: Sequence[str] = ["all"]) -> None:
    """Makes the ops ``ins_names`` names (mx's op names, or ``"dot"``, ``"convolution"``,
    ``"all"``) of ``prog``, not compiled yet, compute in f16: each rounds its result, sums run
    in f32, the inputs and outputs keep their types. ``print()`` shows the ops in f16 now;
    ``compile`` applies it, and the saved file records it (``mxc params``). Replaces an earlier
    ``quantize_fp16`` or ``quantize_bf16``; an unknown name or a compiled program is refused
    with ``mxc.Error`` (docs/quantisation.md)."""

def quantize_bf16(prog: program, ins_names: Sequence[str] = ["all"]) -> None:
    """As ``quantize_fp16``, in bf16."""

def quantize_int8(
    prog: program,
    t: target,
    calibration: Sequence[Mapping[str, _Value]] = [],
    ins_names: Sequence[str] = ["dot", "convolution"],
) -> None:
    """Makes the convolutions and products ``ins_names`` names (``"dot"``, ``"convolution"``,
    or mx's ``"conv"``, ``"matmul"``, ``"gemm"``) of ``prog``, not compiled yet, compute on
    int8: ``prog`` runs on target ``t`` (cpu or ref) on each ``calibration`` sample (a dict of
    inputs by name, as ``run`` takes), and each op's activation range sets its u8 scale and zero
    point; weights become s8 per output channel. Ops with no integer kernel (depthwise
    convolutions, products of two activations) stay f32. No samples, an unknown name or input,
    or a compiled program is refused with ``mxc.Error`` (docs/quantisation.md)."""

def autocast_fp8(prog: program) -> None:
    """Makes ``prog``, not compiled yet, take and give f32 where its inputs and outputs are
    8-bit floats (f8e4m3fn, f8e4m3fnuz, f8e5m2, f8e5m2fnuz), converted to and from them inside:
    an input is rounded to its fp8 type as a cast rounds."""

def explain(p: program, target: Optional[target] = None) -> Dict[str, Any]:
    """Why each kernel of ``p`` (not compiled yet) is what ``target`` (default cpu) makes it,
    as data: ``graph``, ``target``, ``kernels``/``bytes``/``cost`` as (before, after),
    ``rewriting`` and ``kernel_list`` (each kernel's ``op``, ``ops``, ``on_host``, ``cost``,
    ``bytes``, ``flops``, ``origin``, ``rules``, ``replaces``, ``rejected``, ``algorithms``,
    ``library``) -- what ``mxc explain`` prints."""
