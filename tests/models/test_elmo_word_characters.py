"""Taggers of characters over a biLM of words (`config.label_characters`, hf_elmo.elmo_word_characters)."""

import pytest
import torch
from small_models import tiny_config

from hf_elmo import ElmoDataCollator, ElmoForTokenClassification, ElmoModel, ElmoTokenizer
from hf_elmo.char_words import characters_as_words
from hf_elmo.elmo_word_characters import LEXICON_ROLES, WORD_POSITIONS, character_vectors, lexicon_vectors


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


def _character_feature_batch(tokenizer, sentences, **features):
    """Sentences written as their words split by "|" -> a batch of their characters, with `characters_as_words`'s
    `features` (`keep_bigrams`, `keep_lexicon`, `lexicon`) beside each character's own ids."""
    examples = []
    for chars in sentences:
        pieces = chars.split("|")
        examples.append(characters_as_words({"words": list("".join(pieces))}, lambda text, pieces=pieces: pieces,
                                            keep_characters=True, **features))
    return ElmoDataCollator(tokenizer)(examples)


def _character_tagger(**features):
    """A linear character tagger without dropout, with the head's x_k of each character and the given `features`."""
    torch.manual_seed(0)
    config = tiny_config(num_labels=3, label_characters=True, task_token_features=True, task_character_features=True,
                         task_encoder="linear", classifier_dropout=0.0, **features)
    return ElmoForTokenClassification(config).eval()


def _independent_mix(model, batch):
    """The head's mix of the biLM layers, computed here from the biLM's outputs."""
    layers = ElmoModel.forward(model.elmo, batch["input_ids"], batch["attention_mask"]).hidden_states
    weights = torch.softmax(model.scalar_mix.scalar_parameters.detach().view(-1), 0)
    return model.scalar_mix.gamma.detach() * sum(w * layer for w, layer in zip(weights, layers))


def test_character_features_give_each_character_its_own_vector():
    model = _character_tagger()
    config = model.config
    tokenizer = ElmoTokenizer(segmenter="whitespace")
    batch = _character_feature_batch(tokenizer, ["小米|粥|好香", "小米|手机"])
    # Each character's ids are its ids as a one-character word.
    assert batch["character_input_ids"].shape == (2, 5, config.max_characters_per_token)
    assert batch["character_input_ids"][1, 3].tolist() == tokenizer(["机"], is_split_into_words=True)["input_ids"][0]
    assert not batch["character_input_ids"][1, 4].any()  # padding
    output = model(**batch)
    # Independently: [x_k(word); ELMo mix of the word; position one-hot; x_k(character)].
    mixed = _independent_mix(model, batch)
    word_vectors = model.token_features(batch["input_ids"][0])
    char_vectors = model.token_features(batch["character_input_ids"][0])
    index = [0, 0, 1, 2, 2]
    features = torch.cat([word_vectors[index], mixed[0, index], torch.eye(4)[[1, 3, 0, 1, 3]], char_vectors], dim=-1)
    torch.testing.assert_close(output.logits[0], model.classifier(features), rtol=1e-5, atol=1e-6)
    # The two characters of 小米 share word vector and differ only by position without; with, by their own vectors.
    assert not torch.equal(char_vectors[0], char_vectors[1])


def test_character_features_need_their_ids_and_their_config():
    tokenizer = ElmoTokenizer(segmenter="whitespace")
    batch = _character_feature_batch(tokenizer, ["小米|粥"])
    config = dict(num_labels=2, label_characters=True, task_token_features=True)
    with pytest.raises(ValueError, match="character_input_ids are for taggers with config.task_character_features"):
        ElmoForTokenClassification(tiny_config(**config))(**batch)
    model = ElmoForTokenClassification(tiny_config(**config, task_character_features=True))
    without = {key: value for key, value in batch.items() if key != "character_input_ids"}
    with pytest.raises(ValueError, match="need character_input_ids"):
        model(**without)
    with pytest.raises(ValueError, match=r"character_input_ids must be \(batch, positions, characters\)"):
        model(**{**without, "character_input_ids": batch["character_input_ids"][:, :2]})
    for missing in ("label_characters", "task_token_features"):
        with pytest.raises(ValueError, match="task_character_features needs label_characters and task_token_features"):
            tiny_config(**{**config, missing: False}, task_character_features=True)


def test_the_collator_refuses_characters_that_do_not_match_the_positions():
    tokenizer = ElmoTokenizer(segmenter="whitespace")
    example = characters_as_words({"words": list("小米粥")}, lambda text: ["小米", "粥"], keep_characters=True)
    example["characters"] = ["小", "米"]
    with pytest.raises(ValueError, match="'characters' must be a list of one entry for each of the 3 characters"):
        ElmoDataCollator(tokenizer)([example])
    with pytest.raises(ValueError, match="need ElmoDataCollator\\(tokenizer=...\\)"):
        ElmoDataCollator()([{**example, "characters": list("小米粥"), "input_ids": [[1, 2, 3]] * 2}])


def test_bigram_features_give_each_character_the_vector_of_it_and_the_next():
    model = _character_tagger(task_bigram_features=True)
    tokenizer = ElmoTokenizer(segmenter="whitespace")
    batch = _character_feature_batch(tokenizer, ["小米|粥|好香", "小米|手机"], keep_bigrams=True)
    assert batch["bigram_input_ids"].shape == batch["character_input_ids"].shape
    assert batch["bigram_input_ids"][1, 1].tolist() == tokenizer(["米手"], is_split_into_words=True)["input_ids"][0]
    assert torch.equal(batch["bigram_input_ids"][1, 3], batch["character_input_ids"][1, 3])  # 机: the last, alone
    output = model(**batch)
    # Independently: [x_k(word); ELMo mix of the word; position one-hot; x_k(character); x_k(character + next)].
    mixed = _independent_mix(model, batch)
    token_features = model.token_features
    index = [0, 0, 1, 2, 2]
    bigram_ids = tokenizer(["小米", "米粥", "粥好", "好香", "香"], is_split_into_words=True)["input_ids"]
    features = torch.cat([token_features(batch["input_ids"][0])[index], mixed[0, index],
                          torch.eye(4)[[1, 3, 0, 1, 3]], token_features(batch["character_input_ids"][0]),
                          token_features(torch.tensor(bigram_ids))], dim=-1)
    torch.testing.assert_close(output.logits[0], model.classifier(features), rtol=1e-5, atol=1e-6)


def test_bigram_features_need_their_ids_and_the_character_features():
    tokenizer = ElmoTokenizer(segmenter="whitespace")
    batch = _character_feature_batch(tokenizer, ["小米|粥"], keep_bigrams=True)
    config = dict(num_labels=2, label_characters=True, task_token_features=True, task_character_features=True)
    with pytest.raises(ValueError, match="bigram_input_ids are for taggers with config.task_bigram_features"):
        ElmoForTokenClassification(tiny_config(**config))(**batch)
    model = ElmoForTokenClassification(tiny_config(**config, task_bigram_features=True))
    with pytest.raises(ValueError, match="need bigram_input_ids"):
        model(**{key: value for key, value in batch.items() if key != "bigram_input_ids"})
    with pytest.raises(ValueError, match="task_bigram_features needs task_character_features"):
        tiny_config(**{**config, "task_character_features": False}, task_bigram_features=True)
    example = characters_as_words({"words": list("小米粥")}, lambda text: ["小米", "粥"], keep_bigrams=True)
    with pytest.raises(ValueError, match="'bigrams' must be a list of one entry for each of the 3 characters"):
        ElmoDataCollator(tokenizer)([{**example, "bigrams": ["小米", "米粥"]}])


def test_lexicon_vectors_average_each_roles_words_by_weight_over_all_the_characters_words():
    torch.manual_seed(0)
    words = torch.randn(2, 4, 3)
    weights = torch.tensor([[1.0, 2.0, 4.0, 0.0], [3.0, 0.0, 0.0, 0.0]])
    index = torch.full((2, 3, len(LEXICON_ROLES), 2), -1)
    index[0, 0, 0, :2] = torch.tensor([0, 1])  # character 0 begins words 0 and 1
    index[0, 0, 2, 0] = 2  # and ends word 2
    index[0, 1, 1, 0] = 1
    index[1, 0, 0, 0] = 0
    pooled = lexicon_vectors(words, weights, index)
    assert pooled.shape == (2, 3, len(LEXICON_ROLES) * 3)
    roles = pooled.view(2, 3, len(LEXICON_ROLES), 3)
    # By the formula: 3 / (total weight of the character's words) * the weighted sum of the role's words.
    torch.testing.assert_close(roles[0, 0, 0], 3 / 7 * (1 * words[0, 0] + 2 * words[0, 1]))
    torch.testing.assert_close(roles[0, 0, 2], 3 / 7 * 4 * words[0, 2])
    assert not roles[0, 0, 1].any()
    torch.testing.assert_close(roles[0, 1], torch.stack([torch.zeros(3), 3 * words[0, 1], torch.zeros(3)]))
    torch.testing.assert_close(roles[1, 0, 0], 3 * words[1, 0])
    assert not roles[0, 2].any() and not roles[1, 1:].any()  # no words: zeros
    assert torch.isfinite(pooled).all()
    # Counts of millions (the dictionary's) in half precision: the shares are taken in float32 first.
    half = lexicon_vectors(words.half(), weights * 1e6, index)
    assert half.dtype == torch.float16
    torch.testing.assert_close(half.float(), pooled, rtol=4e-3, atol=4e-3)


@pytest.mark.parametrize(
    "weights, index, message",
    [
        (torch.ones(1, 3), torch.full((1, 2, 3, 1), -1), r"lexicon_weights must be \(batch=1, words=2\)"),
        (torch.ones(1, 2), torch.full((1, 2, 2, 1), -1), r"lexicon_match_index must be \(batch=1, characters=2, 3 roles"),
        (torch.ones(1, 2), torch.full((1, 2, 3, 1), 2), "must point at the 2 lexicon words"),
    ],
)
def test_lexicon_vectors_refuse_inputs_that_do_not_fit(weights, index, message):
    with pytest.raises(ValueError, match=message):
        lexicon_vectors(torch.zeros(1, 2, 4), weights, index)


LEXICON = {"小": 0, "小米": 6, "米": 0, "米粥": 2, "手": 0, "手机": 10}


def test_lexicon_features_give_each_character_its_dictionary_words_by_role():
    model = _character_tagger(task_lexicon_features=True)
    config = model.config
    tokenizer = ElmoTokenizer(segmenter="whitespace")
    batch = _character_feature_batch(tokenizer, ["小米粥|好", "小米|手机"], keep_lexicon=True, lexicon=LEXICON)
    assert batch["lexicon_input_ids"].shape == (2, 2, config.max_characters_per_token)
    assert batch["lexicon_input_ids"][0, 1].tolist() == tokenizer(["米粥"], is_split_into_words=True)["input_ids"][0]
    assert batch["lexicon_weights"].tolist() == [[6.0, 2.0], [6.0, 10.0]]
    assert batch["lexicon_match_index"].shape == (2, 4, len(LEXICON_ROLES), 1)
    output = model(**batch)
    mixed = _independent_mix(model, batch)
    x = model.token_features
    xiaomi, zhou = x(batch["lexicon_input_ids"][0]).unbind(0)
    zero = torch.zeros_like(xiaomi)
    # 小 begins 小米; 米 ends 小米 and begins 米粥 (weights 6 and 2 of 8); 粥 ends 米粥; 好: no words.
    lexicon = torch.stack([torch.cat([3 * xiaomi, zero, zero]),
                           torch.cat([3 * 2 / 8 * zhou, zero, 3 * 6 / 8 * xiaomi]),
                           torch.cat([zero, zero, 3 * zhou]),
                           torch.cat([zero, zero, zero])])
    features = torch.cat([x(batch["input_ids"][0])[[0, 0, 0, 1]], mixed[0, [0, 0, 0, 1]], torch.eye(4)[[1, 2, 3, 0]],
                          x(batch["character_input_ids"][0]), lexicon], dim=-1)
    torch.testing.assert_close(output.logits[0], model.classifier(features), rtol=1e-5, atol=1e-6)


def test_lexicon_features_need_their_inputs_and_their_config():
    tokenizer = ElmoTokenizer(segmenter="whitespace")
    batch = _character_feature_batch(tokenizer, ["小米|粥"], keep_lexicon=True, lexicon=LEXICON)
    config = dict(num_labels=2, label_characters=True, task_token_features=True, task_character_features=True)
    with pytest.raises(ValueError, match="lexicon_input_ids, lexicon_weights, lexicon_match_index are for taggers "
                                         "with config.task_lexicon_features"):
        ElmoForTokenClassification(tiny_config(**config))(**batch)
    model = ElmoForTokenClassification(tiny_config(**config, task_lexicon_features=True))
    with pytest.raises(ValueError, match="pass lexicon_input_ids, lexicon_weights, lexicon_match_index"):
        model(**{key: value for key, value in batch.items() if key != "lexicon_weights"})
    with pytest.raises(ValueError, match=r"lexicon_match_index must be \(batch=1, characters=3, 3 roles"):
        model(**{**batch, "lexicon_match_index": batch["lexicon_match_index"][:, :2]})
    with pytest.raises(ValueError, match=r"lexicon_input_ids must be \(batch, positions, characters\)"):
        model(**{**batch, "lexicon_input_ids": batch["lexicon_input_ids"][:, :1]})
    for missing in ("label_characters", "task_token_features"):
        with pytest.raises(ValueError, match="task_lexicon_features needs label_characters and task_token_features"):
            tiny_config(**{**config, missing: False, "task_character_features": False}, task_lexicon_features=True)


def test_the_collator_refuses_lexicon_matches_that_do_not_fit():
    tokenizer = ElmoTokenizer(segmenter="whitespace")
    example = characters_as_words({"words": list("小米粥")}, lambda text: ["小米", "粥"], keep_lexicon=True,
                                  lexicon=LEXICON)
    collate = ElmoDataCollator(tokenizer)
    with pytest.raises(ValueError, match="example 1 lacks lexicon_weights"):
        collate([example, {**example, "lexicon_weights": None}])
    with pytest.raises(ValueError, match="lexicon_matches must hold one entry for each of the 3 characters"):
        collate([{**example, "lexicon_matches": example["lexicon_matches"][:2]}])
    with pytest.raises(ValueError, match="must point at its 2 lexicon words"):
        collate([{**example, "lexicon_matches": [[[5], [], []]] * 3}])
    with pytest.raises(ValueError, match="must be 3 lists of word indices"):
        collate([{**example, "lexicon_matches": [[[0]]] * 3}])
    with pytest.raises(ValueError, match="lexicon_weights must be positive"):
        collate([{**example, "lexicon_weights": [1.0, 0.0]}])
    with pytest.raises(ValueError, match="lexicon_words and lexicon_weights must be lists of the same length"):
        collate([{**example, "lexicon_weights": [1.0]}])
    # A sentence without dictionary words collates to an empty word list (one padded slot).
    empty = characters_as_words({"words": list("好")}, lambda text: ["好"], keep_lexicon=True, lexicon=LEXICON)
    batch = collate([empty])
    assert batch["lexicon_weights"].tolist() == [[0.0]] and batch["lexicon_match_index"].tolist() == [[[[-1]] * 3]]



def test_from_pretrained_refuses_arguments_that_make_an_invalid_config(tmp_path):
    ElmoModel(tiny_config()).save_pretrained(tmp_path)
    for features in (dict(task_lexicon_features=True), dict(task_character_features=True)):
        name = next(iter(features))
        with pytest.raises(ValueError, match=f"{name} needs label_characters and task_token_features"):
            ElmoForTokenClassification.from_pretrained(tmp_path, num_labels=3, label_characters=True, **features)


def test_the_collator_refuses_per_character_inputs_without_the_characters_places():
    example = characters_as_words({"words": list("小米粥")}, lambda text: ["小米", "粥"], keep_characters=True,
                                  keep_lexicon=True, lexicon=LEXICON)
    words_only = {key: value for key, value in example.items() if key not in ("token_word_index", "token_positions")}
    with pytest.raises(ValueError, match="characters, lexicon_matches, lexicon_weights, lexicon_words belong to "
                                         "characters placed in their words"):
        ElmoDataCollator(ElmoTokenizer(segmenter="whitespace"))([words_only])
