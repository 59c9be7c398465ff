"""The biLSTM on hf-elmo's kernels (hf_elmo/kernels/bilstm.py, lstm_recurrence.py) against the plain loop that
defines the numbers (bilm_elmo.ElmoBiLstm): "fast" (batch-major, hand-written backward) and "auto" (oneDNN's
packed per-step products for CPU float32 inference), within the derived float32 tolerances of tests/utils/numerics.py.

Speed is measured by benchmarks/bench_inference.py, never here; these tests check numbers only.
"""

from __future__ import annotations

import inspect
import json

import pytest
import torch

import hf_elmo.kernels.bilstm as kernels_bilstm
import hf_elmo.kernels.lstm_recurrence as lstm_recurrence
import paths
from hf_elmo.convert.bilm_hdf5 import load_model_from_bilm
from hf_elmo.kernels.matrix_products import onednn_available
from hf_elmo.models.elmo.bilm_elmo import ALL_LSTM_FUNCTIONS, reference_lstm_step
from hf_elmo.models.elmo.tokenization_elmo import ElmoTokenizer
from numerics import bilm_tolerance, lstm_tolerance
from small_models import CELL_CLIP, PROJ_CLIP, max_diff, small_model

pytestmark = pytest.mark.numerics  # also run under forced AVX2 kernels by .ci/run

FIXTURES = paths.FIXTURES / "allennlp_elmo"
needs_onednn = pytest.mark.skipif(not onednn_available(), reason="this torch build has no oneDNN packed inner product")


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


def run_bilstm(model, inputs, lengths, state=None, implementation="auto", **kwargs):
    """`model.bilstm`'s layers and final state: "reference" runs the plain ElmoBiLstm, the others the model's
    kernels (kept between calls with the same implementation, as a model keeps them)."""
    if implementation == "reference":
        assert not kwargs.pop("skip_final_step", False), "the plain loop always runs every step"
        return model.bilstm(inputs, lengths, state, **kwargs)
    if model.lstm_implementation != implementation:
        model.set_lstm_implementation(implementation)
    return ALL_LSTM_FUNCTIONS[implementation].bilstm(model.bilstm, inputs, lengths, state, **kwargs)


def reference_skipping_final_step(model, inputs, lengths, state=None):
    """What `skip_final_step` computes, from the plain loop: the forward LSTMs of a row read its positions
    0 .. length-2 and the backward ones 1 .. length-1 (the two directions are separate stacks), so two plain runs
    over length-1 positions, the second on the inputs shifted by one, give every output and final state."""
    width = model.config.projection_dim
    shorter = (lengths - 1).clamp(min=0)
    forward_layers, (forward_h, forward_c) = model.bilstm(inputs, shorter, state)
    shifted = torch.cat([inputs[:, 1:], torch.zeros_like(inputs[:, :1])], dim=1)
    backward_layers, (backward_h, backward_c) = model.bilstm(shifted, shorter, state)
    layers = []
    for forward, backward in zip(forward_layers, backward_layers):
        backward = torch.cat([torch.zeros_like(backward[:, :1, width:]), backward[:, :-1, width:]], dim=1)
        layers.append(torch.cat([forward[..., :width], backward], dim=-1))
    h = torch.stack([forward_h[:, 0], backward_h[:, 1]], dim=1)
    c = torch.stack([forward_c[:, 0], backward_c[:, 1]], dim=1)
    return layers, (h, c)


def count_onednn_layers(monkeypatch) -> list:
    calls = []
    original = kernels_bilstm._lstm_forward_onednn
    monkeypatch.setattr(kernels_bilstm, "_lstm_forward_onednn", lambda *a, **k: calls.append(1) or original(*a, **k))
    return calls


@pytest.mark.parametrize("skip", [True, False])
@pytest.mark.parametrize("clip", [True, False])
@pytest.mark.parametrize("with_state", [False, True])
@pytest.mark.parametrize("batch_lengths", [[9, 3, 7, 1, 7], [6], [4, 4]])
@pytest.mark.parametrize("implementation", ["fast", "auto"])
def test_kernels_equal_the_plain_loop(skip, clip, with_state, batch_lengths, implementation, monkeypatch):
    model = small_model(skip=skip, clip=clip)
    inputs, lengths = bilstm_inputs(batch_lengths, steps=max(batch_lengths) + 1)  # one all-padding step too
    state = random_state(model, len(batch_lengths)) if with_state else None
    if implementation == "auto":
        if not onednn_available():
            pytest.skip("this torch build has no oneDNN packed inner product (the 'fast' cases cover this machine)")
        # input products in chunks of two steps
        monkeypatch.setattr(lstm_recurrence, "_ONEDNN_GATE_BUFFER_ELEMENTS", 4 * 16 * len(batch_lengths) * 2)
    with torch.no_grad():
        ref_layers, (ref_h, ref_c) = run_bilstm(model, inputs, lengths, state, "reference")
        layers, (h, c) = run_bilstm(model, inputs, lengths, state, implementation)
    assert max_diff(layers, ref_layers) <= lstm_tolerance(model.config, *ref_layers)
    assert h.shape == ref_h.shape and c.shape == ref_c.shape
    # The state after each row's own last step is what a longer run would continue from.
    assert max_diff([h, c], [ref_h, ref_c]) <= lstm_tolerance(model.config, ref_h, ref_c)
    # Exactly zero past every row's length, in both directions.
    padding = torch.arange(inputs.shape[1]).unsqueeze(0) >= lengths.unsqueeze(1)
    assert all(not layer[padding].any() for layer in layers + ref_layers)
    if clip:  # the clips really were exercised
        assert any(bool((layer.abs() == PROJ_CLIP).any()) for layer in ref_layers)
        assert bool((ref_c.abs() == CELL_CLIP).any())


@needs_onednn
@pytest.mark.parametrize("batch_lengths", [[5, 2, 4], [5]])  # packed weights; at batch 1 the single-column copies
def test_inference_runs_onednn_packed_products_and_training_does_not(batch_lengths, monkeypatch):
    calls = count_onednn_layers(monkeypatch)
    model = small_model()
    inputs, lengths = bilstm_inputs(batch_lengths, steps=5)
    with torch.no_grad():
        run_bilstm(model, inputs, lengths)
    assert len(calls) == 2  # one per layer
    run_bilstm(model, inputs, lengths)  # autograd on: the fast path with its hand-written backward
    assert len(calls) == 2
    # The kept copies follow the weights: after an in-place update the outputs follow too.
    with torch.no_grad():
        before, _ = run_bilstm(model, inputs, lengths)
        model.bilstm.layers[0].recurrent_weight.mul_(0.5)
        after, _ = run_bilstm(model, inputs, lengths)
        reference, _ = run_bilstm(model, inputs, lengths, implementation="reference")
    assert len(calls) == 6
    assert max_diff(after, before) > 1e-3
    assert max_diff(after, reference) <= lstm_tolerance(model.config, *reference)


@pytest.mark.parametrize("implementation", ["fast", "auto"])
@pytest.mark.parametrize("batch_lengths", [[9, 3, 7, 2, 7], [6], [4, 4]])
def test_skipping_the_final_step_changes_only_the_boundary_outputs(implementation, batch_lengths):
    """`skip_final_step` drops each row's last step per direction: the forward outputs at the row's last
    position and the backward ones at its first are zero, every other output is unchanged (to float32
    rounding: the per-step products then have fewer rows, which may be summed differently)."""
    model = small_model()
    inputs, lengths = bilstm_inputs(batch_lengths, steps=max(batch_lengths) + 1)
    with torch.no_grad():
        full, _ = run_bilstm(model, inputs, lengths, implementation=implementation)
        skipped, _ = run_bilstm(model, inputs, lengths, implementation=implementation, skip_final_step=True)
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
    with torch.no_grad():
        plain = model(char_ids).hidden_states
        reference = model(char_ids, keep_sentence_boundaries=True).hidden_states
    for layer, full_layer in zip(plain, reference):
        mask = (torch.arange(layer.shape[1]).unsqueeze(0) < lengths.unsqueeze(1)).unsqueeze(-1)
        assert float((layer - full_layer[:, 1:-1] * mask).abs().max()) <= bilm_tolerance(model.config, full_layer)


@pytest.mark.parametrize("implementation", ["reference", "fast", "auto"])
def test_outputs_differ_when_a_clip_is_dropped(implementation):
    """Guards the comparisons against passing vacuously: every path must really use the clips."""
    model = small_model()
    inputs, lengths = bilstm_inputs([9, 3, 7, 1, 7], steps=9)
    with torch.no_grad():
        clipped, _ = run_bilstm(model, inputs, lengths, implementation=implementation)
        model.config.cell_clip = None
        unclipped, _ = run_bilstm(model, inputs, lengths, implementation=implementation)
    assert max_diff(clipped, unclipped) > 1e-2


@pytest.mark.parametrize("chunked", [False, True])
def test_grad_and_no_grad_give_the_same_outputs(chunked, monkeypatch):
    """Training keeps the input products of all steps in one buffer, inference computes them in chunks:
    the two agree to float32 rounding."""
    if chunked:  # input products in chunks of two steps
        monkeypatch.setattr(lstm_recurrence, "_GATE_BUFFER_ELEMENTS", 2 * 4 * 16 * 5 * 2)
    model = small_model()
    model.train()
    inputs, lengths = bilstm_inputs([9, 3, 7, 1, 7], steps=9)
    state = random_state(model, 5)
    with torch.no_grad():  # the fast path; "auto" inference may also run oneDNN's (tested against the plain loop)
        plain, (plain_h, plain_c) = run_bilstm(model, inputs, lengths, state, "fast")
    tracked, (h, c) = run_bilstm(model, inputs.requires_grad_(), lengths, state, "fast")
    assert tracked[0].requires_grad
    assert max_diff(plain + [plain_h, plain_c], [t.detach() for t in tracked + [h, c]]) <= lstm_tolerance(
        model.config, *plain, plain_h, plain_c
    )


@pytest.mark.parametrize("skip", [True, False])
def test_gradients_equal_the_plain_loop(skip):
    """The hand-written backpropagation through time against autograd through the plain loop (float64)."""
    model = small_model(skip=skip, dtype=torch.float64)
    inputs, lengths = bilstm_inputs([9, 3, 7, 1, 7], steps=9, dtype=torch.float64)
    h0, c0 = random_state(model, 5, dtype=torch.float64)
    generator = torch.Generator().manual_seed(5)
    output_weights = [torch.randn(5, 9, 16, generator=generator, dtype=torch.float64) for _ in range(2)]
    state_weights = [torch.randn(h0.shape, generator=generator, dtype=torch.float64),
                     torch.randn(c0.shape, generator=generator, dtype=torch.float64)]

    def gradients(implementation):
        leaves = [t.clone().requires_grad_() for t in (inputs, h0, c0)]
        layers, (h, c) = run_bilstm(model, leaves[0], lengths, (leaves[1], leaves[2]), implementation)
        loss = sum((layer * w).sum() for layer, w in zip(layers, output_weights))
        loss = loss + (h * state_weights[0]).sum() + (c * state_weights[1]).sum()
        return torch.autograd.grad(loss, leaves + list(model.bilstm.parameters()))

    reference, fast = gradients("reference"), gradients("fast")
    for ref, got in zip(reference, fast):
        assert ref.abs().max() > 0
        assert float((ref - got).abs().max()) <= 1e-10 * max(1.0, float(ref.abs().max()))


def test_training_with_dropout_runs_through_the_fast_path(monkeypatch):
    recurrences = []
    original = kernels_bilstm._lstm_recurrence
    monkeypatch.setattr(kernels_bilstm, "_lstm_recurrence", lambda *a, **k: recurrences.append(1) or original(*a, **k))
    model = small_model()
    model.train()
    inputs, lengths = bilstm_inputs([9, 3, 7], steps=9)
    layers, _ = model.run_bilstm(inputs, lengths, dropout=0.5)
    assert len(recurrences) == 2  # one per layer
    layers[-1].pow(2).sum().backward()
    grads = [p.grad for p in model.bilstm.parameters()]
    assert all(g is not None and torch.isfinite(g).all() and g.abs().sum() > 0 for g in grads)
    # Dropout really applies: each call draws its own mask.
    with torch.no_grad():
        again, _ = model.run_bilstm(inputs, lengths, dropout=0.5)
    assert max_diff(again, [layer.detach() for layer in layers]) > 1e-3


def test_long_batches_use_chunked_input_products(monkeypatch):
    model = small_model()
    inputs, lengths = bilstm_inputs([9, 3, 7, 1, 7], steps=9)
    with torch.no_grad():
        reference, _ = run_bilstm(model, inputs, lengths, implementation="reference")
        monkeypatch.setattr(lstm_recurrence, "_GATE_BUFFER_ELEMENTS", 2 * 4 * 16 * 5 * 2)  # two steps per chunk
        chunked, _ = run_bilstm(model, inputs, lengths, implementation="fast")
    assert max_diff(chunked, reference) <= lstm_tolerance(model.config, *reference)


@pytest.mark.parametrize("implementation", ["fast", "auto"])
def test_fixture_model_kernels_equal_the_plain_model(implementation):
    """The real (tiny) AllenNLP test biLM on its own sentences: the kernels and the plain model agree."""
    model = load_model_from_bilm(FIXTURES / "options.json", FIXTURES / "lm_weights.hdf5")
    sentences = [batch[0] for batch in json.loads((FIXTURES / "sentences.json").read_text())]
    encoded = ElmoTokenizer(segmenter="whitespace")(sentences, is_split_into_words=True, padding=True, return_tensors="pt")
    with torch.no_grad():
        model.set_lstm_implementation(implementation)
        fast = model(**encoded).hidden_states
        model.set_lstm_implementation("reference")
        reference = model(**encoded).hidden_states
    assert max_diff(fast, reference) <= bilm_tolerance(model.config, *reference)


def test_concurrent_calls_from_two_threads_give_each_its_own_numbers():
    """Inference keeps scratch memory between calls; two threads sharing one model must not share it."""
    import threading

    model = small_model(clip=False)
    cases = [bilstm_inputs([30, 12, 25, 30], steps=30, seed=seed) for seed in (3, 4)]
    with torch.no_grad():
        expected = [run_bilstm(model, inputs, lengths)[0] for inputs, lengths in cases]
    mismatches = []

    def work(index):
        inputs, lengths = cases[index]
        with torch.no_grad():
            for _ in range(60):
                layers, _ = model.run_bilstm(inputs, lengths)
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
        inside, _ = model.run_bilstm(inputs, lengths)
    with torch.no_grad():  # and must be writable here
        after, _ = model.run_bilstm(inputs, lengths)
    assert max_diff(after, inside) == 0


def test_a_used_model_can_be_copied_pickled_and_saved_whole(tmp_path):
    """Inference caches (oneDNN-packed weights: opaque tensors) must not make the model uncopyable; a copy starts
    with empty caches of its own and gives the same numbers."""
    import copy
    import pickle

    model = small_model()
    inputs, lengths = bilstm_inputs([5, 3, 4], steps=5)
    with torch.no_grad():
        expected, _ = model.run_bilstm(inputs, lengths)
        model.run_bilstm(inputs[:1], lengths[:1])  # batch 1 builds the other kind of kept copies
    copies = [copy.deepcopy(model), pickle.loads(pickle.dumps(model))]
    torch.save(model, tmp_path / "whole.pt")
    copies.append(torch.load(tmp_path / "whole.pt", weights_only=False))  # our own file, written just above
    for duplicate in copies:
        assert duplicate.lstm_implementation == "auto" and duplicate.bilstm is not model.bilstm
        with torch.no_grad():
            layers, _ = duplicate.run_bilstm(inputs, lengths)
        assert max_diff(layers, expected) == 0


def test_under_torch_compile_inference_takes_the_path_inductor_can_lower(monkeypatch):
    calls = count_onednn_layers(monkeypatch)
    model = small_model()
    inputs, lengths = bilstm_inputs([5, 3, 4], steps=5)
    with torch.no_grad():
        model.run_bilstm(inputs, lengths)
        assert len(calls) == (2 if onednn_available() else 0)
        monkeypatch.setattr(torch.compiler, "is_compiling", lambda: True)
        compiled_path, _ = model.run_bilstm(inputs, lengths)
        assert len(calls) == (2 if onednn_available() else 0)  # not again
        reference, _ = run_bilstm(model, inputs, lengths, implementation="reference")
    assert max_diff(compiled_path, reference) <= lstm_tolerance(model.config, *reference)


def test_float32_gradients_equal_the_float64_plain_loop(products):
    """The hand-written backpropagation in float32, with oneDNN's products (CPU default where the build has them)
    and with torch's, against autograd through the plain loop in float64: within 1e-6 of each gradient's
    largest value (issue #19)."""
    model = small_model(skip=True, dtype=torch.float64)
    inputs, lengths = bilstm_inputs([9, 3, 7, 1, 7], steps=9, dtype=torch.float64)
    h0, c0 = random_state(model, 5, dtype=torch.float64)
    generator = torch.Generator().manual_seed(5)
    output_weights = [torch.randn(5, 9, 16, generator=generator, dtype=torch.float64) for _ in range(2)]

    def gradients(implementation, dtype):
        model.to(dtype)
        leaves = [t.to(dtype).clone().requires_grad_() for t in (inputs, h0, c0)]
        layers, (h, c) = run_bilstm(model, leaves[0], lengths, (leaves[1], leaves[2]), implementation)
        loss = sum((layer * w.to(dtype)).sum() for layer, w in zip(layers, output_weights)) + h.sum() + c.sum()
        return [g.double() for g in torch.autograd.grad(loss, leaves + list(model.bilstm.parameters()))]

    reference, fast = gradients("reference", torch.float64), gradients("fast", torch.float32)
    worst = max(float((ref - got).abs().max()) / float(ref.abs().max()) for ref, got in zip(reference, fast))
    assert worst <= 1e-6


def test_a_second_backward_through_the_fast_path_raises_instead_of_reading_overwritten_buffers():
    """The fast backward writes gradients over its saved activations, so `retain_graph=True` cannot give a
    correct second backward: it must refuse, naming what to do."""
    model = small_model()
    inputs, lengths = bilstm_inputs([9, 3, 7], steps=9)
    layers, _ = run_bilstm(model, inputs.requires_grad_(), lengths, implementation="fast")
    loss = layers[-1].pow(2).sum()
    loss.backward(retain_graph=True)
    with pytest.raises(RuntimeError, match="runs once per forward"):
        loss.backward()


@pytest.mark.parametrize("batch_lengths", [[4, 1, 3], [1, 1], [1], [5, 3]])
def test_skipping_the_final_step_equals_the_plain_loop_with_its_gradients(batch_lengths):
    """With `skip_final_step` each row runs one step fewer per direction, and a row of length 1 runs none: the
    fast path then returns its initial state as the final state and passes the final state's gradient straight
    back to it, as the plain loop does."""
    model = small_model(dtype=torch.float64)
    steps = max(batch_lengths)
    inputs, lengths = bilstm_inputs(batch_lengths, steps=steps, dtype=torch.float64)
    h0, c0 = random_state(model, len(batch_lengths), dtype=torch.float64)
    generator = torch.Generator().manual_seed(3)
    weights = torch.randn(len(batch_lengths), steps, 16, generator=generator, dtype=torch.float64)

    def run(skipping):
        leaves = [t.clone().requires_grad_() for t in (inputs, h0, c0)]
        layers, (h, c) = skipping(leaves[0], (leaves[1], leaves[2]))
        loss = (layers[-1] * weights).sum() + (h * 1.5).sum() + (c * 0.5).sum()
        wrt = leaves + list(model.bilstm.parameters())
        gradients = torch.autograd.grad(loss, wrt, allow_unused=True)  # no step ran: the weights go unused
        return [t.detach() for t in (*layers, h, c)] + [
            torch.zeros_like(leaf) if g is None else g for leaf, g in zip(wrt, gradients)
        ]

    reference = run(lambda x, state: reference_skipping_final_step(model, x, lengths, state))
    fast = run(lambda x, state: run_bilstm(model, x, lengths, state, "fast", skip_final_step=True))
    for expected, got in zip(reference, fast):
        assert float((expected - got).abs().max()) <= 1e-10 * max(1.0, float(expected.abs().max()))
    if max(batch_lengths) > 1:  # the comparison is not between zeros
        assert reference[0].abs().max() > 0


def test_a_state_that_needs_gradients_keeps_them_when_the_weights_are_frozen():
    """Frozen weights and inputs, but an initial state that requires grad: "auto" must not take the no-grad
    oneDNN inference path, or the state's gradient is lost."""
    model = small_model()
    model.requires_grad_(False)
    inputs, lengths = bilstm_inputs([5, 3], steps=5)
    h0, c0 = (t.requires_grad_() for t in random_state(model, 2))
    layers, _ = run_bilstm(model, inputs, lengths, (h0, c0))
    (h_grad,) = torch.autograd.grad(layers[-1].sum(), h0)
    reference, _ = run_bilstm(model, inputs, lengths, (h0, c0), "reference")
    (h_reference,) = torch.autograd.grad(reference[-1].sum(), h0)
    assert h_reference.abs().max() > 0
    assert max_diff([h_grad], [h_reference]) <= lstm_tolerance(model.config, h_reference)


@pytest.mark.parametrize("implementation", ["reference", "fast", "auto"])
def test_nan_or_inf_past_a_rows_length_changes_no_output_and_no_gradient(implementation):
    model = small_model(skip=True, clip=True)
    inputs, lengths = bilstm_inputs([5, 3, 2], steps=6)
    garbage = inputs.clone()
    padding = torch.arange(6).unsqueeze(0) >= lengths.unsqueeze(1)
    garbage[padding] = float("nan")
    garbage[2, 5] = float("inf")
    weights = torch.randn(3, 6, 16, generator=torch.Generator().manual_seed(3))

    def outputs_and_gradients(values):
        leaf = values.clone().requires_grad_()
        layers, (h, c) = run_bilstm(model, leaf, lengths, implementation=implementation)
        loss = sum((layer * weights).sum() for layer in layers) + h.sum() + c.sum()
        return [*layers, h, c, *torch.autograd.grad(loss, [leaf, *model.bilstm.parameters()])]

    # The same computation on the same numbers: equal, not merely close.
    for clean, dirty in zip(outputs_and_gradients(inputs), outputs_and_gradients(garbage)):
        assert torch.equal(clean, dirty)


@pytest.mark.parametrize("kind", ["foreach", "for-loop"])
def test_inference_after_an_in_place_optimizer_step_in_eval_mode_uses_the_new_weights(kind):
    """Optimisers that update through autograd-visible in-place operations bump the weights' version counters,
    which is what the kept inference copies are keyed by (kernels/weights_key.py): no train() needed."""
    model = small_model(skip=True, clip=True)
    inputs, lengths = bilstm_inputs([6, 4, 2], steps=6)
    with torch.no_grad():
        before, _ = model.run_bilstm(inputs, lengths)  # keeps inference copies of the weights
    optimizer = torch.optim.AdamW(model.bilstm.parameters(), lr=1e-2, foreach=kind == "foreach")
    model.run_bilstm(inputs, lengths)[0][-1].sum().backward()
    optimizer.step()
    with torch.no_grad():
        layers, _ = model.run_bilstm(inputs, lengths)
        reference, _ = run_bilstm(model, inputs, lengths, implementation="reference")
    assert max_diff(layers, before) > 1e-3
    assert max_diff(layers, reference) <= lstm_tolerance(model.config, *reference)


def test_the_inference_step_takes_the_reference_steps_arguments():
    """Issue 42: the int8 and oneDNN paths' step is written against `reference_lstm_step` (same arguments, same
    order), so a change to the arithmetic starts there; the kernel's extra arguments are buffers for the results."""
    reference = list(inspect.signature(reference_lstm_step).parameters)
    assert list(inspect.signature(lstm_recurrence._lstm_step).parameters) == [*reference, "gates", "hidden"]
