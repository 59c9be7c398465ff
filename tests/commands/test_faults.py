"""Faults of issue 37: what the commands write, replace, lock, sweep and load when things go wrong."""

from __future__ import annotations

import os
import stat

import pytest

from hf_elmo import cli
from helpers_embed import save_tiny_model


def run(*argv) -> int:
    return cli.main([str(a) for a in argv])


@pytest.fixture(scope="module")
def model_dir(tmp_path_factory):
    return save_tiny_model(tmp_path_factory.mktemp("tiny-elmo"))


# 15: the user's umask ------------------------------------------------------------------------


def test_converted_weights_get_the_umask_permissions_like_every_other_file(tmp_path, model_dir):
    bilm = tmp_path / "bilm"
    assert run("convert", "--to", "allennlp", "--model", model_dir, bilm) == 0
    output = tmp_path / "converted"
    previous = os.umask(0o022)
    try:
        assert run("convert", "--from", "allennlp", "--options", bilm / "options.json",
                   "--weights", bilm / "weights.hdf5", output) == 0
    finally:
        os.umask(previous)
    modes = {path.name: stat.S_IMODE(path.stat().st_mode) for path in output.iterdir()}
    assert modes["model.safetensors"] == 0o644
    assert set(modes.values()) == {0o644}
