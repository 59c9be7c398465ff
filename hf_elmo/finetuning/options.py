"""The options of `hf-elmo finetune train` / `train-classifier` and of `hf_elmo.finetuning.run`, written once.

As in transformers' `run_ner.py`: the model and head options (`ModelArguments`), how the data is read
(`DataArguments`; the files themselves, `DataFiles`, only exist on the command line) and the training knobs
(`TrainingKnobs`), whose names are `transformers.TrainingArguments` fields, so they pass to it one for one.
The command line's parser is built from these dataclasses (`add_dataclass_arguments`); the library takes
`FinetuneOptions`, all of them in one object.

This module imports neither torch nor transformers: `hf-elmo finetune --help` reads it. transformers'
`HfArgumentParser` would do the building but imports the transformers package (most of a second).

Field metadata read here: `help`; `flags` (the command-line spellings, default `--field-name`; a default-on
switch spelled `--no-x` has that spelling only, others get `--x` and `--no-x`); `choices`;
`required`; `commands` (the sub-commands that have the option, default every one); `one_of` (a required
choice between the options of that group); `cli: False` (Python only); `trainer: False` (a `TrainingKnobs`
field that is not a `TrainingArguments` one); `run_identity: False` (may change when a killed run is resumed).
"""

from __future__ import annotations

import argparse
import math
import os
import typing
from dataclasses import MISSING, dataclass, field, fields

COMMANDS = ("train", "train-classifier")
TAGGER = {"commands": ("train",)}
CLASSIFIER = {"commands": ("train-classifier",)}


def _option(default, help: str = "", **metadata):
    """A dataclass field with its command-line description."""
    if isinstance(default, dict):
        return field(default_factory=dict, metadata={"help": help, **metadata})
    return field(default=default, metadata={"help": help, **metadata})


@dataclass
class ModelArguments:
    """The pretrained biLM and the head put on it."""

    model: str = _option(
        "default", "pretrained ELMo folder or Hub name; 'default' (the default) is the Chinese model shipped with "
        "hf-elmo")
    freeze: bool = _option(True, "keep the biLM fixed (default; --no-freeze fine-tunes it too)")
    random_init: bool = _option(False, "same architecture, biLM randomly initialised (a baseline)")
    # The head's own trainable word vectors x_k beside the ELMo mix (the paper's [x_k; ELMo_k]).
    task_token_features: bool = _option(
        False, "give the head its own trainable word vectors x_k (a character CNN started from the biLM's layer 0) "
        "and feed it [x_k; ELMo_k], as the paper adds ELMo to a task model", flags=("--token-features",))
    dropout: float | None = _option(
        None, "dropout on the ELMo mix and in the head (default: 0.3 for train, 0.5 for train-classifier)")
    task_encoder: str = _option("bilstm", "the task encoder over the ELMo mix", choices=("linear", "bilstm"), **TAGGER)
    task_encoder_hidden_size: int | None = _option(
        None, "task BiLSTM size per direction (default 200)", flags=("--hidden-size",), **TAGGER)
    use_crf: bool = _option(False, "CRF layer with Viterbi decoding", **TAGGER)
    # Character-labelled data read as words by the biLM (config.label_characters); None: decided from the data.
    label_characters: bool | None = _option(
        None, "the file labels single characters (MSRA, most Chinese NER sets): the biLM reads the jieba words they "
        "form and each character gets its word's vectors plus its place in the word (S/B/M/E); tags stay per "
        "character. Default: on when 90%% of the training tokens are one character each (of any script: letters, "
        "digits, punctuation and emoji count) and the model reads jieba words",
        **TAGGER)
    # With label_characters and task_token_features: x_k of each character alone too; None: on whenever both are.
    task_character_features: bool | None = _option(
        None, "with --label-characters and --token-features: each character also gets the head's own vector x_k of "
        "the character alone (the characters of one jieba word otherwise share the word's vectors). Default: on "
        "whenever both are", flags=("--character-features",), **TAGGER)
    classifier_hidden_size: int | None = _option(None, "MLP hidden size (0 = linear)", **CLASSIFIER)
    # With a frozen biLM its layers are computed once for the training and dev data, so each epoch
    # trains only the head (the paper's setting; same numbers as running the biLM every step).
    precompute_elmo: bool = _option(
        True, "compute the frozen biLM's layers once (default; --no-precompute-elmo runs it at every step: less "
        "memory)")
    head_config: dict = _option({}, "further config values of the head", cli=False)


@dataclass
class DataArguments:
    """How the examples are read."""

    max_words: int | None = _option(None, "cut training sentences to this many words")
    unseen_label: str = _option("error", "dev/test labels unseen in training", choices=("error", "O"), **TAGGER)


@dataclass
class DataFiles:
    """Where the examples come from (the library takes the examples themselves)."""

    train: str | None = _option(None, "training file: CoNLL-style (word<TAB>tag) or .jsonl; for train-classifier, "
                                "label<TAB>text lines", one_of="source")
    dataset: str | None = _option(
        None, "a `datasets` dataset (local path or cached name) with train/validation/test", one_of="source", **TAGGER)
    dev: str | None = _option(None, "development file (model selection on it)")
    test: str | None = _option(None, "test file (scored once at the end)")
    dataset_config: str | None = _option(None, "the --dataset's configuration name", **TAGGER)
    words_column: str = _option("tokens", "the --dataset's column of words", **TAGGER)
    tags_column: str = _option("ner_tags", "the --dataset's column of tags", **TAGGER)


@dataclass
class TrainingKnobs:
    """The training knobs, named as `transformers.TrainingArguments` names them."""

    output_dir: str | None = _option(None, "folder to write the fine-tuned model into", required=True,
                                     run_identity=False, flags=("--output-dir", "--output"))
    overwrite: bool = _option(False, "replace an existing output folder", trainer=False, run_identity=False)
    num_train_epochs: float | None = _option(
        None, "passes over the training data (> 0; default: 10 for train, 3 for train-classifier)", flags=("--epochs",))
    max_steps: int = _option(-1, "stop after this many optimiser steps (overrides --epochs; -1, the default, = use "
                                 "--epochs)")
    learning_rate: float | None = _option(
        None, "learning rate (AdamW, linear decay; default: 5e-3 for train with the biLM frozen, otherwise 1e-3)",
        flags=("--lr",))
    weight_decay: float = _option(0.0, "AdamW weight decay")
    per_device_train_batch_size: int = _option(32, "sentences per training step", flags=("--batch-size",))
    per_device_eval_batch_size: int = _option(64, "sentences per evaluation batch", flags=("--eval-batch-size",))
    gradient_accumulation_steps: int = _option(1, "gradient accumulation steps", flags=("--grad-accum",))
    seed: int = _option(42, "initialisation and data order")
    logging_steps: int = _option(50, "log the loss every this many steps", cli=False, run_identity=False)
    load_best_model_at_end: bool = _option(
        True, "keep the last epoch, not the best on dev", flags=("--no-select-best",))
    threads: int | None = _option(None, "torch CPU threads", trainer=False, run_identity=False)


@dataclass
class FinetuneOptions(TrainingKnobs, DataArguments, ModelArguments):
    """Options of `train_tagger` / `train_classifier`: the model, data and training options in one object."""

    def check(self) -> None:
        """Raise `OptionError` (naming the command-line flag) for a value out of range; run before any work."""
        check_options(self)


class OptionError(ValueError):
    """An option out of its range, or a `--model` of the wrong kind; the message names the command-line flag."""


def _is_int(value) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def check_batch_size(value, flag: str = "--batch-size") -> None:
    """`OptionError` unless `value` is a positive integer."""
    if not _is_int(value) or value < 1:
        raise OptionError(f"{flag} must be a positive integer, got {value}")


def flag(name: str) -> str:
    """The command-line spelling of the option `name` (a field of `FinetuneOptions`)."""
    spellings = FIELDS[name].metadata.get("flags") if name in FIELDS else None
    return spellings[0] if spellings else "--" + name.replace("_", "-")


def check_options(options: FinetuneOptions) -> None:
    """Raise `OptionError` naming the flag of the first option out of its range."""

    def refuse(name: str, rule: str):
        raise OptionError(f"{flag(name)} must be {rule}, got {getattr(options, name)}")

    for name in ("per_device_train_batch_size", "per_device_eval_batch_size", "gradient_accumulation_steps",
                 "logging_steps"):
        if not _is_int(getattr(options, name)) or getattr(options, name) < 1:
            refuse(name, "a positive integer")
    for name in ("max_words", "task_encoder_hidden_size", "threads"):
        value = getattr(options, name)
        if value is not None and (not _is_int(value) or value < 1):
            refuse(name, "a positive integer")
    value = options.classifier_hidden_size
    if value is not None and (not _is_int(value) or value < 0):
        refuse("classifier_hidden_size", "0 (a linear classifier) or a positive integer")
    if not _is_int(options.max_steps) or (options.max_steps < 1 and options.max_steps != -1):
        refuse("max_steps", "a positive integer (or -1: train for --epochs)")
    for name in ("num_train_epochs", "learning_rate"):
        value = getattr(options, name)
        if value is not None and (not isinstance(value, (int, float)) or not math.isfinite(value) or value <= 0):
            refuse(name, "a positive number")
    value = options.weight_decay
    if not isinstance(value, (int, float)) or not math.isfinite(value) or value < 0:
        refuse("weight_decay", "a number >= 0")
    value = options.dropout
    if value is not None and (not isinstance(value, (int, float)) or not 0 <= value < 1):
        refuse("dropout", "a probability in [0, 1)")
    if not _is_int(options.seed) or not 0 <= options.seed < 2**32:
        refuse("seed", "an integer in [0, 2**32)")
    for name, item in FIELDS.items():
        choices = item.metadata.get("choices")
        if choices and getattr(options, name) not in choices:
            refuse(name, " or ".join(repr(choice) for choice in choices))
    for name in ("freeze", "random_init", "task_token_features", "use_crf", "precompute_elmo", "load_best_model_at_end",
                 "overwrite"):
        if not isinstance(getattr(options, name), bool):
            refuse(name, "True or False")
    if options.task_character_features is True and (not options.task_token_features
                                                    or options.label_characters is False):
        raise OptionError("--character-features gives each character the head's own vector x_k of its words: it "
                          "needs --token-features and character-labelled data (not --no-label-characters)")
    if options.output_dir:
        _check_output_dir(options)


def _check_output_dir(options: FinetuneOptions) -> None:
    """The output folder: not the --model it reads (nor around or inside it), a new one unless --overwrite, and
    one whose parent takes new files (it is built beside its final place)."""
    from pathlib import Path

    from ..utils.io import check_output_folder, refuse_output_over_inputs
    from ..loading import resolve_model_name

    if isinstance(options.model, (str, os.PathLike)):  # (a model object passed to the library is no path)
        refuse_output_over_inputs(options.output_dir, "--output-dir",
                                  [("the model folder", "--model", resolve_model_name(options.model))])
    if os.path.exists(options.output_dir):
        if not os.path.isdir(options.output_dir):
            raise OptionError(f"--output-dir {options.output_dir} is a file, not a folder")
        if not options.overwrite:  # an unfinished run keeps its checkpoints beside the folder, not in it
            raise OptionError(f"{options.output_dir} already exists (pass --overwrite to replace it)")
    try:
        check_output_folder(Path(options.output_dir).resolve().parent, "--output-dir's parent")
    except ValueError as error:
        raise OptionError(f"--output-dir {options.output_dir}: {error}") from None


FIELDS = {item.name: item for item in fields(FinetuneOptions)}


def training_argument_names() -> tuple[str, ...]:
    """The `TrainingKnobs` that are `transformers.TrainingArguments` fields of the same name and meaning."""
    return tuple(item.name for item in fields(TrainingKnobs) if item.metadata.get("trainer", True))


def run_identity_names() -> tuple[str, ...]:
    """The options that define a run: a killed run is resumed only with the same values."""
    return tuple(name for name, item in FIELDS.items() if item.metadata.get("run_identity", True))


# Building the command line -------------------------------------------------------------------------------


def _argument_type(annotation) -> type:
    """The value type of a field annotation such as `int | None` (None is such a field's default)."""
    arguments = [item for item in typing.get_args(annotation) if item is not type(None)]
    return arguments[0] if arguments else annotation


def add_dataclass_arguments(parser: argparse.ArgumentParser, dataclass_type, command: str) -> None:
    """Add an option to `parser` for each field of `dataclass_type` that `command` has (see the module's docstring
    for the metadata read); its `dest` is the field's name, so `FinetuneOptions(**...)` takes the parsed values."""
    hints = typing.get_type_hints(dataclass_type)
    groups: dict[str, argparse._MutuallyExclusiveGroup] = {}
    for item in fields(dataclass_type):
        metadata = item.metadata
        if not metadata.get("cli", True) or command not in metadata.get("commands", COMMANDS):
            continue
        value_type = _argument_type(hints[item.name])
        spellings = list(metadata.get("flags") or ["--" + item.name.replace("_", "-")])
        keywords = {"dest": item.name, "help": metadata.get("help")}
        default = None if item.default is MISSING else item.default
        if value_type is bool:
            # A switch: --x on; a default-on option spelled --no-x: off; otherwise --x and --no-x, not both at once.
            keywords["default"] = default
            if default is True and spellings[0].startswith("--no-"):
                keywords["action"] = "store_false"
            else:
                keywords["action"] = "store_true"
            if default is not False and not spellings[0].startswith("--no-"):
                both = parser.add_mutually_exclusive_group()
                both.add_argument(*spellings, **keywords)
                both.add_argument("--no-" + spellings[0][2:], dest=item.name, action="store_false", default=default,
                                  help=f"the opposite of {spellings[0]}")
                continue
        else:
            keywords.update(type=value_type, default=default)
            if "choices" in metadata:
                keywords["choices"] = metadata["choices"]
            else:
                keywords["metavar"] = spellings[0][2:].replace("-", "_").upper()
        target = parser
        if "one_of" in metadata:
            group_name = metadata["one_of"]
            others = [other for other in fields(dataclass_type) if other.metadata.get("one_of") == group_name
                      and command in other.metadata.get("commands", COMMANDS)]
            if len(others) > 1:
                if group_name not in groups:
                    groups[group_name] = parser.add_mutually_exclusive_group(required=True)
                target = groups[group_name]
            else:
                keywords["required"] = True
        elif metadata.get("required"):
            keywords["required"] = True
        target.add_argument(*spellings, **keywords)


def add_finetune_arguments(parser: argparse.ArgumentParser, command: str) -> None:
    """Every option of `hf-elmo finetune <command>` (train or train-classifier)."""
    for dataclass_type in (DataFiles, ModelArguments, DataArguments, TrainingKnobs):
        add_dataclass_arguments(parser, dataclass_type, command)


def options_from_arguments(args: argparse.Namespace) -> FinetuneOptions:
    """The `FinetuneOptions` of parsed command-line options (options the command lacks keep their defaults)."""
    return FinetuneOptions(**{name: getattr(args, name) for name in FIELDS if hasattr(args, name)})


__all__ = ["DataArguments", "DataFiles", "FinetuneOptions", "ModelArguments", "OptionError", "TrainingKnobs",
           "add_dataclass_arguments", "add_finetune_arguments", "check_batch_size", "flag", "options_from_arguments",
           "run_identity_names", "training_argument_names"]
