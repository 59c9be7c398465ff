"""The pretraining options are written once (`PretrainingArguments`): the command line, the range checks, the run
identity, the `ElmoConfig` fields and the `TrainingArguments` knobs are read from its fields."""

from __future__ import annotations

import argparse
import dataclasses

from hf_elmo.pretraining.options import (
    CONFIG_FIELDS,
    FIELDS,
    OPTIONS_ADDED_LATER,
    TRAINER_FIELDS,
    PretrainingArguments,
    add_dataclass_arguments,
    run_identity,
)

REQUIRED = ["--train-file", "t.txt", "--output-dir", "out"]


def parse(argv: list[str]) -> PretrainingArguments:
    parser = argparse.ArgumentParser(exit_on_error=False)
    add_dataclass_arguments(parser)
    return PretrainingArguments.from_namespace(parser.parse_args(argv))


def test_the_trainer_knobs_are_training_arguments_fields():
    from transformers import TrainingArguments

    theirs = {item.name for item in dataclasses.fields(TrainingArguments)}
    assert set(TRAINER_FIELDS) <= theirs
    assert {"num_train_epochs", "learning_rate", "per_device_train_batch_size", "seed", "save_steps"} <= set(
        TRAINER_FIELDS)
    assert "group_by_length" not in TRAINER_FIELDS  # the biLM Trainer's own grouping, not TrainingArguments'


def test_the_config_fields_are_elmo_config_fields():
    from hf_elmo import ElmoConfig

    config = ElmoConfig()
    assert all(hasattr(config, field.name) for field in CONFIG_FIELDS.values())


def test_the_options_come_back_as_given_and_default_as_the_dataclass_says():
    options = parse([*REQUIRED, "--epochs", "2.5", "--lr", "0.01", "--batch-size", "7", "--cell-dim", "48",
                     "--no-skip-connections", "--no-group-by-length", "--no-progress", "--output", "o2"])
    assert (options.num_train_epochs, options.learning_rate, options.per_device_train_batch_size) == (2.5, 0.01, 7)
    assert (options.cell_dim, options.no_skip_connections, options.group_by_length) == (48, True, False)
    assert options.disable_tqdm and options.output_dir == "o2" and options.projection_dim is None  # not given
    assert parse(REQUIRED) == PretrainingArguments(train_file=["t.txt"], output_dir="out")


def test_every_range_problem_is_named_by_its_flag():
    options = parse([*REQUIRED, "--batch-size", "0", "--epochs", "0", "--warmup-ratio", "1", "--lr", "nan"])
    assert options.problems() == [
        "--epochs must be above 0, got 0.0", "--batch-size must be at least 1, got 0", "--lr must be a number >= 0, "
        "got nan", "--warmup-ratio must be in [0, 1), got 1.0"]
    assert parse(REQUIRED).problems() == []


# The run identity's names in run_options.json before the options were a dataclass.
RECORDED_NAMES = (
    "train_file", "dev_file", "vocab", "min_count", "max_vocab", "max_words", "projection_dim", "cell_dim", "layers",
    "char_dim", "filters", "highway", "max_characters", "char_scheme", "char_min_count", "cell_clip", "proj_clip",
    "no_skip_connections", "softmax", "num_sampled", "dropout", "segmenter", "batch_size",
    "gradient_accumulation_steps", "lr", "warmup_ratio", "weight_decay", "max_grad_norm", "seed", "init_from",
    "group_by_length")


def test_recorded_runs_still_resume():
    """Renaming a field (to a TrainingArguments name, say) keeps its name in the identity, and a run-identity option
    added since is `added_later` (a recorded run had its default), else no recorded run could be resumed."""
    names = set(run_identity(parse(REQUIRED)))
    assert set(RECORDED_NAMES) <= names
    assert names - set(RECORDED_NAMES) <= set(OPTIONS_ADDED_LATER), "a new run-identity option needs added_later=True"
    assert {"char_scheme": "bytes", "char_min_count": 2}.items() <= OPTIONS_ADDED_LATER.items()
    assert FIELDS["output_dir"].metadata["identity"] is False
