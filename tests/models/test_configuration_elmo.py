"""ElmoConfig: standard defaults, reading AllenNLP / bilm-tf options.json, rejecting inconsistent options."""

import copy
import json

import pytest

from hf_elmo import ElmoConfig
from hf_elmo.bilm_format import allennlp_options, config_from_allennlp_options
from reference_fixtures import ALLENNLP, BILM_TF, FIXTURES
from small_models import tiny_config_kwargs
from transformers import AutoConfig

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
    "filter not integer": (lambda o: o["char_cnn"].__setitem__("filters", [[1, "4"]]), "integer pairs"),
    "bidirectional false": (lambda o: o.__setitem__("bidirectional", False), "'bidirectional' is False"),
    "bad activation": (lambda o: o["char_cnn"].__setitem__("activation", "gelu"), "one of 'relu', 'tanh', got 'gelu'"),
    "string size": (lambda o: o["lstm"].__setitem__("dim", "64"), "lstm_cell_dim must be an integer, got '64'"),
    "float size": (lambda o: o["lstm"].__setitem__("projection_dim", 16.5), "projection_dim must be an integer"),
    "negative size": (lambda o: o["lstm"].__setitem__("projection_dim", -1), "projection_dim must be positive"),
    "bad clip": (lambda o: o["lstm"].__setitem__("cell_clip", -3), "cell_clip must be a non-negative number"),
    "bad skip flag": (lambda o: o["lstm"].__setitem__("use_skip_connections", "yes"), "true or false"),
}


@pytest.mark.parametrize("case", sorted(BAD_OPTIONS))
def test_inconsistent_options_rejected(case):
    change, message = BAD_OPTIONS[case]
    with pytest.raises(ValueError, match=message):
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
    with pytest.raises(ValueError, match="lm_softmax"):
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
    "use_skip_connections": ("false", "use_skip_connections must be true or false, got 'false'"),
    "scalar_mix_layer_norm": ("yes", "scalar_mix_layer_norm must be true or false, got 'yes'"),
    "lm_vocab": (5, "lm_vocab must be a list of strings or null, got 5"),
    "dtype": ("float99", "dtype must name a torch dtype such as 'float32' or 'bfloat16', got 'float99'"),
    "bos_char_ids": ("abc", "bos_char_ids must be a list of integers or null, got 'abc'"),
    "projection_dim": (16.0, "projection_dim must be an integer, got 16.0"),
    "cell_clip": ("3", "cell_clip must be a number or null, got '3'"),
}


@pytest.mark.parametrize("field", sorted(MISTYPED_CONFIG_VALUES))
def test_a_mistyped_config_json_value_is_refused_naming_the_field(field, tmp_path):
    """Nothing that is not a boolean is read as one (a non-empty string was true), and nothing fails deep inside."""
    from hf_elmo import ElmoModel

    ElmoModel(ElmoConfig(**tiny_config_kwargs())).save_pretrained(tmp_path)
    config = json.loads((tmp_path / "config.json").read_text())
    value, message = MISTYPED_CONFIG_VALUES[field]
    config[field] = value
    (tmp_path / "config.json").write_text(json.dumps(config))
    with pytest.raises(ValueError) as error:
        ElmoModel.from_pretrained(tmp_path)
    assert message in str(error.value)


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

    from hf_elmo import ElmoModel, ElmoTokenizer
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
    assert len(lines) == 1 and "use_skip_connections must be true or false, got 'false'" in lines[0], lines
