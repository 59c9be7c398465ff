"""Embedder.encode: the sentence vectors MTEB-style evaluators ask for with `encode(sentences, batch_size=..., **kwargs)`."""

from __future__ import annotations

import inspect

import numpy as np
import pytest

import hf_elmo
from hf_elmo.integrations.embedder import Embedder
from small_models import tiny_config
from hub_helpers import tiny_model

TEXTS = ["我爱北京天安门。", "hello world , ELMo here !", "", "今天天气很好", "一"]


@pytest.fixture(scope="module")
def embedder():
    return Embedder(tiny_model(seed=3), tokenizer=hf_elmo.ElmoTokenizer(segmenter="chars"), device="cpu")


def test_encode_is_sentence_vectors_at_their_defaults(embedder):
    vectors = embedder.encode(TEXTS)
    assert isinstance(vectors, np.ndarray) and vectors.dtype == np.float32
    assert vectors.shape == (len(TEXTS), 2 * tiny_config().projection_dim)
    np.testing.assert_array_equal(vectors, embedder.sentence_vectors(TEXTS, batch_size=32))
    assert not vectors[2].any()  # the empty text
    assert inspect.signature(Embedder.encode).parameters["batch_size"].default == 32


def test_encode_takes_the_arguments_evaluators_pass(embedder):
    """MTEB passes task and prompt arguments, sentence-transformers' evaluators progress and conversion flags;
    a datasets column (any iterable) stands for the list."""
    expected = embedder.sentence_vectors(TEXTS, batch_size=2)
    vectors = embedder.encode(iter(TEXTS), batch_size=2, task_name="STSBenchmark", prompt_type=None,
                              show_progress_bar=False, convert_to_numpy=True)
    np.testing.assert_array_equal(vectors, expected)


def test_encode_normalizes_when_asked(embedder):
    vectors = embedder.encode(TEXTS, normalize_embeddings=True)
    norms = np.linalg.norm(vectors, axis=1)
    np.testing.assert_allclose(norms[[0, 1, 3, 4]], 1.0, rtol=1e-6)
    assert norms[2] == 0.0  # an empty text stays zero, not NaN
    raw = embedder.encode(TEXTS)
    np.testing.assert_allclose(vectors[0], raw[0] / np.linalg.norm(raw[0]), rtol=1e-6)


def test_encode_of_one_string_is_one_vector(embedder):
    np.testing.assert_array_equal(embedder.encode("今天天气很好"), embedder.encode(["今天天气很好"])[0])
