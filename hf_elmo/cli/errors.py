"""The one error type of the command line: a problem the user can fix, printed as one line, exit status 2."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator


class CommandError(Exception):
    """A problem the user can fix; printed as one `hf-elmo: error:` line, exit status 2."""


# How torch (CPU and CUDA) and numpy word a failed allocation; MemoryError itself is caught by its type.
_OUT_OF_MEMORY_PHRASES = ("not enough memory", "Unable to allocate", "can't allocate memory", "out of memory")


def is_out_of_memory(error: BaseException) -> bool:
    """Whether `error` is a failed allocation: MemoryError, or torch's RuntimeError around one."""
    return isinstance(error, MemoryError) or (
        isinstance(error, RuntimeError) and any(phrase in str(error) for phrase in _OUT_OF_MEMORY_PHRASES)
    )


def out_of_memory_message(error: BaseException, what: str) -> str:
    text = str(error).strip()
    detail = text.splitlines()[-1].strip() if text else type(error).__name__
    return f"not enough memory for {what} ({detail[:200]})"


@contextlib.contextmanager
def memory_for(what: str, advice: str = "") -> Iterator[None]:
    """Turn a failed allocation inside the block into a `CommandError` naming `what` was being built."""
    try:
        yield
    except (MemoryError, RuntimeError) as error:
        if not is_out_of_memory(error):
            raise
        raise CommandError(out_of_memory_message(error, what) + (f"; {advice}" if advice else "")) from None
