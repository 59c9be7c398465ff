"""transformers' stock pipelines on ELMo models."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from transformers import pipeline

import hf_elmo

TEXTS = ["我喜欢吃小米", "小米手机挺好用的，真的", "好", "他从老家带回来两袋小米。"]


def test_feature_extraction_pipeline_batches_like_one_text_at_a_time():
    """Issue 36/35: batch_size > 1 raised IndexError (the mixes were a tuple the pipeline could not split). Each
    text's rows equal the one-text run (float32 rounding of other batch shapes) and the padding rows are zeros."""
    extract = pipeline("feature-extraction", model=hf_elmo.DEFAULT_MODEL)
    single = [np.asarray(extract(text)[0]) for text in TEXTS]
    batched = extract(TEXTS, batch_size=3)
    assert len(batched) == len(TEXTS)
    scale = max(float(np.abs(rows).max()) for rows in single)
    for rows, batch_rows in zip(single, batched):
        batch_rows = np.asarray(batch_rows[0])
        assert batch_rows.shape[1] == rows.shape[1] == 2 * extract.model.config.projection_dim
        # Sums of a few hundred float32 products in another order: well inside 1e-5 of the output scale.
        np.testing.assert_allclose(batch_rows[: len(rows)], rows, rtol=0, atol=1e-5 * scale)
        assert not np.any(batch_rows[len(rows):])


def test_feature_extraction_pipeline_returns_the_top_layer():
    """What the stock pipeline returns is documented as the top biLSTM layer (last_hidden_state) by default."""
    extract = pipeline("feature-extraction", model=hf_elmo.DEFAULT_MODEL, return_tensors=True)
    features = extract(TEXTS[0])
    inputs = extract.tokenizer(TEXTS[0], return_tensors="pt")
    with torch.no_grad():  # as the pipeline runs it
        outputs = extract.model(**inputs)
    np.testing.assert_array_equal(features.numpy(), outputs.hidden_states[-1].detach().numpy())


@pytest.mark.parametrize("feature_layer", [0, 1, "average", "mix"])
def test_feature_extraction_pipeline_layer_is_chosen_at_load_time(feature_layer):
    """Issue 36: the stock pipeline's layer is selectable: `model_kwargs={"feature_layer": ...}` (a config field, as
    LLaVA's `vision_feature_layer`) picks a layer, the mean of the L+1 layers or the learned mix."""
    extract = pipeline("feature-extraction", model=hf_elmo.DEFAULT_MODEL, return_tensors=True,
                       model_kwargs={"feature_layer": feature_layer})
    assert extract.model.config.feature_layer == feature_layer
    features = extract(TEXTS[1])
    inputs = extract.tokenizer(TEXTS[1], return_tensors="pt")
    with torch.no_grad():
        outputs = extract.model(**inputs)
    layers = torch.stack(outputs.hidden_states)
    expected = {0: layers[0], 1: layers[1], "average": layers.mean(dim=0), "mix": outputs.mixes[:, 0]}[feature_layer]
    np.testing.assert_array_equal(features.numpy(), expected.numpy())
    others = [layers[0], layers[1], layers[-1], layers.mean(dim=0)]
    assert sum(torch.equal(features, other) for other in others) <= 1  # the choice made a difference


def test_the_stock_token_classification_pipeline_is_refused_naming_elmo_token_classification():
    """Issue 36: `pipeline("token-classification", model=tagger)` raised `AttributeError: ... has no attribute
    is_fast`; now the tokenizer says it is not fast and the pipeline's call is one line naming the ELMo pipeline."""
    from hf_elmo import ElmoConfig, ElmoForTokenClassification, ElmoTokenizer
    from small_models import tiny_config_kwargs

    torch.manual_seed(0)
    tagger = ElmoForTokenClassification(ElmoConfig(**tiny_config_kwargs(), num_labels=3)).eval()
    tokenizer = ElmoTokenizer(segmenter="jieba")
    assert tokenizer.is_fast is False
    stock = pipeline("token-classification", model=tagger, tokenizer=tokenizer)
    with pytest.raises(ValueError, match=r"use pipeline\('elmo-token-classification', \.\.\.\)") as error:
        stock("张伟住在南京。")
    assert "\n" not in str(error.value)


def test_a_pipeline_without_a_task_is_refused_in_one_line_naming_the_task(tmp_path, monkeypatch):
    """Issue 45: `pipeline(model=folder)` with hf-elmo imported raised `RuntimeError: Instantiating a pipeline without a
    task set raised an error: [Errno -2] Name or service not known` (transformers asks the Hub for the task), which
    reads as a network fault. For an hf-elmo folder it is now one line naming the task to pass, and the Hub is not
    asked; other models still are. A tagger's folder names its own pipeline (custom_pipelines): transformers takes
    the task from there and asks for trust_remote_code=True, in one line too."""
    import transformers.pipelines as pipelines

    from hf_elmo import ElmoConfig, ElmoForSequenceClassification, ElmoForTokenClassification, ElmoTokenizer
    from small_models import tiny_config_kwargs

    asked = []

    def unreachable_hub(*args, **kwargs):
        asked.append(True)
        raise OSError("[Errno -2] Name or service not known")

    monkeypatch.setattr(pipelines, "is_offline_mode", lambda: False)
    # transformers 5.x asks the Hub through hf_api(), 4.x through model_info(model, token=...)
    monkeypatch.setattr(pipelines, "hf_api" if hasattr(pipelines, "hf_api") else "model_info", unreachable_hub)
    torch.manual_seed(0)
    folders = {"feature-extraction": hf_elmo.DEFAULT_MODEL}
    for task, model_class in (("elmo-token-classification", ElmoForTokenClassification),
                              ("text-classification", ElmoForSequenceClassification)):
        folder = tmp_path / task
        model_class(ElmoConfig(**tiny_config_kwargs(), num_labels=3)).save_pretrained(folder)
        ElmoTokenizer(segmenter="chars").save_pretrained(folder)
        folders[task] = str(folder)
    monkeypatch.chdir(tmp_path)

    def refusal(folder, **kwargs) -> str:
        with pytest.raises((RuntimeError, ValueError)) as error:
            pipeline(model=folder, **kwargs)
        message = str(error.value)
        assert "\n" not in message and "Errno" not in message and "Instantiating" not in message, message
        return message

    for task, folder in [*folders.items(), ("text-classification", "text-classification")]:  # the last: relative
        kwargs = {"trust_remote_code": False} if task == "elmo-token-classification" else {}  # else: its own pipeline
        message = refusal(folder, **kwargs)
        trust = ", trust_remote_code=True" if task == "elmo-token-classification" else ""
        assert f"pipeline({task!r}, model=...{trust})" in message, message
        for named in ("'feature-extraction'", "'elmo-token-classification'", "'text-classification'"):
            assert named in message
    assert "trust_remote_code=True" in refusal(folders["elmo-token-classification"])
    assert pipeline(model=folders["elmo-token-classification"], trust_remote_code=True).task == "elmo-token-classification"
    assert not asked
    with pytest.raises(RuntimeError, match=r"Name or service not known"):  # not an hf-elmo folder: the Hub, as before
        pipelines.get_task("org/some-model")
    assert asked
