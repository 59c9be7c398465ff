"""Fixtures shared by several files of tests/models/."""

import pytest

from modeling_helpers import make_model


@pytest.fixture(scope="module")
def model():
    """modeling_helpers' small random ElmoModel with two mixes (test_modeling_elmo.py, test_elmo_scalar_mix.py)."""
    return make_model(num_output_representations=2)
