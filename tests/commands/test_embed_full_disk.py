"""`hf-elmo embed` on a full disk: one error line, exit status 2, nothing left behind (not SIGBUS / SIGSEGV)."""

from __future__ import annotations

import errno
import subprocess
import sys
import textwrap

import pytest

from full_disk import small_file_system
from helpers_embed import save_tiny_model
from paths import REPO_ROOT


@pytest.fixture(scope="module")
def model_dir(tmp_path_factory):
    return save_tiny_model(tmp_path_factory.mktemp("tiny-elmo"))


@pytest.fixture
def big_input(tmp_path):
    path = tmp_path / "in.txt"
    path.write_text("".join(f"the cat sat on the mat number {i} again and again\n" for i in range(3000)))
    return path


def embed(*argv):
    return subprocess.run(
        [sys.executable, "-m", "hf_elmo.cli", "embed", *map(str, argv)], capture_output=True, text=True,
        cwd=REPO_ROOT, timeout=300,
    )


@pytest.mark.parametrize("name", ["out.hdf5", "out.npy"])
def test_a_disk_too_small_is_one_error_before_any_work(model_dir, big_input, name, monkeypatch):
    with small_file_system(512 * 1024) as folder:
        if folder is None:
            pytest.skip("cannot mount a small tmpfs here; the injected-ENOSPC tests below cover the writers")
        result = embed(big_input, folder / name, "--model", model_dir, "--split", "whitespace", "--layers", "all")
        assert result.returncode == 2, result.stderr[-2000:]
        lines = result.stderr.strip().splitlines()
        assert len(lines) == 1 and "not enough free space" in lines[0] and str(folder) in lines[0], lines
        assert list(folder.iterdir()) == []


# The disk fills up while the output is written (another process takes the space): the writers must stop with
# one line, removing their temporary; run in a child process so that a crash shows as its exit status.
FILL_DURING_WRITE = textwrap.dedent(
    """
    import os, sys
    import numpy as np
    from hf_elmo.cli import CommandError, embed as cli
    from hf_elmo.utils.io import atomic_file
    folder, output_format, inject = sys.argv[1], sys.argv[2], sys.argv[3] == "inject"
    output = os.path.join(folder, "out." + output_format)

    def rows():
        for index in range(400):
            if index == 5:  # someone else fills the disk
                if inject:
                    import errno
                    raise OSError(errno.ENOSPC, "No space left on device")
                with open(os.path.join(folder, "filler"), "wb") as filler:
                    try:
                        while True:
                            filler.write(b"x" * 65536)
                            filler.flush()
                    except OSError:
                        pass
            yield index, np.ones((3, 20, 32), np.float32)

    try:
        with atomic_file(output) as temporary:
            writer = cli.NpyWriter(temporary, (400, 3, 20, 32)) if output_format == "npy" else cli.Hdf5Writer(temporary, [["w"] * 20] * 400)
            cli._write_embeddings(writer, rows(), None, output, 400 * (4 * 3 * 20 * 32 + 2048))
    except CommandError as error:
        print("error:", error)
        sys.exit(2)
    """
)


def fill_during_write(folder, output_format, inject):
    return subprocess.run(
        [sys.executable, "-c", FILL_DURING_WRITE, str(folder), output_format, "inject" if inject else "real"],
        capture_output=True, text=True, cwd=REPO_ROOT, timeout=300,
    )


def test_hdf5_output_on_a_disk_that_fills_during_the_write_is_one_error(tmp_path):
    with small_file_system(4 * 1024 * 1024) as folder:
        inject = folder is None
        folder = folder or tmp_path
        result = fill_during_write(folder, "hdf5", inject)
        assert result.returncode == 2, (result.returncode, result.stderr[-3000:])
        assert result.stdout.startswith("error:") and "no output was written" in result.stdout, result.stdout
        assert "Traceback" not in result.stderr
        assert sorted(p.name for p in folder.iterdir()) in ([], ["filler"])


def test_npy_output_keeps_its_reserved_space_when_the_disk_fills(tmp_path):
    with small_file_system(4 * 1024 * 1024) as folder:
        if folder is None:
            pytest.skip("cannot mount a small tmpfs here (the allocation itself is tested below)")
        result = fill_during_write(folder, "npy", inject=False)
        assert result.returncode == 0, (result.returncode, result.stderr[-3000:])
        import numpy as np

        assert np.load(folder / "out.npy").shape == (400, 3, 20, 32)


def test_npy_space_is_allocated_before_writing(tmp_path, monkeypatch):
    """The .npy output is a memory map: writing into an unallocated page of a full disk raises SIGBUS, so the
    writer allocates the whole file first and a full disk is a DiskFullError there."""
    from hf_elmo.utils import io as file_io
    from hf_elmo.cli import embed as cli

    def no_space(descriptor, offset, length):
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(file_io.os, "posix_fallocate", no_space, raising=False)
    with pytest.raises(file_io.DiskFullError, match="not enough free space"):
        cli.NpyWriter(str(tmp_path / "x.npy"), (1000, 64))
