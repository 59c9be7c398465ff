"""The `hf-elmo` command line, one front end for every command.

    hf-elmo embed sentences.txt vectors.hdf5             # AllenNLP `allennlp elmo` layout
    hf-elmo embed sentences.txt sentences.npy            # one mean vector per line
    hf-elmo similar --corpus corpus.txt --sentence "我们喝小米粥" --word 小米
    hf-elmo convert --from allennlp --options options.json --weights weights.hdf5 OUTPUT_DIR
    hf-elmo info
    hf-elmo corpus ... / hf-elmo pretrain ... / hf-elmo finetune ...
    hf-elmo export --format onnx --output DIR / hf-elmo serve --model DIR --port 8080

Each command is a module here with `HELP`, `DESCRIPTION` (kept as written in --help), `add_arguments(parser)`
(argparse only, so that `--help` answers without loading torch), optionally `check(args)`, the checks that need
no model (input and output paths, the model folder, option combinations: answered before torch and transformers
are imported), and `run(args)`, which imports the library code it drives; a `HelpFormatter` class there
replaces the default formatter. Exit status: 0 done, 2 a problem the user can fix (one `hf-elmo: error:` line),
3 an upload failed after the output was written, 130 interrupted.
"""

from __future__ import annotations

import argparse
import importlib
import sys
from collections.abc import Sequence

from .errors import CommandError

COMMANDS = ("embed", "similar", "convert", "info", "corpus", "pretrain", "finetune", "export", "serve")
# Short commands, which neither tag, save taggers nor train: they register the models without the tagging pipeline
# and the pretraining head (`register_auto_classes`), whose imports they do not need, and the `hf-elmo` process ends
# without the interpreter's teardown after them (hf_elmo/cli.py).
SHORT_COMMANDS = ("embed", "similar", "convert", "info")


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="hf-elmo",
        description="ELMo contextual word vectors: embed text, find words by context, convert, inspect, pretrain "
        "and fine-tune models.",
        epilog="Run `hf-elmo COMMAND --help` for a command's options.",
    )
    subparsers = parser.add_subparsers(dest="command", metavar="COMMAND")
    for name in COMMANDS:
        command = importlib.import_module(f"{__name__}.{name}")
        formatter = getattr(command, "HelpFormatter", argparse.RawDescriptionHelpFormatter)
        command_parser = subparsers.add_parser(name, help=command.HELP, description=command.DESCRIPTION,
                                               formatter_class=formatter)
        command.add_arguments(command_parser)
        command_parser.set_defaults(run=command.run, check=getattr(command, "check", None),
                                    registers_itself=getattr(command, "REGISTERS_AUTO_CLASSES_ITSELF", False))
    return parser


def _user_errors() -> tuple[type[BaseException], ...]:
    """The exceptions that are a user's problem (bad input, files, options), reported as one line."""
    return CommandError, ValueError, OSError  # OSError: files, permissions, a full disk, the network


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    argv = list(sys.argv[1:] if argv is None else argv)
    args = parser.parse_args(argv)
    args.command_line = argv[1:]  # the command's own options, as given
    if args.command is None:
        parser.print_help()
        return 2
    from .. import register_auto_classes
    from ..loading import MODEL_OPTION

    model_option = MODEL_OPTION.set("--model")  # the flag every command names its model with
    try:
        if args.check is not None:
            args.check(args)
        short = args.command in SHORT_COMMANDS
        if not args.registers_itself:  # `serve` of an ONNX export never imports torch
            register_auto_classes(tagging=not short, pretraining=not short)
        return args.run(args) or 0
    except KeyboardInterrupt:
        command = importlib.import_module(f"{__name__}.{args.command}")
        what_remains = getattr(command, "after_interruption", lambda args: "no output was written")(args)
        print(f"hf-elmo: interrupted; {what_remains}", file=sys.stderr)
        return 130
    except Exception as error:  # a full disk comes as OSError, h5py's RuntimeError, safetensors' own error, ...
        from ..file_io import is_disk_full
        from .errors import is_out_of_memory, out_of_memory_message

        if is_out_of_memory(error):  # where no command named what it was building
            print(f"hf-elmo: error: {out_of_memory_message(error, f'hf-elmo {args.command}')}", file=sys.stderr)
        elif is_disk_full(error):
            print(f"hf-elmo: error: the disk is full ({_one_line(error)}); free some space and run the command "
                  "again", file=sys.stderr)
        elif isinstance(error, _user_errors()):
            print(f"hf-elmo: error: {_one_line(error)}", file=sys.stderr)
        else:
            raise
        return 2
    finally:
        MODEL_OPTION.reset(model_option)


def _one_line(error: BaseException) -> str:
    text = str(error).strip()
    return text.splitlines()[0] if text else type(error).__name__


__all__ = ["COMMANDS", "SHORT_COMMANDS", "CommandError", "build_parser", "main"]
