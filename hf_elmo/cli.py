"""The `hf-elmo` command (console script and `python -m hf_elmo.cli`); the commands are in hf_elmo/commands/."""

import sys

from .commands import main

if __name__ == "__main__":
    sys.exit(main())
