"""Shared pieces of the Hub tests: the test Hub fixture, a subprocess runner, tiny models."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
import torch

from hub_server import HubServer
from paths import REPO_ROOT

SENTENCES = ["我爱北京天安门。", "hello world , ELMo here !", "今天天气很好"]
TOKEN = "hf_test_token"


@pytest.fixture(scope="module")
def hub():
    with HubServer() as server:
        yield server


def tiny_model(seed: int, **overrides):
    """A small random ElmoModel whose scalar mix is not the default (so the mix weights must round-trip)."""
    from hf_elmo import ElmoModel
    from small_models import tiny_config

    torch.manual_seed(seed)
    model = ElmoModel(tiny_config(**overrides)).eval()
    with torch.no_grad():
        for mix in model.scalar_mixes:
            mix.scalar_parameters.uniform_(-1, 1)
            mix.gamma.fill_(0.5 + seed)
    return model


def tiny_tokenizer():
    from hf_elmo import ElmoTokenizer

    return ElmoTokenizer(segmenter="chars")  # no jieba dictionary load: fast subprocesses


def encoder_outputs(model, tokenizer) -> dict[str, torch.Tensor]:
    """Every layer and every mix for SENTENCES, as a flat dict of tensors."""
    batch = tokenizer(SENTENCES, padding=True, return_tensors="pt")
    with torch.no_grad():
        out = model(**batch)
    tensors = {f"layer{i}": h for i, h in enumerate(out.hidden_states)}
    tensors.update({f"mix{i}": m for i, m in enumerate(out.elmo_representations)})
    tensors["input_ids"] = batch["input_ids"]
    return tensors


# Pasted into subprocess scripts (which must not import the tests' modules when run isolated).
SUBPROCESS_PRELUDE = f"""
import json, sys
import torch
from safetensors.torch import save_file
torch.set_num_threads(1)
SENTENCES = {SENTENCES!r}

def encoder_outputs(model, tokenizer):
    batch = tokenizer(SENTENCES, padding=True, return_tensors="pt")
    with torch.no_grad():
        out = model(**batch)
    tensors = {{f"layer{{i}}": h for i, h in enumerate(out.hidden_states)}}
    tensors.update({{f"mix{{i}}": m for i, m in enumerate(out.elmo_representations)}})
    tensors["input_ids"] = batch["input_ids"]
    return {{k: v.contiguous() for k, v in tensors.items()}}

def report(result):
    # On a line of its own: transformers may print prompts without a newline before it.
    print("\\n@@result@@ " + json.dumps(result))

def attempt(call):
    try:
        call()
    except Exception as error:
        return [type(error).__name__, str(error)]
    return None
"""


def hub_env(hub: HubServer, hf_home: Path, offline: bool = False, isolated: bool = False) -> dict[str, str]:
    """Environment for a subprocess talking to the test Hub (huggingface_hub reads it at import)."""
    env = {k: v for k, v in os.environ.items() if not (k.startswith("HF_") or k.startswith("HUGGINGFACE"))}
    env.update(
        HF_ENDPOINT=hub.url,
        HF_TOKEN=TOKEN,
        HF_HOME=str(hf_home),
        HF_HUB_DISABLE_TELEMETRY="1",
        HF_HUB_DISABLE_PROGRESS_BARS="1",
        TRANSFORMERS_VERBOSITY="error",
        OMP_NUM_THREADS="1",
        TOKENIZERS_PARALLELISM="false",
    )
    if offline:
        env["HF_HUB_OFFLINE"] = "1"
    env.pop("PYTHONPATH", None)
    if not isolated:
        env["PYTHONPATH"] = str(REPO_ROOT)
    return env


def run_python(code: str, env: dict[str, str], cwd: Path, isolated: bool = False, timeout: int = 300,
               python: str | None = None) -> str:
    """Run `code` in a fresh interpreter; returns stdout, fails the test with stderr on a non-zero exit.

    `isolated` runs `python -I` from `cwd` without PYTHONPATH and marks `hf_elmo` as unimportable (it may be
    installed in the environment, e.g. editable in CI), as for a user who only has transformers. `python` is the
    interpreter (default: this one), e.g. another environment's with another transformers.
    """
    hide_package = "import sys\nsys.modules['hf_elmo'] = None  # `import hf_elmo` now raises ImportError\n"
    prelude = (hide_package if isolated else "") + SUBPROCESS_PRELUDE
    command = [python or sys.executable] + (["-I"] if isolated else []) + ["-c", prelude + textwrap.dedent(code)]
    result = subprocess.run(
        command, env=env, cwd=cwd, capture_output=True, text=True, timeout=timeout, stdin=subprocess.DEVNULL
    )
    if result.returncode != 0:
        pytest.fail(f"subprocess failed ({result.returncode}):\n{result.stderr[-4000:]}\nstdout:\n{result.stdout[-2000:]}")
    return result.stdout


def run_command(args: list[str], env: dict[str, str], cwd: Path, timeout: int = 300) -> str:
    """Run a Python script with arguments; returns stdout, fails the test with stderr on a non-zero exit."""
    result = subprocess.run(
        [sys.executable, *args], env=env, cwd=cwd, capture_output=True, text=True, timeout=timeout, stdin=subprocess.DEVNULL
    )
    if result.returncode != 0:
        pytest.fail(f"{args[0]} failed ({result.returncode}):\n{result.stderr[-4000:]}\nstdout:\n{result.stdout[-2000:]}")
    return result.stdout


def last_json(stdout: str):
    """The object a subprocess passed to `report(...)` last."""
    lines = [line for line in stdout.splitlines() if line.startswith("@@result@@ ")]
    assert lines, f"the subprocess reported nothing:\n{stdout[-2000:]}"
    return json.loads(lines[-1].split(" ", 1)[1])


def assert_same_outputs(actual: dict[str, torch.Tensor], expected: dict[str, torch.Tensor]) -> None:
    assert sorted(actual) == sorted(expected)
    for key in expected:
        assert torch.equal(actual[key], expected[key]), f"{key} differs after the round trip"
