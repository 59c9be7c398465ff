"""Parity with the reference implementations' own numbers (AllenNLP and bilm-tf fixtures), for the plain PyTorch
of bilm_elmo.py ("reference") and for the package's default path on hf-elmo's kernels ("auto")."""

import h5py
import numpy as np
import pytest
import torch

from hf_elmo import ElmoTokenizer
from hf_elmo.convert.bilm_hdf5 import load_model_from_bilm
from numerics import bilm_tolerance, float32_tolerance, magnitude
from reference_fixtures import ALLENNLP, REFERENCES

pytestmark = pytest.mark.numerics  # also run under forced AVX2 kernels by .ci/run


IMPLEMENTATIONS = ("reference", "auto")


@pytest.fixture(scope="module", params=[(reference, implementation) for reference in REFERENCES
                                        for implementation in IMPLEMENTATIONS],
                ids=lambda param: f"{param[0].name}-{param[1]}")
def reference(request):
    reference, implementation = request.param
    model = load_model_from_bilm(reference.options, reference.weights)
    model.set_lstm_implementation(implementation)
    return reference, model


def run(model, words, initial_state=None):
    tokenizer = ElmoTokenizer()
    inputs = tokenizer(words, is_split_into_words=True, padding=True, return_tensors="pt")
    with torch.no_grad():
        return model(**inputs, initial_state=initial_state, return_state=True)


def max_error(output, reference, batch_index, words, config=None):
    """The largest difference from the reference, in units of the derived float32 tolerance if `config` is given."""
    worst = 0.0
    for row, sentence in enumerate(words):
        expected = reference.expected_top_layer(row, batch_index)
        got = output.last_hidden_state[row, : len(sentence)].numpy()
        assert got.shape == expected.shape
        assert not output.last_hidden_state[row, len(sentence) :].any(), "padding positions must be zero"
        error = float(np.abs(got - expected).max())
        worst = max(worst, error / bilm_tolerance(config, expected) if config is not None else error)
    return worst


def errors_with_carried_state(model, reference) -> list[float]:
    """Per batch, the error in tolerance units; the references ran 10 batches of 3 in order, each row
    starting from the previous batch's final state."""
    state, errors = None, []
    for batch_index, words in enumerate(reference.batches()):
        output = run(model, words, initial_state=state)
        state = output.final_state
        errors.append(max_error(output, reference, batch_index, words, model.config))
    return errors


def test_fixture_architecture(reference):
    reference, model = reference
    assert model.config.use_skip_connections is reference.use_skip_connections
    assert model.config.projection_dim == 16 and model.config.lstm_cell_dim == 64


def test_all_30_sentences_with_carried_state(reference):
    reference, model = reference
    errors = errors_with_carried_state(model, reference)
    assert max(errors) <= 1.0, errors


def _next_float_up(model, parameter_names):
    with torch.no_grad():
        for name, parameter in model.named_parameters():
            if any(part in name for part in parameter_names):
                parameter.copy_(torch.nextafter(parameter, torch.full_like(parameter, float("inf"))))


def _swap_input_and_forget_gates(model):
    with torch.no_grad():
        for layer in model.bilstm.layers:
            for weight in (layer.input_weight, layer.recurrent_weight, layer.bias):
                input_gate, forget_gate, cell_input, output_gate = weight.chunk(4, dim=1)
                weight.copy_(torch.cat([forget_gate, input_gate, cell_input, output_gate], dim=1))


def _without_cell_clip(model):
    model.config.cell_clip = None


@pytest.mark.parametrize(
    "change, passes",
    [
        (lambda model: _next_float_up(model, ["recurrent_weight", "projection_weight"]), True),
        (lambda model: _next_float_up(model, ["char_encoder"]), True),
        (_swap_input_and_forget_gates, False),
        (_without_cell_clip, False),
    ],
    ids=["one-ulp-lstm-weights", "one-ulp-char-encoder", "wrong-gate-order", "missing-cell-clip"],
)
def test_tolerance_accepts_rounding_and_rejects_real_errors(reference, change, passes):
    """The derived tolerance is not a blanket: one ulp on every weight stays inside it, and an implementation
    with the input and forget gates swapped, or without the cell clip, fails the same comparison (by at least
    ten times the tolerance, so the margin does not depend on the processor either)."""
    reference, loaded = reference
    model = load_model_from_bilm(reference.options, reference.weights)
    model.set_lstm_implementation(loaded.lstm_implementation)
    change(model)
    worst = max(errors_with_carried_state(model, reference))
    if passes:
        assert worst <= 1.0
    else:
        assert worst > 10.0


def test_batch_0_stateless(reference):
    reference, model = reference
    words = reference.batches()[0]
    tokenizer = ElmoTokenizer()
    with torch.no_grad():
        output = model(**tokenizer(words, is_split_into_words=True, padding=True, return_tensors="pt"))
    assert output.final_state is None
    assert max_error(output, reference, 0, words, model.config) <= 1.0


def test_zero_state_does_not_reproduce_later_batches(reference):
    """Proves the carried state matters: without it batches 1-9 are far off (so the test above can fail)."""
    reference, model = reference
    for batch_index, words in enumerate(reference.batches()[1:], start=1):
        assert max_error(run(model, words), reference, batch_index, words) > 1e-2


@pytest.mark.parametrize("implementation", IMPLEMENTATIONS)
def test_vocabulary_token_embeddings(implementation):
    """Layer 0 of the 458 vocabulary words (incl. <S>, </S>, <UNK> and a non-ASCII word)."""
    model = load_model_from_bilm(ALLENNLP / "options.json", ALLENNLP / "lm_weights.hdf5")
    model.set_lstm_implementation(implementation)
    tokenizer = ElmoTokenizer()
    words = (ALLENNLP / "vocab_test.txt").read_text(encoding="utf-8").splitlines()
    assert len(words) == 458 and not words[0].isspace()
    start, end = model.sentence_boundary_char_ids()
    rows = []
    for word in words:
        if word == "<S>":
            rows.append(start)
        elif word == "</S>":
            rows.append(end)
        else:
            rows.append(torch.tensor(tokenizer.word_to_char_ids(word)))
    with torch.no_grad():
        vectors = model.token_embeddings(torch.stack(rows))
    with h5py.File(ALLENNLP / "elmo_token_embeddings.hdf5", "r") as handle:
        expected = handle["embedding"][...]
    assert vectors.shape == expected.shape == (458, 16)
    stages = 1 + model.config.num_highway_layers + 1  # CNN, highways, projection
    filters = sum(count for _, count in model.config.char_cnn_filters)
    assert float(np.abs(vectors.numpy() - expected).max()) <= float32_tolerance(magnitude(expected), filters, stages)


@pytest.mark.parametrize("implementation", IMPLEMENTATIONS)
def test_layer_normalised_mix_matches_allennlp(implementation):
    """`Elmo(do_layer_norm=True)`: AllenNLP normalises each layer with the <S>/</S> positions still in the
    mask and strips them afterwards; expected outputs written by AllenNLP itself (see make_fixture.py)."""
    import json

    folder = ALLENNLP.parent / "allennlp_layer_norm_mix"
    inputs = json.loads((folder / "inputs.json").read_text(encoding="utf-8"))
    expected = np.load(folder / "expected.npz", allow_pickle=False)
    model = load_model_from_bilm(ALLENNLP / "options.json", ALLENNLP / "lm_weights.hdf5", scalar_mix_layer_norm=True)
    model.set_lstm_implementation(implementation)
    with torch.no_grad():
        model.scalar_mixes[0].scalar_parameters.copy_(torch.tensor(inputs["mix_weights"]))
    encoded = ElmoTokenizer(segmenter="whitespace")(
        inputs["sentences"], is_split_into_words=True, padding=True, return_tensors="pt"
    )
    for keep, name in ((False, "words_only"), (True, "with_boundaries")):
        with torch.no_grad():
            output = model(**encoded, keep_sentence_boundaries=keep)
        assert output.mask.long().tolist() == expected[f"{name}_mask"].tolist()
        mix = output.elmo_representations[0].numpy()
        assert mix.shape == expected[f"{name}_mix"].shape
        # the mix adds a layer norm (a sum over every position and feature of a layer) after the biLM
        tolerance = bilm_tolerance(model.config, expected[f"{name}_mix"]) + float32_tolerance(
            magnitude(expected[f"{name}_mix"]), int(output.mask.sum()) * 2 * model.config.projection_dim
        )
        assert float(np.abs(mix - expected[f"{name}_mix"]).max()) <= tolerance, name
