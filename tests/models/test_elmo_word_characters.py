"""Taggers of characters over a biLM of words (`config.label_characters`, hf_elmo.elmo_word_characters)."""

import pytest
import torch
from finetune_helpers import tiny_config

from hf_elmo import ElmoDataCollator, ElmoForTokenClassification, ElmoModel, ElmoTokenizer
from hf_elmo.char_words import characters_as_words
from hf_elmo.elmo_word_characters import WORD_POSITIONS, character_vectors


def test_each_character_gets_its_words_vector_and_its_position():
    words = torch.arange(2 * 3 * 2, dtype=torch.float).view(2, 3, 2)
    index = torch.tensor([[0, 0, 1, 2], [0, 1, 1, -1]])
    positions = torch.tensor([[1, 3, 0, 0], [0, 1, 3, 0]])
    vectors, mask = character_vectors(words, index, positions)
    assert vectors.shape == (2, 4, 2 + len(WORD_POSITIONS))
    assert mask.tolist() == [[True] * 4, [True, True, True, False]]
    assert torch.equal(vectors[0, :, :2], words[0, [0, 0, 1, 2]])
    assert torch.equal(vectors[1, :3, :2], words[1, [0, 1, 1]])
    assert torch.equal(vectors[0, :, 2:], torch.eye(4)[[1, 3, 0, 0]])
    assert not vectors[1, 3].any()  # padding


@pytest.mark.parametrize(
    "index, positions, message",
    [
        (None, torch.zeros(1, 2, dtype=torch.long), "pass token_word_index and token_positions"),
        (torch.zeros(1, 2, dtype=torch.long), torch.zeros(1, 3, dtype=torch.long), "must both be (batch=1, characters)"),
        (torch.tensor([[0, 3]]), torch.zeros(1, 2, dtype=torch.long), "points past the 3 words"),
    ],
)
def test_missing_or_inconsistent_character_positions_are_refused(index, positions, message):
    with pytest.raises(ValueError, match=message.replace("(", r"\(").replace(")", r"\)")):
        character_vectors(torch.zeros(1, 3, 4), index, positions)


def _batch(tokenizer, sentences, labels=None):
    examples = []  # words marked with "|", as a segmenter would cut them
    for chars in sentences:
        pieces = chars.split("|")
        example = characters_as_words({"words": list("".join(pieces))}, lambda text, pieces=pieces: pieces)
        examples.append(example)
    if labels is not None:
        for example, row in zip(examples, labels):
            example["labels"] = row
    return ElmoDataCollator(tokenizer)(examples), examples


def test_the_tagger_reads_words_and_labels_characters():
    torch.manual_seed(0)
    config = tiny_config(num_labels=3, label_characters=True, task_encoder="linear", classifier_dropout=0.0)
    model = ElmoForTokenClassification(config).eval()
    tokenizer = ElmoTokenizer(segmenter="whitespace")
    batch, examples = _batch(tokenizer, ["小米|粥|好香", "小米|手机"], labels=[[1, 2, 0, 0, 0], [1, 2, 0, 0]])
    assert examples[0]["words"] == ["小米", "粥", "好香"] and examples[0]["token_positions"] == [1, 3, 0, 1, 3]
    assert batch["input_ids"].shape[:2] == (2, 3) and batch["labels"].shape == (2, 5)
    output = model(**batch)
    assert output.logits.shape == (2, 5, 3) and output.predictions[1, 4] == -100  # one character of padding
    # Independently: the biLM's words, mixed by the head's weights, copied to characters with their positions.
    layers = ElmoModel.forward(model.elmo, batch["input_ids"], batch["attention_mask"]).hidden_states
    weights = torch.softmax(model.scalar_mix.scalar_parameters.detach().view(-1), 0)
    mixed = model.scalar_mix.gamma.detach() * sum(w * layer for w, layer in zip(weights, layers))
    chars = mixed[0, [0, 0, 1, 2, 2]]
    expected = model.classifier(torch.cat([chars, torch.eye(4)[[1, 3, 0, 1, 3]]], dim=-1))
    torch.testing.assert_close(output.logits[0], expected, rtol=1e-5, atol=1e-6)
    # The loss is over the characters' labels.
    model.train()
    loss = model(**batch).loss
    loss.backward()
    assert model.classifier.weight.grad.abs().sum() > 0 and model.scalar_mix.gamma.grad is not None


def test_a_word_tagger_refuses_character_positions_and_a_character_tagger_needs_them():
    tokenizer = ElmoTokenizer(segmenter="whitespace")
    batch, _ = _batch(tokenizer, ["小米|粥"])
    words_only = {key: batch[key] for key in ("input_ids", "attention_mask")}
    with pytest.raises(ValueError, match="for taggers with config.label_characters"):
        ElmoForTokenClassification(tiny_config(num_labels=2))(**batch)
    with pytest.raises(ValueError, match="pass token_word_index and token_positions"):
        ElmoForTokenClassification(tiny_config(num_labels=2, label_characters=True))(**words_only)


def test_the_collator_pads_character_positions_and_cuts_with_max_words():
    tokenizer = ElmoTokenizer(segmenter="whitespace")
    examples = [characters_as_words({"words": list("小米粥好香"), "labels": [1, 2, 0, 0, 0]},
                                    lambda text: ["小米", "粥", "好香"]),
                characters_as_words({"words": ["米"], "labels": [0]}, lambda text: ["米"])]
    batch = ElmoDataCollator(tokenizer, max_words=2)(examples)
    assert batch["token_word_index"].tolist() == [[0, 0, 1, -1, -1], [0, -1, -1, -1, -1]]
    assert batch["token_positions"].tolist() == [[1, 3, 0, 1, 3], [0, 0, 0, 0, 0]]
    assert batch["labels"].tolist() == [[1, 2, 0, 0, 0], [0, -100, -100, -100, -100]]
    assert batch["input_ids"].shape[:2] == (2, 2)
    examples[1]["labels"] = [0, 0]
    with pytest.raises(ValueError, match="1 characters but 2 labels"):
        ElmoDataCollator(tokenizer)(examples)
    examples[1]["labels"], examples[1]["token_word_index"] = [0], [4]
    with pytest.raises(ValueError, match="must point at its 1 words"):
        ElmoDataCollator(tokenizer)(examples)
