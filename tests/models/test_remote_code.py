"""Remote code: saved and pushed folders load with trust_remote_code=True where hf_elmo is not installed."""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path

import pytest
import torch
import transformers
from safetensors.torch import load_file

import hf_elmo

from remote_code_files import CODE_FILES, MAX_CODE_FILES, MAX_CODE_LINES
from hub_helpers import (
    assert_same_outputs,
    encoder_outputs,
    hub,  # noqa: F401  (pytest fixture)
    hub_env,
    last_json,
    run_python,
    tiny_model,
    tiny_tokenizer,
)

PACKAGE = Path(hf_elmo.__file__).resolve().parent / "models" / "elmo"


def expected_auto_map() -> dict[str, str]:
    """AutoConfig plus every model class of AUTO_MODEL_CLASSES that modeling_elmo.py defines, except the
    pretraining head for folders without a language-model vocabulary (these tests save plain encoders)."""
    auto_map = {"AutoConfig": "configuration_elmo.ElmoConfig"}
    for auto_class, class_name in hf_elmo.AUTO_MODEL_CLASSES.items():
        if auto_class == "AutoModelForPreTraining":
            continue
        if hasattr(hf_elmo.models.elmo.modeling_elmo, class_name):
            auto_map[auto_class] = f"modeling_elmo.{class_name}"
    return auto_map


def test_auto_model_classes_cover_every_head_and_are_registered():
    assert hf_elmo.AUTO_MODEL_CLASSES["AutoModel"] == "ElmoModel"
    for auto_class, class_name in hf_elmo.AUTO_MODEL_CLASSES.items():
        model_class = getattr(hf_elmo.models.elmo.modeling_elmo, class_name, None)
        if model_class is None:
            continue
        assert model_class._auto_class == auto_class
        assert getattr(transformers, auto_class)._model_mapping[hf_elmo.ElmoConfig] is model_class
    # A head class added to modeling_elmo.py without an AUTO_MODEL_CLASSES entry would be missing from auto_map.
    heads = {
        name
        for name, value in vars(hf_elmo.models.elmo.modeling_elmo).items()
        if isinstance(value, type)
        and issubclass(value, hf_elmo.ElmoPreTrainedModel)
        and value is not hf_elmo.ElmoPreTrainedModel
        and value.__module__ == hf_elmo.models.elmo.modeling_elmo.__name__
        and "forward" in vars(value)  # not the heads' shared bases (ElmoHeadModel, ElmoTagger)
    }
    # The character tagger shares AutoModelForTokenClassification with the word tagger: register_auto_classes names it
    # in the auto_map of the character taggers saved (test_pipeline_elmo.py), and the package picks it by `architectures`.
    registered = {*hf_elmo.AUTO_MODEL_CLASSES.values(), "ElmoForCharacterTagging"}
    assert heads <= registered, heads - registered


def test_saved_folder_carries_identical_code_and_complete_auto_map(tmp_path):
    tiny_model(seed=0).save_pretrained(tmp_path)
    tiny_tokenizer().save_pretrained(tmp_path)
    assert sorted(path.name for path in tmp_path.glob("*.py")) == sorted(CODE_FILES)
    for name in CODE_FILES:
        assert (tmp_path / name).read_bytes() == (PACKAGE / name).read_bytes(), name
    config = json.loads((tmp_path / "config.json").read_text())
    assert config["auto_map"] == expected_auto_map()
    tokenizer_config = json.loads((tmp_path / "tokenizer_config.json").read_text())
    assert tokenizer_config["auto_map"] == {"AutoTokenizer": ["tokenization_elmo.ElmoTokenizer", None]}


def test_shipped_modelling_files_import_nothing_of_the_package():
    """Remote code imports only the standard library, torch, transformers and what they need, jieba and itself, and
    names the package nowhere (not by an import, nor a string a module could be looked up by, nor the process's
    imported modules): the same Hub folder computes and loads the same way with or without hf-elmo installed."""
    allowed = {"torch", "transformers", "tokenizers", "huggingface_hub", "numpy", "jieba"}
    for name in CODE_FILES:
        source = (PACKAGE / name).read_text(encoding="utf-8")
        for match in re.finditer(r"^\s*(?:from|import)\s+([\w.]+)", source, flags=re.MULTILINE):
            module = match.group(1)
            assert module.startswith(".") or module.split(".")[0] in allowed | sys.stdlib_module_names, (
                f"{name} imports {module}"
            )
        assert "hf_elmo" not in source, name
        for lookup in ("importlib", "import_module", "__import__", "sys.modules.get"):
            assert lookup not in source, (name, lookup)


def test_saved_folders_carry_few_short_code_files(tmp_path):
    """Issue 34: at most MAX_CODE_FILES .py files of at most MAX_CODE_LINES lines together, for every model kind."""
    from hf_elmo import ElmoConfig, ElmoForCharacterTagging, ElmoForSequenceClassification, ElmoForTokenClassification

    config = ElmoConfig(**hf_elmo.ElmoConfig.to_dict(tiny_model(seed=0).config), num_labels=3)
    for index, model in enumerate((tiny_model(seed=0), ElmoForTokenClassification(config),
                                   ElmoForSequenceClassification(config), ElmoForCharacterTagging(config))):
        folder = tmp_path / str(index)
        model.save_pretrained(folder)
        tiny_tokenizer().save_pretrained(folder)
        files = sorted(folder.glob("*.py"))
        lines = sum(len(path.read_text(encoding="utf-8").splitlines()) for path in files)
        assert len(files) <= MAX_CODE_FILES and lines <= MAX_CODE_LINES, (type(model).__name__, len(files), lines)
        for path in files:
            assert path.read_bytes() == (PACKAGE / path.name).read_bytes(), path.name
    tagger_map = json.loads((tmp_path / "3" / "config.json").read_text())["auto_map"]
    assert tagger_map["AutoModelForTokenClassification"] == "modeling_elmo.ElmoForCharacterTagging"


def test_remote_code_loads_without_the_package(hub, tmp_path):
    """The plain path of the remote files gives exactly the package's reference path (the same file)."""
    model, tokenizer = tiny_model(seed=4), tiny_tokenizer()
    model.set_lstm_implementation("reference")
    expected = encoder_outputs(model, tokenizer)
    folder = tmp_path / "folder"
    model.save_pretrained(folder)
    tokenizer.save_pretrained(folder)
    hub.upload("org/elmo-remote", folder)

    stdout = run_python(
        f"""
        import transformers
        from transformers import AutoConfig, AutoModel, AutoTokenizer
        found = {{
            "needs_trust": attempt(lambda: AutoModel.from_pretrained("org/elmo-remote")),
            "tokenizer_needs_trust": attempt(lambda: AutoTokenizer.from_pretrained("org/elmo-remote")),
        }}
        for source, name in (("org/elmo-remote", "hub"), ({str(folder)!r}, "local")):
            model = AutoModel.from_pretrained(source, trust_remote_code=True).eval()
            tokenizer = AutoTokenizer.from_pretrained(source, trust_remote_code=True)
            found[name] = [type(model).__module__, type(model).__name__, type(tokenizer).__name__]
            save_file(encoder_outputs(model, tokenizer), {str(tmp_path)!r} + f"/{{name}}.safetensors")
        # Every auto class in auto_map loads its class (heads start from the encoder's weights).
        config = AutoConfig.from_pretrained("org/elmo-remote", trust_remote_code=True)
        found["auto_map"] = {{}}
        for auto_class in config.auto_map:
            if auto_class != "AutoConfig":
                loaded = getattr(transformers, auto_class).from_pretrained("org/elmo-remote", trust_remote_code=True)
                found["auto_map"][auto_class] = type(loaded).__name__
        report(found)
        """,
        hub_env(hub, tmp_path / "home", isolated=True),
        cwd=tmp_path,
        isolated=True,
    )
    found = last_json(stdout)
    for key in ("needs_trust", "tokenizer_needs_trust"):
        kind, message = found[key]
        assert kind == "ValueError" and "trust_remote_code=True" in message and "org/elmo-remote" in message
    for name in ("hub", "local"):
        module, model_class, tokenizer_class = found[name]
        assert module.startswith("transformers_modules.") and module.endswith(".modeling_elmo")
        assert (model_class, tokenizer_class) == ("ElmoModel", "ElmoTokenizer")
        assert_same_outputs(load_file(tmp_path / f"{name}.safetensors"), expected)
    expected_classes = {k: v.split(".")[1] for k, v in expected_auto_map().items() if k != "AutoConfig"}
    assert found["auto_map"] == expected_classes


def test_auto_map_lists_every_head_registered_for_remote_code(tmp_path, monkeypatch):
    """A head class in modeling_elmo.py registered for an auto class appears in the encoder's saved auto_map."""

    class ElmoForTestHead(hf_elmo.ElmoPreTrainedModel):
        def __init__(self, config):
            super().__init__(config)
            self.elmo = hf_elmo.ElmoModel(config)
            self.post_init()

    monkeypatch.setattr(ElmoForTestHead, "_auto_class", "AutoModelForMultipleChoice", raising=False)
    monkeypatch.setattr(hf_elmo.models.elmo.modeling_elmo, "ElmoForTestHead", ElmoForTestHead, raising=False)
    tiny_model(seed=0).save_pretrained(tmp_path)
    auto_map = json.loads((tmp_path / "config.json").read_text())["auto_map"]
    assert auto_map["AutoModelForMultipleChoice"] == "modeling_elmo.ElmoForTestHead"
    assert auto_map["AutoModel"] == "modeling_elmo.ElmoModel"


TAGGING_TEXTS = ["张伟住在南京。", "小米手机挺好用的，李四说", "", "王五和赵六去了上海和北京，又回到南京。"]


def test_saved_taggers_tag_text_through_their_pipeline_without_the_package(hub, tmp_path):
    """Issue 36: a saved tagger names its pipeline in config.json (`custom_pipelines`), so that `pipeline(model=folder,
    trust_remote_code=True)` gives entity spans where hf-elmo is not installed: the same words, tags and entities as
    the package's `tag`, for a word tagger (BiLSTM + CRF) and a character tagger with its characters' own x_k."""
    from hf_elmo import ElmoConfig, ElmoForCharacterTagging, ElmoForTokenClassification, ElmoTokenizer
    from hf_elmo.finetuning.predict import tag

    base = ElmoConfig.to_dict(tiny_model(seed=0).config)
    labels = ["O", "B-PER", "I-PER", "B-LOC", "I-LOC"]
    kinds = {
        "words": (ElmoForTokenClassification, {"use_crf": True, "task_encoder": "bilstm"}),
        "characters": (ElmoForCharacterTagging, {"task_token_features": True, "task_character_features": True}),
    }
    tokenizer = ElmoTokenizer(segmenter="jieba")
    expected = {}
    for name, (model_class, fields) in kinds.items():
        torch.manual_seed(7)
        config = ElmoConfig(**{**base, **fields, "id2label": dict(enumerate(labels)),
                               "label2id": {label: i for i, label in enumerate(labels)}})
        model = model_class(config).eval()
        with torch.no_grad():  # a trained head's tags vary: so that every text gets entities to compare
            model.classifier.weight.normal_(0, 3.0)
        model.save_pretrained(tmp_path / name)
        tokenizer.save_pretrained(tmp_path / name)
        saved = json.loads((tmp_path / name / "config.json").read_text())
        assert saved["custom_pipelines"] == {"elmo-token-classification": {
            "impl": "modeling_elmo.ElmoTokenClassificationPipeline", "pt": ["AutoModelForTokenClassification"],
            "type": "text"}}
        expected[name] = [{key: result[key] for key in ("words", "tags", "entities")}
                          for result in tag(model, tokenizer, TAGGING_TEXTS)]
        assert sum(len(result["entities"]) for result in expected[name]) >= 3, expected[name]

    stdout = run_python(
        f"""
        from transformers import pipeline
        texts = {TAGGING_TEXTS!r}
        found = {{}}
        for name in ("words", "characters"):
            folder = {str(tmp_path)!r} + "/" + name
            tagger = pipeline(model=folder, trust_remote_code=True)  # the task comes from config.json
            named = pipeline("elmo-token-classification", model=folder, trust_remote_code=True)
            found[name] = {{
                "classes": [type(tagger).__module__, type(tagger).__name__, type(tagger.model).__name__],
                "batched": tagger(texts, batch_size=2, return_tags=True),
                "one": [named(text, return_tags=True) for text in texts],
                "spans": named(texts[0]),
                "needs_trust": attempt(lambda: pipeline(model=folder)),
            }}
        report(found)
        """,
        hub_env(hub, tmp_path / "home", isolated=True),
        cwd=tmp_path,
        isolated=True,
    )
    found = last_json(stdout)
    for name, model_class in (("words", "ElmoForTokenClassification"), ("characters", "ElmoForCharacterTagging")):
        module, pipeline_class, loaded_class = found[name]["classes"]
        assert module.startswith("transformers_modules.") and module.endswith(".modeling_elmo")
        assert (pipeline_class, loaded_class) == ("ElmoTokenClassificationPipeline", model_class)
        assert found[name]["spans"] == found[name]["one"][0]["entities"]
        for results in (found[name]["batched"], found[name]["one"]):
            assert len(results) == len(TAGGING_TEXTS)
            for got, want in zip(results, expected[name]):
                assert (got["words"], got["tags"]) == (want["words"], want["tags"])
                spans = [{key: value for key, value in entity.items() if key != "score"} for entity in got["entities"]]
                assert spans == [{key: value for key, value in entity.items() if key != "score"}
                                 for entity in want["entities"]]
                # Mean tag probabilities over a few positions, from batches padded otherwise: float32 rounding.
                assert [e["score"] for e in got["entities"]] == pytest.approx([e["score"] for e in want["entities"]],
                                                                             rel=1e-5)
        kind, message = found[name]["needs_trust"]
        assert kind == "ValueError" and "trust_remote_code=True" in message
