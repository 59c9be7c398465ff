"""A real full disk for tests: a small tmpfs mounted for the test (root on Linux), else None."""

from __future__ import annotations

import contextlib
import os
import subprocess
import tempfile
from collections.abc import Iterator
from pathlib import Path


@contextlib.contextmanager
def small_file_system(size_bytes: int) -> Iterator[Path | None]:
    """A folder on a file system of `size_bytes`, or None where this process cannot mount one (then the test
    injects ENOSPC at the write call instead)."""
    folder = Path(tempfile.mkdtemp(prefix="hf-elmo-small-disk-"))
    mounted = False
    try:
        if hasattr(os, "geteuid") and os.geteuid() == 0:
            result = subprocess.run(
                ["mount", "-t", "tmpfs", "-o", f"size={size_bytes}", "tmpfs", str(folder)], capture_output=True
            )
            mounted = result.returncode == 0
        yield folder if mounted else None
    finally:
        if mounted:
            subprocess.run(["umount", "-l", str(folder)], capture_output=True)
        os.rmdir(folder)
