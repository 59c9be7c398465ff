"""Small random task models of every kind the ONNX export writes (tests/export, tests/serving), with every head
weight random (a CRF of zeros, as initialised, would decode like argmax), and the texts they are compared on."""

from __future__ import annotations

import torch
from small_models import tiny_config

from hf_elmo import (ElmoForCharacterTagging, ElmoForSequenceClassification, ElmoForTokenClassification,
                     ElmoTokenizer)

TAGS = ["O", "B-LOC", "I-LOC", "B-PER", "I-PER"]
CLASSES = ["negative", "neutral", "positive"]
# Punctuation, Latin words, digits, emoji, Chinese, and an empty string.
TEXTS = ["张三在北京工作。", "Alice met Bob in Paris, 2018!", "", "😀 emoji 和 数字 12345, ok?",
         "小米发布了新手机，价格“很便宜”！", "   "]


def _randomised(model, seed: int, scale: float = 0.5):
    torch.manual_seed(seed)
    with torch.no_grad():
        for parameter in model.parameters():
            parameter.normal_(0.0, scale)
    return model.eval()


def _config(labels, **head):
    return tiny_config(id2label=dict(enumerate(labels)), label2id={label: i for i, label in enumerate(labels)},
                       classifier_dropout=0.0, **head)


def crf_tagger(seed: int = 0):
    """A word tagger: BiLSTM (two layers) + CRF, the paper's NER model."""
    return _randomised(ElmoForTokenClassification(_config(TAGS, task_encoder="bilstm", task_encoder_num_layers=2,
                                                          task_encoder_hidden_size=8, use_crf=True)), seed)


def character_tagger(seed: int = 1):
    """A character tagger with its own word and character vectors, BiLSTM + CRF."""
    return _randomised(ElmoForCharacterTagging(_config(TAGS, task_encoder="bilstm", task_encoder_hidden_size=8,
                                                       use_crf=True, task_token_features=True,
                                                       task_character_features=True)), seed)


def classifier(seed: int = 2):
    """A sentence classifier with a hidden layer and its own word vectors."""
    return _randomised(ElmoForSequenceClassification(_config(CLASSES, classifier_hidden_size=8,
                                                             task_token_features=True)), seed)


def tokenizer():
    return ElmoTokenizer(segmenter="jieba")


def save(model, folder) -> str:
    model.save_pretrained(folder)
    tokenizer().save_pretrained(folder)
    return str(folder)
