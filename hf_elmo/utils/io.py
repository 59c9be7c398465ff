"""Outputs that appear whole or not at all, one writer per output, and input files read with one-line errors.

Every output is built under a temporary name beside its target and renamed onto it only when complete, so an
interrupted or failed run leaves neither a half-written output nor a stray temporary, and never touches a file that
happens to share a predictable name. A run holds the output's lock (`output_lock`) while it writes; taking it
sweeps what killed runs left beside the output (`remove_stale_temporaries`).

A temporary's name says which process made it: ``.TARGET.KIND-PID-START-MACHINE-RANDOM``, with the process id, its
start time (a reused pid is not the owner) and a digest of the host name, boot id and pid namespace (a pid means
something only there: a container sharing the folder has pids of its own). The sweep deletes a temporary only once
its owner is provably gone, and leaves those it cannot judge.
"""

from __future__ import annotations

import contextlib
import errno
import functools
import hashlib
import json
import os
import re
import shutil
import socket
import stat
import sys
import tempfile
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

from ..models.elmo.text_elmo import open_file

try:
    import fcntl
except ImportError:  # Windows: no lock, the block runs as is
    fcntl = None


# Temporaries named for their process --------------------------------------------------------------------------

_TEMPORARY = re.compile(
    r"^\.(?P<target>.+)\.(?P<kind>[a-z]+)-(?P<pid>\d+)-(?P<start>\d+)-(?P<machine>[0-9a-f]{12})-[A-Za-z0-9_]+$"
)
_UNKNOWN_MACHINE = "0" * 12  # a process that cannot name its pid namespace: its temporaries are never judged


@functools.lru_cache(maxsize=1)
def _machine() -> str:
    """12 hex digits naming where this process's pids mean something: host name, boot and pid namespace."""
    parts = [socket.gethostname()]
    try:
        with open("/proc/sys/kernel/random/boot_id", encoding="ascii") as boot:
            parts += [boot.read().strip(), os.readlink("/proc/self/ns/pid")]
    except OSError:
        if os.path.isdir("/proc"):
            return _UNKNOWN_MACHINE
        parts.append(sys.platform)  # no pid namespaces, and a reboot ends every owner anyway
    return hashlib.sha256("\0".join(parts).encode("utf-8", "surrogateescape")).hexdigest()[:12]


def _process_start(pid: int) -> int | None:
    """The start time of process `pid` in clock ticks since boot (Linux); None without such a process or /proc."""
    try:
        with open(f"/proc/{pid}/stat", encoding="ascii", errors="replace") as handle:
            return int(handle.read().rsplit(")", 1)[1].split()[19])
    except (OSError, IndexError, ValueError):
        return None


def _owner_is_gone(pid: int, start: int) -> bool:
    running_start = _process_start(pid)
    if running_start is not None:
        return start != 0 and running_start != start
    if os.path.isdir("/proc"):
        return True  # Linux: no such process
    try:  # elsewhere only whether the pid is alive can be asked
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    except OSError:
        pass
    return False


def temporary_name(target_name: str, kind: str = "tmp") -> str:
    """A fresh name beside `target_name` for a temporary of this process (see the module docstring)."""
    pid = os.getpid()
    return f".{target_name}.{kind}-{pid}-{_process_start(pid) or 0}-{_machine()}-{uuid.uuid4().hex}"


def temporary_folder(target: str | os.PathLike, kind: str = "tmp") -> Path:
    """A new folder beside `target`, named for this process; made with the usual permissions (mkdtemp's are 0700)."""
    path = Path(target).parent / temporary_name(Path(target).name, kind)
    path.mkdir()
    return path


def _dead_temporaries(target: Path) -> list[tuple[re.Match, str]]:
    """(name match, path) of the temporaries beside `target` whose owner is provably gone."""
    try:
        entries = list(os.scandir(target.parent))
    except OSError:
        return []
    return [(match, entry.path) for entry in entries
            if (match := _TEMPORARY.match(entry.name)) and match["target"] == target.name
            and match["machine"] == _machine() != _UNKNOWN_MACHINE
            and _owner_is_gone(int(match["pid"]), int(match["start"]))]


# The one lock -------------------------------------------------------------------------------------------------


class OutputInUseError(OSError):
    """Another run holds the lock of an output (`output_lock`)."""


_held: set[str] = set()


def _lock_path(target: str) -> str:
    return os.path.join(os.path.dirname(target), f".{os.path.basename(target)}.lock")


@contextlib.contextmanager
def output_lock(target: str | os.PathLike) -> Iterator[None]:
    """Hold, for the whole block, the one writer's lock of the output `target` (a file or folder to be written, made
    inside its parent, which is made if missing), then sweep what killed runs left beside it.

    The lock is `fcntl.flock` on ``.TARGET.lock`` beside the output, which records this run's pid, host and start
    time: a second run into the same output gets `OutputInUseError` naming the first. The file is removed on exit;
    the kernel releases the lock of a killed run, and the next run takes the file over. Nested calls for one target
    in one process hold it once. Where there are no file locks (Windows, a file system without them) or the parent
    cannot be made (the command's own check names why), the block runs without one.
    """
    target = os.path.abspath(os.fspath(target))
    if target in _held:
        yield
        return
    folder, lock_path, descriptor = os.path.dirname(target), _lock_path(target), None
    with contextlib.suppress(OSError):
        os.makedirs(folder, exist_ok=True)
    while fcntl is not None and os.path.isdir(folder):
        try:
            descriptor = os.open(lock_path, os.O_RDWR | os.O_CREAT, 0o666)
        except OSError as error:  # the words of `check_writable`, which callers may run later
            raise ValueError(f"cannot write to {folder}: {error.strerror or error}") from None
        try:
            fcntl.flock(descriptor, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = os.read(descriptor, 1000).decode("utf-8", "replace").strip() or "its identity not yet written"
            os.close(descriptor)
            raise OutputInUseError(f"{target} is being written by another hf-elmo run ({holder}; lock {lock_path}); "
                                   "wait for it to end, or choose another output") from None
        except OSError as error:
            os.close(descriptor)
            descriptor = None
            if error.errno not in (errno.ENOLCK, errno.EOPNOTSUPP, errno.ENOTSUP, errno.EINVAL):
                raise
            break
        # The previous holder removes the file on its way out: a lock on a file no longer at `lock_path` excludes
        # no one, so take the one on the file now there.
        with contextlib.suppress(FileNotFoundError):
            if os.path.samestat(os.fstat(descriptor), os.stat(lock_path)):
                break
        os.close(descriptor)
    try:
        if descriptor is not None:
            started = time.strftime("%Y-%m-%d %H:%M:%S %z")
            os.ftruncate(descriptor, 0)
            os.write(descriptor, f"pid {os.getpid()} on {socket.gethostname()}, started {started}\n".encode())
        _held.add(target)
        remove_stale_temporaries(target, say=True)
        yield
    finally:
        _held.discard(target)
        if descriptor is not None:
            with contextlib.suppress(FileNotFoundError):
                os.unlink(lock_path)
            os.close(descriptor)


# The one sweep ------------------------------------------------------------------------------------------------


def restore_interrupted_overwrite(target: str | os.PathLike) -> bool:
    """Put back the previous output folder of a replacement killed between its two renames (see `AtomicDirectory`):
    when `target` is missing and a dead run's ".old" folder beside it holds it. Returns whether it did."""
    target = Path(os.path.abspath(os.fspath(target)))
    for match, path in _dead_temporaries(target):
        previous = os.path.join(path, "previous")
        if match["kind"] == "old" and os.path.isdir(previous) and not os.path.lexists(target):
            os.replace(previous, target)
            shutil.rmtree(path, ignore_errors=True)
            return True
    return False


def remove_stale_temporaries(target: str | os.PathLike, say: bool = False) -> int:
    """Delete the temporaries beside `target` (named by `temporary_name`) whose process is no longer running, after
    putting back a previous output that one had moved aside and moving in the rest of a complete file set
    (`AtomicFileSet`) one was moving in; returns how many were deleted. Temporaries of running processes are left,
    and so are those of another host, boot or pid namespace, whose owner cannot be looked up from here. With `say`,
    what was done is said on stderr."""
    target = Path(os.path.abspath(os.fspath(target)))
    if restore_interrupted_overwrite(target) and say:  # never delete the only copy of the previous output
        print(f"hf-elmo: put back the previous {target}, which a killed --overwrite run had moved aside",
              file=sys.stderr)
    removed = 0
    for match, path in _dead_temporaries(target):
        with contextlib.suppress(FileNotFoundError):  # another process removed it first
            if match["kind"] == "ready" and os.path.isdir(path):
                _move_files_in(path, target.parent)
            elif os.path.isdir(path) and not os.path.islink(path):
                shutil.rmtree(path)
                removed += 1
            else:
                os.unlink(path)
                removed += 1
    if removed and say:
        print(f"hf-elmo: removed {removed} temporary file(s) or folder(s) of killed runs beside {target}",
              file=sys.stderr)
    if fcntl is not None and str(target) not in _held and os.path.isfile(_lock_path(str(target))):
        _remove_lock_of_a_killed_run(_lock_path(str(target)))
    return removed


def _remove_lock_of_a_killed_run(path: str) -> None:
    """Delete the lock file `path` if its lock can be taken (by the protocol of `output_lock`: a live holder keeps
    it)."""
    try:
        descriptor = os.open(path, os.O_RDWR)
    except OSError:
        return
    try:
        fcntl.flock(descriptor, fcntl.LOCK_EX | fcntl.LOCK_NB)
        if os.path.samestat(os.fstat(descriptor), os.stat(path)):
            os.unlink(path)
    except OSError:
        pass  # held by a live run, or already gone
    finally:
        os.close(descriptor)


def _move_files_in(source: str | os.PathLike, folder: str | os.PathLike) -> None:
    """Move every file of the folder `source` into `folder`, then remove `source`."""
    for name in sorted(os.listdir(source)):
        os.replace(os.path.join(source, name), os.path.join(folder, name))
    os.rmdir(source)


# Checks before any work ----------------------------------------------------------------------------------


def _not_a_plain_entry(path: str | os.PathLike) -> str | None:
    """What `path` is when it is neither missing, a regular file nor a real folder: "a symbolic link to X",
    "a character device", ... (an output may replace only what an earlier run could have written)."""
    try:
        mode = os.lstat(path).st_mode
    except FileNotFoundError:
        return None
    if stat.S_ISLNK(mode):
        return f"a symbolic link (to {os.readlink(path)})"
    for test, kind in ((stat.S_ISCHR, "a character device"), (stat.S_ISBLK, "a block device"),
                       (stat.S_ISFIFO, "a FIFO (named pipe)"), (stat.S_ISSOCK, "a socket")):
        if test(mode):
            return kind
    return None if stat.S_ISREG(mode) or stat.S_ISDIR(mode) else "not a regular file"


def refuse_special_output(path: str | os.PathLike) -> None:
    """ValueError naming `path` when it is a symbolic link, device, FIFO or socket: never replaced by an output."""
    kind = _not_a_plain_entry(path)
    if kind:
        raise ValueError(
            f"{os.fspath(path)} is {kind}; hf-elmo replaces only regular files and folders it wrote: choose another "
            "output name"
        )


def check_output_path(path: str | os.PathLike, overwrite: bool, flag: str = "--overwrite") -> None:
    """Raise ValueError, before any work is done, if `path` cannot take a new output file."""
    path = os.fspath(path)
    refuse_special_output(path)
    if os.path.isdir(path):
        raise ValueError(f"{path} is a folder; give a file name to write to")
    if os.path.lexists(path) and not overwrite:
        raise ValueError(f"{path} already exists (pass {flag} to replace it)")
    parent = os.path.dirname(os.path.abspath(path))
    if not os.path.isdir(parent):
        raise ValueError(f"output folder does not exist: {parent}")
    check_writable(parent)


def _is_inside(path: str, folder: str) -> bool:
    """Whether the resolved `path` lies strictly inside the resolved `folder`."""
    return path != folder and os.path.splitdrive(path)[0] == os.path.splitdrive(folder)[0] and \
        os.path.commonpath([path, folder]) == folder


def refuse_output_over_inputs(output: str | os.PathLike, output_flag: str, inputs) -> None:
    """ValueError (one line), before anything is written, when the output `output` (named on the command line by
    `output_flag`) is one of `inputs`, contains one, or lies inside one that is a folder: writing it (or replacing it
    with --overwrite) would destroy or change what the command reads. `inputs`: (what, flag, path) triples, e.g.
    ("the model folder", "--model", "runs/a"); paths that do not exist (Hub names) are skipped. Paths are compared
    resolved, symbolic links followed. Reads only the file system: every command that writes runs it before torch."""
    target = os.path.realpath(os.fspath(output))
    for what, flag, path in inputs:
        if path is None or not os.path.exists(path):
            continue
        source = os.path.realpath(os.fspath(path))
        if target == source:
            relation = "is"
        elif _is_inside(source, target):
            relation = "contains"
        elif os.path.isdir(source) and _is_inside(target, source):
            relation = "lies inside"
        else:
            continue
        given = f"{flag} {os.fspath(path)}" if flag else os.fspath(path)
        shown = os.fspath(output) + (f" (resolved: {target})" if target != os.path.abspath(os.fspath(output)) else "")
        raise ValueError(
            f"{output_flag} {shown} {relation} {what} it reads ({given}): writing it would destroy or change its "
            "own input; choose an output outside it"
        )


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


OUTPUT_FOLDER_MARKERS = ("config.json", "options.json")


def refuse_foreign_folder(folder: str | os.PathLike, markers=OUTPUT_FOLDER_MARKERS) -> None:
    """ValueError unless the existing `folder` may be replaced by an output folder: a real folder (no mount point)
    that is empty or holds one of `markers` (config.json or options.json; an ONNX export's model.onnx or
    client.json), with nothing but regular files and folders inside (`--overwrite` must not throw away a home
    folder or a device node given by mistake)."""
    folder = os.fspath(folder)
    if os.path.ismount(folder):
        raise ValueError(f"{folder} is a mount point; hf-elmo does not replace it: choose another output folder")
    entries = os.listdir(folder)
    if entries and not any(name in entries for name in markers):
        raise ValueError(
            f"{folder} holds no {' or '.join(markers)}, so it is no output folder of hf-elmo; --overwrite "
            "replaces only those: remove it yourself or choose another output folder"
        )
    for root, folders, files in os.walk(folder):
        for name in folders + files:
            kind = _not_a_plain_entry(os.path.join(root, name))
            if kind:
                raise ValueError(
                    f"{os.path.join(root, name)} is {kind}; --overwrite replaces only folders of regular files: "
                    f"remove {folder} yourself or choose another output folder"
                )


# Atomic writes ------------------------------------------------------------------------------------------------


@contextlib.contextmanager
def atomic_file(path: str | os.PathLike, overwrite: bool = True) -> Iterator[str]:
    """A fresh temporary path beside `path` (an empty file with the permissions a plain `open(path, "w")` gives),
    renamed onto `path` only when the block finishes without error. `overwrite=False`: refuse a `path` that appeared
    meanwhile."""
    target = os.path.abspath(os.fspath(path))
    check_output_path(target, overwrite=True)  # a folder or a missing parent fails before any work
    temporary = os.path.join(os.path.dirname(target), temporary_name(os.path.basename(target)))
    os.close(os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o666))
    try:
        yield temporary
        if os.path.lexists(target) and not overwrite:
            raise ValueError(f"{os.fspath(path)} appeared while writing it; not replacing it (pass --overwrite)")
        refuse_special_output(target)  # it may have been made while this run worked
        if os.path.isdir(target):
            raise ValueError(f"{os.fspath(path)} became a folder while writing it; not replacing it")
        os.replace(temporary, target)
    finally:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(temporary)


def atomic_write_text(path: str | os.PathLike, text: str, overwrite: bool = True) -> None:
    """Write `text` (UTF-8) to `path` atomically (`overwrite`: see `atomic_file`)."""
    with atomic_file(path, overwrite=overwrite) as temporary:
        with open(temporary, "w", encoding="utf-8") as handle:
            handle.write(text)


class _AtomicFolder:
    """A temporary folder beside `self.locked` for the block, which holds that output's lock; `check()` runs before
    any work, again once the lock's sweep is done, and the subclass's `_move_in` only when the block succeeded."""

    locked: Path
    path: Path

    def __enter__(self) -> Path:
        self.check()
        self._lock = output_lock(self.locked)
        self._lock.__enter__()
        try:
            self.check()  # the sweep may have put back a previous output, or moved in a killed run's file set
            self.path = temporary_folder(self.locked)
        except BaseException:
            self._lock.__exit__(None, None, None)
            raise
        return self.path

    def __exit__(self, exc_type, exc, tb) -> bool:
        try:
            if exc_type is None:
                # Writers that go through mkstemp (safetensors' save, as transformers calls it) leave 0600 files:
                # give every file the mode the folder's own creation got from the umask.
                mode = stat.S_IMODE(os.stat(self.path).st_mode) & 0o666
                for root, _, files in os.walk(self.path):
                    for name in files:
                        if not os.path.islink(os.path.join(root, name)):
                            os.chmod(os.path.join(root, name), mode)
                self._move_in()
        finally:
            shutil.rmtree(self.path, ignore_errors=True)  # gone already when moved in
            self._lock.__exit__(None, None, None)
        return False


class AtomicDirectory(_AtomicFolder):
    """Build a folder under a temporary name beside `target` and move it into place only on success.

    With `overwrite=False` an existing `target` is refused before anything is written, and again if one appeared by
    the time the folder is complete; with `overwrite=True` the previous output is replaced only once the new one is
    complete. The block holds `output_lock(target)`.
    """

    def __init__(self, target: str | os.PathLike, overwrite: bool = False, markers=OUTPUT_FOLDER_MARKERS):
        self.target = self.locked = Path(target)
        self.overwrite = overwrite
        self.markers = tuple(markers)  # the files that mark a folder as an output `overwrite` may replace

    def check(self) -> None:
        """Raise (FileExistsError, ValueError) if the folder could not be written; callers run it before any work."""
        refuse_special_output(self.target)
        if self.target.exists() and not self.overwrite:
            raise FileExistsError(f"{self.target} already exists (pass --overwrite to replace it)")
        if self.target.exists() and not self.target.is_dir():
            raise FileExistsError(f"{self.target} is a file; --overwrite replaces an output folder, not a file")
        if self.target.exists():
            refuse_foreign_folder(self.target, self.markers)
        check_output_folder(self.target.parent, f"{self.target} cannot be made:")

    def _move_in(self) -> None:
        if not os.path.lexists(self.target):
            os.replace(self.path, self.target)
            return
        # What is there now may not be what `check` saw before the work: another run's output.
        if not self.overwrite:
            raise FileExistsError(f"{self.target} appeared while writing it; not replacing it (pass --overwrite)")
        self.check()
        # Between the two renames the previous output is only in the ".old" folder, which the next run's sweep puts
        # back (`restore_interrupted_overwrite`) if this process dies there.
        old = temporary_folder(self.target, "old")
        os.replace(self.target, old / "previous")
        try:
            os.replace(self.path, self.target)
        except BaseException:
            os.replace(old / "previous", self.target)
            raise
        finally:
            shutil.rmtree(old, ignore_errors=True)


class AtomicFileSet(_AtomicFolder):
    """Write the files `names` of `folder` as one unit: the folder ends with all of the previous ones or all of the
    new ones, never a mix (one file of a split written while another is not would leak the test part into the
    pretraining text).

    The block writes the files into a temporary folder inside `folder` (yielded). When it ends without error that
    folder is renamed to a ".ready" one, which marks the set complete, and its files are moved in. A run killed while
    moving them leaves the ".ready" folder, whose files the next run's sweep (of ``folder / unit``) moves in; a run
    that fails before leaves the previous files untouched. Existing files are replaced only with `overwrite`; the
    block holds `output_lock(folder / unit)`.
    """

    def __init__(self, folder: str | os.PathLike, names, unit: str, overwrite: bool = False):
        self.folder = Path(folder)
        self.locked = self.folder / unit
        self.names = tuple(names)
        self.overwrite = overwrite

    def check(self) -> None:
        """Raise (FileExistsError, ValueError) if the files could not be written; run before any work."""
        check_output_folder(self.folder)
        for name in self.names:
            refuse_special_output(self.folder / name)
            if os.path.isdir(self.folder / name):
                raise ValueError(f"{self.folder / name} is a folder; not replacing it with a file")
        existing = [name for name in self.names if os.path.lexists(self.folder / name)]
        if existing and not self.overwrite:
            raise FileExistsError(f"{self.folder} already holds {', '.join(existing)} (pass --overwrite to replace them)")

    def _move_in(self) -> None:
        written = sorted(os.listdir(self.path))
        if written != sorted(self.names):
            raise RuntimeError(f"wrote {written} for the set {sorted(self.names)}")
        self.check()  # nothing appeared meanwhile that must not be replaced
        ready = self.folder / temporary_name(self.locked.name, "ready")
        os.replace(self.path, ready)
        _move_files_in(ready, self.folder)


# Free space -------------------------------------------------------------------------------------------------


class DiskFullError(OSError):
    """Not enough free space for an output; the message names the folder and the sizes."""


def human_size(size: float) -> str:
    for unit in ("bytes", "kB", "MB"):
        if size < 1000:
            return f"{size:.0f} {unit}" if unit == "bytes" else f"{size:.1f} {unit}"
        size /= 1000
    return f"{size:.1f} GB"


def check_free_space(path: str | os.PathLike, needed: int, what: str) -> None:
    """Raise DiskFullError unless the file system of `path` (a file to write, or a folder) has `needed` bytes
    free. Called before work whose output size is known, so that a full disk is one clear error up front."""
    folder = os.path.dirname(os.path.abspath(os.fspath(path))) if not os.path.isdir(path) else os.fspath(path)
    free = shutil.disk_usage(folder).free
    if free < needed:
        raise DiskFullError(
            f"not enough free space in {folder} for {what}: about {human_size(needed)} needed, {human_size(free)} free"
        )


def reserve_space(path: str | os.PathLike, size: int, what: str) -> None:
    """Allocate `size` bytes of the existing file `path` on disk now (a memory-mapped file is otherwise sparse,
    and a write into a hole of a full disk kills the process with SIGBUS instead of raising an error)."""
    if not hasattr(os, "posix_fallocate"):
        return
    descriptor = os.open(os.fspath(path), os.O_RDWR)
    try:
        os.posix_fallocate(descriptor, 0, size)
    except OSError as error:
        if error.errno == errno.ENOSPC:
            folder = os.path.dirname(os.path.abspath(os.fspath(path)))
            raise DiskFullError(f"not enough free space in {folder} for {what} ({human_size(size)})") from None
        if error.errno not in (errno.EOPNOTSUPP, errno.EINVAL):  # a file system without fallocate
            raise
    finally:
        os.close(descriptor)


def is_disk_full(error: BaseException) -> bool:
    """Whether `error` (an OSError, or h5py's RuntimeError around one) says the disk is full."""
    return getattr(error, "errno", None) in (errno.ENOSPC, errno.EDQUOT) or "No space left on device" in str(error)


def disk_filled_up(error: BaseException, folder: str | os.PathLike) -> bool:
    """Whether a failed write into `folder` was a full disk: the error says so, or (torch.save reports a short
    write as a bare "unexpected pos" RuntimeError) the file system has under 1 MB left."""
    if is_disk_full(error):
        return True
    try:
        return shutil.disk_usage(folder).free < 1_000_000
    except OSError:
        return False


# Input files, read with one-line errors -------------------------------------------------------------------


def read_input_bytes(path: str | os.PathLike, what: str = "input") -> bytes:
    """The bytes of `path` (`-` = standard input); ValueError naming the file when it is missing, a folder or
    unreadable (`what` names the kind of file in the message)."""
    path = os.fspath(path)
    if path == "-":
        return sys.stdin.buffer.read()
    with _opened_input(path, what) as handle:
        return handle.read()


def _opened_input(path: str, what: str):
    """`path` opened for reading in binary; ValueError naming the file when it is missing, a folder or unreadable."""
    return open_file(path, f"{what} file")


def decode_utf8(data: bytes, path: str | os.PathLike, encoding: str = "utf-8-sig") -> str:
    """`data` (the bytes of the file `path`) as text, a leading byte-order mark dropped (unless `encoding` is
    "utf-8"); ValueError naming the file, line and byte when it is not UTF-8."""
    try:
        return data.decode(encoding)
    except UnicodeDecodeError as error:
        line = len(split_text_lines(data[: error.start] + b"x"))
        raise ValueError(
            f"{os.fspath(path)}:{line}: not valid UTF-8 (byte 0x{data[error.start]:02x} at byte offset {error.start} "
            "of the file); convert the file to UTF-8 first"
        ) from None


def split_text_lines(data: bytes) -> list[bytes]:
    """The lines of `data`, ending at ``\n``, ``\r\n`` or a lone ``\r`` (as Python's text mode reads them),
    line ends removed; a line end at the very end makes no extra empty line. Every command reads its text
    input with this (or `iter_text_lines`), so a file from an old Mac editor is read as the lines it shows."""
    return data.splitlines()


def iter_text_lines(path: str | os.PathLike, what: str = "input", chunk_bytes: int = 1 << 20) -> Iterator[tuple[int, str]]:
    """(line number, text) of every line of the UTF-8 file `path`, read a chunk at a time, split as
    `split_text_lines` does, a leading byte-order mark dropped. ValueError naming the file and line for bytes
    that are not UTF-8 (and, as `read_input_bytes`, for a file that cannot be read)."""
    path = os.fspath(path)
    handle = _opened_input(path, what)
    number = 0

    def decoded(raw: bytes) -> str:
        try:
            text = raw.decode("utf-8")
        except UnicodeDecodeError as error:
            raise ValueError(f"{path}:{number}: not valid UTF-8 ({error.reason} at byte {error.start} of the line)") from None
        return text.removeprefix("\ufeff") if number == 1 else text

    with handle:
        pending = b""
        while chunk := handle.read(chunk_bytes):
            lines = (pending + chunk).splitlines(keepends=True)
            # The last piece may continue in the next chunk: no line end yet, or a "\r" whose "\n" comes next.
            pending = lines.pop() if not lines[-1].endswith(b"\n") else b""
            for raw in lines:
                number += 1
                yield number, decoded(raw.rstrip(b"\r\n"))
        if pending:
            number += 1
            yield number, decoded(pending.rstrip(b"\r\n"))


def load_json_file(path: str | os.PathLike, what: str):
    """A hand-edited JSON file (options, vocabularies, results); a missing file or broken JSON is a ValueError
    naming `what` and the path. A UTF-8 byte order mark is accepted."""
    try:
        with open(path, encoding="utf-8-sig") as handle:
            return json.load(handle)
    except FileNotFoundError:
        raise ValueError(f"{what} not found: {os.fspath(path)}") from None
    except (json.JSONDecodeError, UnicodeDecodeError, RecursionError) as error:
        raise ValueError(f"{what} {os.fspath(path)} is not valid JSON: {type(error).__name__}: {error}") from None
