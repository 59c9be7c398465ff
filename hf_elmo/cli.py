"""The `hf-elmo` command (console script and `python -m hf_elmo.cli`); the commands are in hf_elmo/commands/."""

from __future__ import annotations

import sys
from collections.abc import Sequence

from .commands import SHORT_COMMANDS
from .commands import main as run_command


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command `argv` (default: the process's arguments) and return its exit status.

    Called without arguments by the `hf-elmo` console script or `python -m hf_elmo.cli`, whose process ends with the
    command, a short command (`embed`, `similar`, `convert`, `info`) ends the process itself once it returned: the
    exit handlers run and the standard streams are flushed as at any exit, but the interpreter's teardown of every
    loaded module (torch, transformers and what they import), which took 0.5-1.5 s after a one-line `hf-elmo embed`,
    is skipped. Training commands exit as usual."""
    code = run_command(argv)
    if argv is None and sys.argv[1:2] and sys.argv[1] in SHORT_COMMANDS and _this_process_is_the_command():
        _end_process(code)
    return code


def _this_process_is_the_command() -> bool:
    from . import _started_as_the_command

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


if __name__ == "__main__":
    sys.exit(main())
