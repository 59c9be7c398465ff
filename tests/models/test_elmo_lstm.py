"""The fast exact path (default) against the straightforward reference (`config.lstm_implementation = "reference"`).

Speed is measured by benchmarks/bench_inference.py, never here; these tests check numbers only.
"""

from __future__ import annotations

import json

import pytest
import torch

import hf_elmo.elmo_lstm as elmo_lstm
import hf_elmo.elmo_lstm_kernels as elmo_lstm_kernels
from hf_elmo.bilm_format import load_model_from_bilm
from hf_elmo.configuration_elmo import ElmoConfig
from hf_elmo.modeling_elmo import ElmoModel
from hf_elmo.tokenization_elmo import ElmoTokenizer
from numerics import bilm_tolerance, lstm_tolerance
import paths
from small_models import CELL_CLIP, PROJ_CLIP, encode, max_diff, small_model

pytestmark = pytest.mark.numerics  # also run under forced AVX2 kernels by .ci/run

FIXTURES = paths.FIXTURES / "allennlp_elmo"


def bilstm_inputs(batch_lengths, steps, dim=8, dtype=torch.float32, seed=1):
    generator = torch.Generator().manual_seed(seed)
    lengths = torch.tensor(batch_lengths)
    inputs = torch.randn(len(batch_lengths), steps, dim, generator=generator, dtype=dtype)
    inputs[torch.arange(steps).unsqueeze(0) >= lengths.unsqueeze(1)] = 0
    return inputs, lengths


def random_state(model, batch, dtype=torch.float32, seed=2):
    generator = torch.Generator().manual_seed(seed)
    config = model.config
    h = torch.randn(config.num_lstm_layers, 2, batch, config.projection_dim, generator=generator, dtype=dtype) * 0.3
    c = torch.randn(config.num_lstm_layers, 2, batch, config.lstm_cell_dim, generator=generator, dtype=dtype)
    return h, c


def implementation(fast: bool = True, onednn: bool = True) -> str:
    return ("auto" if onednn else "fast") if fast else "reference"


def run_bilstm(model, inputs, lengths, state=None, fast=True, onednn=True, **kwargs):
    model.config.lstm_implementation = implementation(fast, onednn)
    try:
        return model.bilstm(inputs, lengths, state, **kwargs)
    finally:
        model.config.lstm_implementation = "auto"


@pytest.mark.parametrize("skip", [True, False])
@pytest.mark.parametrize("clip", [True, False])
@pytest.mark.parametrize("with_state", [False, True])
@pytest.mark.parametrize("batch_lengths", [[9, 3, 7, 1, 7], [6], [4, 4]])
@pytest.mark.parametrize("onednn", [False, True])
def test_fast_equals_reference(skip, clip, with_state, batch_lengths, onednn, monkeypatch):
    model = small_model(skip=skip, clip=clip)
    inputs, lengths = bilstm_inputs(batch_lengths, steps=max(batch_lengths) + 1)  # one all-padding step too
    state = random_state(model, len(batch_lengths)) if with_state else None
    if onednn and not elmo_lstm.onednn_available():
        pytest.skip("this torch build has no oneDNN packed inner product (the MKL cases cover this machine)")
    if onednn:  # input products in chunks of two steps
        monkeypatch.setattr(elmo_lstm_kernels, "_ONEDNN_GATE_BUFFER_ELEMENTS", 4 * 16 * len(batch_lengths) * 2)
    with torch.no_grad():
        ref_layers, (ref_h, ref_c) = run_bilstm(model, inputs, lengths, state, fast=False)
        layers, (h, c) = run_bilstm(model, inputs, lengths, state, onednn=bool(onednn))
    assert max_diff(layers, ref_layers) <= lstm_tolerance(model.config, *ref_layers)
    assert max_diff([h, c], [ref_h, ref_c]) <= lstm_tolerance(model.config, ref_h, ref_c)
    # Exactly zero past every row's length, in both directions.
    padding = torch.arange(inputs.shape[1]).unsqueeze(0) >= lengths.unsqueeze(1)
    assert all(not layer[padding].any() for layer in layers)
    # The state after each row's own last step is what a longer run would continue from.
    assert h.shape == ref_h.shape and c.shape == ref_c.shape
    if clip:  # the clips really were exercised
        assert any(bool((layer.abs() == PROJ_CLIP).any()) for layer in ref_layers)
        assert bool((ref_c.abs() == CELL_CLIP).any())


@pytest.mark.skipif(not elmo_lstm.onednn_available(), reason="this torch build has no oneDNN packed inner product")
@pytest.mark.parametrize("batch_lengths", [[5, 2, 4], [5]])  # packed weights; at batch 1 the single-column copies
def test_inference_runs_onednn_packed_products_and_training_does_not(batch_lengths, monkeypatch):
    calls = []
    original = elmo_lstm._lstm_forward_onednn
    monkeypatch.setattr(elmo_lstm, "_lstm_forward_onednn", lambda *a, **k: calls.append(1) or original(*a, **k))
    model = small_model()
    inputs, lengths = bilstm_inputs(batch_lengths, steps=5)
    with torch.no_grad():
        run_bilstm(model, inputs, lengths)
    assert len(calls) == 2  # one per layer
    run_bilstm(model, inputs, lengths)  # autograd on: the fast path with its hand-written backward
    assert len(calls) == 2
    # The kept copies follow the weights: after an update the outputs follow too.
    with torch.no_grad():
        before, _ = run_bilstm(model, inputs, lengths)
        model.bilstm.layers[0].recurrent_weight.mul_(0.5)
        after, _ = run_bilstm(model, inputs, lengths)
        reference, _ = run_bilstm(model, inputs, lengths, fast=False)
    assert max_diff(after, before) > 1e-3
    assert max_diff(after, reference) <= lstm_tolerance(model.config, *reference)


@pytest.mark.parametrize("path", ["reference", "mkl", "onednn"])
@pytest.mark.parametrize("batch_lengths", [[9, 3, 7, 2, 7], [6], [4, 4]])
def test_skipping_the_final_step_changes_only_the_boundary_outputs(path, batch_lengths):
    """`skip_final_step` drops each row's last step per direction: the forward outputs at the row's last
    position and the backward ones at its first are zero, every other output is unchanged (to float32
    rounding: the reference path's per-step products then have fewer rows, which MKL may sum differently)."""
    model = small_model()
    inputs, lengths = bilstm_inputs(batch_lengths, steps=max(batch_lengths) + 1)
    fast, onednn = path != "reference", path == "onednn"
    with torch.no_grad():
        full, _ = run_bilstm(model, inputs, lengths, fast=fast, onednn=onednn)
        skipped, _ = run_bilstm(model, inputs, lengths, fast=fast, onednn=onednn, skip_final_step=True)
    rows = torch.arange(len(batch_lengths))
    projection_dim = model.config.projection_dim
    for full_layer, skipped_layer in zip(full, skipped):
        expected = full_layer.clone()
        expected[rows, lengths - 1, :projection_dim] = 0
        expected[rows, 0, projection_dim:] = 0
        assert float((skipped_layer - expected).abs().max()) <= lstm_tolerance(model.config, full_layer)
        assert not skipped_layer[rows, lengths - 1, :projection_dim].any()
        assert not skipped_layer[rows, 0, projection_dim:].any()
        assert full_layer[rows, lengths - 1, :projection_dim].abs().amax(-1).min() > 0  # what was dropped was not zero
    # What ElmoModel returns without boundaries or state (where it skips those steps) does not change.
    char_ids = torch.randint(1, 200, (len(batch_lengths), max(batch_lengths), 50))
    char_ids[torch.arange(max(batch_lengths)).unsqueeze(0) >= lengths.unsqueeze(1)] = 0
    model.config.lstm_implementation = implementation(fast, onednn)
    with torch.no_grad():
        plain = model(char_ids).hidden_states
        reference = model(char_ids, keep_sentence_boundaries=True).hidden_states
    for layer, full_layer in zip(plain, reference):
        mask = (torch.arange(layer.shape[1]).unsqueeze(0) < lengths.unsqueeze(1)).unsqueeze(-1)
        assert float((layer - full_layer[:, 1:-1] * mask).abs().max()) <= bilm_tolerance(model.config, full_layer)


def test_outputs_differ_when_a_clip_is_dropped():
    """Guards the comparison above against passing vacuously: the fast path must really use the clips."""
    model = small_model()
    inputs, lengths = bilstm_inputs([9, 3, 7, 1, 7], steps=9)
    with torch.no_grad():
        clipped, _ = run_bilstm(model, inputs, lengths)
        model.bilstm.config.cell_clip = None
        unclipped, _ = run_bilstm(model, inputs, lengths)
    assert max_diff(clipped, unclipped) > 1e-2


@pytest.mark.parametrize("chunked", [False, True])
def test_grad_and_no_grad_give_the_same_outputs(chunked, monkeypatch):
    """Training keeps the input products of all steps in one buffer, inference computes them in chunks:
    the two agree to float32 rounding."""
    if chunked:  # input products in chunks of two steps
        monkeypatch.setattr(elmo_lstm_kernels, "_GATE_BUFFER_ELEMENTS", 2 * 4 * 16 * 5 * 2)
    model = small_model()
    model.train()
    inputs, lengths = bilstm_inputs([9, 3, 7, 1, 7], steps=9)
    state = random_state(model, 5)
    with torch.no_grad():  # the MKL fast path; inference may also run oneDNN's (tested against the reference)
        plain, (plain_h, plain_c) = run_bilstm(model, inputs, lengths, state, onednn=False)
    tracked, (h, c) = run_bilstm(model, inputs.requires_grad_(), lengths, state)
    assert tracked[0].requires_grad
    assert max_diff(plain + [plain_h, plain_c], [t.detach() for t in tracked + [h, c]]) <= lstm_tolerance(
        model.config, *plain, plain_h, plain_c
    )


@pytest.mark.parametrize("skip", [True, False])
def test_gradients_equal_reference(skip):
    """The hand-written backpropagation through time against autograd through the reference loop (float64)."""
    model = small_model(skip=skip, dtype=torch.float64)
    inputs, lengths = bilstm_inputs([9, 3, 7, 1, 7], steps=9, dtype=torch.float64)
    h0, c0 = random_state(model, 5, dtype=torch.float64)
    generator = torch.Generator().manual_seed(5)
    output_weights = [torch.randn(5, 9, 16, generator=generator, dtype=torch.float64) for _ in range(2)]
    state_weights = [torch.randn(h0.shape, generator=generator, dtype=torch.float64),
                     torch.randn(c0.shape, generator=generator, dtype=torch.float64)]

    def gradients(fast):
        leaves = [t.clone().requires_grad_() for t in (inputs, h0, c0)]
        layers, (h, c) = run_bilstm(model, leaves[0], lengths, (leaves[1], leaves[2]), fast=fast)
        loss = sum((layer * w).sum() for layer, w in zip(layers, output_weights))
        loss = loss + (h * state_weights[0]).sum() + (c * state_weights[1]).sum()
        return torch.autograd.grad(loss, leaves + list(model.bilstm.parameters()))

    reference, fast = gradients(False), gradients(True)
    for ref, got in zip(reference, fast):
        assert ref.abs().max() > 0
        assert float((ref - got).abs().max()) <= 1e-10 * max(1.0, float(ref.abs().max()))


def test_training_with_dropout_runs_through_fast_path():
    model = small_model()
    model.train()
    inputs, lengths = bilstm_inputs([9, 3, 7], steps=9)
    layers, _ = model.bilstm(inputs, lengths, dropout=0.5)
    layers[-1].pow(2).sum().backward()
    grads = [p.grad for p in model.bilstm.parameters()]
    assert all(g is not None and torch.isfinite(g).all() and g.abs().sum() > 0 for g in grads)


def test_long_batches_use_chunked_input_products(monkeypatch):
    model = small_model()
    inputs, lengths = bilstm_inputs([9, 3, 7, 1, 7], steps=9)
    with torch.no_grad():
        reference, _ = run_bilstm(model, inputs, lengths, fast=False)
        monkeypatch.setattr(elmo_lstm_kernels, "_GATE_BUFFER_ELEMENTS", 2 * 4 * 16 * 5 * 2)  # two steps per chunk
        chunked, _ = run_bilstm(model, inputs, lengths)
    assert max_diff(chunked, reference) <= lstm_tolerance(model.config, *reference)


def test_fixture_model_fast_equals_reference():
    """The real (tiny) AllenNLP test biLM on its own sentences: fast and reference paths agree."""
    model = load_model_from_bilm(FIXTURES / "options.json", FIXTURES / "lm_weights.hdf5")
    sentences = [batch[0] for batch in json.loads((FIXTURES / "sentences.json").read_text())]
    encoded = ElmoTokenizer(segmenter="whitespace")(sentences, is_split_into_words=True, padding=True, return_tensors="pt")
    with torch.no_grad():
        fast = model(**encoded).hidden_states
        model.config.lstm_implementation = "reference"
        reference = model(**encoded).hidden_states
    assert max_diff(fast, reference) <= bilm_tolerance(model.config, *reference)


def test_concurrent_calls_from_two_threads_give_each_its_own_numbers():
    """Inference keeps scratch memory between calls; two threads sharing one model must not share it."""
    import threading

    model = small_model(clip=False)
    model.config.cell_clip = model.config.proj_clip = None
    cases = [bilstm_inputs([30, 12, 25, 30], steps=30, seed=seed) for seed in (3, 4)]
    with torch.no_grad():
        expected = [run_bilstm(model, inputs, lengths)[0] for inputs, lengths in cases]
    mismatches = []

    def work(index):
        inputs, lengths = cases[index]
        with torch.no_grad():
            for _ in range(60):
                layers, _ = model.bilstm(inputs, lengths)
                if max_diff(layers, expected[index]) > lstm_tolerance(model.config, *expected[index]):
                    mismatches.append(index)

    threads = [threading.Thread(target=work, args=(index,)) for index in (0, 1)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert not mismatches


@pytest.mark.parametrize("batch_lengths", [[7, 3], [6]])
def test_a_call_under_inference_mode_leaves_the_model_usable_outside_it(batch_lengths):
    model = small_model()
    inputs, lengths = bilstm_inputs(batch_lengths, steps=7)
    with torch.inference_mode():  # first: the scratch memory kept between calls is made here
        inside, _ = model.bilstm(inputs, lengths)
    with torch.no_grad():  # and must be writable here
        after, _ = model.bilstm(inputs, lengths)
    assert max_diff(after, inside) == 0


def test_a_used_model_can_be_copied_pickled_and_saved_whole(tmp_path):
    """Inference caches (oneDNN-packed weights: opaque tensors) must not make the model uncopyable."""
    import copy
    import pickle

    model = small_model()
    inputs, lengths = bilstm_inputs([5, 3, 4], steps=5)
    with torch.no_grad():
        expected, _ = model.bilstm(inputs, lengths)
        model.bilstm(inputs[:1], lengths[:1])  # batch 1 builds the other kind of cached copies
    copies = [copy.deepcopy(model), pickle.loads(pickle.dumps(model))]
    torch.save(model, tmp_path / "whole.pt")
    copies.append(torch.load(tmp_path / "whole.pt", weights_only=False))  # our own file, written just above
    for duplicate in copies:
        with torch.no_grad():
            layers, _ = duplicate.bilstm(inputs, lengths)
        assert max_diff(layers, expected) == 0


def test_under_torch_compile_inference_takes_the_path_inductor_can_lower(monkeypatch):
    model = small_model()
    inputs, lengths = bilstm_inputs([5, 3, 4], steps=5)
    with torch.no_grad():
        assert model.bilstm._can_use_onednn(inputs) == elmo_lstm.onednn_available()
        monkeypatch.setattr(torch.compiler, "is_compiling", lambda: True)
        assert not model.bilstm._can_use_onednn(inputs)
        compiled_path, _ = model.bilstm(inputs, lengths)
        reference, _ = run_bilstm(model, inputs, lengths, fast=False)
    assert max_diff(compiled_path, reference) <= lstm_tolerance(model.config, *reference)


def test_lstm_implementation_is_a_validated_config_field_that_is_saved(tmp_path):
    with pytest.raises(ValueError, match="lstm_implementation must be one of 'auto', 'fast', 'reference', 'int8', got 'onednn'"):
        ElmoConfig(lstm_implementation="onednn")
    model = small_model(clip=False)
    encoded = encode([["the", "cat", "sat"]])
    with torch.no_grad():
        exact = model(**encoded).hidden_states[-1]
    model.config.lstm_implementation = "int8"
    with torch.no_grad():
        quantized = model(**encoded).hidden_states[-1]
    model.save_pretrained(tmp_path)
    loaded = ElmoModel.from_pretrained(tmp_path).eval()
    assert loaded.config.lstm_implementation == "int8"
    with torch.no_grad():  # quantised on its first call from the saved fp32 weights: the same int8 numbers
        assert torch.equal(loaded(**encoded).hidden_states[-1], quantized)
    assert not torch.equal(quantized, exact)


def test_float32_gradients_equal_the_float64_reference(products):
    """The hand-written backpropagation in float32, with oneDNN's products (CPU default where the build has them)
    and with torch's, against autograd through the reference loop in float64: within 1e-6 of each gradient's
    largest value (issue #19)."""
    model = small_model(skip=True, dtype=torch.float64)
    inputs, lengths = bilstm_inputs([9, 3, 7, 1, 7], steps=9, dtype=torch.float64)
    h0, c0 = random_state(model, 5, dtype=torch.float64)
    generator = torch.Generator().manual_seed(5)
    output_weights = [torch.randn(5, 9, 16, generator=generator, dtype=torch.float64) for _ in range(2)]

    def gradients(fast, dtype):
        model.to(dtype)
        leaves = [t.to(dtype).clone().requires_grad_() for t in (inputs, h0, c0)]
        layers, (h, c) = run_bilstm(model, leaves[0], lengths, (leaves[1], leaves[2]), fast=fast)
        loss = sum((layer * w.to(dtype)).sum() for layer, w in zip(layers, output_weights)) + h.sum() + c.sum()
        return [g.double() for g in torch.autograd.grad(loss, leaves + list(model.bilstm.parameters()))]

    reference, fast = gradients(False, torch.float64), gradients(True, torch.float32)
    worst = max(float((ref - got).abs().max()) / float(ref.abs().max()) for ref, got in zip(reference, fast))
    assert worst <= 1e-6


def test_a_second_backward_through_the_fast_path_raises_instead_of_reading_overwritten_buffers():
    """The fast backward writes gradients over its saved activations, so `retain_graph=True` cannot give a
    correct second backward: it must refuse, naming what to do."""
    model = small_model()
    inputs, lengths = bilstm_inputs([9, 3, 7], steps=9)
    layers, _ = run_bilstm(model, inputs.requires_grad_(), lengths)
    loss = layers[-1].pow(2).sum()
    loss.backward(retain_graph=True)
    with pytest.raises(RuntimeError, match="runs once per forward"):
        loss.backward()


@pytest.mark.parametrize("batch_lengths", [[4, 1, 3], [1, 1], [1]])
def test_rows_that_run_no_step_keep_their_initial_state_and_its_gradient(batch_lengths):
    """With `skip_final_step` a row of length 1 runs no step: like the reference, the fast path returns its
    initial state as the final state and passes the final state's gradient straight back to it."""
    model = small_model(dtype=torch.float64)
    steps = max(batch_lengths)
    inputs, lengths = bilstm_inputs(batch_lengths, steps=steps, dtype=torch.float64)
    h0, c0 = random_state(model, len(batch_lengths), dtype=torch.float64)
    generator = torch.Generator().manual_seed(3)
    weights = torch.randn(len(batch_lengths), steps, 16, generator=generator, dtype=torch.float64)

    def run(fast):
        leaves = [t.clone().requires_grad_() for t in (inputs, h0, c0)]
        layers, (h, c) = run_bilstm(model, leaves[0], lengths, (leaves[1], leaves[2]), fast=fast, skip_final_step=True)
        loss = (layers[-1] * weights).sum() + (h * 1.5).sum() + (c * 0.5).sum()
        wrt = leaves + list(model.bilstm.parameters())
        gradients = torch.autograd.grad(loss, wrt, allow_unused=True)  # no step ran: the weights go unused
        return [t.detach() for t in (*layers, h, c)] + [
            torch.zeros_like(leaf) if g is None else g for leaf, g in zip(wrt, gradients)
        ]

    for reference, fast in zip(run(False), run(True)):
        assert float((reference - fast).abs().max()) <= 1e-10 * max(1.0, float(reference.abs().max()))


def test_a_state_that_needs_gradients_keeps_them_when_the_weights_are_frozen():
    """Frozen weights and inputs, but an initial state that requires grad: "auto" must not take the no-grad
    oneDNN inference path, or the state's gradient is lost."""
    model = small_model()
    model.requires_grad_(False)
    inputs, lengths = bilstm_inputs([5, 3], steps=5)
    h0, c0 = (t.requires_grad_() for t in random_state(model, 2))
    layers, _ = run_bilstm(model, inputs, lengths, (h0, c0))
    (h_grad,) = torch.autograd.grad(layers[-1].sum(), h0)
    reference, _ = run_bilstm(model, inputs, lengths, (h0, c0), fast=False)
    (h_reference,) = torch.autograd.grad(reference[-1].sum(), h0)
    assert h_reference.abs().max() > 0
    assert max_diff([h_grad], [h_reference]) <= lstm_tolerance(model.config, h_reference)


@pytest.mark.parametrize("path", [dict(fast=False), dict(onednn=False), dict(onednn=True)])
def test_nan_or_inf_past_a_rows_length_changes_no_output_and_no_gradient(path):
    model = small_model(skip=True, clip=True)
    inputs, lengths = bilstm_inputs([5, 3, 2], steps=6)
    garbage = inputs.clone()
    padding = torch.arange(6).unsqueeze(0) >= lengths.unsqueeze(1)
    garbage[padding] = float("nan")
    garbage[2, 5] = float("inf")
    weights = torch.randn(3, 6, 16, generator=torch.Generator().manual_seed(3))

    def outputs_and_gradients(values):
        leaf = values.clone().requires_grad_()
        layers, (h, c) = run_bilstm(model, leaf, lengths, **path)
        loss = sum((layer * weights).sum() for layer in layers) + h.sum() + c.sum()
        return [*layers, h, c, *torch.autograd.grad(loss, [leaf, *model.bilstm.parameters()])]

    # The same computation on the same numbers: equal, not merely close.
    for clean, dirty in zip(outputs_and_gradients(inputs), outputs_and_gradients(garbage)):
        assert torch.equal(clean, dirty)


@pytest.mark.parametrize("kind", ["fused", "foreach", "for-loop"])
def test_inference_after_an_optimizer_step_uses_the_new_weights(kind):
    # Fused optimisers (transformers' default AdamW) do not bump the weights' version counters.
    model = small_model(skip=True, clip=True)
    inputs, lengths = bilstm_inputs([6, 4, 2], steps=6)
    with torch.no_grad():
        run_bilstm(model, inputs, lengths)  # keeps inference copies of the weights
    flags = {"fused": dict(fused=True), "foreach": dict(foreach=True), "for-loop": dict(foreach=False)}[kind]
    optimizer = torch.optim.AdamW(model.bilstm.parameters(), lr=1e-2, **flags)
    run_bilstm(model, inputs, lengths)[0][-1].sum().backward()
    optimizer.step()
    with torch.no_grad():
        layers, _ = run_bilstm(model, inputs, lengths)
        reference, _ = run_bilstm(model, inputs, lengths, fast=False)
    assert max_diff(layers, reference) <= lstm_tolerance(model.config, *reference)
