"""utils/io.py: atomic outputs, temporaries named for their process, and the removal of those left by killed runs."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap

import pytest

from hf_elmo.utils.io import AtomicDirectory, atomic_file, remove_stale_temporaries, temporary_name

LEAVE_A_TEMPORARY = textwrap.dedent(
    """
    import os, sys, time
    from hf_elmo.utils.io import temporary_name
    folder, kind = sys.argv[1], sys.argv[2]
    path = os.path.join(folder, temporary_name("out.hdf5"))
    if kind == "dir":
        os.mkdir(path)
        open(os.path.join(path, "part"), "w").close()
    else:
        open(path, "w").close()
    print(path, flush=True)
    time.sleep(60)
    """
)


def start_owner(folder, kind="file"):
    """A process that makes a temporary beside folder/out.hdf5 and waits: (process, temporary path)."""
    process = subprocess.Popen([sys.executable, "-c", LEAVE_A_TEMPORARY, str(folder), kind], stdout=subprocess.PIPE, text=True)
    return process, process.stdout.readline().strip()


@pytest.mark.parametrize("kind", ["file", "dir"])
def test_temporaries_of_killed_runs_are_removed_and_those_of_running_ones_kept(tmp_path, kind):
    process, temporary = start_owner(tmp_path, kind)
    try:
        assert os.path.exists(temporary)
        assert remove_stale_temporaries(tmp_path / "out.hdf5") == 0  # its owner still runs
        assert os.path.exists(temporary)
    finally:
        process.send_signal(signal.SIGKILL)
        process.wait()
    (tmp_path / "out.hdf5.tmp").write_text("a user's own file")
    (tmp_path / ".other.h5.tmp-1-2-abc").write_text("another target's temporary")
    assert remove_stale_temporaries(tmp_path / "out.hdf5") == 1
    assert not os.path.exists(temporary)
    assert sorted(p.name for p in tmp_path.iterdir()) == [".other.h5.tmp-1-2-abc", "out.hdf5.tmp"]


def test_a_reused_process_id_is_not_taken_for_the_owner(tmp_path):
    name = temporary_name("out.npy")
    pid, start = name.split(".tmp-")[1].split("-")[:2]
    assert int(pid) == os.getpid()
    if int(start) == 0:
        pytest.skip("no /proc: process start times are not available on this system")
    (tmp_path / name).write_text("ours")
    assert remove_stale_temporaries(tmp_path / "out.npy") == 0
    # the same pid with another start time: a process that ended, whose pid this process now has
    other = name.replace(f"-{pid}-{start}-", f"-{pid}-{int(start) - 1}-")
    os.rename(tmp_path / name, tmp_path / other)
    assert remove_stale_temporaries(tmp_path / "out.npy") == 1


def test_atomic_outputs_use_owned_temporaries_and_leave_none(tmp_path):
    target = tmp_path / "vectors.npy"
    with atomic_file(target) as temporary:
        assert os.path.basename(temporary).startswith(f".vectors.npy.tmp-{os.getpid()}-")
        with open(temporary, "w") as handle:
            handle.write("x")
    assert target.read_text() == "x"
    with pytest.raises(RuntimeError):
        with AtomicDirectory(tmp_path / "model") as folder:
            assert folder.name.startswith(f".model.tmp-{os.getpid()}-")
            raise RuntimeError("interrupted")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["vectors.npy"]


def test_a_temporary_of_another_pid_namespace_is_never_taken_for_dead(tmp_path):
    """A run in a container sharing the folder has pids of its own: the sweep cannot look its owner up."""
    import shutil

    if shutil.which("unshare") is None or subprocess.run(["unshare", "--pid", "--fork", "--mount-proc", "true"]).returncode:
        pytest.skip("cannot start a process in a new pid namespace here (unshare needs root)")
    # --kill-child: the process in the namespace ends with unshare (it would otherwise outlive the test)
    process = subprocess.Popen(["unshare", "--pid", "--fork", "--kill-child", "--mount-proc", sys.executable, "-c",
                                LEAVE_A_TEMPORARY, str(tmp_path), "file"], stdout=subprocess.PIPE, text=True)
    try:
        temporary = process.stdout.readline().strip()
        assert os.path.exists(temporary)
        assert remove_stale_temporaries(tmp_path / "out.hdf5") == 0  # its pid (1 or 2 in there) is someone else here
        assert os.path.exists(temporary)
    finally:
        process.send_signal(signal.SIGKILL)
        process.wait()


def test_temporaries_of_unknown_origin_are_left(tmp_path):
    dead_pid = 2**22 + 1  # above Linux's pid_max limit: no such process
    for name in (f".out.npy.tmp-{dead_pid}-5-0123456789ab-x", f".out.npy.tmp-{dead_pid}-5-000000000000-x",
                 f".out.npy.tmp-{dead_pid}-5-abc"):
        (tmp_path / name).write_text("another machine's, or an unknown one's")
    assert remove_stale_temporaries(tmp_path / "out.npy") == 0
    name = temporary_name("out.npy").replace(f".tmp-{os.getpid()}-", f".tmp-{dead_pid}-")
    (tmp_path / name).write_text("a dead process of this machine")
    assert remove_stale_temporaries(tmp_path / "out.npy") == 1


KILLED_BETWEEN_THE_STEPS = textwrap.dedent(
    """
    import os, shutil, sys
    from hf_elmo.utils import io as file_io
    target, step = sys.argv[1], sys.argv[2]
    if step == "between the two renames":
        real_replace = file_io.os.replace
        def replace_then_die(source, destination):
            real_replace(source, destination)
            os._exit(9)
        file_io.os.replace = replace_then_die
    else:  # after the two renames, before the previous output is deleted
        file_io.shutil.rmtree = lambda *args, **kwargs: os._exit(9)
    with file_io.AtomicDirectory(target, overwrite=True) as folder:
        (folder / "config.json").write_text("new")
    """
)


@pytest.mark.parametrize("step", ["between the two renames", "after the two renames"])
def test_overwrite_killed_between_its_steps_keeps_the_previous_output_recoverable(tmp_path, step):
    from hf_elmo.utils.io import restore_interrupted_overwrite

    target = tmp_path / "model"
    target.mkdir()
    (target / "config.json").write_text("previous")
    killed = subprocess.run([sys.executable, "-c", KILLED_BETWEEN_THE_STEPS, str(target), step])
    assert killed.returncode == 9
    if step == "between the two renames":
        assert not target.exists()  # the previous output is only in the dead run's ".old" folder
        assert restore_interrupted_overwrite(target)
        assert (target / "config.json").read_text() == "previous"
    else:
        assert (target / "config.json").read_text() == "new"
    assert remove_stale_temporaries(target) == 1  # the new folder, or the previous one after the two renames
    assert sorted(p.name for p in tmp_path.iterdir()) == ["model"]


def test_the_sweep_itself_puts_the_previous_output_back(tmp_path):
    target = tmp_path / "model"
    target.mkdir()
    (target / "config.json").write_text("previous")
    subprocess.run([sys.executable, "-c", KILLED_BETWEEN_THE_STEPS, str(target), "between the two renames"])
    remove_stale_temporaries(target)
    assert (target / "config.json").read_text() == "previous"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["model"]
