"""The heads' losses (modeling_elmo.py): tagging_loss, classification_loss and their label checks."""

import math

import pytest
import torch
import torch.nn.functional as F
from finetune_helpers import LABELS
from small_models import tiny_config
from head_helpers import batch, tagger

from hf_elmo import ElmoForSequenceClassification
from hf_elmo.models.elmo.modeling_elmo import classification_loss, tagging_loss


def test_loss_ignores_minus_100_positions():
    model = tagger()
    inputs, labels = batch()
    output = model(**inputs, labels=labels)
    # Marking one more word -100 must drop exactly that word's term from the mean.
    partial = labels.clone()
    partial[0, 2] = -100
    keep = partial != -100
    expected = F.cross_entropy(output.logits[keep], partial[keep])
    torch.testing.assert_close(model(**inputs, labels=partial).loss, expected)
    assert not torch.allclose(expected, output.loss)


def test_bad_labels_are_rejected():
    model = tagger()
    inputs, labels = batch()
    with pytest.raises(ValueError, match="one label per word"):
        model(**inputs, labels=labels[:, :3])
    labels[0, 0] = len(LABELS)
    with pytest.raises(ValueError, match="outside"):
        model(**inputs, labels=labels)


def test_sequence_head_regression_and_multi_label_losses_follow_transformers():
    inputs, _ = batch()
    torch.manual_seed(0)
    regressor = ElmoForSequenceClassification(tiny_config(num_labels=1, classifier_dropout=0.0)).eval()
    targets = torch.tensor([0.3, 0.9, -1.5])  # num_labels 1: regression, as in transformers
    output = regressor(**inputs, labels=targets)
    torch.testing.assert_close(output.loss, F.mse_loss(output.logits.squeeze(-1), targets))
    assert output.loss > 0
    tagger_like = ElmoForSequenceClassification(tiny_config(num_labels=3, classifier_dropout=0.0)).eval()
    multi = torch.tensor([[1.0, 0.0, 1.0], [0.0, 0.0, 0.0], [0.0, 1.0, 0.0]])  # float labels: multi-label
    output = tagger_like(**inputs, labels=multi)
    torch.testing.assert_close(output.loss, F.binary_cross_entropy_with_logits(output.logits, multi))
    with pytest.raises(ValueError, match="multi-label classification .* needs labels of shape \\(3, 3\\)"):
        tagger_like(**inputs, labels=torch.tensor([0.3, 0.9, 1.0]))  # floats for a single-label classifier
    tagger_like.config.problem_type = "regression"
    output = tagger_like(**inputs, labels=multi)
    torch.testing.assert_close(output.loss, F.mse_loss(output.logits, multi))



def test_losses_equal_a_hand_computation():
    """Sums over the labelled items divided by their count, or by `num_items_in_batch`; numbers worked out by hand."""
    # One sentence of three words and two labels: p(label 1 | word 1) = 3/4, p(label 0 | word 2) = 4/5; the third
    # word is unlabelled (-100) and the fourth is padding (outside the mask) although it carries a label.
    logits = torch.tensor([[[0.0, math.log(3.0)], [math.log(4.0), 0.0], [5.0, -5.0], [-9.0, 9.0]]])
    labels = torch.tensor([[1, 0, -100, 0]])
    mask = torch.tensor([[True, True, True, False]])
    total = -(math.log(3.0 / 4.0) + math.log(4.0 / 5.0))
    assert tagging_loss(logits, labels, mask).item() == pytest.approx(total / 2, rel=1e-6)
    assert tagging_loss(logits, labels, mask, num_items_in_batch=8).item() == pytest.approx(total / 8, rel=1e-6)
    # Single-label classification: p(class 1) = 2 / (1 + 2 + 1) in the first row; the second row is left out.
    scores = torch.tensor([[0.0, math.log(2.0), 0.0], [7.0, 0.0, 0.0]])
    assert classification_loss(scores, torch.tensor([1, -100])).item() == pytest.approx(math.log(2.0), rel=1e-6)
    # One label: regression, squared errors (1 - 2)^2 + (3 - 1)^2 over 2 items.
    assert classification_loss(torch.tensor([[1.0], [3.0]]), torch.tensor([2.0, 1.0])).item() == pytest.approx(2.5)
    # Floating-point labels: multi-label, -ln sigmoid(0) - ln(1 - sigmoid(ln 3)) = ln 2 + ln 4 over 2 items.
    multi = classification_loss(torch.tensor([[0.0, math.log(3.0)]]), torch.tensor([[1.0, 0.0]]))
    assert multi.item() == pytest.approx(1.5 * math.log(2.0), rel=1e-6)
