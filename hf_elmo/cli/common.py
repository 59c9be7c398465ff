"""What several commands share: reading the input lines, splitting them into words, the model options, the
options of a command built from dataclasses."""

from __future__ import annotations

import argparse
import dataclasses
import os
import types
import typing
from collections.abc import Sequence

from ..utils.io import read_input_bytes, split_text_lines
from ..utils.options import default_of
from ..utils.options import spellings as option_spellings
from .errors import CommandError, memory_for

DEFAULT_MAX_LINE_BYTES = 1_000_000
DEFAULT_MAX_WORDS_PER_LINE = 10_000


def read_lines(path: str, blank_lines: str = "error", what: str = "input", max_line_bytes: int | None = None) -> list[str]:
    """The stripped lines of a UTF-8 text file (`-` = stdin), checked for encoding and blank lines; lines end at
    \\n, \\r\\n or \\r (`split_text_lines`).

    `blank_lines="error"` refuses blank lines (naming them, as `allennlp elmo` did), `"keep"` keeps them
    as sentences of zero words, `"skip"` drops them. A line over `max_line_bytes` is refused before it is
    decoded or segmented: the model's memory grows with the longest sentence of a batch.
    """
    data = read_input_bytes(path, what)
    raw_lines = split_text_lines(data)
    lines = []
    for number, raw in enumerate(raw_lines, start=1):
        if max_line_bytes is not None and len(raw) > max_line_bytes:
            raise CommandError(
                f"{path}: line {number} is {len(raw):,} bytes, over --max-line-bytes {max_line_bytes:,}; "
                "put one sentence or paragraph on each line, or raise the limit"
            )
        try:
            text = raw.decode("utf-8")
        except UnicodeDecodeError as error:
            raise CommandError(
                f"{path}: line {number} is not valid UTF-8 (byte 0x{raw[error.start]:02x} at byte offset {error.start}); "
                "convert the file to UTF-8 first"
            ) from None
        if number == 1:
            text = text.removeprefix("\ufeff")
        lines.append(text.strip())
    blank = [number for number, line in enumerate(lines, start=1) if not line]
    if blank and blank_lines == "error":
        shown = ", ".join(map(str, blank[:10])) + (f" and {len(blank) - 10} more" if len(blank) > 10 else "")
        raise CommandError(
            f"{path}: blank line(s) at line {shown}; remove them, or pass --blank-lines keep "
            "(empty entries) or --blank-lines skip"
        )
    if blank_lines == "skip":
        lines = [line for line in lines if line]
    if not lines:
        raise CommandError(f"{path}: no sentences in the {what} file")
    return lines


def split_lines(
    lines: Sequence[str], split: str, tokenizer, max_words: int | None = None, what: str = "input"
) -> list[list[str]]:
    """Words of each line: the model's tokenizer (`model`) or whitespace-separated (`whitespace`); a line of
    more than `max_words` words is refused before the model sees any of them."""
    word_lists = [line.split() for line in lines] if split == "whitespace" else [tokenizer.tokenize(line) for line in lines]
    if max_words is not None:
        for number, words in enumerate(word_lists, start=1):
            if len(words) > max_words:
                raise CommandError(
                    f"{what}: sentence {number} has {len(words):,} words, over --max-words-per-line {max_words:,}; "
                    "split it, or raise the limit"
                )
    return word_lists


def check_input_file(path: str | None, what: str = "input") -> None:
    """`CommandError` naming `path` unless it is an existing file; `None` (not given) and `-` (stdin) pass."""
    if path is None or path == "-":
        return
    if os.path.isdir(path):
        article = "an" if what[:1] in "aeio" or what.startswith("hdf5") else "a"
        raise CommandError(f"{path} is a folder, not {article} {what} file")
    if not os.path.exists(path):
        raise CommandError(f"{what} file not found: {path}")


def check_output_parent(path: str) -> None:
    """`CommandError` unless the folder that is to hold the output `path` exists (as for every output of hf-elmo
    named by the user, it is not made)."""
    parent = os.path.dirname(os.path.abspath(path))
    if not os.path.isdir(parent):
        raise CommandError(f"output folder does not exist: {parent}")


def check_output_apart(output: str, output_flag: str, models=(), files=()) -> None:
    """`ValueError` (exit 2, one line) when the output is a model folder or file the command reads, contains one, or
    lies inside a model folder (`refuse_output_over_inputs`, the one check of every command that writes).
    `models`: (flag, name) pairs of the models read ('default' is the shipped model; Hub names pass);
    `files`: (flag, path) pairs of the input files read."""
    from ..loading import resolve_model_name
    from ..utils.io import refuse_output_over_inputs

    inputs = [("the model folder", flag, resolve_model_name(name)) for flag, name in models if name is not None]
    inputs += [("the input folder" if os.path.isdir(path) else "the input file", flag, path)
               for flag, path in files if path not in (None, "-")]
    refuse_output_over_inputs(output, output_flag, inputs)


def output_argument(args, metavar: str) -> str:
    """The output named positionally (`metavar`) or as --output (`args.output_option`): one of them, once."""
    positional, option = args.output, getattr(args, "output_option", None)
    if positional is not None and option is not None and positional != option:
        raise CommandError(f"two outputs given: {metavar} {positional} and --output {option}; give one")
    if positional is None and option is None:
        raise CommandError(f"the output is missing: give --output {metavar} (or {metavar} as the last argument)")
    return positional if positional is not None else option


def check_model_folder(model: str | None) -> None:
    """`ModelNotFoundError` for a model named as a local folder that is missing or holds no config.json; `None`,
    'default' and Hub names pass (the Hub is asked when the model is loaded)."""
    if model is None:
        return
    from ..loading import check_local_model, resolve_model_name

    check_local_model(resolve_model_name(model))


def make_embedder(args, distributed=None):
    """The `Embedder` of --model: a local folder's encoder as an `ElmoBiLm` (`load_bilm`, which spares the import of
    transformers' model classes, most of the start-up), a Hub model's as an `ElmoModel`."""
    import torch
    from transformers.utils import logging as hf_logging

    from ..integrations.embedder import Embedder
    from ..loading import load_model_and_tokenizer

    hf_logging.disable_progress_bar()
    device = args.device
    if device is None and torch.cuda.is_available():
        device = f"cuda:{distributed.local_rank}" if distributed else "cuda"
    with memory_for(f"the model {args.model or 'default'}"):
        model, tokenizer, _ = load_model_and_tokenizer(args.model, user_dict=getattr(args, "user_dict", None),
                                                       bilm=True)
        embedder = Embedder(model, tokenizer=tokenizer, device=device or "cpu", dtype=args.dtype,
                            batch_size=args.batch_size, progress=False)
    return embedder


# transformers' bars for every weight file it reads or writes: a pretraining run drew one "Writing model shards" bar
# per checkpoint (28 in a short run), and every load one "Loading weights" bar, between the command's own lines.
QUIET_BARS = ("Loading weights", "Writing model shards")


def quiet_weight_bars() -> tuple:
    """Hide transformers' per-file weight bars (`QUIET_BARS`) for the rest of the command, keeping its other bars
    (downloads) and the commands' own; returns (the previous hook,) to restore, or None where transformers has no
    such hook (4.x)."""
    from transformers.utils import logging as hf_logging

    if not hasattr(hf_logging, "set_tqdm_hook"):  # transformers 4.x: no hook, its weight bars stay
        return None

    def hook(factory, args, kwargs):
        if kwargs.get("desc") in QUIET_BARS:
            kwargs = {**kwargs, "disable": True}
        return factory(*args, **kwargs)

    return (hf_logging.set_tqdm_hook(hook),)


def batch_memory(args):
    """`memory_for` the model's work on a batch, whose memory grows with --batch-size and the longest line."""
    return memory_for(f"the vectors of a batch of {args.batch_size} sentence(s)",
                      "pass a smaller --batch-size, or a file of shorter lines")


def add_model_arguments(parser: argparse.ArgumentParser, batch: bool = True) -> None:
    group = parser.add_argument_group("model")
    group.add_argument("--model", help="model folder or Hub id; 'default' or no --model: the Chinese model shipped with hf-elmo")
    group.add_argument("--device", help="torch device, e.g. cpu or cuda:0 (default: cuda if available)")
    group.add_argument("--dtype", choices=["float32", "bfloat16", "float16"], help="compute dtype (default float32)")
    if batch:
        group.add_argument("--batch-size", type=int, default=64, help="sentences per forward pass (default 64)")


def _true_or_false(text: str) -> bool:
    """A switch's optional value, read as transformers' `string_to_bool` reads it."""
    if text.lower() in ("yes", "true", "t", "y", "1", "no", "false", "f", "n", "0"):
        return text.lower() in ("yes", "true", "t", "y", "1")
    raise argparse.ArgumentTypeError(f"true or false expected, got {text}")


def add_dataclass_options(parser: argparse.ArgumentParser, *dataclass_types) -> None:
    """Add to `parser` an option for each field of `dataclass_types`, made from the field as transformers'
    `HfArgumentParser` makes it, so that the dataclasses stay HfArgumentParser's to parse: the parsed namespace
    holds each field under its name, with the value HfArgumentParser gives (tests/commands/test_finetune_options.py
    parses the same command lines with both). HfArgumentParser itself is not used because importing it imports the
    transformers package: 0.7-2 s more for `--help` and for the errors answered before any model is loaded.

    Read as HfArgumentParser reads them: the spellings `--field-name` and the metadata's `aliases` (a list; shown
    first, as the spellings --help and error messages use); the rest of the metadata (`help`, `required`, `nargs`,
    ...) goes to `add_argument` as it is; `X | None` is `X`; `Literal[...]` gives the choices, `list[X]` takes one
    or more values; a field without a default is required; a dataclass's `_argument_group_name` is its --help
    section. A `bool` field is a switch (`--x` alone is True, `--x false` False); one that is on by default, or
    None (decided later), also gets `--no-` before each of its spellings (HfArgumentParser: `--no-x` for one on by
    default). HfArgumentParser's `--field_name` spellings are left out of --help's way.
    """
    for dataclass_type in dataclass_types:
        title = getattr(dataclass_type, "_argument_group_name", None)
        section = parser.add_argument_group(title) if title else parser
        hints = typing.get_type_hints(dataclass_type)
        for item in dataclasses.fields(dataclass_type):
            if not item.init:
                continue
            value_type = hints[item.name]
            if typing.get_origin(value_type) in (typing.Union, types.UnionType):  # X | None
                value_type = next(kind for kind in typing.get_args(value_type) if kind is not type(None))
            default = default_of(item)
            keywords = {"dest": item.name, "type": value_type, "default": default}
            if value_type is bool:
                keywords.update(type=_true_or_false, default=False if default is dataclasses.MISSING else default)
                if default is not None:
                    keywords.update(nargs="?", const=True)
            elif default is dataclasses.MISSING:
                keywords.update(default=None, required=True)
            if typing.get_origin(value_type) is typing.Literal:
                names = {str(choice): choice for choice in typing.get_args(value_type)}
                keywords.update(choices=list(names.values()), type=lambda text, names=names: names.get(text, text))
            elif typing.get_origin(value_type) is list:
                keywords.update(type=typing.get_args(value_type)[0], nargs="+")
            metadata = {key: value for key, value in item.metadata.items() if key != "aliases"}
            spellings = option_spellings(item)
            if "choices" not in keywords:  # the value's name in --help: of the spelling shown first
                keywords["metavar"] = "true|false" if value_type is bool else spellings[0][2:].replace("-", "_").upper()
            section.add_argument(*spellings, **{**keywords, **metadata})
            if value_type is bool and keywords["default"] is not False:  # its default is the switch's, shown there
                section.add_argument(*("--no-" + spelling[2:] for spelling in spellings), dest=item.name,
                                     action="store_false", default=argparse.SUPPRESS,
                                     help=f"the opposite of {spellings[0]}")


class OptionsHelpFormatter(argparse.RawDescriptionHelpFormatter, argparse.ArgumentDefaultsHelpFormatter):
    """The description as written, and each option's default in its help, where it has one worth saying (not for
    a required option, a default of None, or the `--no-` side of a switch)."""

    def _get_help_string(self, action):
        if action.required or action.default is None or action.default is argparse.SUPPRESS:
            return action.help
        return super()._get_help_string(action)


def add_user_dict_argument(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--user-dict", metavar="FILE",
        help="a jieba user dictionary (one word a line, optionally with a frequency and a part of speech) for "
        "the model's tokenizer: names and terms it should keep whole (needs a model that segments with jieba)",
    )


def check_user_dict(args, presplit: bool, split_option: str) -> None:
    """`CommandError` for a --user-dict that is missing, or given for text that is split already."""
    if args.user_dict is None:
        return
    if presplit:
        raise CommandError(f"--user-dict tells jieba how to split text into words; with {split_option} the text is "
                           "split already: give one of them")
    check_input_file(args.user_dict, "--user-dict")
    from ..models.elmo.text_elmo import check_text_file  # the tokenizer's own check, before any model is loaded

    try:
        check_text_file(args.user_dict, "--user-dict")
    except ValueError as error:
        raise CommandError(str(error)) from None


def add_text_arguments(parser: argparse.ArgumentParser) -> None:
    add_user_dict_argument(parser)
    parser.add_argument(
        "--split",
        choices=["model", "whitespace"],
        default="model",
        help="how a line becomes words: the model's tokenizer (default; jieba for Chinese) or whitespace "
        "only, for text that is already segmented (what `allennlp elmo` did)",
    )
    parser.add_argument(
        "--max-words-per-line", type=positive_int, default=DEFAULT_MAX_WORDS_PER_LINE,
        help=f"refuse a line of more words than this (default {DEFAULT_MAX_WORDS_PER_LINE:,}): memory grows with it",
    )
    parser.add_argument(
        "--max-line-bytes", type=positive_int, default=DEFAULT_MAX_LINE_BYTES,
        help=f"refuse a line of more bytes than this before reading it into words (default {DEFAULT_MAX_LINE_BYTES:,})",
    )


def positive_int(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a whole number >= 1, got {text!r}") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"expected a whole number >= 1, got {value}")
    return value
