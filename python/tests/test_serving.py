"""The Ray Serve example (examples/serve/serve_mxr.py): Ray started here, a compiled model
deployed on two replicas, requests sent from several threads, every answer checked against
onnxruntime, and a bad request answered with mxc's message."""

import socket
import sys
from concurrent.futures import ThreadPoolExecutor

import numpy as np
import onnxruntime as ort
import pytest
import ray

import mxc

from conftest import ROOT

sys.path.insert(0, str(ROOT / "examples" / "serve"))
import serve_mxr  # noqa: E402


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="module")
def served(tiny_cnn, tmp_path_factory):
    path = tmp_path_factory.mktemp("serve") / "tiny.mxr"
    p = mxc.parse_onnx(str(tiny_cnn))
    p.compile(mxc.get_target("cpu"))
    mxc.save(p, str(path))
    port = free_port()
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False)
    try:
        serve_mxr.deploy(str(path), replicas=2, threads=1, port=port)
        yield f"http://127.0.0.1:{port}/mxr"
    finally:
        serve_mxr.serve.shutdown()
        ray.shutdown()


def test_requests_from_several_threads_match_onnxruntime(served, tiny_cnn):
    session = ort.InferenceSession(str(tiny_cnn), providers=["CPUExecutionProvider"])
    inputs = [np.random.default_rng(i).standard_normal((1, 3, 8, 8)).astype(np.float32) for i in range(16)]
    with ThreadPoolExecutor(max_workers=4) as pool:
        answers = list(pool.map(lambda x: serve_mxr.infer(served, {"image": x}), inputs))
    for x, (out,) in zip(inputs, answers):
        np.testing.assert_allclose(out, session.run(None, {"image": x})[0], rtol=1e-4, atol=1e-5)


def test_a_bad_request_gets_mxcs_message(served):
    with pytest.raises(RuntimeError, match="input `image`: expected tensor<1x3x8x8xf32>, got tensor<2x3x8x8xf32>"):
        serve_mxr.infer(served, {"image": np.zeros((2, 3, 8, 8), np.float32)})
