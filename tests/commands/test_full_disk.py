"""convert (both directions), pretrain and finetune on a disk that fills up: one error line, exit status 2, no
traceback, nothing half-written left behind (a real small tmpfs; see tests/utils/full_disk.py)."""

from __future__ import annotations

import subprocess
import sys

import pytest

from finetune_helpers import save_tiny_base, toy_sentences, write_conll
from full_disk import small_file_system
from helpers_embed import save_tiny_model
from paths import REPO_ROOT

TRAIN = REPO_ROOT / "tests" / "fixtures" / "bilm_tf" / "train"
TINY_PRETRAIN = ["--projection-dim", "16", "--cell-dim", "32", "--char-dim", "4", "--filters", "[[1,8],[2,8],[3,16]]",
                 "--highway", "1", "--threads", "1", "--no-progress"]


def hf_elmo(*argv):
    return subprocess.run([sys.executable, "-m", "hf_elmo.cli", *map(str, argv)], capture_output=True, text=True,
                          cwd=REPO_ROOT, timeout=600)


def assert_one_error_line(result, *phrases):
    assert result.returncode == 2, (result.returncode, result.stderr[-3000:])
    assert "Traceback" not in result.stderr, result.stderr[-3000:]
    last = result.stderr.strip().splitlines()[-1]
    assert last.startswith("hf-elmo: error: ") and all(phrase in last for phrase in phrases), last


@pytest.fixture(scope="module")
def tiny_model(tmp_path_factory):
    return save_tiny_model(tmp_path_factory.mktemp("tiny-elmo"))


@pytest.fixture
def small_disk():
    with small_file_system(40 * 1024) as folder:
        if folder is None:
            pytest.skip("mounting a small tmpfs needs root; the disk-full checks run where it can be mounted (CI)")
        yield folder


def test_convert_to_allennlp_on_a_full_disk(tiny_model, small_disk):
    result = hf_elmo("convert", "--to", "allennlp", "--model", tiny_model, small_disk / "out")
    assert_one_error_line(result, "the disk is full", "No space left on device")
    assert list(small_disk.iterdir()) == []  # was: a segmentation fault and the temporary folder left


def test_convert_from_allennlp_on_a_full_disk(tiny_model, small_disk, tmp_path):
    assert hf_elmo("convert", "--to", "allennlp", "--model", tiny_model, tmp_path / "bilm").returncode == 0
    result = hf_elmo("convert", "--from", "allennlp", "--options", tmp_path / "bilm" / "options.json",
                     "--weights", tmp_path / "bilm" / "weights.hdf5", small_disk / "out")
    assert_one_error_line(result, "the disk is full")
    assert list(small_disk.iterdir()) == []


def test_convert_from_allennlp_on_disks_that_fill_at_any_file(tiny_model, tmp_path):
    """Sizes around the output's: the disk fills in whichever file is being written (the modelling files, the
    safetensors weights, the tokenizer files); each is either a complete folder or one error line."""
    assert hf_elmo("convert", "--to", "allennlp", "--model", tiny_model, tmp_path / "bilm").returncode == 0
    assert hf_elmo("convert", "--from", "allennlp", "--options", tmp_path / "bilm" / "options.json", "--weights",
                   tmp_path / "bilm" / "weights.hdf5", tmp_path / "reference").returncode == 0
    needed = sum(path.stat().st_size for path in (tmp_path / "reference").iterdir())
    outcomes = set()
    for fraction in (0.2, 0.4, 0.6, 0.8, 0.9, 1.0):
        with small_file_system(int(needed * fraction) // 4096 * 4096 + 4096) as folder:
            if folder is None:
                pytest.skip("mounting a small tmpfs needs root; the disk-full checks run where it can be mounted (CI)")
            result = hf_elmo("convert", "--from", "allennlp", "--options", tmp_path / "bilm" / "options.json",
                             "--weights", tmp_path / "bilm" / "weights.hdf5", folder / "out")
            outcomes.add(result.returncode)
            if result.returncode == 0:
                assert sorted(p.name for p in folder.iterdir()) == ["out"]
            else:
                assert_one_error_line(result, "the disk is full")
                assert list(folder.iterdir()) == []
    assert 2 in outcomes


def test_pretrain_checkpoint_on_a_full_disk(small_disk):
    run = small_disk / "run"
    result = hf_elmo("pretrain", "--train-file", TRAIN / "data.txt", "--vocab", TRAIN / "vocab.txt", "--output-dir",
                     run, "--batch-size", "4", "--max-steps", "30", "--save-steps", "5", *TINY_PRETRAIN)
    assert_one_error_line(result, f"the disk holding {run} is full: checkpoint-5 could not be saved",
                          "run the same command again to resume from the beginning")
    assert sorted(path.name for path in run.iterdir()) == ["run_options.json", "vocab.txt"]


def test_finetune_on_a_full_disk(small_disk, tmp_path):
    base = save_tiny_base(tmp_path / "base")
    train = write_conll(tmp_path / "train.txt", toy_sentences(64, 1))
    result = hf_elmo("finetune", "train", "--model", base, "--train", train, "--output-dir", small_disk / "tagger",
                     "--epochs", "2", "--batch-size", "8", "--threads", "1")
    assert_one_error_line(result, f"the disk holding {small_disk / 'tagger'} is full; nothing was written to it")
    assert not (small_disk / "tagger").exists()
    assert [path.name for path in (small_disk / ".tagger.checkpoints").iterdir()] == ["run_options.json"]
