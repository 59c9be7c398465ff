"""The fine-tuning options are written once: the command line is made from the options dataclasses (and gives the
values transformers' `HfArgumentParser` gives from them), the ranges are checked where the options are made, and
the training knobs are `TrainingArguments` fields of the same names."""

from __future__ import annotations

import argparse
import dataclasses
from typing import Annotated

import pytest

from hf_elmo.cli.common import add_dataclass_options
from hf_elmo.finetuning.options import (
    COMMAND_OPTIONS,
    FIELDS,
    OPTIONS_ADDED_LATER,
    FinetuneOptions,
    OptionError,
    RunArguments,
    TrainingOptions,
    flag,
    run_identity_names,
)
from hf_elmo.utils.options import Option, added_later, at_least, problems


def parser_for(command: str) -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog=command, exit_on_error=False)
    add_dataclass_options(parser, *COMMAND_OPTIONS[command])
    return parser


def options_from(parser, argv) -> FinetuneOptions:
    args = parser.parse_args(argv)
    return FinetuneOptions(**{name: getattr(args, name) for name in FIELDS if name in args})


# Command lines that transformers' HfArgumentParser also reads: every spelling kind (the field's, an alias), every
# value kind (number, choice, switch alone, switch with a value, None by default), the last of two spellings.
SAME_AS_HF_ARGUMENT_PARSER = {
    "train": [
        ["--train", "t.txt", "--output-dir", "out"],
        ["--train", "t.txt", "--dev", "d.txt", "--test", "e.txt", "--output", "out", "--epochs", "2.5", "--lr", "0.01",
         "--batch-size", "7", "--eval-batch-size", "5", "--grad-accum", "3", "--max-steps", "10", "--weight-decay",
         "0.1", "--seed", "9", "--threads", "2", "--logging-steps", "5", "--max-words", "40", "--dropout", "0.2"],
        ["--train", "t.txt", "--output-dir", "out", "--freeze", "--random-init", "--token-features", "--use-crf",
         "--label-characters", "--character-features", "--overwrite", "--task-encoder", "linear", "--hidden-size",
         "8", "--unseen-label", "O", "--model", "m"],
        ["--train", "t.txt", "--output-dir", "out", "--freeze", "false", "--use-crf", "true", "--label-characters",
         "false", "--select-best", "no", "--precompute-elmo", "0"],
        ["--dataset", "conll2003", "--dataset-config", "c", "--words-column", "w", "--tags-column", "t",
         "--output-dir", "out", "--no-freeze", "--no-precompute-elmo"],
        ["--train", "t.txt", "--output-dir", "out", "--no-freeze", "--freeze", "--num-train-epochs", "4",
         "--learning-rate", "0.5", "--per-device-train-batch-size", "3", "--load-best-model-at-end", "false",
         "--task-token-features", "--task-encoder-hidden-size", "16"],
    ],
    "train-classifier": [
        ["--train", "t.tsv", "--output-dir", "out"],
        ["--train", "t.tsv", "--output", "out", "--classifier-hidden-size", "0", "--no-freeze", "--dropout", "0.5",
         "--epochs", "1", "--token-features", "--select-best", "false", "--seed", "3"],
        ["--train", "t.tsv", "--dev", "d.tsv", "--test", "e.tsv", "--output-dir", "out", "--model", "m",
         "--random-init", "--no-precompute-elmo", "--max-words", "9", "--max-steps", "4", "--lr", "0.1",
         "--weight-decay", "0.01", "--batch-size", "2", "--eval-batch-size", "3", "--grad-accum", "2", "--overwrite",
         "--threads", "1", "--logging-steps", "1"],
    ],
}


def values_from_ours(command: str, argv: list[str]) -> tuple:
    args = parser_for(command).parse_args(argv)
    return tuple(dataclass_type(**{item.name: getattr(args, item.name) for item in dataclasses.fields(dataclass_type)})
                 for dataclass_type in COMMAND_OPTIONS[command])


def values_from_hf_argument_parser(command: str, argv: list[str]) -> tuple:
    from transformers import HfArgumentParser

    parser = HfArgumentParser(COMMAND_OPTIONS[command])
    return tuple(parser.parse_args_into_dataclasses(argv, look_for_args_file=False))


@pytest.mark.parametrize("command", SAME_AS_HF_ARGUMENT_PARSER)
def test_the_command_line_gives_the_values_hf_argument_parser_gives(command):
    """`add_dataclass_options` is a torch- and transformers-free stand-in for `HfArgumentParser`, checked here."""
    changed = set()
    for argv in SAME_AS_HF_ARGUMENT_PARSER[command]:
        ours = values_from_ours(command, argv)
        assert ours == values_from_hf_argument_parser(command, argv), argv
        for options in ours:
            changed |= {item.name for item in dataclasses.fields(options)
                        if getattr(options, item.name) != getattr(type(options)(), item.name)}
    every = {item.name for dataclass_type in COMMAND_OPTIONS[command] for item in dataclasses.fields(dataclass_type)}
    assert every == changed, "every option is given a value other than its default above"


@pytest.mark.parametrize("argv", [["--task-encoder", "gru"], ["--use-crf", "maybe"], ["--epochs", "many"],
                                  ["--train", "t.txt"]])
def test_what_hf_argument_parser_refuses_is_refused(argv):
    argv = argv + (["--output-dir", "out"] if argv != ["--train", "t.txt"] else [])
    with pytest.raises(SystemExit):
        values_from_hf_argument_parser("train", argv)
    with pytest.raises((SystemExit, argparse.ArgumentError)):
        values_from_ours("train", argv)


def test_a_value_out_of_range_is_refused_by_both_in_the_same_words():
    from transformers import HfArgumentParser  # noqa: F401  (imported before the comparison below)

    for parse in (values_from_ours, values_from_hf_argument_parser):
        with pytest.raises(OptionError, match="--epochs must be a positive number, got 0.0"):
            parse("train", ["--train", "t.txt", "--output-dir", "out", "--epochs", "0"])


def test_the_training_knobs_are_training_arguments_fields_of_the_same_type():
    from transformers import TrainingArguments

    theirs = {item.name: item for item in dataclasses.fields(TrainingArguments)}
    for item in dataclasses.fields(TrainingOptions):
        assert item.name in theirs, f"{item.name} is no TrainingArguments field"
    assert "logging_steps" in theirs and not {"overwrite", "threads"} & set(theirs)


@pytest.mark.parametrize("command", ["train", "train-classifier"])
def test_every_option_of_the_command_line_is_a_field_and_comes_back_as_given(command):
    parser = parser_for(command)
    argv = ["--train", "t.txt", "--output-dir", "out", "--epochs", "2.5", "--lr", "0.01", "--batch-size", "7",
            "--grad-accum", "3", "--no-freeze", "--no-select-best", "--token-features", "--seed", "9"]
    fields_of_the_parser = {action.dest for action in parser._actions if action.dest != "help"}
    files = {item.name for dataclass_type in COMMAND_OPTIONS[command] for item in dataclasses.fields(dataclass_type)}
    assert fields_of_the_parser <= set(FIELDS) | files
    options = options_from(parser, argv)
    assert (options.num_train_epochs, options.learning_rate, options.per_device_train_batch_size) == (2.5, 0.01, 7)
    assert (options.gradient_accumulation_steps, options.freeze, options.load_best_model_at_end) == (3, False, False)
    assert options.task_token_features and options.seed == 9 and options.output_dir == "out"
    defaults = options_from(parser, ["--train", "t.txt", "--output-dir", "out"])
    assert dataclasses.replace(defaults, output_dir=None) == FinetuneOptions()


def test_every_spelling_of_the_tagger_switches_still_works():
    parser = parser_for("train")
    base = ["--train", "t.txt", "--output", "out"]
    assert options_from(parser, base).label_characters is None
    assert options_from(parser, base + ["--label-characters"]).label_characters is True
    assert options_from(parser, base + ["--no-label-characters"]).label_characters is False
    on = options_from(parser, base + ["--token-features", "--character-features", "--use-crf", "--hidden-size", "8",
                                      "--task-encoder", "linear", "--no-precompute-elmo", "--eval-batch-size", "5"])
    assert (on.task_character_features, on.use_crf, on.task_encoder_hidden_size) == (True, True, 8)
    assert (on.task_encoder, on.precompute_elmo, on.per_device_eval_batch_size) == ("linear", False, 5)
    assert options_from(parser, base + ["--no-character-features"]).task_character_features is False
    # As with argparse's BooleanOptionalAction and transformers' scripts, the last of a switch's spellings counts.
    assert options_from(parser, base + ["--no-freeze", "--freeze"]).freeze is True


def test_options_of_one_command_only_are_not_offered_to_the_other():
    tagger = {action.dest for action in parser_for("train")._actions}
    classifier = {action.dest for action in parser_for("train-classifier")._actions}
    assert {"use_crf", "label_characters", "dataset", "unseen_label"} <= tagger - classifier
    assert "classifier_hidden_size" in classifier - tagger


def test_a_refusal_names_the_command_line_spelling():
    assert flag("num_train_epochs") == "--epochs" and flag("per_device_train_batch_size") == "--batch-size"
    assert flag("weight_decay") == "--weight-decay"
    with pytest.raises(OptionError, match="--epochs must be a positive number, got 0"):
        FinetuneOptions(num_train_epochs=0)
    with pytest.raises(OptionError, match="--task-encoder must be 'linear' or 'bilstm', got gru"):
        FinetuneOptions(task_encoder="gru")
    with pytest.raises(OptionError, match="--hidden-size must be a positive integer, got 0"):
        dataclasses.replace(FinetuneOptions(), task_encoder_hidden_size=0)
    with pytest.raises(OptionError, match="--label-characters must be True or False, got yes"):
        FinetuneOptions(label_characters="yes")


def test_the_run_identity_is_every_option_but_where_and_how_the_run_writes():
    names = set(run_identity_names())
    assert not names & {item.name for item in dataclasses.fields(RunArguments)}
    assert {"learning_rate", "seed", "model", "task_encoder", "head_config"} <= names
    assert names | {item.name for item in dataclasses.fields(RunArguments)} == set(FIELDS)


def test_a_record_of_an_older_shape_is_refused_naming_what_differs(tmp_path):
    from hf_elmo.utils.checkpoints import RunFolderError, check_same_run
    from hf_elmo.finetuning.run import _spelled

    with pytest.raises(RunFolderError, match=r"other options \(--lr 0.01 there, 0.005 now; --options"):
        check_same_run(tmp_path, {"learning_rate": 0.01, "options": {}}, {"learning_rate": 0.005}, _spelled)


# The run identity's names in run_options.json since it became one flat record of the options.
RECORDED_NAMES = (
    "model", "freeze", "random_init", "task_token_features", "dropout", "task_encoder", "task_encoder_hidden_size",
    "use_crf", "label_characters", "task_character_features", "classifier_hidden_size", "precompute_elmo",
    "head_config", "max_words", "unseen_label", "num_train_epochs", "max_steps", "learning_rate", "weight_decay",
    "per_device_train_batch_size", "per_device_eval_batch_size", "gradient_accumulation_steps", "seed",
    "load_best_model_at_end")


def test_recorded_runs_still_resume():
    """A run-identity option added since is `added_later` (a recorded run had its default), else no killed run
    recorded before it could be resumed (tests/commands/test_finetune_bad_input.py resumes one)."""
    names = set(run_identity_names())
    assert set(RECORDED_NAMES) <= names
    assert names - set(RECORDED_NAMES) <= set(OPTIONS_ADDED_LATER), "a new run-identity option needs added_later=True"


@dataclasses.dataclass
class SomeOptions:
    old: Annotated[int, Option(check=at_least(1))] = dataclasses.field(default=1, metadata={"aliases": ["--o"]})
    new: Annotated[int, Option(added_later=True)] = 3
    new_dict: Annotated[dict, Option(added_later=True)] = dataclasses.field(default_factory=dict)


def test_the_shared_option_helpers_read_the_annotated_option():
    assert added_later(SomeOptions) == {"new": 3, "new_dict": {}}
    assert problems(SomeOptions(old=0)) == ["--o must be at least 1, got 0"] and problems(SomeOptions()) == []
