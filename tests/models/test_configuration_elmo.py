"""ElmoConfig: standard defaults, reading AllenNLP / bilm-tf options.json, rejecting inconsistent options (types
through huggingface_hub's `@strict` dataclass validation, ranges and sizes by `check_values`), and what its
config.json holds: the architecture, plus a head's own fields; never how the model computes."""

import copy
import json
from pathlib import Path

import pytest

import hf_elmo
import hf_elmo.models.elmo.bilm_elmo as bilm_elmo
from hf_elmo import ElmoConfig, ElmoForTokenClassification, ElmoModel
from hf_elmo.convert.bilm_hdf5 import allennlp_options, config_from_allennlp_options
from hf_elmo.models.elmo.configuration_elmo import HEAD_FIELDS
from hf_elmo.utils.transformers_versions import TRANSFORMERS_MAJOR
from reference_fixtures import ALLENNLP, BILM_TF, FIXTURES
from small_models import tiny_config, tiny_config_kwargs
from transformers import AutoConfig

# What older hf-elmo versions wrote into config.json about how the model computed (now the loader's choice).
RUNTIME_KEYS = ("lstm_implementation", "lstm_keep_inference_copies", "token_cache_size")
REMOVED_FEATURES = ("label_characters", "task_bigram_features", "task_lexicon_features")
# A value of the wrong type is refused by the typed dataclass naming the field; a value out of range by ElmoConfig.
CONFIG_ERRORS = (ValueError,)

ALLENNLP_OPTIONS = json.loads((ALLENNLP / "options.json").read_text())


def test_defaults_are_the_standard_model():
    """2x4096_512_2048cnn_2xhighway, as in AllenNLP's published options file."""
    config = ElmoConfig()
    assert allennlp_options(config) == {
        "lstm": {
            "use_skip_connections": True,
            "projection_dim": 512,
            "cell_clip": 3,
            "proj_clip": 3,
            "dim": 4096,
            "n_layers": 2,
        },
        "char_cnn": {
            "activation": "relu",
            "filters": [[1, 32], [2, 32], [3, 64], [4, 128], [5, 256], [6, 512], [7, 1024]],
            "n_highway": 2,
            "embedding": {"dim": 16},
            "n_characters": 262,
            "max_characters_per_token": 50,
        },
    }
    assert config.num_char_filters == 2048 and config.hidden_size == 1024
    assert config.char_vocab_size == 262 and config.model_type == "elmo"


@pytest.mark.parametrize("as_path", [True, False], ids=["path", "dict"])
def test_from_allennlp_options(as_path):
    source = ALLENNLP / "options.json" if as_path else copy.deepcopy(ALLENNLP_OPTIONS)
    config = config_from_allennlp_options(source)
    assert config.char_embedding_dim == 4
    assert config.char_cnn_filters == [[1, 4], [2, 8], [3, 16], [4, 32], [5, 64]]
    assert config.num_char_filters == 124
    assert (config.num_highway_layers, config.projection_dim, config.lstm_cell_dim, config.num_lstm_layers) == (2, 16, 64, 2)
    assert (config.cell_clip, config.proj_clip, config.use_skip_connections) == (3, 3, True)
    assert allennlp_options(config) == ALLENNLP_OPTIONS


def test_options_file_with_a_byte_order_mark(tmp_path):
    path = tmp_path / "options.json"
    path.write_bytes(b"\xef\xbb\xbf" + (ALLENNLP / "options.json").read_bytes())
    assert allennlp_options(config_from_allennlp_options(path)) == ALLENNLP_OPTIONS


def test_bilm_tf_options_without_skip_connections():
    config = config_from_allennlp_options(BILM_TF / "options.json")
    assert config.use_skip_connections is False


def test_extra_keyword_arguments_pass_through():
    config = config_from_allennlp_options(ALLENNLP / "options.json", num_output_representations=3)
    assert config.num_output_representations == 3


@pytest.mark.parametrize("language", ["es", "fr", "it"])
def test_training_only_keys_are_ignored(language):
    path = FIXTURES / "allennlp_elmo" / "elmo_multilingual" / language / "options.json"
    options = json.loads(path.read_text())
    assert {"dropout", "n_epochs", "batch_size", "unroll_steps", "n_negative_samples_batch"} <= set(options)
    config = config_from_allennlp_options(path)
    assert not hasattr(config, "dropout") and not hasattr(config, "n_epochs")
    # Architecture identical to the AllenNLP test model.
    assert allennlp_options(config) == allennlp_options(config_from_allennlp_options(ALLENNLP_OPTIONS))


def test_training_n_characters_261_accepted():
    options = copy.deepcopy(ALLENNLP_OPTIONS)
    options["char_cnn"]["n_characters"] = 261
    assert config_from_allennlp_options(options).char_vocab_size == 262  # + the padding row


def mutated(change):
    options = copy.deepcopy(ALLENNLP_OPTIONS)
    change(options)
    return options


BAD_OPTIONS = {
    "missing section": (lambda o: o.pop("lstm"), "missing required section 'lstm'"),
    "section not an object": (lambda o: o.__setitem__("char_cnn", [1]), "missing required section 'char_cnn'"),
    "missing lstm.dim": (lambda o: o["lstm"].pop("dim"), "missing required key 'lstm.dim'"),
    "missing n_layers": (lambda o: o["lstm"].pop("n_layers"), "missing required key 'lstm.n_layers'"),
    "missing n_highway": (lambda o: o["char_cnn"].pop("n_highway"), "missing required key 'char_cnn.n_highway'"),
    "missing embedding dim": (lambda o: o["char_cnn"].__setitem__("embedding", {}), "char_cnn.embedding.dim"),
    "missing filters": (lambda o: o["char_cnn"].pop("filters"), "missing required key 'char_cnn.filters'"),
    "bad n_characters": (
        lambda o: o["char_cnn"].__setitem__("n_characters", 300),
        "char_cnn.n_characters must be 261 .* or 262 .*got 300",
    ),
    "filter wider than max chars": (
        lambda o: o["char_cnn"].__setitem__("filters", [[1, 4], [60, 8]]),
        "width 60 exceeds max_characters_per_token 50",
    ),
    "filters not pairs": (lambda o: o["char_cnn"].__setitem__("filters", [[1, 4, 5]]), "list of \\[width, count\\] pairs"),
    "filter not integer": (lambda o: o["char_cnn"].__setitem__("filters", [[1, "4"]]), "char_cnn_filters.*'4'"),
    "bidirectional false": (lambda o: o.__setitem__("bidirectional", False), "'bidirectional' is False"),
    "bad activation": (lambda o: o["char_cnn"].__setitem__("activation", "gelu"), "char_cnn_activation.*gelu"),
    "string size": (lambda o: o["lstm"].__setitem__("dim", "64"), "lstm_cell_dim.*'64'"),
    "float size": (lambda o: o["lstm"].__setitem__("projection_dim", 16.5), "projection_dim.*16.5"),
    "negative size": (lambda o: o["lstm"].__setitem__("projection_dim", -1), "projection_dim must be positive"),
    "bad clip": (lambda o: o["lstm"].__setitem__("cell_clip", -3), "cell_clip must be a non-negative number"),
    "bad skip flag": (lambda o: o["lstm"].__setitem__("use_skip_connections", "yes"), "true or false"),
}


@pytest.mark.parametrize("case", sorted(BAD_OPTIONS))
def test_inconsistent_options_rejected(case):
    change, message = BAD_OPTIONS[case]
    with pytest.raises(CONFIG_ERRORS, match=message):
        config_from_allennlp_options(mutated(change))


@pytest.mark.parametrize(
    "setting, message",
    [(dict(lm_dropout=-1.0), "lm_dropout must be in \\[0, 1\\)"), (dict(lm_dropout=float("nan")), "lm_dropout"),
     (dict(lstm_forget_bias=float("nan")), "lstm_forget_bias must be a finite number")],
)
def test_out_of_range_training_settings_are_rejected(setting, message):
    with pytest.raises(ValueError, match=message):
        ElmoConfig(**setting)


def test_error_names_the_file(tmp_path):
    path = tmp_path / "options.json"
    path.write_text(json.dumps(mutated(lambda o: o["char_cnn"].__setitem__("activation", "gelu"))))
    with pytest.raises(ValueError, match=f"^{path}: .*gelu"):
        config_from_allennlp_options(path)
    with pytest.raises(ValueError, match="options file not found"):
        config_from_allennlp_options(tmp_path / "missing.json")
    broken = tmp_path / "broken.json"
    broken.write_text('{"lstm": ')
    with pytest.raises(ValueError, match="not valid JSON"):
        config_from_allennlp_options(broken)
    a_list = tmp_path / "list.json"
    a_list.write_text("[1, 2]")
    with pytest.raises(ValueError, match="expected a JSON object"):
        config_from_allennlp_options(a_list)


def test_direct_construction_is_validated():
    with pytest.raises(ValueError, match="char_vocab_size >= 262"):
        ElmoConfig(char_vocab_size=100)
    with pytest.raises(ValueError, match="lm_softmax.*hierarchical"):
        ElmoConfig(lm_softmax="hierarchical")
    with pytest.raises(ValueError, match="lm_num_sampled must be >= 1"):
        ElmoConfig(lm_softmax="sampled", lm_num_sampled=0)
    with pytest.raises(ValueError, match="char_cnn_filters is empty"):
        ElmoConfig(char_cnn_filters=[])


def test_save_and_load(tmp_path):
    config = config_from_allennlp_options(ALLENNLP / "options.json", num_output_representations=2)
    config.save_pretrained(tmp_path)
    for loaded in (ElmoConfig.from_pretrained(tmp_path), AutoConfig.from_pretrained(tmp_path)):
        assert isinstance(loaded, ElmoConfig)
        assert {**loaded.to_dict(), "_name_or_path": ""} == {**config.to_dict(), "_name_or_path": ""}


MISTYPED_CONFIG_VALUES = {
    "feature_layer": "top",
    "use_skip_connections": "false",
    "scalar_mix_layer_norm": "yes",
    "lm_vocab": 5,
    "dtype": "float99",
    "bos_char_ids": "abc",
    "projection_dim": 16.0,
    "cell_clip": "3",
}


@pytest.mark.parametrize("field", sorted(MISTYPED_CONFIG_VALUES))
def test_a_mistyped_config_json_value_is_refused_naming_the_field(field, tmp_path):
    """Nothing that is not a boolean is read as one (a non-empty string was true), and nothing fails deep inside:
    the error names the field and the value."""
    ElmoModel(ElmoConfig(**tiny_config_kwargs())).save_pretrained(tmp_path)
    config = json.loads((tmp_path / "config.json").read_text())
    value = MISTYPED_CONFIG_VALUES[field]
    config[field] = value
    (tmp_path / "config.json").write_text(json.dumps(config))
    with pytest.raises(CONFIG_ERRORS) as error:
        ElmoModel.from_pretrained(tmp_path)
    assert field in str(error.value) and repr(value) in str(error.value), str(error.value)


@pytest.mark.parametrize("setting, message", [
    (dict(num_labels="3"), "num_labels must be a positive integer, got '3'"),
    (dict(num_labels=0), "num_labels must be a positive integer, got 0"),
    (dict(id2label=["O", "B-PER"]), r"id2label must be an object \{id: label\}, got \['O', 'B-PER'\]"),
])
def test_mistyped_label_settings_are_refused_naming_them(setting, message, tmp_path):
    with pytest.raises(ValueError, match=message):
        tiny_config(**setting)
    ElmoModel(tiny_config()).save_pretrained(tmp_path)
    # transformers 4.x sets from_pretrained's overrides after the config was made, through its own num_labels setter
    # (a TypeError for "3"; 0 labels pass): only 5.x's are checked here.
    if TRANSFORMERS_MAJOR >= 5 or "id2label" in setting:
        with pytest.raises(ValueError, match=message):  # the same values as from_pretrained's overrides
            ElmoForTokenClassification.from_pretrained(tmp_path, **setting)
    if "id2label" in setting:
        config = json.loads((tmp_path / "config.json").read_text())
        (tmp_path / "config.json").write_text(json.dumps({**config, **setting}))
        with pytest.raises(ValueError, match=message):
            ElmoForTokenClassification.from_pretrained(tmp_path)


HUGE = {
    "num_lstm_layers": 10**6,
    "num_highway_layers": 10**6,
    "num_output_representations": 10**6,
    "lstm_cell_dim": 10**9,
    "char_cnn_filters": [[1, 10**6]],
}


@pytest.fixture
def no_module_is_built(monkeypatch):
    """Fails the test if a model starts building its layers (a huge one would allocate for minutes)."""
    def refuse(*args, **kwargs):
        raise AssertionError("a module was built before the configuration was refused")

    for name in ("ElmoCharacterEncoder", "ElmoBiLstm", "ElmoScalarMix"):
        monkeypatch.setattr(getattr(bilm_elmo, name), "__init__", refuse)


@pytest.mark.parametrize("field", sorted(HUGE))
def test_huge_sizes_are_refused_before_any_module_is_built(field, tmp_path, no_module_is_built):
    with pytest.raises(ValueError, match=f"Invalid ElmoConfig: .*{'weights' if field in ('lstm_cell_dim', 'char_cnn_filters') else field}"):
        tiny_config(**{field: HUGE[field]})
    # A config.json asking for them, an argument of from_pretrained, or a field changed after creation.
    config = tiny_config()
    config.save_pretrained(tmp_path)
    saved = json.loads((tmp_path / "config.json").read_text())
    (tmp_path / "config.json").write_text(json.dumps({**saved, field: HUGE[field]}))
    with pytest.raises(ValueError, match="Invalid ElmoConfig"):
        ElmoModel.from_pretrained(tmp_path)
    setattr(config, field, HUGE[field])
    for model_class in (ElmoModel, bilm_elmo.ElmoBiLm):
        with pytest.raises(ValueError, match="Invalid ElmoConfig"):
            model_class(config)


def test_the_largest_allowed_sizes_are_accepted():
    """The bounds are not below what real models use: the standard English model, 64 layers of a tiny one."""
    ElmoConfig()
    tiny_config(num_lstm_layers=64, num_highway_layers=64, num_output_representations=64)


def test_an_encoders_config_json_holds_the_architecture_only(tmp_path):
    """No runtime keys (how the model computes is the loader's choice) and no head fields, even when the config
    object holds non-default ones; a head's config.json keeps its non-default fields and only those."""
    head_values = dict(task_encoder="bilstm", use_crf=True, freeze_elmo=False, lm_dropout=0.2, classifier_hidden_size=8)
    config = tiny_config(**head_values, num_labels=3)
    encoder = ElmoModel(config)
    encoder.set_lstm_implementation("reference")
    encoder.save_pretrained(tmp_path / "encoder")
    saved = json.loads((tmp_path / "encoder" / "config.json").read_text())
    assert not set(saved) & set(RUNTIME_KEYS + HEAD_FIELDS), set(saved) & set(RUNTIME_KEYS + HEAD_FIELDS)
    assert saved["lstm_cell_dim"] == config.lstm_cell_dim and saved["architectures"] == ["ElmoModel"]
    ElmoForTokenClassification(tiny_config(**head_values, num_labels=3)).save_pretrained(tmp_path / "tagger")
    tagger = json.loads((tmp_path / "tagger" / "config.json").read_text())
    assert {name: tagger[name] for name in HEAD_FIELDS if name in tagger} == head_values
    assert not set(tagger) & set(RUNTIME_KEYS)
    reloaded = ElmoConfig.from_pretrained(tmp_path / "tagger")
    assert all(getattr(reloaded, name) == value for name, value in head_values.items())


def test_the_shipped_config_json_holds_no_runtime_or_head_keys():
    shipped = json.loads((Path(hf_elmo.DEFAULT_MODEL) / "config.json").read_text(encoding="utf-8"))
    assert not set(shipped) & set(RUNTIME_KEYS + HEAD_FIELDS + REMOVED_FEATURES)


def test_an_older_config_json_with_runtime_keys_still_loads_without_them(tmp_path):
    ElmoModel(tiny_config()).save_pretrained(tmp_path)
    config = json.loads((tmp_path / "config.json").read_text())
    older = {**config, "lstm_implementation": "int8", "lstm_keep_inference_copies": False, "token_cache_size": 7,
             **{name: False for name in REMOVED_FEATURES}}
    (tmp_path / "config.json").write_text(json.dumps(older))
    model = ElmoModel.from_pretrained(tmp_path)
    assert model.lstm_implementation == "auto"  # the recipient's choice, not the file's
    for key in RUNTIME_KEYS + REMOVED_FEATURES:
        assert not hasattr(model.config, key), key
    model.save_pretrained(tmp_path / "again")
    assert not set(json.loads((tmp_path / "again" / "config.json").read_text())) & set(RUNTIME_KEYS + REMOVED_FEATURES)


@pytest.mark.parametrize("feature", REMOVED_FEATURES)
def test_an_older_config_json_with_a_removed_feature_switched_on_is_refused_by_name(feature, tmp_path):
    ElmoModel(tiny_config()).save_pretrained(tmp_path)
    config = json.loads((tmp_path / "config.json").read_text())
    (tmp_path / "config.json").write_text(json.dumps({**config, feature: True}))
    with pytest.raises(ValueError, match=f"Invalid ElmoConfig: {feature} is no longer supported"):
        ElmoForTokenClassification.from_pretrained(tmp_path)


def test_a_mistyped_tokenizer_option_is_refused_naming_it(tmp_path):
    from hf_elmo import ElmoTokenizer

    ElmoTokenizer(segmenter="chars").save_pretrained(tmp_path)
    options = json.loads((tmp_path / "tokenizer_config.json").read_text())
    options["do_lower_case"] = "false"
    (tmp_path / "tokenizer_config.json").write_text(json.dumps(options))
    with pytest.raises(ValueError, match="do_lower_case must be true or false, got 'false'"):
        ElmoTokenizer.from_pretrained(tmp_path)


def test_the_command_line_reports_a_mistyped_config_in_one_line(tmp_path):
    import subprocess
    import sys

    from hf_elmo import ElmoTokenizer
    from paths import REPO_ROOT

    ElmoModel(ElmoConfig(**tiny_config_kwargs())).save_pretrained(tmp_path)
    ElmoTokenizer().save_pretrained(tmp_path)
    config = json.loads((tmp_path / "config.json").read_text())
    config["use_skip_connections"] = "false"
    (tmp_path / "config.json").write_text(json.dumps(config))
    result = subprocess.run([sys.executable, "-m", "hf_elmo.cli", "info", "--model", str(tmp_path)],
                            capture_output=True, text=True, cwd=REPO_ROOT, timeout=120)
    assert result.returncode == 2
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and "use_skip_connections" in lines[0] and "'false'" in lines[0], lines


def test_num_hidden_layers_is_the_number_of_lstm_layers_as_in_other_transformers_models():
    """Issue 36: `config.num_hidden_layers` raised AttributeError; code written for any transformers model reads it
    (and may set it)."""
    config = ElmoConfig(**tiny_config_kwargs())
    assert config.num_hidden_layers == config.num_lstm_layers == 2
    config.num_hidden_layers = 3
    assert config.num_lstm_layers == 3
    assert ElmoConfig(num_hidden_layers=4).num_lstm_layers == 4


@pytest.mark.parametrize("value, message", [
    (3, r"feature_layer must be a layer index in \[-3, 2\], 'average' or 'mix', got 3"),
    (-4, r"feature_layer must be a layer index in \[-3, 2\]"),
])
def test_a_feature_layer_outside_the_layers_is_refused(value, message):
    with pytest.raises(ValueError, match=message):
        ElmoConfig(**{**tiny_config_kwargs(), "feature_layer": value})


def test_the_mix_as_feature_layer_needs_a_mix():
    with pytest.raises(ValueError, match="feature_layer='mix' needs a learned mix"):
        ElmoConfig(**{**tiny_config_kwargs(), "feature_layer": "mix", "num_output_representations": 0})
