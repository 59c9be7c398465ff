"""Issue 43: hf-elmo on transformers 4.x and 5.x. What 4.x cannot run is refused in one line naming the version."""

from __future__ import annotations

import importlib
import sys

import pytest
import transformers

from hf_elmo.utils import transformers_versions
from hf_elmo.utils.transformers_versions import TRANSFORMERS_MAJOR, transformers_5_needed


def test_the_installed_major_is_read_without_importing_transformers():
    assert transformers_versions.TRANSFORMERS_VERSION == transformers.__version__
    assert TRANSFORMERS_MAJOR == int(transformers.__version__.split(".")[0]) in (4, 5)


def test_what_needs_transformers_5_is_refused_in_one_line_on_4x(monkeypatch):
    monkeypatch.delitem(sys.modules, "hf_elmo.integrations.sentence_transformers", raising=False)
    if TRANSFORMERS_MAJOR >= 5:
        assert transformers_5_needed("anything") is None
        return
    message = transformers_5_needed("--format sentence-transformers")
    assert message == (f"--format sentence-transformers needs transformers>=5.24,<6 (installed: transformers "
                       f"{transformers.__version__}): pip install 'transformers>=5.24,<6'")
    with pytest.raises(ImportError, match=r"^hf_elmo.integrations.sentence_transformers \(sentence-transformers 6\) "
                                          r"needs transformers>=5.24,<6 \(installed: transformers 4\.[^\n]*$"):
        importlib.import_module("hf_elmo.integrations.sentence_transformers")
