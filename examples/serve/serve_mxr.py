"""Serves a compiled mxc program (.mxr) with Ray Serve: a deployment whose replicas each hold
the loaded program, taking numpy arrays in and giving numpy arrays back over HTTP (an .npz
body each way).

    python examples/serve/serve_mxr.py model.mxr --replicas 2 --port 8000
    # then, from any client:
    from serve_mxr import infer
    outputs = infer("http://127.0.0.1:8000/mxr", {"image": x})

Each replica runs one request at a time on `threads` threads; more replicas (on more
machines, docs/serving.md) serve more requests at once.
"""

import argparse
import io
import time
import urllib.request

import numpy as np
from ray import serve
from starlette.requests import Request
from starlette.responses import Response


@serve.deployment(max_ongoing_requests=1, ray_actor_options={"num_cpus": 0.5})
class MxrModel:
    """One replica: the program loaded once, run for each request."""

    def __init__(self, path: str, threads: int = 1):
        import mxc

        self.program = mxc.load(path)
        self.program.set_threads(threads)

    async def __call__(self, request: Request) -> Response:
        return self.run_npz(await request.body())

    def run_npz(self, body: bytes) -> Response:
        import mxc

        with np.load(io.BytesIO(body)) as npz:
            feeds = {name: npz[name] for name in npz.files}
        try:
            outputs = self.program.run(feeds)
        except mxc.Error as e:
            return Response(str(e).encode(), status_code=400, media_type="text/plain")
        out = io.BytesIO()
        np.savez(out, *[np.asarray(o) for o in outputs])
        return Response(out.getvalue(), media_type="application/octet-stream")


def deploy(path: str, replicas: int = 2, threads: int = 1, route: str = "/mxr", port: int = 8000):
    """Starts Serve's HTTP proxy on `port` (Ray must be initialised) and deploys `path` on
    `replicas` replicas at `route`; returns the deployment's handle."""
    serve.start(http_options={"host": "127.0.0.1", "port": port})
    app = MxrModel.options(num_replicas=replicas).bind(path, threads)
    return serve.run(app, name="mxr", route_prefix=route)


def infer(url: str, feeds: dict, timeout: float = 60.0) -> list:
    """Sends `feeds` (name -> numpy array) to the deployment at `url`; the outputs in order.
    A request the program refuses raises RuntimeError with mxc's message."""
    body = io.BytesIO()
    np.savez(body, **feeds)
    request = urllib.request.Request(url, data=body.getvalue(), method="POST")
    try:
        with urllib.request.urlopen(request, timeout=timeout) as response:
            data = response.read()
    except urllib.error.HTTPError as e:
        raise RuntimeError(e.read().decode()) from None
    with np.load(io.BytesIO(data)) as npz:
        return [npz[f"arr_{i}"] for i in range(len(npz.files))]


def main():
    import ray

    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("mxr")
    parser.add_argument("--replicas", type=int, default=2)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--port", type=int, default=8000)
    parser.add_argument("--address", default=None, help="a Ray cluster to join (default: start one here)")
    args = parser.parse_args()
    ray.init(address=args.address)
    deploy(args.mxr, args.replicas, args.threads, port=args.port)
    print(f"serving {args.mxr} at http://127.0.0.1:{args.port}/mxr; Ctrl-C stops")
    try:
        while True:
            time.sleep(3600)
    except KeyboardInterrupt:
        serve.shutdown()


if __name__ == "__main__":
    main()
