"""Shared test setup: one CPU thread (the test machine is shared) and no network for the Hub client."""

import os
import sys
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("OMP_NUM_THREADS", "1")
# Round-trip tests compare outputs bit for bit. MKL picks its kernels by memory alignment on some CPUs
# (seen on AMD EPYC), and weights mapped from a safetensors file are not 64-byte aligned, so a loaded
# model can differ from the one that was saved in the last bit (1.5e-8). Strict conditional numerical
# reproducibility makes MKL's results independent of alignment; subprocesses inherit it.
os.environ.setdefault("MKL_CBWR", "AUTO,STRICT")

# Let `pytest tests` work from a source checkout without installing the package, and let tests in every
# folder import the shared helpers of tests/utils by name.
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
sys.path.insert(0, str(Path(__file__).resolve().parent / "utils"))

import pytest  # noqa: E402
import torch  # noqa: E402

torch.set_num_threads(1)


@pytest.fixture(params=["onednn", "torch"])
def products(request, monkeypatch):
    """Runs a test with each library hf_elmo's kernels can multiply with (hf_elmo/kernels/matrix_products.py):
    oneDNN (the CPU float32 default where torch has it) and torch's own products."""
    import hf_elmo.kernels.bilstm as bilstm
    import hf_elmo.kernels.matrix_products as matrix_products

    if request.param == "onednn" and not matrix_products.onednn_available():
        pytest.skip("this torch build has no oneDNN inner product")
    if request.param == "torch":
        # bilstm.py holds its own reference to the function (it picks the oneDNN inference path with it).
        for module in (matrix_products, bilstm):
            monkeypatch.setattr(module, "onednn_available", lambda: False)
    return request.param
