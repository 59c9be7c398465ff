"""A frozen biLM's layers computed once (`elmo_hidden_states`) give the heads the same outputs and training."""

import pytest
import torch
from finetune_helpers import LEARNABLE, save_tiny_base, toy_sentences

from hf_elmo import ElmoDataCollator, ElmoForSequenceClassification, ElmoForTokenClassification, ElmoTokenizer
from hf_elmo.finetuning.conll import sentences_from_pairs
from hf_elmo.finetuning.run import FinetuneOptions, precompute_elmo_layers, train_classifier, train_tagger


def _examples(sentences, label2id):
    return [{"words": words, "labels": [label2id[t] for t in tags]} for words, tags in sentences]


@pytest.fixture(scope="module")
def base(tmp_path_factory):
    return save_tiny_base(tmp_path_factory.mktemp("precomputed") / "base", seed=3, **LEARNABLE)


def _tagger(base, **config):
    labels = ["O", "B-LOC", "I-LOC", "B-PER", "I-PER"]
    torch.manual_seed(0)
    return ElmoForTokenClassification.from_pretrained(
        base, num_labels=5, id2label=dict(enumerate(labels)), label2id={l: i for i, l in enumerate(labels)}, **config
    )


@pytest.mark.parametrize("encoder, crf", [("linear", False), ("bilstm", True)])
def test_tagger_outputs_from_precomputed_layers_equal_outputs_from_words(base, encoder, crf):
    model = _tagger(base, task_encoder=encoder, use_crf=crf).eval()
    sentences = toy_sentences(12, seed=5) + [([], [])]  # ragged, and an empty sentence
    examples = _examples(sentences, model.config.label2id)
    collator = ElmoDataCollator(ElmoTokenizer(), max_words=5)  # the cut applies to both paths alike
    precomputed = precompute_elmo_layers(model.elmo, collator, examples, batch_size=4)
    assert precomputed[0]["elmo_hidden_states"].shape == (3, min(5, len(sentences[0][0])), 2 * 16)
    with torch.no_grad():
        from_words = model(**collator(examples))
        from_layers = model(**collator(precomputed))
    torch.testing.assert_close(from_layers.logits, from_words.logits, rtol=0, atol=1e-6)
    torch.testing.assert_close(from_layers.loss, from_words.loss, rtol=0, atol=1e-6)
    assert torch.equal(from_layers.predictions, from_words.predictions)


def test_training_with_precomputed_layers_ends_where_training_from_words_ends(base):
    train = sentences_from_pairs(toy_sentences(48, seed=1), "train")
    dev = sentences_from_pairs(toy_sentences(10, seed=2), "dev")
    runs = {}
    for precompute in (True, False):
        options = FinetuneOptions(
            model=base, task_encoder="bilstm", task_encoder_hidden_size=8, use_crf=True, dropout=0.3, num_train_epochs=2,
            learning_rate=2e-2, per_device_train_batch_size=8, seed=0, logging_steps=1000, precompute_elmo=precompute,
        )
        runs[precompute] = train_tagger(train, dev, None, options)
    cached, direct = (runs[flag]["model"].state_dict() for flag in (True, False))
    changed = 0
    initial = _tagger(base, task_encoder="bilstm", task_encoder_hidden_size=8, use_crf=True).state_dict()
    for name, value in direct.items():
        torch.testing.assert_close(cached[name], value, rtol=0, atol=1e-5, msg=name)
        changed += not torch.equal(value, initial[name])
    assert changed > 5  # the head really trained
    assert runs[True]["results"]["dev"] == runs[False]["results"]["dev"]


def test_classifier_trains_the_same_on_precomputed_layers(base):
    pairs = [(" ".join(words), "loc" if "LOC" in " ".join(tags) else "none") for words, tags in toy_sentences(40, seed=4)]
    finals = {}
    for precompute in (True, False):
        options = FinetuneOptions(model=base, num_train_epochs=1, learning_rate=1e-2, per_device_train_batch_size=8, seed=0, dropout=0.2,
                                  classifier_hidden_size=8, logging_steps=1000, precompute_elmo=precompute)
        run = train_classifier(pairs, pairs[:10], pairs[10:20], options)
        finals[precompute] = (run["model"].state_dict(), run["results"]["test"]["accuracy"])
    for name, value in finals[False][0].items():
        torch.testing.assert_close(finals[True][0][name], value, rtol=0, atol=1e-5, msg=name)
    assert finals[True][1] == finals[False][1]


def test_precomputed_layers_are_refused_when_they_cannot_stand_for_the_biLM(base):
    model = _tagger(base).eval()
    layers = torch.zeros(2, 3, 4, 32)
    mask = torch.ones(2, 4, dtype=torch.long)
    with pytest.raises(ValueError, match="attention_mask"):
        model(elmo_hidden_states=layers)
    with pytest.raises(ValueError, match=r"\(batch, 3 layers, words, 32\)"):
        model(elmo_hidden_states=torch.zeros(2, 2, 4, 32), attention_mask=mask)
    with pytest.raises(ValueError, match="match attention_mask"):
        model(elmo_hidden_states=layers, attention_mask=torch.ones(2, 5, dtype=torch.long))
    with pytest.raises(ValueError, match="not both"):
        model(input_ids=torch.zeros(2, 4, 50, dtype=torch.long), elmo_hidden_states=layers, attention_mask=mask)
    with pytest.raises(ValueError, match="input_ids .* or elmo_hidden_states"):
        model(attention_mask=mask)
    model.set_elmo_frozen(False)
    with pytest.raises(ValueError, match="frozen biLM"):
        model(elmo_hidden_states=layers, attention_mask=mask)
    classifier = ElmoForSequenceClassification.from_pretrained(base, num_labels=2).eval()
    assert classifier(elmo_hidden_states=layers, attention_mask=mask).logits.shape == (2, 2)
    collator = ElmoDataCollator(ElmoTokenizer())
    with pytest.raises(ValueError, match="some examples have elmo_hidden_states"):
        collator([{"elmo_hidden_states": torch.zeros(3, 2, 32)}, {"words": ["a"]}])
    with pytest.raises(ValueError, match="same layers and dim"):
        collator([{"elmo_hidden_states": torch.zeros(3, 2, 32)}, {"elmo_hidden_states": torch.zeros(2, 2, 32)}])


def test_head_word_vectors_start_as_the_biLM_layer_zero_and_train_while_the_biLM_stays_frozen(base):
    model = _tagger(base, task_encoder="bilstm", use_crf=True, task_token_features=True)
    encoder = model.elmo.char_encoder.state_dict()
    own = model.token_features.state_dict()
    assert own.keys() == encoder.keys()
    for name, value in encoder.items():
        assert torch.equal(own[name], value), name
    assert model.encoder.input_size == model.config.hidden_size + model.config.projection_dim
    assert all(p.requires_grad for p in model.token_features.parameters())
    assert not any(p.requires_grad for p in model.elmo.parameters())

    train = sentences_from_pairs(toy_sentences(32, seed=1), "train")
    options = FinetuneOptions(
        model=base, task_encoder="bilstm", task_encoder_hidden_size=8, use_crf=True, dropout=0.3, num_train_epochs=1,
        learning_rate=2e-2, per_device_train_batch_size=8, seed=0, logging_steps=1000, task_token_features=True,
    )
    trained = train_tagger(train, None, None, options)["model"]
    assert trained.config.task_token_features
    after = trained.token_features.state_dict()
    assert any(not torch.equal(after[name], value) for name, value in encoder.items())  # x_k learned
    for name, value in trained.elmo.char_encoder.state_dict().items():
        assert torch.equal(value, encoder[name]), name  # the biLM did not


def test_head_word_vectors_from_precomputed_layers_equal_those_from_words(base, tmp_path):
    model = _tagger(base, task_encoder="bilstm", use_crf=True, task_token_features=True).eval()
    with torch.no_grad():  # make x_k differ from the biLM's layer 0, as after training
        for parameter in model.token_features.parameters():
            parameter.add_(0.05 * torch.randn_like(parameter))
    sentences = toy_sentences(12, seed=5) + [([], [])]
    examples = _examples(sentences, model.config.label2id)
    collator = ElmoDataCollator(ElmoTokenizer(), max_words=5)
    precomputed = precompute_elmo_layers(model.elmo, collator, examples, batch_size=4, keep_input_ids=True)
    with torch.no_grad():
        from_words = model(**collator(examples))
        from_layers = model(**collator(precomputed))
    torch.testing.assert_close(from_layers.logits, from_words.logits, rtol=0, atol=1e-6)
    assert torch.equal(from_layers.predictions, from_words.predictions)
    # Saved and reloaded, the trained x_k is kept (not copied again from the biLM).
    model.save_pretrained(tmp_path / "tagger")
    reloaded = ElmoForTokenClassification.from_pretrained(tmp_path / "tagger").eval()
    for name, value in model.token_features.state_dict().items():
        assert torch.equal(reloaded.token_features.state_dict()[name], value), name
    layers_only = collator([{key: value for key, value in item.items() if key != "input_ids"} for item in precomputed])
    with pytest.raises(ValueError, match="own word vectors need input_ids"):
        model(**layers_only)
    batch = collator(precomputed)
    with pytest.raises(ValueError, match="input_ids must be"):
        model(input_ids=batch["input_ids"][:, :-1], elmo_hidden_states=batch["elmo_hidden_states"],
              attention_mask=batch["attention_mask"])
    with pytest.raises(ValueError, match="precomputed biLM positions"):
        collator([{"elmo_hidden_states": torch.zeros(3, 2, 32), "words": ["a", "b", "c"]}])
