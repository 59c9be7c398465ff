"""Issue 45.2: Ctrl-C (SIGINT) or SIGTERM during `pretrain` and `finetune train` saves a checkpoint before the
command exits, and says which; start-up says whether the run starts fresh or resumes (from which checkpoint) and
when the next checkpoint is written. Before, the first checkpoint came at step 500 and Ctrl-C before it lost the run.

The signal is sent by the process to itself in the middle of a training step (deterministic, unlike a timer).
"""

from __future__ import annotations

import json
import os
import signal

import pytest
import torch
from safetensors.torch import load_file

from finetune_helpers import save_tiny_base
from hf_elmo import cli
from paths import REPO_ROOT

DATA = str(REPO_ROOT / "tests" / "fixtures" / "bilm_tf" / "train" / "data.txt")
TINY_ARGS = ["--projection-dim", "16", "--cell-dim", "32", "--char-dim", "4", "--filters", "[[1,8],[2,8],[3,16]]",
             "--highway", "1", "--threads", "1", "--no-progress"]


def signalled_at_step(monkeypatch, trainer_class, step: int, number: int) -> None:
    """`trainer_class.training_step` sends `number` to this process during its `step`-th call."""
    original = trainer_class.training_step
    calls = {"n": 0}

    def training_step(self, *args, **kwargs):
        calls["n"] += 1
        if calls["n"] == step:
            os.kill(os.getpid(), number)
        return original(self, *args, **kwargs)

    monkeypatch.setattr(trainer_class, "training_step", training_step)


def weights(folder) -> dict:
    return load_file(str(folder / "model.safetensors"))


@pytest.mark.parametrize("number", [signal.SIGINT, signal.SIGTERM])
def test_a_signal_during_pretraining_saves_a_checkpoint_and_the_rerun_resumes_from_it(tmp_path, monkeypatch, capsys,
                                                                                     number):
    from hf_elmo.pretraining.trainer import LanguageModelTrainer

    handlers = {n: signal.getsignal(n) for n in (signal.SIGINT, signal.SIGTERM)}
    argv = ["pretrain", "--train-file", DATA, "--min-count", "1", "--max-steps", "6", "--save-steps", "100",
            "--batch-size", "2", "--seed", "3", *TINY_ARGS]
    run = tmp_path / "run"
    with monkeypatch.context() as patch:
        signalled_at_step(patch, LanguageModelTrainer, 3, number)
        assert cli.main([*argv, "--output-dir", str(run)]) == 130
    assert {n: signal.getsignal(n) for n in handlers} == handlers  # the handlers are put back
    err = capsys.readouterr().err
    assert f"starting a new run in {run}; the next checkpoint is written at step 100 (every --save-steps 100)" in err
    assert f"hf-elmo: {signal.Signals(number).name} received: pretraining stops after this step" in err
    last = err.strip().splitlines()[-1]
    assert last == (f"hf-elmo: interrupted; saved the checkpoint {run / 'checkpoint-3'}; the same command resumes the "
                    f"run from {run / 'checkpoint-3'}"), err
    assert (run / "checkpoint-3" / "trainer_state.json").is_file() and not (run / "model.safetensors").exists()

    assert cli.main([*argv, "--output-dir", str(run)]) == 0
    err = capsys.readouterr().err
    assert f"resuming from {run / 'checkpoint-3'} (step 3); the next checkpoint is written at step 100" in err
    reference = tmp_path / "reference"
    assert cli.main([*argv, "--output-dir", str(reference)]) == 0
    resumed, uninterrupted = weights(run), weights(reference)
    assert max(float((resumed[k] - uninterrupted[k]).abs().max()) for k in resumed) <= 1e-6


@pytest.fixture(scope="module")
def classifier_data(tmp_path_factory):
    root = tmp_path_factory.mktemp("interrupted-finetune")
    base = save_tiny_base(root / "base")
    pairs = [("good film", "pos"), ("bad film", "neg"), ("very good", "pos"), ("so bad", "neg"), ("fine", "pos"),
             ("awful", "neg")]
    data = root / "train.tsv"
    data.write_text("".join(f"{label}\t{text}\n" for text, label in pairs), encoding="utf-8")
    return base, data


def test_a_signal_during_fine_tuning_saves_a_checkpoint_mid_epoch_and_the_rerun_resumes_it(tmp_path, monkeypatch,
                                                                                          capsys, caplog,
                                                                                          classifier_data):
    import logging

    from transformers import Trainer

    caplog.set_level(logging.INFO, logger="hf_elmo")
    base, data = classifier_data
    argv = ["finetune", "train-classifier", "--model", base, "--train", str(data), "--epochs", "2", "--batch-size", "2",
            "--threads", "1", "--seed", "5"]
    output = tmp_path / "out"
    with monkeypatch.context() as patch:
        signalled_at_step(patch, Trainer, 2, signal.SIGINT)  # mid-way through the first epoch (3 steps)
        assert cli.main([*argv, "--output-dir", str(output)]) == 130
    err = capsys.readouterr().err
    checkpoints = tmp_path / ".out.checkpoints"
    assert f"starting a new run; checkpoints are written to {checkpoints} at the end of each epoch" in caplog.text
    assert "hf-elmo: SIGINT received: fine-tuning stops after this step" in err
    last = err.strip().splitlines()[-1]
    assert last.startswith(f"hf-elmo: interrupted; saved the checkpoint ") and last.endswith(
        f"nothing was written to {output}; the same command resumes from {last.split('saved the checkpoint ')[1].split(';')[0]}"), err
    saved = last.split("saved the checkpoint ")[1].split(";")[0]
    assert saved.endswith("checkpoint-2") and os.path.isfile(os.path.join(saved, "trainer_state.json")), saved
    assert not output.exists()

    caplog.clear()
    assert cli.main([*argv, "--output-dir", str(output)]) == 0
    assert f"resuming from {saved}; checkpoints are written to" in caplog.text
    assert json.loads((output / "results.json").read_text())["resumed_from"] == "checkpoint-2"
    reference = tmp_path / "reference"
    assert cli.main([*argv, "--output-dir", str(reference)]) == 0
    resumed, uninterrupted = weights(output), weights(reference)
    assert all(torch.equal(resumed[k], uninterrupted[k]) for k in resumed)
    assert not checkpoints.exists()

