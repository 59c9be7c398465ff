"""The fine-tuning options are written once: the command line is built from the dataclasses, and the training knobs
are `TrainingArguments` fields of the same names."""

from __future__ import annotations

import argparse
import dataclasses

import pytest

from hf_elmo.finetuning.options import (
    FIELDS,
    DataFiles,
    FinetuneOptions,
    OptionError,
    TrainingKnobs,
    add_finetune_arguments,
    flag,
    options_from_arguments,
    training_argument_names,
)


def parser_for(command: str) -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog=command, exit_on_error=False)
    add_finetune_arguments(parser, command)
    return parser


def test_the_training_knobs_are_training_arguments_fields_of_the_same_type():
    from transformers import TrainingArguments

    theirs = {item.name: item for item in dataclasses.fields(TrainingArguments)}
    for name in training_argument_names():
        assert name in theirs, f"{name} is no TrainingArguments field"
    names = set(training_argument_names())
    assert {"num_train_epochs", "learning_rate", "per_device_train_batch_size", "seed"} <= names
    assert not {"overwrite", "threads"} & set(training_argument_names())


@pytest.mark.parametrize("command", ["train", "train-classifier"])
def test_every_option_of_the_command_line_is_a_field_and_comes_back_as_given(command):
    parser = parser_for(command)
    argv = ["--train", "t.txt", "--output-dir", "out", "--epochs", "2.5", "--lr", "0.01", "--batch-size", "7",
            "--grad-accum", "3", "--no-freeze", "--no-select-best", "--token-features", "--seed", "9"]
    args = parser.parse_args(argv)
    fields_of_the_parser = {action.dest for action in parser._actions if action.dest != "help"}
    assert fields_of_the_parser <= set(FIELDS) | {item.name for item in dataclasses.fields(DataFiles)}
    options = options_from_arguments(args)
    assert (options.num_train_epochs, options.learning_rate, options.per_device_train_batch_size) == (2.5, 0.01, 7)
    assert (options.gradient_accumulation_steps, options.freeze, options.load_best_model_at_end) == (3, False, False)
    assert options.task_token_features and options.seed == 9 and options.output_dir == "out"
    defaults = options_from_arguments(parser.parse_args(["--train", "t.txt", "--output-dir", "out"]))
    assert dataclasses.replace(defaults, output_dir=None) == FinetuneOptions()


def test_options_of_one_command_only_are_not_offered_to_the_other():
    tagger = {action.dest for action in parser_for("train")._actions}
    classifier = {action.dest for action in parser_for("train-classifier")._actions}
    assert {"use_crf", "label_characters", "dataset", "unseen_label"} <= tagger - classifier
    assert "classifier_hidden_size" in classifier - tagger
    with pytest.raises(argparse.ArgumentError):
        parser_for("train").parse_args(["--train", "a", "--dataset", "b", "--output-dir", "o"])


def test_a_refusal_names_the_command_line_spelling():
    assert flag("num_train_epochs") == "--epochs" and flag("per_device_train_batch_size") == "--batch-size"
    assert flag("weight_decay") == "--weight-decay"
    with pytest.raises(OptionError, match="--epochs must be a positive number, got 0"):
        FinetuneOptions(num_train_epochs=0).check()
    with pytest.raises(OptionError, match="--task-encoder must be 'linear' or 'bilstm', got gru"):
        FinetuneOptions(task_encoder="gru").check()
    assert all(item.name in FIELDS for item in dataclasses.fields(TrainingKnobs))


def test_a_record_of_an_older_shape_is_refused_naming_what_differs(tmp_path):
    from hf_elmo.utils.checkpoints import RunFolderError, check_same_run
    from hf_elmo.finetuning.run import _spelled

    with pytest.raises(RunFolderError, match=r"other options \(--lr 0.01 there, 0.005 now; --options"):
        check_same_run(tmp_path, {"learning_rate": 0.01, "options": {}}, {"learning_rate": 0.005}, _spelled)
