"""The CRF against brute force: every tag path of short sentences enumerated explicitly."""

import itertools

import pytest
import torch

from hf_elmo import ElmoCrf


def random_crf(num_tags: int, seed: int) -> ElmoCrf:
    generator = torch.Generator().manual_seed(seed)
    crf = ElmoCrf(num_tags)
    with torch.no_grad():
        for parameter in crf.parameters():
            parameter.copy_(torch.randn(parameter.shape, generator=generator))
    return crf


def path_score(crf: ElmoCrf, emissions: torch.Tensor, path) -> torch.Tensor:
    """Score of one path through one sentence, written out term by term."""
    score = crf.start_transitions[path[0]] + emissions[0, path[0]]
    for t in range(1, len(path)):
        score = score + crf.transitions[path[t - 1], path[t]] + emissions[t, path[t]]
    return score + crf.end_transitions[path[-1]]


def all_paths(num_tags: int, length: int):
    return list(itertools.product(range(num_tags), repeat=length))


@pytest.fixture
def case():
    num_tags, lengths = 3, [4, 2, 1, 3]
    crf = random_crf(num_tags, seed=1)
    emissions = torch.randn(len(lengths), max(lengths), num_tags, generator=torch.Generator().manual_seed(2))
    mask = torch.arange(max(lengths)) < torch.tensor(lengths).unsqueeze(1)
    return crf, emissions, mask, lengths


def test_log_partition_is_logsumexp_over_all_paths(case):
    crf, emissions, mask, lengths = case
    log_z = crf.log_partition(emissions, mask)
    for row, length in enumerate(lengths):
        scores = torch.stack([path_score(crf, emissions[row], p) for p in all_paths(3, length)])
        torch.testing.assert_close(log_z[row], torch.logsumexp(scores, 0), rtol=1e-6, atol=1e-5)


def test_log_likelihood_of_full_and_partial_labels(case):
    crf, emissions, mask, lengths = case
    tags = torch.tensor([[0, 2, 1, 1], [2, 0, -100, -100], [1, -100, -100, -100], [0, -100, 2, -100]])
    log_likelihood = crf.log_likelihood(emissions, tags, mask)
    for row, length in enumerate(lengths):
        paths = all_paths(3, length)
        scores = torch.stack([path_score(crf, emissions[row], p) for p in paths])
        gold = tags[row, :length].tolist()
        consistent = [i for i, p in enumerate(paths) if all(g == -100 or g == t for g, t in zip(gold, p))]
        # Row 3 leaves its middle word unlabelled: the gold score sums over the 3 tags there.
        assert len(consistent) == (3 if row == 3 else 1)
        expected = torch.logsumexp(scores[consistent], 0) - torch.logsumexp(scores, 0)
        torch.testing.assert_close(log_likelihood[row], expected, rtol=1e-6, atol=1e-5)


def test_viterbi_is_the_brute_force_argmax(case):
    crf, emissions, mask, lengths = case
    decoded = crf.viterbi_decode(emissions, mask)
    for row, length in enumerate(lengths):
        paths = all_paths(3, length)
        scores = torch.stack([path_score(crf, emissions[row], p) for p in paths])
        assert decoded[row, :length].tolist() == list(paths[int(scores.argmax())])
        assert (decoded[row, length:] == -100).all()


@pytest.mark.parametrize("seed", range(5))
def test_viterbi_many_random_cases(seed):
    num_tags, length = 4, 5
    crf = random_crf(num_tags, seed)
    emissions = torch.randn(1, length, num_tags, generator=torch.Generator().manual_seed(100 + seed))
    mask = torch.ones(1, length, dtype=torch.bool)
    paths = all_paths(num_tags, length)
    scores = torch.stack([path_score(crf, emissions[0], p) for p in paths])
    assert crf.viterbi_decode(emissions, mask)[0].tolist() == list(paths[int(scores.argmax())])


def test_marginals_match_brute_force(case):
    crf, emissions, mask, lengths = case
    marginals = crf.marginals(emissions, mask)
    for row, length in enumerate(lengths):
        paths = all_paths(3, length)
        probabilities = torch.softmax(torch.stack([path_score(crf, emissions[row], p) for p in paths]), 0)
        expected = torch.zeros(length, 3)
        for probability, path in zip(probabilities, paths):
            for t, tag in enumerate(path):
                expected[t, tag] += probability
        torch.testing.assert_close(marginals[row, :length], expected, rtol=1e-5, atol=1e-6)
        assert (marginals[row, length:] == 0).all()


def test_empty_rows_contribute_nothing():
    crf = random_crf(3, seed=3)
    emissions = torch.randn(2, 2, 3)
    mask = torch.tensor([[True, True], [False, False]])
    assert crf.log_partition(emissions, mask)[1] == 0
    assert crf.log_likelihood(emissions, torch.full((2, 2), -100), mask)[1] == 0
    assert crf.viterbi_decode(emissions, mask)[1].tolist() == [-100, -100]
    empty = torch.zeros(2, 0, 3)
    assert crf.viterbi_decode(empty, torch.zeros(2, 0, dtype=torch.bool)).shape == (2, 0)


def test_gradients_stay_finite_with_partial_labels(case):
    crf, emissions, mask, _ = case
    emissions = emissions.clone().requires_grad_(True)
    tags = torch.tensor([[0, 2, 1, 1], [2, 0, -100, -100], [1, -100, -100, -100], [0, -100, 2, -100]])
    crf.log_likelihood(emissions, tags, mask).sum().backward()
    assert torch.isfinite(emissions.grad).all()
    assert all(torch.isfinite(p.grad).all() for p in crf.parameters())
