"""Shared test setup: one CPU thread (the test machine is shared) and no network for the Hub client."""

import os
import sys
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("OMP_NUM_THREADS", "1")

# Let `pytest tests` work from a source checkout without installing the package.
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import torch  # noqa: E402

torch.set_num_threads(1)
