"""Reading input files with one-line errors, and output files that appear whole or not at all.

Every command writes to a uniquely named temporary file beside the target and renames it onto the target
only when the content is complete, so an interrupted or failed run leaves neither a half-written file nor a
stray temporary behind, and never touches another file that happens to share a predictable name.

A temporary's name says which process made it: ``.TARGET.KIND-PID-START-MACHINE-RANDOM`` with the process id,
its start time (so a reused pid is not mistaken for the owner) and a digest of the host name, boot id and pid
namespace (a pid means something only there: another container or host sharing the folder has its own). A
process killed with SIGKILL cannot clean up; `remove_stale_temporaries` deletes such leftovers beside a target
once their owner is provably gone, and leaves those it cannot judge.
"""

from __future__ import annotations

import contextlib
import ctypes
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
except ImportError:  # Windows
    fcntl = None

_TEMPORARY = re.compile(
    r"^\.(?P<target>.+)\.(?P<kind>[a-z]+)-(?P<pid>\d+)-(?P<start>\d+)-(?P<machine>[0-9a-f]{12})-[A-Za-z0-9_]+$"
)
# The machine digest of a process that cannot name its pid namespace: its temporaries are never judged.
_UNKNOWN_MACHINE = "0" * 12


@functools.lru_cache(maxsize=1)
def _machine_identity() -> str:
    """12 hex digits naming where this process's pids mean something: host name, boot and pid namespace."""
    parts = [socket.gethostname()]
    if os.path.isdir("/proc"):
        try:
            with open("/proc/sys/kernel/random/boot_id", encoding="ascii") as boot:
                parts.append(boot.read().strip())
            parts.append(os.readlink("/proc/self/ns/pid"))
        except OSError:
            return _UNKNOWN_MACHINE
    else:  # no pid namespaces; a reboot makes every old owner gone anyway
        parts.append(sys.platform)
    digest = hashlib.sha256("\0".join(parts).encode("utf-8", "surrogateescape")).hexdigest()[:12]
    return digest if digest != _UNKNOWN_MACHINE else "0" * 11 + "1"


def _process_start(pid: int) -> int | None:
    """The start time of process `pid` in clock ticks since boot (Linux), None if there is no such process or
    no /proc to ask."""
    try:
        with open(f"/proc/{pid}/stat", encoding="ascii", errors="replace") as stat:
            return int(stat.read().rsplit(")", 1)[1].split()[19])
    except (OSError, IndexError, ValueError):
        return None


def temporary_prefix(target_name: str, kind: str = "tmp") -> str:
    """The start of a temporary name beside `target_name` that names this process (see the module docstring)."""
    pid = os.getpid()
    return f".{target_name}.{kind}-{pid}-{_process_start(pid) or 0}-{_machine_identity()}-"


def temporary_name(target_name: str, kind: str = "tmp") -> str:
    return temporary_prefix(target_name, kind) + uuid.uuid4().hex


def _owner_is_running(pid: int, start: int) -> bool:
    running_start = _process_start(pid)
    if running_start is not None:
        return start == 0 or running_start == start
    if os.path.isdir("/proc"):
        return False  # Linux: no such process
    try:  # elsewhere: only whether the pid is alive
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except OSError:
        return True
    return True


_AT_FDCWD = -100
_RENAME_NOREPLACE = 1
_RENAME_EXCHANGE = 2


@functools.lru_cache(maxsize=1)
def _renameat2():
    if not sys.platform.startswith("linux"):
        return None
    try:
        function = ctypes.CDLL(None, use_errno=True).renameat2  # glibc 2.28 and later
    except (OSError, AttributeError):
        return None
    function.argtypes = [ctypes.c_int, ctypes.c_char_p, ctypes.c_int, ctypes.c_char_p, ctypes.c_uint]
    function.restype = ctypes.c_int
    return function


def _rename_with_flags(first: str | os.PathLike, second: str | os.PathLike, flags: int) -> bool:
    """renameat2(first, second, flags); False, with nothing changed, where the C library or the file system
    does not have it. Other failures raise OSError."""
    renameat2 = _renameat2()
    if renameat2 is None:
        return False
    if renameat2(_AT_FDCWD, os.fsencode(first), _AT_FDCWD, os.fsencode(second), flags) == 0:
        return True
    code = ctypes.get_errno()
    if code in (errno.ENOSYS, errno.EINVAL, errno.EOPNOTSUPP, errno.ENOTSUP):
        return False
    raise OSError(code, os.strerror(code), os.fspath(second))


def exchange_paths(first: str | os.PathLike, second: str | os.PathLike) -> bool:
    """Swap two existing paths in one atomic step (Linux renameat2 RENAME_EXCHANGE); False, with nothing
    changed, where the C library or the file system cannot."""
    return _rename_with_flags(first, second, _RENAME_EXCHANGE)


def rename_without_replacing(source: str | os.PathLike, target: str | os.PathLike) -> None:
    """Rename `source` to `target`, raising FileExistsError if `target` exists: atomically where renameat2
    RENAME_NOREPLACE works (a plain rename would silently replace an empty folder made meanwhile)."""
    try:
        if _rename_with_flags(source, target, _RENAME_NOREPLACE):
            return
    except FileExistsError:
        raise FileExistsError(f"{os.fspath(target)} appeared while writing it; not replacing it (pass --overwrite)") from None
    if os.path.lexists(target):
        raise FileExistsError(f"{os.fspath(target)} appeared while writing it; not replacing it (pass --overwrite)")
    os.replace(source, target)


class OutputInUseError(OSError):
    """Another run holds the lock of an output (`output_lock`)."""


_held_locks: set[str] = set()


def _lock_path(target: str) -> str:
    return os.path.join(os.path.dirname(target), f".{os.path.basename(target)}.lock")


def _remove_stale_lock(target: str) -> None:
    """Delete the lock file a killed run left beside `target`: one whose lock can be taken (by the protocol of
    `output_lock`, so a live holder is never disturbed)."""
    lock_path = _lock_path(target)
    if fcntl is None or target in _held_locks or not os.path.isfile(lock_path):
        return
    try:
        descriptor = os.open(lock_path, os.O_RDWR)
    except OSError:
        return
    try:
        fcntl.flock(descriptor, fcntl.LOCK_EX | fcntl.LOCK_NB)
        if os.path.samestat(os.fstat(descriptor), os.stat(lock_path)):
            os.unlink(lock_path)
    except OSError:
        pass  # held by a live run, or already gone
    finally:
        os.close(descriptor)


@contextlib.contextmanager
def output_lock(target: str | os.PathLike) -> Iterator[None]:
    """Hold, for the whole block, the one writer's lock of the output `target` (a file or folder to be written):
    `fcntl.flock` on ``.TARGET.lock`` beside it, which records this run's pid, host and start time. A second
    run into the same output gets `OutputInUseError` naming the first. The lock file is removed on exit; the
    kernel releases the lock of a killed run, and the next run takes it over. Nested calls for one target
    in one process hold it once. Where file locks are unavailable (no fcntl, a file system without locks),
    the block runs without one."""
    target = os.path.abspath(os.fspath(target))
    if target in _held_locks or fcntl is None:
        yield
        return
    lock_path = _lock_path(target)
    if not os.path.isdir(os.path.dirname(target)):
        raise ValueError(f"output folder does not exist: {os.path.dirname(target)}")
    while True:
        try:
            descriptor = os.open(lock_path, os.O_RDWR | os.O_CREAT, 0o666)
        except OSError as error:  # the same words as `check_writable`, which callers may run later
            raise ValueError(f"cannot write to {os.path.dirname(target)}: {error.strerror or error}") from None
        try:
            fcntl.flock(descriptor, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = os.read(descriptor, 1000).decode("utf-8", "replace").strip() or "its identity not yet written"
            os.close(descriptor)
            raise OutputInUseError(
                f"{target} is being written by another hf-elmo run ({holder}; lock {lock_path}); wait for it to "
                "end, or choose another output"
            ) from None
        except OSError as error:
            os.close(descriptor)
            if error.errno not in (errno.ENOLCK, errno.EOPNOTSUPP, errno.ENOTSUP, errno.EINVAL):
                raise
            yield
            return
        # The previous holder removes the file on its way out: a lock on a file no longer at `lock_path` is
        # no lock for anyone else, so take the one on the file now there.
        try:
            if os.path.samestat(os.fstat(descriptor), os.stat(lock_path)):
                break
        except FileNotFoundError:
            pass
        os.close(descriptor)
    try:
        started = time.strftime("%Y-%m-%d %H:%M:%S %z")
        os.ftruncate(descriptor, 0)
        os.write(descriptor, f"pid {os.getpid()} on {socket.gethostname()}, started {started}\n".encode())
        _held_locks.add(target)
        yield
    finally:
        _held_locks.discard(target)
        with contextlib.suppress(FileNotFoundError):
            os.unlink(lock_path)
        os.close(descriptor)


def restore_interrupted_overwrite(target: str | os.PathLike) -> bool:
    """Put back the previous output folder of a replacement killed between its two renames (see
    `AtomicDirectory`): when `target` is missing and a dead run's ".old" folder beside it holds it. Returns
    whether it did."""
    target = Path(os.path.abspath(os.fspath(target)))
    if os.path.lexists(target):
        return False
    for match, path in _dead_temporaries(target):
        previous = os.path.join(path, "previous")
        if match["kind"] == "old" and os.path.isdir(previous) and not os.path.lexists(target):
            os.replace(previous, target)
            shutil.rmtree(path, ignore_errors=True)
            return True
    return False


def finish_interrupted_file_set(target: str | os.PathLike) -> bool:
    """Move in the rest of a complete set of files (see `AtomicFileSet`) whose run died while moving them into
    place, so the folder holds the whole new set; returns whether there was one."""
    target = Path(os.path.abspath(os.fspath(target)))
    finished = False
    for match, path in _dead_temporaries(target):
        if match["kind"] == "ready" and os.path.isdir(path):
            _move_files_in(path, target.parent)
            finished = True
    return finished


def _move_files_in(source: str | os.PathLike, folder: str | os.PathLike) -> None:
    """Move every file of the folder `source` into `folder`, then remove `source`."""
    for name in sorted(os.listdir(source)):
        os.replace(os.path.join(source, name), os.path.join(folder, name))
    os.rmdir(source)


def _dead_temporaries(target: Path) -> list[tuple[re.Match, str]]:
    """(name match, path) of the temporaries beside `target` whose owner is provably gone."""
    try:
        entries = list(os.scandir(target.parent))
    except OSError:
        return []
    dead = []
    for entry in entries:
        match = _TEMPORARY.match(entry.name)
        if not match or match["target"] != target.name:
            continue
        if match["machine"] != _machine_identity() or match["machine"] == _UNKNOWN_MACHINE:
            continue
        if not _owner_is_running(int(match["pid"]), int(match["start"])):
            dead.append((match, entry.path))
    return dead


def remove_stale_temporaries(target: str | os.PathLike) -> int:
    """Delete the temporaries beside `target` (files or folders named by `temporary_name`) whose process is no
    longer running; returns how many were removed. Temporaries of running processes are left alone, and so are
    those made on another host, boot or pid namespace (a container sharing the folder), whose owner cannot be
    looked up from here."""
    target = Path(os.path.abspath(os.fspath(target)))
    restore_interrupted_overwrite(target)  # never delete the only copy of the previous output
    finish_interrupted_file_set(target)  # nor a complete set of new files half moved in
    _remove_stale_lock(str(target))
    removed = 0
    for _, path in _dead_temporaries(target):
        try:
            if os.path.isdir(path) and not os.path.islink(path):
                shutil.rmtree(path)
            else:
                os.unlink(path)
            removed += 1
        except FileNotFoundError:
            pass  # another process removed it first
    return removed


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
    handle, temporary = tempfile.mkstemp(prefix=temporary_prefix(os.path.basename(target)), dir=os.path.dirname(target))
    os.close(handle)
    os.chmod(temporary, 0o666 & ~_current_umask())
    try:
        yield temporary
        if os.path.lexists(target) and not overwrite:
            raise ValueError(f"{os.fspath(path)} appeared while writing it; not replacing it (pass --overwrite)")
        refuse_special_output(target)  # it may have been made while this run worked
        if os.path.isdir(target):
            raise ValueError(f"{os.fspath(path)} became a folder while writing it; not replacing it")
        os.replace(temporary, target)
    finally:
        if os.path.exists(temporary):
            os.unlink(temporary)


def apply_umask(folder: str | os.PathLike) -> None:
    """Give every file under `folder` the permissions a plain `open(path, "w")` would: writers that go through
    mkstemp (safetensors' save, as transformers calls it) leave 0600 files another user cannot read."""
    mode = 0o666 & ~_current_umask()
    for root, _, files in os.walk(folder):
        for name in files:
            path = os.path.join(root, name)
            if not os.path.islink(path):
                os.chmod(path, mode)


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


def remove_incomplete_checkpoints(folder: str | os.PathLike) -> list[str]:
    """Delete the Trainer checkpoints in `folder` that a failed save left without their trainer_state.json
    (written last); returns their names."""
    removed = []
    for checkpoint in sorted(Path(folder).glob("checkpoint-*")):
        if checkpoint.is_dir() and not (checkpoint / "trainer_state.json").is_file():
            shutil.rmtree(checkpoint, ignore_errors=True)
            removed.append(checkpoint.name)
    return removed


def atomic_write_text(path: str | os.PathLike, text: str, overwrite: bool = True) -> None:
    """Write `text` (UTF-8) to `path` atomically (`overwrite`: see `atomic_file`)."""
    with atomic_file(path, overwrite=overwrite) as temporary:
        with open(temporary, "w", encoding="utf-8") as handle:
            handle.write(text)


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


# Files one of hf-elmo's output folders always holds (a model folder, or the bilm-tf export).
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


class AtomicDirectory:
    """Build a folder under a temporary name beside `target` and move it into place only on success.

    With `overwrite=False` an existing `target` is refused before anything is written, and again if one appeared
    by the time the folder is complete. The block holds `output_lock(target)`.
    """

    def __init__(self, target: str | os.PathLike, overwrite: bool = False, markers=OUTPUT_FOLDER_MARKERS):
        self.target = Path(target)
        self.overwrite = overwrite
        self.markers = tuple(markers)  # the files that mark a folder as an output `overwrite` may replace
        self.path: Path | None = None

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

    def __enter__(self) -> Path:
        self.check()
        self.target.parent.mkdir(parents=True, exist_ok=True)
        self._lock = output_lock(self.target)
        self._lock.__enter__()
        # A plain mkdir (not mkdtemp, which makes 0700 folders) so the result gets the usual permissions.
        self.path = self.target.parent / temporary_name(self.target.name)
        self.path.mkdir()
        return self.path

    def __exit__(self, exc_type, exc, tb) -> bool:
        try:
            return self._move_into_place(exc_type)
        finally:
            self._lock.__exit__(None, None, None)

    def _move_into_place(self, exc_type) -> bool:
        if exc_type is not None:
            shutil.rmtree(self.path, ignore_errors=True)
            return False
        apply_umask(self.path)
        if os.path.lexists(self.target):
            try:  # what is there now may not be what `check` saw before the work: another run's output
                if not self.overwrite:
                    raise FileExistsError(f"{self.target} appeared while writing it; not replacing it (pass --overwrite)")
                self.check()
            except BaseException:
                shutil.rmtree(self.path, ignore_errors=True)
                raise
            if exchange_paths(self.path, self.target):  # one step: no moment without a complete output
                shutil.rmtree(self.path, ignore_errors=True)  # now the previous output
                return False
            # Two steps: between them the previous output is only in the ".old" folder, which the sweep of a
            # later run puts back (`restore_interrupted_overwrite`) if this process dies there.
            old = Path(tempfile.mkdtemp(prefix=temporary_prefix(self.target.name, "old"), dir=self.target.parent))
            os.replace(self.target, old / "previous")
            try:
                os.replace(self.path, self.target)
            except BaseException:
                os.replace(old / "previous", self.target)  # put the previous folder back untouched
                shutil.rmtree(self.path, ignore_errors=True)
                shutil.rmtree(old, ignore_errors=True)
                raise
            shutil.rmtree(old, ignore_errors=True)
        else:
            try:
                rename_without_replacing(self.path, self.target)
            except BaseException:
                shutil.rmtree(self.path, ignore_errors=True)
                raise
        return False


@contextlib.contextmanager
def _termination_deferred() -> Iterator[None]:
    """Hold SIGINT and SIGTERM until the block is done (they are delivered then): for steps that must not be
    left half done. Only the main thread of a POSIX process can do this; elsewhere the block runs as is."""
    import signal
    import threading

    if not hasattr(signal, "pthread_sigmask") or threading.current_thread() is not threading.main_thread():
        yield
        return
    held = {signal.SIGINT, signal.SIGTERM}
    previous = signal.pthread_sigmask(signal.SIG_BLOCK, held)
    try:
        yield
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, previous)


class AtomicFileSet:
    """Write the files `names` of `folder` as one unit: the folder ends with all of the previous ones or all of
    the new ones, never a mix (one file of a split written while another is not would leak the test part into
    the pretraining text).

    The block writes the files into a temporary folder inside `folder` (yielded). When it ends without error
    that folder is renamed to a ".ready" one, which marks the set complete, and its files are moved in with
    SIGINT/SIGTERM held back. A run killed (SIGKILL) while moving leaves the ".ready" folder, and the next run's
    sweep (`remove_stale_temporaries` of ``folder / unit``) moves the rest in; a run that fails before leaves
    the previous files untouched and its temporary is removed. Existing files are replaced only with
    `overwrite`; the block holds `output_lock(folder / unit)` and sweeps what killed runs left first.
    """

    def __init__(self, folder: str | os.PathLike, names, unit: str, overwrite: bool = False):
        self.folder = Path(folder)
        self.names = tuple(names)
        self.unit = unit
        self.overwrite = overwrite
        self.path: Path | None = None

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

    def __enter__(self) -> Path:
        self.check()
        self.folder.mkdir(parents=True, exist_ok=True)
        self._lock = output_lock(self.folder / self.unit)
        self._lock.__enter__()
        try:
            remove_stale_temporaries(self.folder / self.unit)
            self.check()  # a killed run's set, now moved in, counts as existing
            self.path = self.folder / temporary_name(self.unit)
            self.path.mkdir()
        except BaseException:
            self._lock.__exit__(None, None, None)
            raise
        return self.path

    def __exit__(self, exc_type, exc, tb) -> bool:
        try:
            if exc_type is None:
                try:
                    written = sorted(os.listdir(self.path))
                    if written != sorted(self.names):
                        raise RuntimeError(f"wrote {written} for the set {sorted(self.names)}")
                    apply_umask(self.path)
                    self.check()  # nothing appeared meanwhile that must not be replaced
                    ready = self.folder / temporary_name(self.unit, "ready")
                    os.replace(self.path, ready)
                except BaseException:
                    shutil.rmtree(self.path, ignore_errors=True)
                    raise
                with _termination_deferred():
                    _move_files_in(ready, self.folder)
            else:
                shutil.rmtree(self.path, ignore_errors=True)
        finally:
            self._lock.__exit__(None, None, None)
        return False


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
