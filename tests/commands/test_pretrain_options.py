"""The pretraining options are written once (the roles of `PretrainingArguments`): the command line, the range
checks, the run identity, the `ElmoConfig` fields and the `TrainingArguments` knobs are read from their fields."""

from __future__ import annotations

import argparse
import dataclasses

import pytest

from hf_elmo.cli.common import add_dataclass_options
from hf_elmo.pretraining.options import (
    ARCHITECTURE_DEFAULTS,
    COMMAND_OPTIONS,
    CONFIG_OPTIONS,
    OPTIONS_ADDED_LATER,
    PretrainingArguments,
    config_field,
    run_identity,
    trainer_options,
)

REQUIRED = ["--train-file", "t.txt", "--output-dir", "out"]
GIVEN = [*REQUIRED, "--epochs", "2.5", "--lr", "0.01", "--batch-size", "7", "--cell-dim", "48", "--filters", "[[1,4]]",
         "--no-skip-connections", "--no-group-by-length", "--no-progress", "--output", "o2", "--softmax", "sampled"]


def parse(argv: list[str]) -> PretrainingArguments:
    parser = argparse.ArgumentParser(exit_on_error=False)
    add_dataclass_options(parser, *COMMAND_OPTIONS)
    return PretrainingArguments.from_namespace(parser.parse_args(argv))


def test_the_options_come_back_as_given_and_default_as_the_dataclass_says():
    options = parse(GIVEN)
    assert (options.num_train_epochs, options.learning_rate, options.per_device_train_batch_size) == (2.5, 0.01, 7)
    assert (options.lstm_cell_dim, options.char_cnn_filters, options.no_skip_connections) == (48, "[[1,4]]", True)
    assert not options.group_by_length and options.disable_tqdm and options.output_dir == "o2"
    assert options.lm_softmax == "sampled" and options.projection_dim is None  # not given: --init-from's or 128
    assert parse(REQUIRED) == PretrainingArguments(train_file=["t.txt"], output_dir="out")


def test_transformers_hf_argument_parser_reads_the_roles_the_same():
    from transformers import HfArgumentParser

    roles = HfArgumentParser(COMMAND_OPTIONS).parse_args_into_dataclasses(GIVEN, look_for_args_file=False)
    merged = {name: value for role in roles for name, value in dataclasses.asdict(role).items()}
    assert PretrainingArguments(**merged) == parse(GIVEN)


def test_the_trainer_knobs_and_config_fields_are_fields_of_theirs():
    from transformers import TrainingArguments

    from hf_elmo import ElmoConfig

    knobs = trainer_options({item.name for item in dataclasses.fields(TrainingArguments)})
    assert {"num_train_epochs", "learning_rate", "per_device_train_batch_size", "seed", "save_steps"} <= set(knobs)
    assert "group_by_length" not in knobs  # the biLM Trainer's own grouping, not TrainingArguments'
    config = ElmoConfig()
    assert all(hasattr(config, config_field(name).name) for name in CONFIG_OPTIONS)
    assert set(ARCHITECTURE_DEFAULTS) <= set(CONFIG_OPTIONS)


@pytest.mark.parametrize("argv, problems", [
    (["--batch-size", "0", "--epochs", "0", "--warmup-ratio", "1", "--lr", "nan"],
     ["--batch-size must be at least 1, got 0", "--lr must be a number >= 0, got nan",
      "--warmup-ratio must be in [0, 1), got 1.0", "--epochs must be above 0, got 0.0"]),
    (["--max-steps", "-5", "--threads", "0", "--dropout", "1"],
     ["--dropout must be in [0, 1), got 1.0", "--max-steps must be at least 1, got -5",
      "--threads must be at least 1, got 0"]),
    (["--max-steps", "-1"], []),  # TrainingArguments' "not given": --epochs decides
])
def test_every_range_problem_is_named_by_its_flag(argv, problems):
    assert sorted(parse([*REQUIRED, *argv]).problems()) == sorted(problems)


# The run identity's names in run_options.json before the options were dataclasses.
RECORDED_NAMES = (
    "train_file", "dev_file", "vocab", "min_count", "max_vocab", "max_words", "projection_dim", "cell_dim", "layers",
    "char_dim", "filters", "highway", "max_characters", "char_scheme", "char_min_count", "cell_clip", "proj_clip",
    "no_skip_connections", "softmax", "num_sampled", "dropout", "segmenter", "batch_size",
    "gradient_accumulation_steps", "lr", "warmup_ratio", "weight_decay", "max_grad_norm", "seed", "init_from",
    "group_by_length")


def test_recorded_runs_still_resume():
    """Renaming a field (to a TrainingArguments or ElmoConfig name, say) keeps its name in the identity (its first
    spelling), and a run-identity option added since is `added_later` (a recorded run had its default), else no
    recorded run could be resumed."""
    names = set(run_identity(parse(REQUIRED)))
    assert set(RECORDED_NAMES) <= names
    assert names - set(RECORDED_NAMES) <= set(OPTIONS_ADDED_LATER), "a new run-identity option needs added_later=True"
    assert {"char_scheme": "bytes", "char_min_count": 2}.items() <= OPTIONS_ADDED_LATER.items()
    assert "output_dir" not in names and "epochs" not in names
