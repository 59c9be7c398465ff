"""A tiny tagger and a labelled batch, shared by the head and loss tests (tests/models/test_heads.py,
test_elmo_losses.py)."""

import torch
from finetune_helpers import LABELS
from small_models import tiny_config

from hf_elmo import ElmoForTokenClassification, ElmoTokenizer

ID2LABEL = dict(enumerate(LABELS))
LABEL2ID = {label: i for i, label in ID2LABEL.items()}
SENTENCES = [["Alice", "met", "Bob", "in", "Paris"], ["hello"], ["New", "York", "."]]
TAGS = [[3, 0, 3, 0, 1], [0], [1, 2, 0]]


def batch(sentences=SENTENCES, tags=TAGS):
    encoding = ElmoTokenizer()(sentences, is_split_into_words=True, padding=True, return_tensors="pt")
    labels = torch.full(encoding["attention_mask"].shape, -100)
    for row, row_tags in enumerate(tags):
        labels[row, : len(row_tags)] = torch.tensor(row_tags)
    return dict(encoding), labels


def tagger(seed=0, **overrides) -> ElmoForTokenClassification:
    torch.manual_seed(seed)
    values = dict(id2label=ID2LABEL, label2id=LABEL2ID, classifier_dropout=0.0)
    values.update(overrides)
    return ElmoForTokenClassification(tiny_config(**values)).eval()
