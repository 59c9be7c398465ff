"""benchmarks/ner_experiments.py: where a run's results go."""

from __future__ import annotations

import importlib.util

import pytest

from paths import REPO_ROOT


@pytest.fixture(scope="module")
def ner_experiments():
    spec = importlib.util.spec_from_file_location("ner_experiments", REPO_ROOT / "benchmarks" / "ner_experiments.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.mark.parametrize(
    ("argv", "expected"),
    [
        (["pd-elmo"], "pd-elmo"),
        (["pd-elmo", "--random-bilm"], "pd-elmo-random"),
        (["msra", "--random-bilm", "--name", "baseline"], "baseline"),
        (["msra", "--name", "words"], "words"),
    ],
)
def test_a_random_biLM_run_does_not_take_the_pretrained_runs_file(ner_experiments, argv, expected):
    args = ner_experiments.build_parser().parse_args(argv)
    assert ner_experiments.result_name(args) == expected
