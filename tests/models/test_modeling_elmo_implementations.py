"""How a model computes: the plain PyTorch of bilm_elmo.py ("reference") or hf-elmo's kernels ("auto", "fast",
"int8"; hf_elmo/kernels/), chosen by `from_pretrained(..., lstm_implementation=...)` / `set_lstm_implementation()` and
never saved. The kernels give the plain path's outputs and gradients within the derived tolerances of
tests/utils/numerics.py, and their caches (inference copies of the weights, the token cache) never outlive the
weights they were made from."""

from __future__ import annotations

import copy
import json
import pickle

import pytest
import torch

from hf_elmo import ElmoForPreTraining, ElmoForTokenClassification, ElmoModel
import hf_elmo.kernels as kernels
from hf_elmo.kernels import build_token_cache
from hf_elmo.kernels import token_cache_of
from hf_elmo.models.elmo.bilm_elmo import ALL_LSTM_FUNCTIONS, ElmoKernelFunctions, ElmoKernelInterface

LSTM_IMPLEMENTATIONS = ("auto", "reference", "fast", "int8")
from hf_elmo.models.elmo.tokenization_elmo import ElmoTokenizer
from numerics import bilm_tolerance
from small_models import max_diff, small_model, tiny_config

pytestmark = pytest.mark.numerics  # also run under forced AVX2 kernels by .ci/run

KERNELS = ("auto", "fast")
BATCH_LENGTHS = [5, 2, 7, 1, 7]


def random_batch(batch_lengths=BATCH_LENGTHS, seed=0, vocabulary=6):
    """Character ids of random words (drawn from a few, so that words repeat, as the kernels' deduplication
    expects), each row padded past its length, and one column of padding in every row."""
    generator = torch.Generator().manual_seed(seed)
    width = 50
    words = []
    for _ in range(vocabulary):
        length = int(torch.randint(1, 9, (1,), generator=generator))
        characters = torch.randint(1, 257, (length,), generator=generator)
        # the byte scheme's shifted ids: begin-of-word, the bytes, end-of-word, padding
        words.append(torch.cat([torch.tensor([259]), characters, torch.tensor([260]), torch.full((width - length - 2,), 261)]))
    ids = torch.zeros(len(batch_lengths), max(batch_lengths) + 1, width, dtype=torch.long)
    for row, length in enumerate(batch_lengths):
        for position in range(length):
            ids[row, position] = words[int(torch.randint(0, vocabulary, (1,), generator=generator))]
    mask = (torch.arange(ids.shape[1]).unsqueeze(0) < torch.tensor(batch_lengths).unsqueeze(1)).long()
    return ids, mask


def random_state(config, batch, dtype=torch.float32, seed=2):
    generator = torch.Generator().manual_seed(seed)
    h = torch.randn(config.num_lstm_layers, 2, batch, config.projection_dim, generator=generator, dtype=dtype) * 0.3
    c = torch.randn(config.num_lstm_layers, 2, batch, config.lstm_cell_dim, generator=generator, dtype=dtype)
    return h, c


def model_with_mixes(layers=2, skip=True, clip=True, dtype=torch.float32) -> ElmoModel:
    """`small_model` (clips really active) whose mix is not the plain average, on the plain path."""
    model = small_model(skip=skip, clip=clip, layers=layers, dtype=dtype, implementation="reference")
    with torch.no_grad():
        for mix in model.scalar_mixes:
            mix.scalar_parameters.normal_()
            mix.gamma.fill_(0.7)
    return model


def outputs(model, ids, mask, state=None, **kwargs) -> list[torch.Tensor]:
    output = model(ids, attention_mask=mask, initial_state=state, return_state=state is not None, **kwargs)
    tensors = [*output.hidden_states, *output.elmo_representations]
    return tensors + list(output.final_state) if state is not None else tensors


@pytest.mark.parametrize("layers", [1, 2, 3])
@pytest.mark.parametrize("skip", [True, False])
@pytest.mark.parametrize("clip", [True, False])
@pytest.mark.parametrize("with_state", [False, True])
def test_the_kernels_give_the_plain_paths_outputs(layers, skip, clip, with_state):
    model = model_with_mixes(layers=layers, skip=skip, clip=clip)
    ids, mask = random_batch()
    state = random_state(model.config, len(BATCH_LENGTHS)) if with_state else None
    with torch.no_grad():
        expected = outputs(model, ids, mask, state)
        tolerance = bilm_tolerance(model.config, *expected)
        for implementation in KERNELS:
            model.set_lstm_implementation(implementation)
            got = outputs(model, ids, mask, state)
            assert len(got) == len(expected)
            assert max_diff(got, expected) <= tolerance, implementation
            padding = ~mask.bool()
            assert all(not layer[padding].any() for layer in got[: layers + 2]), implementation
    if with_state:  # the comparison is not vacuous: the state changes the outputs far beyond the tolerance
        model.set_lstm_implementation("reference")
        with torch.no_grad():
            assert max_diff(outputs(model, ids, mask), expected) > 1e3 * tolerance


def test_the_kernels_give_the_plain_paths_outputs_with_the_sentence_boundaries():
    model = model_with_mixes()
    ids, mask = random_batch(seed=1)
    with torch.no_grad():
        expected = outputs(model, ids, mask, keep_sentence_boundaries=True)
        for implementation in KERNELS:
            model.set_lstm_implementation(implementation)
            got = outputs(model, ids, mask, keep_sentence_boundaries=True)
            assert max_diff(got, expected) <= bilm_tolerance(model.config, *expected), implementation


def tagger(freeze_elmo=True, dtype=torch.float32, implementation="reference"):
    torch.manual_seed(0)
    model = ElmoForTokenClassification(tiny_config(num_labels=3, classifier_dropout=0.0, freeze_elmo=freeze_elmo,
                                                   task_token_features=True, task_encoder="bilstm",
                                                   task_encoder_hidden_size=6, use_crf=True))
    model.to(dtype).eval()
    model.set_lstm_implementation(implementation)
    return model


def test_a_heads_kernels_give_the_plain_paths_outputs():
    """The head's own word vectors (x_k) also go through the kernels' character encoder."""
    model = tagger()
    ids, mask = random_batch()
    with torch.no_grad():
        expected = model(ids, attention_mask=mask, output_hidden_states=True)
        for implementation in KERNELS:
            model.set_lstm_implementation(implementation)
            got = model(ids, attention_mask=mask, output_hidden_states=True)
            tolerance = bilm_tolerance(model.config, expected.logits, *expected.hidden_states)
            assert max_diff([got.logits, *got.hidden_states], [expected.logits, *expected.hidden_states]) <= tolerance


def elmo_gradients(model, ids, mask, state, dtype):
    """Every gradient of a random weighted sum of all outputs (layers, mixes, final state)."""
    generator = torch.Generator().manual_seed(7)
    leaves = [t.to(dtype).clone().requires_grad_() for t in state]
    output = model(ids, attention_mask=mask, initial_state=tuple(leaves), return_state=True)
    tensors = [*output.hidden_states, *output.elmo_representations, *output.final_state]
    loss = sum((t * torch.randn(t.shape, generator=generator, dtype=torch.float64).to(dtype)).sum() for t in tensors)
    parameters = [p for p in model.parameters() if p.requires_grad]
    return [g.double() for g in torch.autograd.grad(loss, leaves + parameters)]


@pytest.mark.parametrize("skip", [True, False])
def test_the_fast_paths_gradients_equal_the_plain_paths(skip):
    """Training: the kernels' hand-written backward (biLSTM) and deduplicated character encoder against autograd
    through the plain model, in float64 (the same sums up to their order: within 1e-10 of each gradient's largest
    value); and in float32, no further from the float64 plain model than the plain model in float32 is."""
    ids, mask = random_batch()
    reference_model = model_with_mixes(skip=skip, dtype=torch.float64).train()
    state = random_state(reference_model.config, len(BATCH_LENGTHS), dtype=torch.float64)
    reference = elmo_gradients(reference_model, ids, mask, state, torch.float64)
    assert all(g.abs().max() > 0 for g in reference[:2])  # the state gets gradients
    for implementation in KERNELS:
        reference_model.set_lstm_implementation(implementation)
        fast = elmo_gradients(reference_model, ids, mask, state, torch.float64)
        for expected, got in zip(reference, fast):
            assert float((expected - got).abs().max()) <= 1e-10 * max(1.0, float(expected.abs().max())), implementation

    def float32_error(implementation):
        model = copy.deepcopy(reference_model).float()
        model.set_lstm_implementation(implementation)
        gradients = elmo_gradients(model, ids, mask, state, torch.float32)
        return max(float((ref - got).abs().max()) / float(ref.abs().max()) for ref, got in zip(reference, gradients))

    plain = float32_error("reference")
    assert 0 < plain < 1e-4
    for implementation in KERNELS:
        assert float32_error(implementation) <= 2 * plain, implementation


def test_a_heads_gradients_on_the_kernels_equal_the_plain_paths():
    """An unfrozen tagger with its own word vectors, a BiLSTM and a CRF, in float64."""
    ids, mask = random_batch()
    labels = torch.randint(0, 3, mask.shape, generator=torch.Generator().manual_seed(4)).masked_fill(~mask.bool(), -100)

    def gradients(implementation):
        model = tagger(freeze_elmo=False, dtype=torch.float64, implementation=implementation).train()
        loss = model(ids, attention_mask=mask, labels=labels).loss
        names, parameters = zip(*[(n, p) for n, p in model.named_parameters() if p.requires_grad])
        return loss.detach(), dict(zip(names, torch.autograd.grad(loss, parameters, allow_unused=True)))

    reference_loss, reference = gradients("reference")
    for implementation in KERNELS:
        loss, got = gradients(implementation)
        assert float((loss - reference_loss).abs()) <= 1e-10 * float(reference_loss.abs())
        for name, expected in reference.items():
            if expected is None:  # the encoder's own mixes: the head mixes with its own
                assert got[name] is None, name
                continue
            assert float((expected - got[name]).abs().max()) <= 1e-10 * max(1.0, float(expected.abs().max())), name
    assert reference["elmo.bilstm.layers.0.input_weight"].abs().max() > 0
    assert reference["token_features.projection.weight"].abs().max() > 0


def test_pretraining_on_the_kernels_gives_the_plain_paths_loss_and_gradients():
    """The sampled softmax with its hand-written backward and the fast biLSTM, against the plain formula and loop
    (float64, the same negative samples)."""
    ids, mask = random_batch()
    vocabulary = ["<S>", "</S>", "<UNK>"] + [f"w{i}" for i in range(20)]
    labels = torch.randint(0, len(vocabulary), mask.shape, generator=torch.Generator().manual_seed(5))
    labels = labels.masked_fill(~mask.bool(), -100)

    def loss_and_gradients(implementation):
        torch.manual_seed(0)
        config = tiny_config(lm_vocab=vocabulary, lm_softmax="sampled", lm_num_sampled=8, lm_dropout=0.0)
        model = ElmoForPreTraining(config).double().train()
        model.set_lstm_implementation(implementation)
        torch.manual_seed(1)  # the negative samples
        loss = model(ids, attention_mask=mask, labels=labels).loss
        parameters = [p for p in model.parameters() if p.requires_grad]
        return [loss.detach(), *torch.autograd.grad(loss, parameters)]

    reference = loss_and_gradients("reference")
    for implementation in KERNELS:
        for expected, got in zip(reference, loss_and_gradients(implementation)):
            assert float((expected - got).abs().max()) <= 1e-10 * max(1.0, float(expected.abs().max())), implementation


# Choosing the implementation -------------------------------------------------------------------------------------


def test_the_implementation_is_chosen_at_load_time_and_never_saved(tmp_path):
    assert set(ALL_LSTM_FUNCTIONS) == set(LSTM_IMPLEMENTATIONS)  # the reference and the package's kernels
    small_model().save_pretrained(tmp_path / "model")
    assert ElmoModel.from_pretrained(tmp_path / "model").lstm_implementation == "auto"  # the default
    for implementation in LSTM_IMPLEMENTATIONS:
        loaded = ElmoModel.from_pretrained(tmp_path / "model", lstm_implementation=implementation)
        assert loaded.lstm_implementation == implementation
        assert not hasattr(loaded.config, "lstm_implementation")
        loaded.save_pretrained(tmp_path / implementation)
        assert "lstm_implementation" not in json.loads((tmp_path / implementation / "config.json").read_text())
        assert ElmoModel.from_pretrained(tmp_path / implementation).lstm_implementation == "auto"
    head = ElmoForTokenClassification.from_pretrained(tmp_path / "model", num_labels=2, lstm_implementation="reference")
    assert head.lstm_implementation == "reference" == head.elmo.lstm_implementation
    head.set_lstm_implementation("fast")
    assert head.lstm_implementation == "fast" == head.elmo.lstm_implementation


def test_an_unknown_implementation_is_refused_naming_the_choices(tmp_path):
    model = small_model()
    message = "lstm_implementation must be one of the registered reference, auto, fast, int8, got 'onednn'"
    with pytest.raises(ValueError, match=message):
        model.set_lstm_implementation("onednn")
    assert model.lstm_implementation == "auto"  # unchanged
    model.save_pretrained(tmp_path)
    with pytest.raises(ValueError, match=message):
        ElmoModel.from_pretrained(tmp_path, lstm_implementation="onednn")


def test_a_registered_implementation_is_looked_up_when_the_model_runs():
    """Another library plugs its functions in as the package's kernels do, under a name of its own."""
    calls = []

    def counting_bilstm(module, inputs, lengths, initial_state=None, dropout=0.0, skip_final_step=False):
        calls.append(inputs.shape)
        return ALL_LSTM_FUNCTIONS["reference"].bilstm(module, inputs, lengths, initial_state, dropout, skip_final_step)

    ElmoKernelInterface.register("counting", ElmoKernelFunctions(ALL_LSTM_FUNCTIONS["reference"].character_encoder,
                                                                 counting_bilstm))
    try:
        model = small_model()
        batch = sentences_batch()
        with torch.no_grad():
            model.set_lstm_implementation("reference")
            expected = model(**batch).hidden_states
            model.set_lstm_implementation("counting")
            got = model(**batch).hidden_states
        assert calls == [(2, 5, model.config.projection_dim)]  # two sentences of at most 3 words, plus <S> and </S>
        assert all(torch.equal(a, b) for a, b in zip(expected, got))
    finally:
        ElmoKernelInterface._global_mapping.pop("counting")


# The kernels' caches ----------------------------------------------------------------------------------------------


def sentences_batch(sentences=(("the", "cat", "sat"), ("a", "dog"))):
    return ElmoTokenizer()([list(s) for s in sentences], is_split_into_words=True, padding=True, return_tensors="pt")


def reference_outputs(model, batch):
    """The plain path's outputs of `model` (its weights as they are now), leaving the model's kernels alone."""
    twin = copy.deepcopy(model)
    twin.set_lstm_implementation("reference")
    with torch.no_grad():
        return twin(**batch).hidden_states


def used_model():
    """An eval-mode model whose kernels hold every kind of inference copy (packed for batches, streaming order
    for batch 1) and a token cache."""
    model = small_model()
    tokenizer = ElmoTokenizer()
    build_token_cache(model, torch.tensor([tokenizer.word_to_char_ids(w) for w in ("the", "cat", "sat", "a")]))
    with torch.no_grad():
        model(**sentences_batch())
        model(**sentences_batch([("the", "cat")]))
    return model


def test_train_drops_the_inference_copies_and_the_token_cache():
    model = used_model()
    assert token_cache_of(model) is not None and model.bilstm in kernels._runners
    model.train()
    assert token_cache_of(model) is None and model.bilstm not in kernels._runners
    head = ElmoForTokenClassification(tiny_config(num_labels=2)).eval()
    with torch.no_grad():
        head(**sentences_batch())
    assert head.elmo.bilstm in kernels._runners
    head.train()  # through the head: nn.Module.train reaches the encoder
    assert head.elmo.bilstm not in kernels._runners


@pytest.mark.parametrize("batch", [(("the", "cat", "sat"), ("a", "dog")), (("the", "cat"),)], ids=["batch", "batch-1"])
@pytest.mark.parametrize("weight", ["bilstm.layers.0.recurrent_weight", "bilstm.layers.1.projection_weight",
                                    "bilstm.layers.0.input_weight", "char_encoder.projection.bias"])
def test_an_in_place_weight_update_in_eval_mode_invalidates_the_copies(batch, weight):
    model = used_model()
    encoded = sentences_batch(batch)
    with torch.no_grad():
        before = model(**encoded).hidden_states
        model.get_parameter(weight).add_(1)
        after = model(**encoded).hidden_states
    expected = reference_outputs(model, encoded)
    assert max_diff(after, before) > 1e3 * bilm_tolerance(model.config, *expected)
    assert max_diff(after, expected) <= bilm_tolerance(model.config, *expected)


def test_an_in_place_weight_update_invalidates_the_int8_copies():
    model = small_model(implementation="int8")
    encoded = sentences_batch()
    with torch.no_grad():
        model(**encoded)  # quantises
        model.bilstm.layers[0].input_weight.add_(0.5)
        after = model(**encoded).hidden_states
        fresh = copy.deepcopy(model)  # a copy starts without copies: quantises the new weights
        assert max_diff(after, fresh(**encoded).hidden_states) == 0


@pytest.mark.parametrize("batch", [(("the", "cat", "sat"), ("a", "dog")), (("the", "cat"),)], ids=["batch", "batch-1"])
def test_a_fused_optimizer_step_between_eval_calls_with_train_in_between_uses_the_new_weights(batch):
    """Fused optimisers (transformers' default AdamW) write without bumping version counters: the copies must be
    gone because the model went through train()."""
    model = used_model()
    encoded = sentences_batch(batch)
    with torch.no_grad():
        before = model(**encoded).hidden_states
    model.train()
    optimizer = torch.optim.AdamW(model.parameters(), lr=5e-2, fused=True)
    model(**encoded).last_hidden_state.sum().backward()
    optimizer.step()
    model.eval()
    with torch.no_grad():
        after = model(**encoded).hidden_states
    expected = reference_outputs(model, encoded)
    assert max_diff(after, before) > 1e-2
    assert max_diff(after, expected) <= bilm_tolerance(model.config, *expected)


@pytest.mark.parametrize("batch", [(("the", "cat", "sat"), ("a", "dog")), (("the", "cat"),)], ids=["batch", "batch-1"])
def test_no_grad_calls_in_training_mode_follow_a_fused_optimizer_step(batch):
    """A metric computed under no_grad between training steps, without eval(): the model stays in training mode,
    so nothing drops inference copies made there, and a fused step does not change what they are keyed by. The
    kernels must not keep (or not use) copies while the model trains."""
    model = small_model()
    model.train()
    encoded = sentences_batch(batch)
    optimizer = torch.optim.AdamW(model.parameters(), lr=5e-2, fused=True)
    with torch.no_grad():
        model(**encoded)
    model(**encoded).last_hidden_state.sum().backward()
    optimizer.step()
    with torch.no_grad():
        after = model(**encoded).hidden_states
    expected = reference_outputs(model, encoded)
    assert max_diff(after, expected) <= bilm_tolerance(model.config, *expected)


def test_a_used_model_and_a_used_head_can_be_copied_and_pickled():
    """A copy starts with empty caches of its own (oneDNN's packed weights cannot be copied at all): the same
    numbers, up to the rounding of layer 0 computed without the original's token cache."""
    model = used_model()
    head = ElmoForTokenClassification(tiny_config(num_labels=2, task_token_features=True)).eval()
    with torch.no_grad():
        head(**sentences_batch())  # its kernels keep copies too
    for original in (model, head):
        encoded = sentences_batch()
        with torch.no_grad():
            expected = original(**encoded, output_hidden_states=True)
        expected = [expected[0], *expected.hidden_states]
        for duplicate in (copy.deepcopy(original), pickle.loads(pickle.dumps(original))):
            assert duplicate.lstm_implementation == original.lstm_implementation
            assert duplicate.config.to_dict() == original.config.to_dict()
            with torch.no_grad():
                got = duplicate(**encoded, output_hidden_states=True)
            assert max_diff([got[0], *got.hidden_states], expected) <= bilm_tolerance(model.config, *expected)
