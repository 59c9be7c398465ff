"""The one error type of the command line: a problem the user can fix, printed as one line, exit status 2."""


class CommandError(Exception):
    """A problem the user can fix; printed as one `hf-elmo: error:` line, exit status 2."""
