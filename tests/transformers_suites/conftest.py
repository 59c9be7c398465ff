"""Fetch transformers' common test files for the installed version and lay them out beside the ELMo tests.

The files come from the source package of the installed transformers version on the package index (the only
network this harness uses), unpacked once into `.fetched/` (ignored by git; delete it to fetch again). Where the
index cannot be reached and nothing is cached, every test module of this folder is reported skipped with the
reason, and the rest of the suite runs as usual; CI (.ci/run) sets HF_ELMO_TRANSFORMERS_SUITES=required, which makes
that an error instead.
"""

import os
import shutil
import subprocess
import sys
import tarfile
import tempfile
from pathlib import Path, PurePosixPath

import pytest
import transformers

HARNESS = Path(__file__).resolve().parent
TRANSFORMERS_VERSION = transformers.__version__
FETCHED = HARNESS / ".fetched" / f"transformers-{TRANSFORMERS_VERSION}"
# Named `tests` because transformers' `get_tests_dir()` walks up from a test file to a folder so named (the
# tokenizer suite reads `fixtures/sample_text.txt` there).
FETCHED_TESTS = FETCHED / "tests"
# What the harness adds to the fetched folder: transformers' `tests/__init__.py` (test_configuration_common.py
# executes it through `direct_transformers_import`) is empty, and the sample text is not in the source package.
SAMPLE_TEXT = HARNESS / "fixtures" / "sample_text.txt"

# The stand-ins hold no tests; they exist only to be imported by the common files.
collect_ignore = ["exporters/test_export.py", "generation/test_utils.py", "utils/test_configuration_utils.py"]


def fetch_transformers_tests() -> str | None:
    """Make `FETCHED_TESTS` hold the installed transformers' top-level `tests/*.py`; None when it does, else why not
    (one line)."""
    if (FETCHED_TESTS / "test_modeling_common.py").is_file():
        return None
    FETCHED.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=FETCHED) as scratch:
        download = subprocess.run(
            [sys.executable, "-m", "pip", "download", f"transformers=={TRANSFORMERS_VERSION}", "--no-binary", ":all:",
             "--no-deps", "--disable-pip-version-check", "--quiet", "--timeout", "20", "--retries", "1",
             "-d", scratch],
            capture_output=True, text=True, check=False)
        archives = list(Path(scratch).glob("transformers-*.tar.gz"))
        if download.returncode != 0 or not archives:
            lines = [line.strip() for line in download.stderr.splitlines() if line.strip()]
            return (f"transformers {TRANSFORMERS_VERSION}'s test files are not cached and its source package could "
                    f"not be downloaded from the package index ({lines[-1] if lines else 'no archive'})")
        unpacked = Path(scratch) / "tests"
        unpacked.mkdir()
        with tarfile.open(archives[0]) as archive:
            for member in archive.getmembers():
                parts = PurePosixPath(member.name).parts  # ("transformers-<version>", "tests", "<name>.py")
                if member.isfile() and len(parts) == 3 and parts[1] == "tests" and parts[2].endswith(".py"):
                    (unpacked / parts[2]).write_bytes(archive.extractfile(member).read())
        if not (unpacked / "test_modeling_common.py").is_file():
            return (f"the source package of transformers {TRANSFORMERS_VERSION} holds no tests/test_modeling_common.py"
                    "; its common suites cannot run")
        (unpacked / "__init__.py").touch()
        (unpacked / "fixtures").mkdir()
        shutil.copyfile(SAMPLE_TEXT, unpacked / "fixtures" / "sample_text.txt")
        try:
            unpacked.rename(FETCHED_TESTS)  # whole or not at all, also when two runs fetch at once
        except OSError:
            if not (FETCHED_TESTS / "test_modeling_common.py").is_file():
                raise
    return None


UNAVAILABLE = fetch_transformers_tests()
if UNAVAILABLE is None:
    # `transformers_suites.test_modeling_common` and its siblings are now transformers' own files.
    sys.modules[__package__].__path__.append(str(FETCHED_TESTS))


# CI must run the suites: there, files that cannot be fetched are an error, not a skip.
REQUIRED = os.environ.get("HF_ELMO_TRANSFORMERS_SUITES") == "required"
# A hung common test (e.g. a loader waiting on the network) fails alone instead of stalling the whole run.
TIMEOUT_SECONDS = 300


class UnavailableModule(pytest.Module):
    """A test module that cannot be imported without transformers' files: reported as skipped with the reason (a
    collection error where the suites are required)."""

    def collect(self):
        if REQUIRED:
            raise RuntimeError(UNAVAILABLE + " (HF_ELMO_TRANSFORMERS_SUITES=required)")
        pytest.skip(UNAVAILABLE)


def pytest_pycollect_makemodule(module_path, parent):
    if UNAVAILABLE is not None:
        return UnavailableModule.from_parent(parent, path=module_path)
    return None


def pytest_collection_modifyitems(config, items):
    for item in items:
        if item.path.is_relative_to(HARNESS) and item.get_closest_marker("timeout") is None:
            item.add_marker(pytest.mark.timeout(TIMEOUT_SECONDS))
