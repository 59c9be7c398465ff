"""Issue 41: the model as `from_pretrained` returns it (on hf-elmo's kernels, the package's default) traces:
`torch.export.export` with a dynamic batch size and `torch.compile(fullgraph=True)` give eager's outputs on another
batch size. While tracing, the model computes with the reference functions (the kernels step aside)."""

from __future__ import annotations

import pytest
import torch
from transformers import AutoModel

import hf_elmo
from hf_elmo import ElmoTokenizer

from numerics import bilm_tolerance

pytestmark = pytest.mark.numerics  # also run under forced AVX2 kernels by .ci/run

TEXTS = ["我喜欢吃小米", "小米手机挺好用", "你好", "今天天气不错", "他说"]


def batches():
    tokenizer = ElmoTokenizer.from_pretrained(hf_elmo.DEFAULT_MODEL)
    # One width for both batches: the time loop is Python, so the sentence length is fixed in the traced graph.
    encode = lambda texts: tokenizer(texts, padding="max_length", max_length=4, truncation=True, return_tensors="pt")
    return encode(TEXTS[:2]), encode(TEXTS)


def assert_close(got, want, config):
    """Traced with the reference functions, compared with eager on the kernels: float32 rounding apart (the derived
    tolerance of tests/utils/numerics.py, as the kernels' own tests use)."""
    for name in ("last_hidden_state", "mixes"):
        expected = getattr(want, name)
        tolerance = bilm_tolerance(config, expected)
        assert float((got[name] - expected).abs().max()) <= tolerance, name


def test_torch_export_with_a_dynamic_batch_equals_eager():
    model = AutoModel.from_pretrained(hf_elmo.DEFAULT_MODEL).eval()
    assert model.lstm_implementation == "auto"  # as loaded: the kernels
    traced_batch, other_batch = batches()
    batch = torch.export.Dim("batch")
    exported = torch.export.export(model, (), dict(traced_batch),
                                   dynamic_shapes={key: {0: batch} for key in traced_batch})
    with torch.no_grad():
        want, got = model(**other_batch), exported.module()(**other_batch)
    assert_close(got, want, model.config)


def test_torch_compile_fullgraph_equals_eager():
    model = AutoModel.from_pretrained(hf_elmo.DEFAULT_MODEL).eval()
    first, other = batches()
    # aot_eager runs the traced graph without generating C++: fullgraph=True already proves there is no graph break.
    compiled = torch.compile(model, fullgraph=True, dynamic=True, backend="aot_eager")
    with torch.no_grad():
        compiled(**first)
        got, want = compiled(**other), model(**other)
    assert_close(got, want, model.config)
