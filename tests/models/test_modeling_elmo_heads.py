"""ElmoForTokenClassification / ElmoForSequenceClassification: losses, freezing, saving, Auto classes."""

import pytest
import torch
import torch.nn.functional as F
from finetune_helpers import LABELS, save_tiny_base
from small_models import tiny_config
from head_helpers import ID2LABEL, LABEL2ID, SENTENCES, TAGS, batch, tagger
from transformers import AutoModelForSequenceClassification, AutoModelForTokenClassification

from hf_elmo import (
    ElmoForSequenceClassification,
    ElmoForTokenClassification,
    ElmoModel,
    ElmoTokenizer,
    ElmoTokenClassifierOutput,
)


@pytest.mark.parametrize("encoder", ["linear", "bilstm"])
@pytest.mark.parametrize("use_crf", [False, True])
def test_token_head_outputs_and_loss(encoder, use_crf):
    model = tagger(task_encoder=encoder, task_encoder_hidden_size=6, use_crf=use_crf)
    inputs, labels = batch()
    output = model(**inputs, labels=labels)
    assert isinstance(output, ElmoTokenClassifierOutput)
    assert output.logits.shape == (3, 5, len(LABELS))
    assert output.predictions.shape == (3, 5)
    assert (output.predictions[1, 1:] == -100).all() and (output.predictions[0] >= 0).all()
    labelled = labels != -100
    if use_crf:
        expected = (
            -model.crf.log_likelihood(output.logits, labels, inputs["attention_mask"].bool()).sum() / labelled.sum()
        )
    else:
        expected = F.cross_entropy(output.logits[labelled], labels[labelled])
    torch.testing.assert_close(output.loss, expected)


def test_predictions_do_not_depend_on_batch_padding():
    model = tagger(task_encoder="bilstm", task_encoder_hidden_size=6, use_crf=True)
    inputs, _ = batch()
    together = model(**inputs)
    alone_inputs, _ = batch([SENTENCES[2]], [TAGS[2]])
    alone = model(**alone_inputs)
    torch.testing.assert_close(together.logits[2, :3], alone.logits[0], rtol=1e-5, atol=1e-6)
    assert together.predictions[2, :3].tolist() == alone.predictions[0].tolist()


def test_frozen_elmo_trains_only_mix_and_head():
    model = tagger(task_encoder="bilstm", task_encoder_hidden_size=6, use_crf=True).train()
    inputs, labels = batch()
    model(**inputs, labels=labels).loss.backward()
    assert all(p.grad is None and not p.requires_grad for p in model.elmo.parameters())
    for name in (
        "scalar_mix.scalar_parameters",
        "scalar_mix.gamma",
        "classifier.weight",
        "crf.transitions",
        "encoder.weight_ih_l0",
    ):
        assert model.get_parameter(name).grad is not None, name
        assert model.get_parameter(name).grad.abs().sum() > 0, name


def test_unfrozen_elmo_gets_gradients():
    model = tagger(freeze_elmo=False).train()
    inputs, labels = batch()
    model(**inputs, labels=labels).loss.backward()
    for name, parameter in model.elmo.named_parameters():
        if name.startswith("scalar_mixes."):  # the head mixes with its own scalar_mix
            assert parameter.grad is None, name
        elif name != "char_encoder.char_embedding.weight":
            assert parameter.grad is not None and parameter.grad.abs().sum() > 0, name


def test_save_load_round_trip_keeps_labels_head_and_freezing(tmp_path):
    model = tagger(task_encoder="bilstm", task_encoder_hidden_size=6, use_crf=True)
    with torch.no_grad():
        model.crf.transitions.normal_()
    model.save_pretrained(tmp_path)
    loaded = AutoModelForTokenClassification.from_pretrained(tmp_path).eval()
    assert type(loaded) is ElmoForTokenClassification
    assert loaded.config.id2label == ID2LABEL and loaded.config.label2id == LABEL2ID
    assert (loaded.config.task_encoder, loaded.config.use_crf) == ("bilstm", True)
    assert not any(p.requires_grad for p in loaded.elmo.parameters())
    inputs, _ = batch()
    torch.testing.assert_close(loaded(**inputs).logits, model(**inputs).logits)
    assert torch.equal(loaded(**inputs).predictions, model(**inputs).predictions)


def test_head_on_a_base_checkpoint_is_initialised(tmp_path):
    folder = save_tiny_base(tmp_path / "base")
    base = ElmoModel.from_pretrained(folder)
    model = ElmoForTokenClassification.from_pretrained(
        folder, num_labels=3, task_encoder="bilstm", task_encoder_hidden_size=6, use_crf=True
    )
    for name, value in base.state_dict().items():
        assert torch.equal(model.elmo.state_dict()[name], value), name
    bound = 6**-0.5
    for name, value in model.encoder.named_parameters():
        assert value.abs().max() <= bound and value.abs().max() > 0, name
    assert torch.equal(model.crf.transitions, torch.zeros(3, 3))
    assert torch.equal(model.scalar_mix.gamma, torch.ones(1))
    assert not any(p.requires_grad for p in model.elmo.parameters())
    unfrozen = ElmoForTokenClassification.from_pretrained(folder, num_labels=3, freeze_elmo=False)
    trainable = {name for name, p in unfrozen.elmo.named_parameters() if p.requires_grad}
    assert trainable == {name for name in base.state_dict() if not name.startswith("scalar_mixes.")}


def test_sequence_head_mean_pools_real_words_only(tmp_path):
    torch.manual_seed(0)
    config = tiny_config(num_labels=2, classifier_dropout=0.0, classifier_hidden_size=5)
    model = ElmoForSequenceClassification(config).eval()
    inputs, _ = batch()
    logits = model(**inputs).logits
    alone, _ = batch([SENTENCES[1]], [TAGS[1]])
    torch.testing.assert_close(logits[1], model(**alone).logits[0], rtol=1e-5, atol=1e-6)
    labels = torch.tensor([0, -100, 1])
    output = model(**inputs, labels=labels)
    torch.testing.assert_close(output.loss, F.cross_entropy(logits[[0, 2]], labels[[0, 2]]))
    model.save_pretrained(tmp_path)
    loaded = AutoModelForSequenceClassification.from_pretrained(tmp_path).eval()
    assert type(loaded) is ElmoForSequenceClassification
    torch.testing.assert_close(loaded(**inputs).logits, logits)


def test_config_rejects_bad_head_options():

    with pytest.raises(ValueError, match="task_encoder.*transformer"):
        tiny_config(task_encoder="transformer")
    with pytest.raises(ValueError, match="classifier_dropout"):
        tiny_config(classifier_dropout=1.5)


@pytest.mark.parametrize("use_crf", [False, True])
def test_batches_of_empty_sentences(use_crf):
    model = tagger(task_encoder="bilstm", task_encoder_hidden_size=6, use_crf=use_crf)
    inputs = dict(ElmoTokenizer()(["", ""], padding=True, return_tensors="pt"))
    assert inputs["input_ids"].shape == (2, 0, 50)
    output = model(**inputs, labels=torch.zeros(2, 0, dtype=torch.long))
    assert output.logits.shape == (2, 0, len(LABELS)) and output.predictions.shape == (2, 0)
    assert output.loss.item() == 0.0


def test_stock_text_classification_pipeline_batches_like_one_by_one(tmp_path):
    # The stock pipelines pad `input_ids` with the tokenizer's pad id; ELMo's padded word is all zeros.
    from transformers import pipeline

    torch.manual_seed(0)
    ElmoForSequenceClassification(tiny_config(num_labels=3)).save_pretrained(tmp_path)
    ElmoTokenizer(segmenter="chars").save_pretrained(tmp_path)
    classifier = pipeline("text-classification", model=str(tmp_path), top_k=None)
    texts = ["我喜欢吃小米", "小米手机挺好用的吧", "好", ""]
    one_by_one = [classifier([text])[0] for text in texts]
    for batch_size in (2, 3):
        batched = classifier(texts, batch_size=batch_size)
        assert len(batched) == len(texts)
        for got, want in zip(batched, one_by_one):
            assert [r["label"] for r in got] == [r["label"] for r in want]
            assert [r["score"] for r in got] == pytest.approx([r["score"] for r in want], rel=1e-5)


def test_the_word_taggers_forward_takes_the_papers_inputs_only():
    """Issue 34: at most 9 named inputs (BERT's head takes 6); the character tagger's inputs live on its own class."""
    import inspect

    from hf_elmo import ElmoForTokenClassification

    named = [name for name, parameter in inspect.signature(ElmoForTokenClassification.forward).parameters.items()
             if name != "self" and parameter.kind is not inspect.Parameter.VAR_KEYWORD]
    assert len(named) <= 9, named
    assert not {"token_word_index", "token_positions", "character_input_ids"} & set(named)


def test_heads_honour_output_hidden_states_and_refuse_output_attentions():
    """Issues 36, 41: `output_hidden_states` was ignored, then honoured only as an argument; the heads, as `ElmoModel`,
    return the L+1 biLM layers when asked or when `config.output_hidden_states` says so (ELMo's default), and refuse
    attentions they do not have."""
    inputs, _ = batch()
    torch.manual_seed(0)
    classifier = ElmoForSequenceClassification(tiny_config(num_labels=2)).eval()
    for model in (tagger(), classifier):
        with torch.no_grad():
            by_default = model(**inputs)
            model.config.output_hidden_states = False
            plain = model(**inputs)
            layers = model(**inputs, output_hidden_states=True)
            encoder = model.elmo(**inputs, output_hidden_states=True)
            model.config.output_hidden_states = True
        assert len(by_default.hidden_states) == model.config.num_lstm_layers + 1, type(model).__name__
        assert plain.hidden_states is None, type(model).__name__
        assert len(layers.hidden_states) == model.config.num_lstm_layers + 1
        assert all(torch.equal(ours, theirs) for ours, theirs in zip(layers.hidden_states, encoder.hidden_states))
        assert torch.equal(plain.logits, layers.logits)
        with pytest.raises(ValueError, match="no attention layers: output_attentions=True cannot be honoured"):
            model(**inputs, output_attentions=True)
