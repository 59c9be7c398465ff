"""Reading input files with one-line errors, and output files that appear whole or not at all.

Every command writes to a uniquely named temporary file beside the target and renames it onto the target
only when the content is complete, so an interrupted or failed run leaves neither a half-written file nor a
stray temporary behind, and never touches another file that happens to share a predictable name.
"""

from __future__ import annotations

import contextlib
import os
import sys
import tempfile
from collections.abc import Iterator


def check_output_path(path: str | os.PathLike, overwrite: bool, flag: str = "--overwrite") -> None:
    """Raise ValueError, before any work is done, if `path` cannot take a new output file."""
    path = os.fspath(path)
    if os.path.isdir(path):
        raise ValueError(f"{path} is a folder; give a file name to write to")
    if os.path.exists(path) and not overwrite:
        raise ValueError(f"{path} already exists (pass {flag} to replace it)")
    parent = os.path.dirname(os.path.abspath(path))
    if not os.path.isdir(parent):
        raise ValueError(f"output folder does not exist: {parent}")
    check_writable(parent)


def check_writable(folder: str | os.PathLike) -> None:
    """Raise ValueError naming `folder` if no file can be created in it (permissions, a read-only file system):
    found by creating one, since permission bits do not tell root or a read-only mount apart."""
    try:
        with tempfile.TemporaryFile(dir=folder):
            pass
    except OSError as error:
        raise ValueError(f"cannot write to {os.fspath(folder)}: {error.strerror or error}") from None


def check_output_folder(path: str | os.PathLike, flag: str = "output folder") -> None:
    """Raise ValueError, before any work is done, if the folder `path` (made with its missing parents) could
    not be written: it or an ancestor is a file, or its nearest existing ancestor is not writable."""
    path = os.path.abspath(os.fspath(path))
    folder = path
    while not os.path.exists(folder):
        parent = os.path.dirname(folder)
        if parent == folder:  # a root that does not exist (a missing drive on Windows)
            raise ValueError(f"{flag} {path} cannot be created: {folder} does not exist")
        folder = parent
    if not os.path.isdir(folder):
        what = "is a file" if folder == path else f"lies inside {folder}, which is a file"
        raise ValueError(f"{flag} {path} {what}, not a folder")
    check_writable(folder)


def _current_umask() -> int:
    try:  # Linux: read it without changing it (setting it, even briefly, affects every thread)
        with open("/proc/self/status", encoding="ascii") as status:
            for line in status:
                if line.startswith("Umask:"):
                    return int(line.split()[1], 8)
    except OSError:
        pass
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


@contextlib.contextmanager
def atomic_file(path: str | os.PathLike, overwrite: bool = True) -> Iterator[str]:
    """A fresh temporary path beside `path`, renamed onto it only when the block finishes without error.

    The file gets the permissions a plain `open(path, "w")` would give (mkstemp alone makes it 0600).
    """
    target = os.path.abspath(os.fspath(path))
    check_output_path(target, overwrite=True)  # a folder or a missing parent fails before any work
    handle, temporary = tempfile.mkstemp(prefix=f".{os.path.basename(target)}.", suffix=".tmp", dir=os.path.dirname(target))
    os.close(handle)
    os.chmod(temporary, 0o666 & ~_current_umask())
    try:
        yield temporary
        if os.path.exists(target) and not overwrite:
            raise ValueError(f"{os.fspath(path)} appeared while writing it; not replacing it (pass --overwrite)")
        os.replace(temporary, target)
    finally:
        if os.path.exists(temporary):
            os.unlink(temporary)


def atomic_write_text(path: str | os.PathLike, text: str, overwrite: bool = True) -> None:
    """Write `text` (UTF-8) to `path` atomically (`overwrite`: see `atomic_file`)."""
    with atomic_file(path, overwrite=overwrite) as temporary:
        with open(temporary, "w", encoding="utf-8") as handle:
            handle.write(text)


def read_input_bytes(path: str | os.PathLike, what: str = "input") -> bytes:
    """The bytes of `path` (`-` = standard input); ValueError naming the file when it is missing, a folder or
    unreadable (`what` names the kind of file in the message)."""
    path = os.fspath(path)
    try:
        if path == "-":
            return sys.stdin.buffer.read()
        with open(path, "rb") as handle:
            return handle.read()
    except FileNotFoundError:
        raise ValueError(f"{what} file not found: {path}") from None
    except IsADirectoryError:
        raise ValueError(f"{path} is a folder, not a {what} file") from None
    except OSError as error:
        raise ValueError(f"cannot read the {what} file {path}: {error.strerror or error}") from None
