"""`python -m hf_elmo.cli ...`: the `hf-elmo` command."""

import sys

from . import main

if __name__ == "__main__":
    sys.exit(main())
