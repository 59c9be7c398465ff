"""hf_elmo.Embedder: outputs equal ElmoModel's layers (and AllenNLP's numbers), in input order, for any batch size."""

from __future__ import annotations

import random

import numpy as np
import pytest
import torch

import hf_elmo
from hf_elmo import ElmoModel, Embedder
from hf_elmo.loading import ModelNotFoundError
from helpers_embed import SENTENCES, allennlp_model, allennlp_top_layers, model_layers, save_tiny_model

torch.set_num_threads(1)
ATOL = 1e-6  # batch composition changes float32 summation order only (~1e-7)


@pytest.fixture(scope="module")
def model_dir(tmp_path_factory):
    return save_tiny_model(tmp_path_factory.mktemp("tiny-elmo"))


@pytest.fixture(scope="module")
def embedder(model_dir):
    return Embedder(model_dir, batch_size=3)


@pytest.fixture(scope="module")
def reference(model_dir):
    model = ElmoModel.from_pretrained(model_dir).eval()
    return [model_layers(model, sentence.split()) for sentence in SENTENCES]


WORDS = [sentence.split() for sentence in SENTENCES]


def test_all_layers_equal_elmo_model(embedder, reference):
    outputs = embedder.embed(WORDS)
    assert len(outputs) == len(WORDS)
    for words, output, (layers, _) in zip(WORDS, outputs, reference):
        assert output.shape == (3, len(words), 16) and output.dtype == np.float32
        np.testing.assert_allclose(output, layers, rtol=0, atol=ATOL)


@pytest.mark.parametrize("choice", ["top", "average", "mix", 0, 1, 2, -1])
def test_single_layer_choices_equal_elmo_model(embedder, reference, choice):
    outputs = embedder.embed(WORDS, layers=choice)
    for words, output, (layers, mix) in zip(WORDS, outputs, reference):
        expected = {"top": layers[-1], "average": layers.mean(axis=0), "mix": mix}.get(choice)
        if expected is None:
            expected = layers[choice]
        assert output.shape == (len(words), 16)
        np.testing.assert_allclose(output, expected, rtol=0, atol=ATOL)


def test_mix_is_not_the_average(embedder):
    # The fixture model has a non-uniform learned mix, so the two choices must differ.
    mix, average = embedder.embed(WORDS[:1], layers="mix")[0], embedder.embed(WORDS[:1], layers="average")[0]
    assert np.abs(mix - average).max() > 1e-3


def test_top_layer_equals_allennlp():
    """The API against AllenNLP's own numbers for its fixture biLM (first batch: zero initial state)."""
    words, tops = allennlp_top_layers()
    outputs = Embedder(allennlp_model(), batch_size=2).embed(words, layers="top")
    for output, top in zip(outputs, tops):
        np.testing.assert_allclose(output, top, rtol=1e-6, atol=1e-6)  # AllenNLP: atol 1e-6, rtol 1e-5


def test_batch_size_independence(embedder):
    baseline = embedder.embed(WORDS, batch_size=1)
    for batch_size in (2, 3, 64):
        for a, b in zip(baseline, embedder.embed(WORDS, batch_size=batch_size)):
            assert a.shape == b.shape
            np.testing.assert_allclose(a, b, rtol=0, atol=ATOL)


def test_results_follow_input_order(embedder):
    baseline = embedder.embed(WORDS)
    order = list(range(len(WORDS)))
    random.Random(1).shuffle(order)
    shuffled = embedder.embed([WORDS[i] for i in order])
    for position, index in enumerate(order):
        np.testing.assert_allclose(shuffled[position], baseline[index], rtol=0, atol=ATOL)


def test_raw_strings_use_the_tokenizer(embedder):
    # The fixture's tokenizer segments Chinese into characters.
    assert embedder.tokenize("小米粥") == ["小", "米", "粥"]  # shaped like embed("小米粥"): one sentence
    assert embedder.tokenize(["小米粥", ["小米", "粥"]]) == [["小", "米", "粥"], ["小米", "粥"]]
    raw = embedder.embed(["小米粥"], layers="top")[0]
    split = embedder.embed([["小", "米", "粥"]], layers="top")[0]
    np.testing.assert_array_equal(raw, split)
    single = embedder.embed("小米粥", layers="top")
    np.testing.assert_array_equal(single, raw)


def test_empty_sentence(embedder):
    outputs = embedder.embed([[], ["a"], []])
    assert outputs[0].shape == (3, 0, 16) and outputs[2].shape == (3, 0, 16)
    assert embedder.embed([[]], layers="top")[0].shape == (0, 16)
    vectors = embedder.sentence_vectors([[], ["a"]])
    assert vectors.shape == (2, 16)
    assert not vectors[0].any() and vectors[1].any()


@pytest.mark.parametrize("choice", ["average", "top", "mix", "all"])
def test_sentence_vectors_are_masked_means(embedder, choice):
    vectors = embedder.sentence_vectors(WORDS, layers=choice, batch_size=2)
    words = embedder.embed(WORDS, layers=choice)
    assert vectors.shape == (len(WORDS),) + words[0].shape[:-2] + (16,)
    for vector, word_vectors in zip(vectors, words):
        np.testing.assert_allclose(vector, word_vectors.mean(axis=-2), rtol=0, atol=ATOL)


def test_torch_output(embedder):
    outputs = embedder.embed(WORDS[:2], layers="top", return_tensors="pt")
    assert all(isinstance(output, torch.Tensor) for output in outputs)
    np.testing.assert_array_equal(outputs[1].numpy(), embedder.embed(WORDS[:2], layers="top")[1])
    assert isinstance(embedder.sentence_vectors(WORDS[:2], return_tensors="pt"), torch.Tensor)


def test_sents2elmo_semantics(embedder, reference):
    sents = WORDS[:3]
    layers = [ref[0] for ref in reference[:3]]
    for output_layer in (0, 1, 2):
        for output, expected in zip(embedder.sents2elmo(sents, output_layer), layers):
            np.testing.assert_allclose(output, expected[output_layer], rtol=0, atol=ATOL)
    for output, expected in zip(embedder.sents2elmo(sents, -1), layers):
        np.testing.assert_allclose(output, expected.mean(axis=0), rtol=0, atol=ATOL)
    for output, expected in zip(embedder.sents2elmo(sents, -2), layers):
        np.testing.assert_allclose(output, expected, rtol=0, atol=ATOL)
    for bad in (3, -3):
        with pytest.raises(ValueError, match="output_layer"):
            embedder.sents2elmo(sents, bad)
    for strings in (["abc"], "abc", [["a"], "bc"]):  # a string would be read character by character
        with pytest.raises(TypeError, match="pre-segmented sentences"):
            embedder.sents2elmo(strings)


def test_bfloat16_gives_float32_arrays(model_dir, reference):
    outputs = Embedder(model_dir, dtype="bfloat16").embed(WORDS[:2], layers="top")
    assert outputs[0].dtype == np.float32
    np.testing.assert_allclose(outputs[0], reference[0][0][-1], atol=0.1)


def test_progress_bar(embedder, capsys):
    embedder.embed(WORDS, progress=True)
    assert "sent" in capsys.readouterr().err


@pytest.mark.parametrize("layers", ["bottom", 3, -4, 1.5, True])
def test_bad_layer_choice(embedder, layers):
    with pytest.raises((ValueError, TypeError), match="layer"):
        embedder.embed(WORDS[:1], layers=layers)


@pytest.mark.parametrize("sentences", [42, [["a", 1]], [None]])
def test_bad_sentences(embedder, sentences):
    with pytest.raises(TypeError, match="sentence"):
        embedder.embed(sentences)


def test_bad_return_tensors_and_batch_size(embedder, model_dir):
    with pytest.raises(ValueError, match="return_tensors"):
        embedder.embed(WORDS[:1], return_tensors="tf")
    with pytest.raises(ValueError, match="batch_size"):
        Embedder(model_dir, batch_size=0)
    with pytest.raises(ValueError, match="unknown device 'banana'"):
        Embedder(model_dir, device="banana")
    if not torch.cuda.is_available():
        with pytest.raises(ValueError, match="no CUDA GPU"):
            Embedder(model_dir, device="cuda")


def test_missing_model(tmp_path, monkeypatch):
    with pytest.raises(ModelNotFoundError, match="not found"):
        Embedder(tmp_path / "nowhere")
    (tmp_path / "empty").mkdir()
    with pytest.raises(ModelNotFoundError, match="config.json"):
        Embedder(tmp_path / "empty")
    monkeypatch.setattr(hf_elmo, "DEFAULT_MODEL", str(tmp_path / "not-built"))
    with pytest.raises(ModelNotFoundError, match="default model"):
        Embedder()


def test_a_folder_without_its_tokenizer_warns_or_refuses(tmp_path, caplog):
    import logging

    from hf_elmo import ElmoConfig, ElmoModel
    from small_models import tiny_config_kwargs

    ElmoModel(ElmoConfig(**tiny_config_kwargs())).save_pretrained(tmp_path / "bare")  # weights only, no tokenizer
    with caplog.at_level(logging.WARNING, logger="hf_elmo.integrations.embedder"):
        embedder = Embedder(tmp_path / "bare")
    assert f"{tmp_path / 'bare'} has no tokenizer_config.json: using a default ElmoTokenizer" in caplog.text
    assert embedder.embed([["a", "b"]], layers="top")[0].shape[0] == 2
    # A model with a word embedding cannot run without the dictionary its tokenizer carries.
    words = ElmoConfig(**tiny_config_kwargs(), word_vocab_size=10, word_embedding_dim=4, bos_word_id=1, eos_word_id=2)
    ElmoModel(words).save_pretrained(tmp_path / "words")
    with pytest.raises(ModelNotFoundError, match="word embedding needs its own dictionary"):
        Embedder(tmp_path / "words")
