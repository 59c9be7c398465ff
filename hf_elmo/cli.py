"""The `hf-elmo` command (console script and `python -m hf_elmo.cli`); the commands are in hf_elmo/commands/."""

import signal
import sys

from .commands import main as run_command


def main(argv=None) -> int:
    """Run the command of `argv` (default: the process's arguments). Run as the process's own command line (no
    `argv`), a Ctrl-C that comes once the command has ended is ignored: the output is complete (or the interruption
    reported), and torch's exit hooks would otherwise end in a traceback."""
    try:
        return run_command(argv)
    finally:
        if argv is None:
            signal.signal(signal.SIGINT, signal.SIG_IGN)


if __name__ == "__main__":
    sys.exit(main())
