"""Tagging characters over a biLM of words (`ElmoForCharacterTagging`, hf_elmo/models/elmo/modeling_elmo.py):
each character gets its word's vectors and its S/B/M/E position; the collator makes those inputs."""

import json
from pathlib import Path

import pytest
import torch
import torch.nn.functional as F
from small_models import SIZE_MISMATCH, tiny_config
from transformers import AutoModelForTokenClassification

import hf_elmo
from hf_elmo import ElmoForCharacterTagging, ElmoForTokenClassification, ElmoModel, ElmoTokenizer
from hf_elmo.finetuning.collator import ElmoCharacterTaggingCollator, ElmoDataCollator
from hf_elmo.finetuning.character_words import characters_as_words
from hf_elmo.models.elmo.modeling_elmo import WORD_POSITIONS, character_vectors


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
        (torch.zeros(2, 2, dtype=torch.long), torch.zeros(2, 2, dtype=torch.long), "must both be (batch=1, characters)"),
    ],
)
def test_missing_or_inconsistent_character_positions_are_refused(index, positions, message):
    with pytest.raises(ValueError, match=message.replace("(", r"\(").replace(")", r"\)")):
        character_vectors(torch.zeros(1, 3, 4), index, positions)


def _batch(tokenizer, sentences, labels=None, **features):
    """Sentences written as their words split by "|" (as a segmenter would cut them) -> a batch of their characters,
    with `characters_as_words`' `features` (`keep_characters`)."""
    examples = []
    for chars in sentences:
        pieces = chars.split("|")
        examples.append(characters_as_words({"words": list("".join(pieces))}, lambda text, pieces=pieces: pieces,
                                            **features))
    if labels is not None:
        for example, row in zip(examples, labels):
            example["labels"] = row
    return ElmoCharacterTaggingCollator(tokenizer)(examples), examples


def _independent_mix(model, batch):
    """The head's mix of the biLM layers, computed here from the biLM's outputs."""
    with torch.no_grad():
        layers = model.elmo(batch["input_ids"], batch["attention_mask"]).hidden_states
    weights = torch.softmax(model.scalar_mix.scalar_parameters.detach().view(-1), 0)
    return model.scalar_mix.gamma.detach() * sum(w * layer for w, layer in zip(weights, layers))


def _tagger(**config):
    torch.manual_seed(0)
    model = ElmoForCharacterTagging(tiny_config(num_labels=3, classifier_dropout=0.0, **config)).eval()
    with torch.no_grad():  # not the plain average: the head's mix must really be the one used
        model.scalar_mix.scalar_parameters.normal_()
    return model


def test_the_tagger_reads_words_and_labels_characters():
    model = _tagger()
    tokenizer = ElmoTokenizer(segmenter="whitespace")
    batch, examples = _batch(tokenizer, ["小米|粥|好香", "小米|手机"], labels=[[1, 2, 0, 0, 0], [1, 2, 0, 0]])
    assert examples[0]["words"] == ["小米", "粥", "好香"] and examples[0]["token_positions"] == [1, 3, 0, 1, 3]
    assert batch["input_ids"].shape[:2] == (2, 3) and batch["labels"].shape == (2, 5)
    output = model(**batch)
    assert output.logits.shape == (2, 5, 3)
    # Independently: the biLM's words, mixed by the head's weights, copied to characters with their positions.
    mixed = _independent_mix(model, batch)
    chars = mixed[0, [0, 0, 1, 2, 2]]
    with torch.no_grad():
        expected = model.classifier(torch.cat([chars, torch.eye(4)[[1, 3, 0, 1, 3]]], dim=-1))
    torch.testing.assert_close(output.logits[0], expected, rtol=1e-5, atol=1e-6)
    # One prediction per character (-100 at the padding character), the loss over the characters' labels.
    assert output.predictions.tolist()[1][4] == -100
    real = batch["labels"] != -100
    assert torch.equal(output.predictions[real], output.logits.argmax(-1)[real])
    torch.testing.assert_close(output.loss, F.cross_entropy(output.logits[real], batch["labels"][real]))
    model.train()
    loss = model(**batch).loss
    loss.backward()
    assert model.classifier.weight.grad.abs().sum() > 0 and model.scalar_mix.gamma.grad is not None
    assert model(**batch).predictions is None  # decoding is for evaluation


def test_a_crf_and_a_bilstm_over_the_characters():
    model = _tagger(task_encoder="bilstm", task_encoder_hidden_size=6, use_crf=True)
    with torch.no_grad():
        model.crf.transitions.normal_()
    batch, _ = _batch(ElmoTokenizer(segmenter="whitespace"), ["小米|粥|好香", "小米|手机"],
                      labels=[[1, 2, 0, 0, 0], [1, -100, 0, 0]])
    output = model(**batch)
    mask = batch["token_word_index"] >= 0
    labelled = (batch["labels"] != -100).sum()
    expected = -model.crf.log_likelihood(output.logits, batch["labels"], mask).sum() / labelled
    torch.testing.assert_close(output.loss, expected)
    assert torch.equal(output.predictions, model.crf.viterbi_decode(output.logits, mask))
    # Each sentence's characters alone give the same tags as in the batch.
    alone, _ = _batch(ElmoTokenizer(segmenter="whitespace"), ["小米|手机"])
    torch.testing.assert_close(model(**alone).logits[0], output.logits[1, :4], rtol=1e-5, atol=1e-6)


def test_a_word_tagger_refuses_character_positions_and_a_character_tagger_needs_them():
    tokenizer = ElmoTokenizer(segmenter="whitespace")
    batch, _ = _batch(tokenizer, ["小米|粥"])
    words_only = {key: batch[key] for key in ("input_ids", "attention_mask")}
    with pytest.raises(TypeError, match="unexpected keyword arguments: token_positions, token_word_index"):
        ElmoForTokenClassification(tiny_config(num_labels=2))(**batch)
    with pytest.raises(ValueError, match="pass token_word_index and token_positions"):
        ElmoForCharacterTagging(tiny_config(num_labels=2))(**words_only)


def test_the_collator_pads_character_positions_and_cuts_with_max_words():
    tokenizer = ElmoTokenizer(segmenter="whitespace")
    examples = [characters_as_words({"words": list("小米粥好香"), "labels": [1, 2, 0, 0, 0]},
                                    lambda text: ["小米", "粥", "好香"]),
                characters_as_words({"words": ["米"], "labels": [0]}, lambda text: ["米"])]
    batch = ElmoCharacterTaggingCollator(tokenizer, max_words=2)(examples)
    assert batch["token_word_index"].tolist() == [[0, 0, 1, -1, -1], [0, -1, -1, -1, -1]]
    assert batch["token_positions"].tolist() == [[1, 3, 0, 1, 3], [0, 0, 0, 0, 0]]
    assert batch["labels"].tolist() == [[1, 2, 0, 0, 0], [0, -100, -100, -100, -100]]
    assert batch["input_ids"].shape[:2] == (2, 2)
    examples[1]["labels"] = [0, 0]
    with pytest.raises(ValueError, match="1 characters but 2 labels"):
        ElmoCharacterTaggingCollator(tokenizer)(examples)
    examples[1]["labels"], examples[1]["token_word_index"] = [0], [4]
    with pytest.raises(ValueError, match="must point at its 1 words"):
        ElmoCharacterTaggingCollator(tokenizer)(examples)


def test_character_features_give_each_character_its_own_vector():
    model = _tagger(task_token_features=True, task_character_features=True)
    config = model.config
    tokenizer = ElmoTokenizer(segmenter="whitespace")
    batch, _ = _batch(tokenizer, ["小米|粥|好香", "小米|手机"], keep_characters=True)
    # Each character's ids are its ids as a one-character word.
    assert batch["character_input_ids"].shape == (2, 5, config.max_characters_per_token)
    assert batch["character_input_ids"][1, 3].tolist() == tokenizer(["机"], is_split_into_words=True)["input_ids"][0]
    assert not batch["character_input_ids"][1, 4].any()  # padding
    output = model(**batch)
    # Independently: [x_k(word); ELMo mix of the word; position one-hot; x_k(character)].
    mixed = _independent_mix(model, batch)
    with torch.no_grad():
        word_vectors = model.token_features(batch["input_ids"][0])
        char_vectors = model.token_features(batch["character_input_ids"][0])
        index = [0, 0, 1, 2, 2]
        features = torch.cat([word_vectors[index], mixed[0, index], torch.eye(4)[[1, 3, 0, 1, 3]], char_vectors], dim=-1)
        expected = model.classifier(features)
    torch.testing.assert_close(output.logits[0], expected, rtol=1e-5, atol=1e-6)
    # The two characters of 小米 share word vector and position-free features; their own vectors tell them apart.
    assert not torch.equal(char_vectors[0], char_vectors[1])
    assert not torch.equal(output.logits[0, 0], output.logits[0, 1])


def test_character_features_need_their_ids_and_their_config():
    tokenizer = ElmoTokenizer(segmenter="whitespace")
    batch, _ = _batch(tokenizer, ["小米|粥"], keep_characters=True)
    config = dict(num_labels=2, task_token_features=True)
    with pytest.raises(ValueError, match="character_input_ids are for taggers with config.task_character_features"):
        ElmoForCharacterTagging(tiny_config(**config))(**batch)
    model = ElmoForCharacterTagging(tiny_config(**config, task_character_features=True))
    without = {key: value for key, value in batch.items() if key != "character_input_ids"}
    with pytest.raises(ValueError, match="need character_input_ids"):
        model(**without)
    with pytest.raises(ValueError, match=r"character_input_ids must be \(batch, positions, characters\)"):
        model(**{**without, "character_input_ids": batch["character_input_ids"][:, :2]})
    with pytest.raises(ValueError, match="task_character_features needs task_token_features"):
        tiny_config(num_labels=2, task_character_features=True)


def test_the_collator_refuses_characters_that_do_not_match_the_positions():
    tokenizer = ElmoTokenizer(segmenter="whitespace")
    example = characters_as_words({"words": list("小米粥")}, lambda text: ["小米", "粥"], keep_characters=True)
    example["characters"] = ["小", "米"]
    with pytest.raises(ValueError, match="'characters' must be a list of one entry for each of the 3 characters"):
        ElmoCharacterTaggingCollator(tokenizer)([example])
    with pytest.raises(ValueError, match="need ElmoCharacterTaggingCollator\\(tokenizer=...\\)"):
        ElmoCharacterTaggingCollator()([{**example, "characters": list("小米粥"), "input_ids": [[1, 2, 3]] * 2}])


def test_the_collator_refuses_per_character_inputs_without_the_characters_places():
    example = characters_as_words({"words": list("小米粥")}, lambda text: ["小米", "粥"], keep_characters=True)
    words_only = {key: value for key, value in example.items() if key not in ("token_word_index", "token_positions")}
    with pytest.raises(ValueError, match="example 0 has no token_word_index: each example needs its characters' "
                                         "places in their words"):
        ElmoCharacterTaggingCollator(ElmoTokenizer(segmenter="whitespace"))([words_only])
    with pytest.raises(ValueError, match="batch them with ElmoCharacterTaggingCollator"):
        ElmoDataCollator(ElmoTokenizer(segmenter="whitespace"))([example])


def test_from_pretrained_refuses_arguments_that_make_an_invalid_config(tmp_path):
    ElmoModel(tiny_config()).save_pretrained(tmp_path)
    with pytest.raises(ValueError, match="task_character_features needs task_token_features"):
        ElmoForCharacterTagging.from_pretrained(tmp_path, num_labels=3, task_character_features=True)
    # Not a config field any more: transformers hands it to the model class, which refuses it by name.
    with pytest.raises(TypeError, match="unexpected keyword argument 'label_characters'"):
        ElmoForTokenClassification.from_pretrained(tmp_path, num_labels=3, label_characters=True)


def test_a_character_tagger_saves_its_own_module_and_auto_map_and_reloads(tmp_path):
    """Remote-code users load it with AutoModelForTokenClassification: its folder carries its module and maps the
    auto class to it; the package reloads it with its own class."""
    ElmoModel(tiny_config()).save_pretrained(tmp_path / "base")
    model = ElmoForCharacterTagging.from_pretrained(
        tmp_path / "base", num_labels=3, task_token_features=True, task_character_features=True, use_crf=True,
        classifier_dropout=0.0,
    ).eval()
    with torch.no_grad():  # a trained head differs from its start: the round trip must keep it
        for parameter in (*model.classifier.parameters(), *model.crf.parameters(), *model.token_features.parameters()):
            parameter.add_(0.1 * torch.randn_like(parameter))
    model.save_pretrained(tmp_path / "tagger")
    config = json.loads((tmp_path / "tagger" / "config.json").read_text())
    assert config["architectures"] == ["ElmoForCharacterTagging"]
    assert config["auto_map"]["AutoModelForTokenClassification"] == (
        "modeling_elmo.ElmoForCharacterTagging"
    )
    saved = (tmp_path / "tagger" / "modeling_elmo.py").read_bytes()  # where the tagging pipeline is
    assert saved == (Path(hf_elmo.__file__).parent / "models" / "elmo" / "modeling_elmo.py").read_bytes()
    # The head's non-default fields stay in its config.json (an encoder's would leave them out).
    assert (config["task_token_features"], config["task_character_features"], config["use_crf"]) == (True, True, True)
    assert "freeze_elmo" not in config  # the default
    batch, _ = _batch(ElmoTokenizer(segmenter="whitespace"), ["小米|粥|好香", "小米|手机"], keep_characters=True)
    with torch.no_grad():
        expected = model(**batch)
    for loader in (ElmoForCharacterTagging, AutoModelForTokenClassification):
        reloaded = loader.from_pretrained(tmp_path / "tagger").eval()
        assert type(reloaded) is ElmoForCharacterTagging, loader  # loaded as what it is
        with torch.no_grad():
            got = reloaded(**batch)
        assert torch.equal(got.logits, expected.logits) and torch.equal(got.predictions, expected.predictions)


def test_the_word_taggers_from_pretrained_does_not_misread_a_character_tagger(tmp_path):
    """Called directly (without the `config=` AutoModelForTokenClassification passes), ElmoForTokenClassification's
    from_pretrained must load a saved character tagger as what it is, or refuse it naming its class; not report
    weights whose shapes differ from their own config.json."""
    torch.manual_seed(0)
    ElmoForCharacterTagging(tiny_config(num_labels=3)).save_pretrained(tmp_path)
    try:
        loaded = ElmoForTokenClassification.from_pretrained(tmp_path)
    except RuntimeError as error:  # transformers' size-mismatch error, naming the mismatched weights
        assert SIZE_MISMATCH in str(error), str(error)
    else:
        assert type(loaded) is ElmoForCharacterTagging


# Entity spans in the text (issue 45 #6) ------------------------------------------------------------------------------
# Punctuation, Latin, digits, emoji, full-width characters, and a capital whose lowercase is two characters long.
SPANS_TEXT = "张伟住在南京，2024年买了 iPhone 15 Pro😀！ＡＢＣ１２３ x-ray, İstanbul (ok)。"


@pytest.mark.parametrize("tagger_class", [ElmoForTokenClassification, ElmoForCharacterTagging])
@pytest.mark.parametrize("segmenter, lowercase", [("jieba", True), ("chars", False), ("whitespace", True)])
def test_each_entity_start_and_end_give_its_words_in_the_text(tmp_path, capsys, monkeypatch, tagger_class, segmenter,
                                                             lowercase):
    """tag(), the elmo-token-classification pipeline and `finetune predict` read `start` / `end` from the tokenizer's
    offsets: searching the words in the text went wrong after a lowercase of another length (İ -> i̇)."""
    from transformers import pipeline

    import hf_elmo.finetuning.predict
    import hf_elmo.models.elmo.modeling_elmo
    from hf_elmo.models.elmo.modeling_elmo import TASK
    from hf_elmo.cli import main as hf_elmo_main

    def main(argv):
        return hf_elmo_main(["finetune", *argv])

    labels = {0: "B-X", 1: "I-X", 2: "O", 3: "S-Y"}
    model = tagger_class(tiny_config(num_labels=4, id2label=labels, label2id={v: k for k, v in labels.items()}))
    tokenizer = ElmoTokenizer(segmenter=segmenter, do_lower_case=lowercase)
    model.save_pretrained(tmp_path)
    tokenizer.save_pretrained(tmp_path)

    def cycling_tags(model, batch, with_scores=True):  # entities of one and of several units, every few units
        positions = torch.arange(hf_elmo.models.elmo.modeling_elmo.tagged_mask(model, batch).shape[1]).expand(len(batch["input_ids"]), -1)
        best = torch.tensor([0, 1, 1, 2, 3, 0, 2])[positions % 7]
        return best, torch.ones(best.shape) if with_scores else None

    for module in (hf_elmo.models.elmo.modeling_elmo, hf_elmo.finetuning.predict):
        monkeypatch.setattr(module, "best_tags", cycling_tags)
    results = [hf_elmo.finetuning.predict.tag(model, tokenizer, SPANS_TEXT)[0],
               pipeline(TASK, model=model, tokenizer=tokenizer)(SPANS_TEXT, return_tags=True)]
    if tagger_class is ElmoForTokenClassification:  # what `finetune predict` takes, raw or split text
        assert main(["predict", "--model", str(tmp_path), SPANS_TEXT]) == 0
        results.append(json.loads(capsys.readouterr().out.strip()))
        assert main(["predict", "--model", str(tmp_path), "--split-into-words", SPANS_TEXT]) == 0
        results.append(json.loads(capsys.readouterr().out.strip()))
        assert results[-1]["words"] == SPANS_TEXT.split() and results[-1]["text"] == SPANS_TEXT
    for result in results:
        assert len(result["entities"]) >= 3 and any(e["word_end"] - e["word_start"] > 1 for e in result["entities"])
        for entity in result["entities"]:
            surface = SPANS_TEXT[entity["start"] : entity["end"]].replace(" ", "")
            units = result["words"][entity["word_start"] : entity["word_end"]]
            if tagger_class is ElmoForCharacterTagging and lowercase and "İ" in surface:
                assert "".join(units) in surface.lower()  # a character of a longer lowercase spans its word
            else:
                assert surface.lower() == "".join(units).lower() if lowercase else surface == "".join(units), entity
