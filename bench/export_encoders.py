"""Exports two more architectures with torch's dynamo exporter (opset 18), for issue 38's "speed
that holds on every exporter's graph": a ViT (ViT-S/16's shape: 12 layers, hidden 384, 6
heads, a 224 x 224 image in 16 x 16 patches) and a Whisper-style audio encoder (whisper-tiny's:
4 layers, hidden 384, 6 heads, 80 mel bins x 3000 frames through two 1-D convolutions). Random
weights (seed 0): the graphs, not the accuracy, are what is measured. Same layout as
../shared/bench-models/make.sh (OUT/NAME/model.onnx + test_data_set_0/{input,output}_0.pb,
PyTorch's output as reference). With --torchscript, the TorchScript exporter's graphs instead
(opset 17), for comparison. Run it with the benchmark models' venv:
    ~/.cache/mxc-bench-venv/bin/python bench/export_encoders.py ~/.cache/mxc-bench-models-dynamo
    ~/.cache/mxc-bench-venv/bin/python bench/export_encoders.py ~/.cache/mxc-bench-models --torchscript
"""
import os
import sys
from pathlib import Path

import onnx
import torch
from onnx import numpy_helper
from transformers import ViTConfig, ViTModel, WhisperConfig
from transformers.models.whisper.modeling_whisper import WhisperEncoder


class Hidden(torch.nn.Module):
    """The encoder's last hidden state alone."""

    def __init__(self, m):
        super().__init__()
        self.m = m

    def forward(self, x):
        return self.m(x, return_dict=False)[0]


def vit() -> torch.nn.Module:
    torch.manual_seed(0)
    config = ViTConfig(hidden_size=384, num_hidden_layers=12, num_attention_heads=6, intermediate_size=1536,
                       image_size=224, patch_size=16)
    return ViTModel(config, add_pooling_layer=False)


def whisper_encoder() -> torch.nn.Module:
    torch.manual_seed(0)
    config = WhisperConfig(d_model=384, encoder_layers=4, encoder_attention_heads=6, encoder_ffn_dim=1536,
                           num_mel_bins=80, max_source_positions=1500)
    return WhisperEncoder(config)


def export(module: torch.nn.Module, x: torch.Tensor, out: Path, dynamo: bool) -> None:
    data = out / "test_data_set_0"
    data.mkdir(parents=True, exist_ok=True)
    model = Hidden(module.eval()).eval()
    with torch.no_grad():
        ref = model(x)
        if dynamo:
            torch.onnx.export(model, (x,), str(out / "model.onnx"), dynamo=True, external_data=False,
                              input_names=["x"], output_names=["y"], opset_version=18)
        else:
            torch.onnx.export(model, (x,), str(out / "model.onnx"), dynamo=False, do_constant_folding=True,
                              input_names=["x"], output_names=["y"], opset_version=17)
    onnx.save_tensor(numpy_helper.from_array(x.numpy(), "x"), str(data / "input_0.pb"))
    onnx.save_tensor(numpy_helper.from_array(ref.numpy(), "y"), str(data / "output_0.pb"))
    print(f"{out.name}: {os.path.getsize(out / 'model.onnx') / 1e6:.1f} MB")


torch.set_num_threads(2)
root = Path(sys.argv[1])
dynamo = "--torchscript" not in sys.argv[2:]
g = torch.Generator().manual_seed(1)
export(vit(), torch.randn(1, 3, 224, 224, generator=g), root / "vit_s16", dynamo)
export(whisper_encoder(), torch.randn(1, 80, 3000, generator=g), root / "whisper_tiny_encoder", dynamo)
