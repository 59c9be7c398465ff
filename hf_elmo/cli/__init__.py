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
import signal
import sys
from collections.abc import Sequence

from .errors import CommandError

COMMANDS = ("embed", "similar", "convert", "info", "corpus", "pretrain", "finetune", "export", "serve")
# Short commands, which do not train: they register the models without the pretraining head
# (`register_auto_classes`), or nothing where they load a local folder's encoder as an `ElmoBiLm` (embed, similar,
# info: `common.make_embedder`; the loading registers what a Hub model needs), and the `hf-elmo` process ends
# without the interpreter's teardown after them (`main`).
SHORT_COMMANDS = ("embed", "similar", "convert", "info")


def command_modules() -> dict:
    """Each command's module by name, in the order of `COMMANDS` (argparse only: importing them loads no torch)."""
    from . import convert, corpus, embed, export, finetune, info, pretrain, serve, similar

    modules = {"embed": embed, "similar": similar, "convert": convert, "info": info, "corpus": corpus,
               "pretrain": pretrain, "finetune": finetune, "export": export, "serve": serve}
    return {name: modules[name] for name in COMMANDS}


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="hf-elmo",
        description="ELMo contextual word vectors: embed text, find words by context, convert, inspect, pretrain "
        "and fine-tune models.",
        epilog="Run `hf-elmo COMMAND --help` for a command's options.",
    )
    subparsers = parser.add_subparsers(dest="command", metavar="COMMAND")
    for name, command in command_modules().items():
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


def run_command(argv: Sequence[str] | None = None) -> int:
    """Parse `argv` (default: the process's arguments), run the command and return its exit status."""
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
    previous_bar_hook = None
    try:
        if args.check is not None:
            args.check(args)
        if not args.registers_itself:  # `serve` of an ONNX export never imports torch
            register_auto_classes(pretraining=args.command not in SHORT_COMMANDS)
        from .common import quiet_weight_bars

        previous_bar_hook = quiet_weight_bars()
        return args.run(args) or 0
    except KeyboardInterrupt as interruption:
        command = command_modules()[args.command]
        what_remains = getattr(command, "after_interruption", lambda args: "no output was written")(args)
        saved = getattr(interruption, "checkpoint", None)  # training stopped on the signal after saving one
        if saved:
            what_remains = f"saved the checkpoint {saved}; " + what_remains
        # On its own line: a progress bar (or the terminal's ^C) may hold the cursor mid-line.
        print(f"{chr(10) if sys.stderr.isatty() else ''}hf-elmo: interrupted; {what_remains}", file=sys.stderr)
        return 130
    except Exception as error:  # a full disk comes as OSError, h5py's RuntimeError, safetensors' own error, ...
        from ..utils.io import is_disk_full
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
        if previous_bar_hook is not None:
            from transformers.utils import logging as hf_logging

            hf_logging.set_tqdm_hook(previous_bar_hook[0])


def _one_line(error: BaseException) -> str:
    text = str(error).strip()
    return text.splitlines()[0] if text else type(error).__name__


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command `argv` (default: the process's arguments) and return its exit status.

    Called without arguments by the `hf-elmo` console script or `python -m hf_elmo.cli`, whose process ends with the
    command: a Ctrl-C that comes once the command has ended is ignored (the output is complete, or the interruption
    reported, and torch's exit hooks would otherwise end in a traceback), and a short command (`embed`, `similar`,
    `convert`, `info`) ends the process itself once it returned: the exit handlers run and the standard streams are
    flushed as at any exit, but the interpreter's teardown of every loaded module (torch, transformers and what they
    import), which took 0.5-1.5 s after a one-line `hf-elmo embed`, is skipped. Training commands exit as usual."""
    try:
        code = run_command(argv)
    finally:
        if argv is None:
            signal.signal(signal.SIGINT, signal.SIG_IGN)
    if argv is None and sys.argv[1:2] and sys.argv[1] in SHORT_COMMANDS and _this_process_is_the_command():
        _end_process(code)
    return code


def _this_process_is_the_command() -> bool:
    from .. import _started_as_the_command

    return _started_as_the_command()


def _end_process(code: int) -> None:
    """Exit with `code` as `sys.exit(code)` would, without the interpreter's teardown; returns (leaving the exit to
    the interpreter) when another thread still runs, which the interpreter would wait for, or when a standard stream
    cannot be flushed, which it reports."""
    import atexit
    import os
    import threading

    if any(thread.is_alive() and not thread.daemon for thread in threading.enumerate()
           if thread is not threading.main_thread()):
        return
    atexit._run_exitfuncs()  # logging, multiprocessing, temporary folders, ...: in the order the interpreter runs them
    try:
        for stream in (sys.stdout, sys.stderr):
            if stream is not None:
                stream.flush()
    except (OSError, ValueError):
        return
    os._exit(code)


__all__ = ["COMMANDS", "SHORT_COMMANDS", "CommandError", "build_parser", "main", "run_command"]
