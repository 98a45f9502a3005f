"""Exports two convolutional detectors to ONNX with a fixed batch of 1 and a symbolic image size:
the input `images` is float32 [1, 3, height, width] (dim_params `height` and `width`; any
multiple of 32 works). Both come from torch's TorchScript exporter (dynamo=False, dynamic_axes,
opset 17) with random weights (torch.manual_seed(0)) in eval mode, every BatchNorm given random
running statistics and affine parameters (seeded) so that none is the identity:
- yolo_detector/model.onnx: YOLOv8n, the real network of the `ultralytics` package, built from
  its yolov8n.yaml (no download, no pretrained weights) and prepared as ultralytics' own ONNX
  export prepares it (Conv+BN fused, C2f with split, the Detect head in export mode with dynamic
  anchors, decode included); output `output0` [1, 84, anchors], anchors = sum over the strides
  8, 16, 32 of (height/s)*(width/s), rows 4 xywh box (pixels) + 80 class scores (sigmoid);
- text_detector/model.onnx: DBNet (Liao et al., "Real-time Scene Text Detection with
  Differentiable Binarization") with a torchvision resnet18 backbone (strides 4, 8, 16, 32), the
  paper's FPN neck (256-channel laterals, nearest x2 top-down adds, 64-channel 3x3 smoothing,
  every level brought to stride 4 and concatenated) and its probability head (conv-BN-ReLU,
  two 2x2 stride-2 transposed convs, sigmoid); output `probability` [1, 1, height, width].
Each model is checked with onnxruntime at 320x320 and 480x640 (shapes, finite, not constant,
close to PyTorch) and a summary (ops per type, output shapes) is printed. Nothing but
model.onnx is written.
Run it with the benchmark models' venv (~/.cache/mxc-bench-venv, made by make.sh):
    ~/.cache/mxc-bench-venv/bin/pip install ultralytics
    ~/.cache/mxc-bench-venv/bin/python bench/export_detectors.py ~/.cache/mxc-bench-models
"""
import argparse
import os
from collections import Counter
from pathlib import Path

import numpy as np
import onnx
import onnxruntime as ort
import torch
from torch import nn
from torchvision.models import resnet18

# ultralytics probes the network when imported unless told it is offline
os.environ.setdefault("YOLO_OFFLINE", "1")
os.environ.setdefault("YOLO_VERBOSE", "False")

OPSET = 17
CHECK_SIZES = [(320, 320), (480, 640)]  # (height, width)
TRACE_SIZE = (640, 640)
YOLO_STRIDES = (8, 16, 32)


def randomise_batchnorms(model: nn.Module, seed: int) -> None:
    """Gives every BatchNorm seeded, non-trivial statistics and affine terms, kept near the
    identity's scale so that the deep networks neither vanish nor blow up."""
    g = torch.Generator().manual_seed(seed)
    for m in model.modules():
        if isinstance(m, nn.modules.batchnorm._BatchNorm):
            n = m.num_features
            m.running_mean.copy_(0.2 * torch.randn(n, generator=g))
            m.running_var.copy_(0.5 + torch.rand(n, generator=g))
            m.weight.data.copy_(0.5 + 0.5 * torch.rand(n, generator=g))
            m.bias.data.copy_(0.1 * torch.randn(n, generator=g))


# ---------------------------------------------------------------- YOLOv8n (ultralytics)

def yolo_detector() -> nn.Module:
    """YOLOv8n from ultralytics' yaml, made ready for export the way its Exporter does it."""
    from ultralytics.nn.modules import C2f, Detect
    from ultralytics.nn.tasks import DetectionModel

    torch.manual_seed(0)
    model = DetectionModel("yolov8n.yaml", nc=80, verbose=False)
    with torch.no_grad():
        randomise_batchnorms(model, 0)
    for p in model.parameters():
        p.requires_grad = False
    model = model.eval().float().fuse(verbose=False)
    for m in model.modules():
        if isinstance(m, Detect):
            # the flags ultralytics.engine.exporter sets for `format="onnx", dynamic=True`:
            # anchors rebuilt from the feature maps' shapes on each call, raw (not end-to-end)
            # predictions with xywh boxes, no cached shape from an earlier call
            m.dynamic = True
            m.export = True
            m.format = "onnx"
            m.max_det = 300
            m.agnostic_nms = False
            m.xyxy = False
            m.shape = None
        elif isinstance(m, C2f):
            m.forward = m.forward_split
    return model


def yolo_anchors(h: int, w: int) -> int:
    return sum((h // s) * (w // s) for s in YOLO_STRIDES)


# ---------------------------------------------------------------- DBNet (resnet18 + FPN)

class ResNetFeatures(nn.Module):
    """torchvision's resnet18 without its classifier, returning the outputs of its four stages
    (64, 128, 256, 512 channels at strides 4, 8, 16, 32)."""

    def __init__(self):
        super().__init__()
        r = resnet18(weights=None)
        self.stem = nn.Sequential(r.conv1, r.bn1, r.relu, r.maxpool)
        self.stages = nn.ModuleList([r.layer1, r.layer2, r.layer3, r.layer4])

    def forward(self, x):
        x = self.stem(x)
        feats = []
        for stage in self.stages:
            x = stage(x)
            feats.append(x)
        return feats


class DBNeck(nn.Module):
    """DBNet's FPN: 1x1 laterals to 256 channels, a nearest x2 top-down pathway with adds, 3x3
    smoothing to 64 channels per level, then each level upsampled (nearest) to stride 4 and the
    four concatenated (deepest first, as in the paper's code) into 256 channels."""

    def __init__(self, in_channels=(64, 128, 256, 512), inner=256):
        super().__init__()
        out = inner // 4
        self.laterals = nn.ModuleList(nn.Conv2d(c, inner, 1, bias=False) for c in in_channels)
        self.smooth = nn.ModuleList(nn.Conv2d(inner, out, 3, padding=1, bias=False) for _ in in_channels)
        self.up2 = nn.Upsample(scale_factor=2, mode="nearest")
        # level i (stride 4 * 2**i) needs a factor 2**i to reach stride 4
        self.to_stride4 = nn.ModuleList(
            nn.Upsample(scale_factor=2 ** i, mode="nearest") if i else nn.Identity()
            for i in range(len(in_channels)))

    def forward(self, feats):
        lat = [conv(f) for conv, f in zip(self.laterals, feats)]
        # top-down: from the coarsest level, add each upsampled sum into the next finer lateral
        for i in range(len(lat) - 2, -1, -1):
            lat[i] = lat[i] + self.up2(lat[i + 1])
        levels = [up(conv(p)) for conv, up, p in zip(self.smooth, self.to_stride4, lat)]
        return torch.cat(levels[::-1], 1)


class DBHead(nn.Module):
    """DB's probability branch: 3x3 conv-BN-ReLU to 64, 2x2 stride-2 transposed conv-BN-ReLU,
    2x2 stride-2 transposed conv to one channel, sigmoid: back to the input resolution."""

    def __init__(self, c=256):
        super().__init__()
        mid = c // 4
        self.body = nn.Sequential(
            nn.Conv2d(c, mid, 3, padding=1, bias=False), nn.BatchNorm2d(mid), nn.ReLU(inplace=True),
            nn.ConvTranspose2d(mid, mid, 2, 2), nn.BatchNorm2d(mid), nn.ReLU(inplace=True),
            nn.ConvTranspose2d(mid, 1, 2, 2), nn.Sigmoid())

    def forward(self, x):
        return self.body(x)


class DBNet(nn.Module):
    def __init__(self):
        super().__init__()
        self.backbone = ResNetFeatures()
        self.neck = DBNeck()
        self.head = DBHead()

    def forward(self, images):
        return self.head(self.neck(self.backbone(images)))


def text_detector() -> nn.Module:
    torch.manual_seed(0)
    model = DBNet()
    with torch.no_grad():
        randomise_batchnorms(model, 0)
    return model.eval()


# ---------------------------------------------------------------- export and checks

def export(model: nn.Module, path: Path, output: str, output_axes: dict) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    example = torch.rand(1, 3, *TRACE_SIZE, generator=torch.Generator().manual_seed(1))
    with torch.no_grad():
        torch.onnx.export(model, (example,), str(path), dynamo=False, do_constant_folding=True,
                          opset_version=OPSET, input_names=["images"], output_names=[output],
                          dynamic_axes={"images": {2: "height", 3: "width"}, output: output_axes})
    pin_output_dims(path)


def pin_output_dims(path: Path) -> None:
    """Replaces the names the exporter makes up for output dims it could not follow (the YOLO
    head's batch and channel dims come out as `Concatoutput0_dim_0`, `..._1`) by the sizes ONNX
    shape inference derives for them, so that only `height`, `width` and `anchors` stay symbolic."""
    proto = onnx.load(str(path))
    inferred = {o.name: o for o in onnx.shape_inference.infer_shapes(proto, data_prop=True).graph.output}
    changed = False
    for out in proto.graph.output:
        for d, i in zip(out.type.tensor_type.shape.dim, inferred[out.name].type.tensor_type.shape.dim):
            if i.HasField("dim_value") and not d.HasField("dim_value"):
                d.dim_value = i.dim_value
                changed = True
    if changed:
        onnx.save(proto, str(path))


def dims(value_info) -> list:
    return [d.dim_param or d.dim_value for d in value_info.type.tensor_type.shape.dim]


def check(model: nn.Module, path: Path, expected_shape, threads: int) -> None:
    """Loads the ONNX file in onnxruntime, runs it at every CHECK_SIZES, compares with PyTorch
    and prints the op counts and output shapes."""
    proto = onnx.load(str(path))
    onnx.checker.check_model(proto)
    assert dims(proto.graph.input[0]) == [1, 3, "height", "width"], dims(proto.graph.input[0])
    ops = Counter(n.op_type for n in proto.graph.node)
    print(f"{path.parent.name}: {os.path.getsize(path) / 1e6:.1f} MB, {len(proto.graph.node)} nodes, "
          f"input {dims(proto.graph.input[0])}, output {dims(proto.graph.output[0])}")
    print("  ops: " + ", ".join(f"{op} {n}" for op, n in sorted(ops.items(), key=lambda kv: (-kv[1], kv[0]))))

    opts = ort.SessionOptions()
    opts.intra_op_num_threads = threads
    opts.inter_op_num_threads = 1
    sess = ort.InferenceSession(str(path), opts, providers=["CPUExecutionProvider"])
    for h, w in CHECK_SIZES:
        x = torch.rand(1, 3, h, w, generator=torch.Generator().manual_seed(h * w))
        (y,) = sess.run(None, {"images": x.numpy()})
        with torch.no_grad():
            ref = model(x)
        ref = (ref[0] if isinstance(ref, (tuple, list)) else ref).numpy()
        want = tuple(expected_shape(h, w))
        assert y.shape == want, f"{h}x{w}: output {y.shape}, expected {want}"
        assert np.isfinite(y).all(), f"{h}x{w}: non-finite output"
        assert y.std() > 0, f"{h}x{w}: constant output"
        err = np.abs(y - ref).max() / max(np.abs(ref).max(), 1e-12)
        assert err < 1e-3, f"{h}x{w}: onnxruntime differs from PyTorch by {err:.2e} (relative to max)"
        print(f"  {h}x{w}: output {list(y.shape)}, range [{y.min():.4g}, {y.max():.4g}], "
              f"std {y.std():.4g}, max |ort - torch| / max |torch| {err:.1e}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("out", type=Path, help="models folder, e.g. ~/.cache/mxc-bench-models")
    parser.add_argument("--threads", type=int, default=2, help="CPU threads for torch and onnxruntime")
    args = parser.parse_args()
    torch.set_num_threads(args.threads)

    yolo = yolo_detector()
    path = args.out / "yolo_detector" / "model.onnx"
    export(yolo, path, "output0", {2: "anchors"})
    check(yolo, path, lambda h, w: (1, 84, yolo_anchors(h, w)), args.threads)

    db = text_detector()
    path = args.out / "text_detector" / "model.onnx"
    export(db, path, "probability", {2: "height", 3: "width"})
    check(db, path, lambda h, w: (1, 1, h, w), args.threads)


if __name__ == "__main__":
    main()
