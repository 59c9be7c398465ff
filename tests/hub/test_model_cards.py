"""Model cards: YAML metadata from huggingface_hub's ModelCardData, results from model_cards/results/*.json."""

from __future__ import annotations

import importlib.util
import json

import pytest
import yaml
from huggingface_hub import ModelCard

from hf_elmo.utils.model_card import builtin_specs, converted_model_card, load_results, make_model_card
from paths import REPO_ROOT

CARDS = REPO_ROOT / "model_cards"
REQUIRED_KEYS = {"language", "license", "library_name", "pipeline_tag", "tags", "datasets", "metrics"}


def front_matter(card_text: str) -> dict:
    assert card_text.startswith("---\n")
    return yaml.safe_load(card_text.split("---\n", 2)[1])


def load_make_cards():
    spec = importlib.util.spec_from_file_location("make_cards", CARDS / "make_cards.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.mark.parametrize("name", ["elmo-zh-small", "elmo-en-original", "elmo-zh-ner"])
def test_committed_cards_have_the_metadata_and_are_up_to_date(name):
    path = CARDS / name / "README.md"
    metadata = front_matter(path.read_text(encoding="utf-8"))
    assert REQUIRED_KEYS <= set(metadata), REQUIRED_KEYS - set(metadata)
    assert metadata["library_name"] == "transformers"
    assert "elmo" in metadata["tags"]
    card = ModelCard.load(path)  # huggingface_hub parses it back
    assert card.data.library_name == "transformers"
    results = load_results(CARDS / "results" / f"{name}.json")
    measured = [r for r in builtin_specs()[name].published_results + results["results"] if r["metric_value"] is not None]
    assert len(card.data.eval_results or []) == len(measured)
    assert ("model-index" in metadata) == bool(measured)
    # The committed file is exactly what the generator makes from the results JSON.
    assert path.read_text(encoding="utf-8") == str(make_model_card(builtin_specs()[name], results))


def test_make_cards_check_passes_on_the_committed_cards():
    assert load_make_cards().main(["--check"]) == 0


def test_measured_results_become_model_index_and_survive_a_load_round_trip(tmp_path):
    results_file = tmp_path / "results.json"
    results = json.loads((CARDS / "results" / "elmo-zh-small.json").read_text())
    results["results"][0]["metric_value"] = 87.25  # a validation perplexity, as the trainer would write it
    results["results"][1]["metric_value"] = None  # a still-pending test perplexity
    results["details"] = {"Parameters": "1.2M"}
    results_file.write_text(json.dumps(results))
    card = make_model_card(builtin_specs()["elmo-zh-small"], load_results(results_file))
    card.save(tmp_path / "README.md")

    loaded = ModelCard.load(tmp_path / "README.md")
    metadata = front_matter((tmp_path / "README.md").read_text(encoding="utf-8"))
    assert REQUIRED_KEYS | {"model-index"} <= set(metadata)
    (entry,) = metadata["model-index"]
    assert entry["name"] == "elmo-zh-small"
    (result,) = entry["results"]  # the still-null test perplexity is not in the metadata
    assert result["metrics"] == [
        {"type": "perplexity", "value": 87.25, "name": "Perplexity (mean of forward and backward)"}
    ]
    assert result["dataset"]["split"] == "validation"
    (evaluation,) = loaded.data.eval_results
    assert (evaluation.metric_type, evaluation.metric_value, evaluation.dataset_split) == ("perplexity", 87.25, "validation")
    assert "| 87.25 |" in loaded.text and "pending" in loaded.text and "| Parameters | 1.2M |" in loaded.text


def test_english_card_carries_the_published_perplexity_with_its_source():
    card = make_model_card(builtin_specs("someone")["elmo-en-original"])
    (evaluation,) = card.data.eval_results
    assert (evaluation.dataset_type, evaluation.metric_type, evaluation.metric_value) == ("lm1b", "perplexity", 39.7)
    assert "Peters" in evaluation.source_name
    assert "--push-to-hub someone/elmo-en-original" in card.text


def test_converted_card_uses_published_figures_only_for_the_standard_architecture():
    from hf_elmo import ElmoConfig

    standard = ElmoConfig()  # the defaults are the 2x4096_512_2048cnn_2xhighway model
    card = converted_model_card("me/elmo-en", standard, "options.json", "weights.hdf5")
    assert card.data.eval_results[0].metric_value == 39.7 and card.data.model_name == "elmo-en"
    small = ElmoConfig(char_embedding_dim=4, char_cnn_filters=[[1, 4]], projection_dim=8, lstm_cell_dim=16)
    card = converted_model_card("me/tiny", small, "options.json", "weights.hdf5", language="zh", license="mit")
    metadata = front_matter(str(card))
    assert "model-index" not in metadata and card.data.eval_results is None
    assert (metadata["language"], metadata["license"], metadata["library_name"]) == (["zh"], "mit", "transformers")


@pytest.mark.parametrize(
    "content, problem",
    [
        ('{"results": [{"task_type": "x"}]}', "misses"),
        ('{"results": [], "extra": 1}', "unknown keys"),
        ('{"results": "nope"}', '"results" list'),
        ("not json", "not valid JSON"),
        ('{"evaluation": [{"measure": "F1", "result": "90"}]}', '"evaluation" must be a list'),
        ('{"evaluation": [{"measure": "F1", "result": 90, "target": ">= 90", "command": "x"}]}', "the strings"),
    ],
)
def test_bad_results_files_are_rejected_with_the_reason(tmp_path, content, problem):
    path = tmp_path / "results.json"
    path.write_text(content)
    with pytest.raises(ValueError, match=problem):
        load_results(path)


def test_evaluation_rows_become_a_table_with_their_commands(tmp_path):
    rows = [
        {"measure": "MSRA test F1", "result": "80.1", "target": ">= 90: missed", "command": "`python a.py --x 1`"},
        {"measure": "PD test F1", "result": "97.1", "target": ">= 95.5: met", "command": "`python b.py`"},
    ]
    path = tmp_path / "results.json"
    path.write_text(json.dumps({"results": [], "evaluation": rows}))
    card = str(make_model_card(builtin_specs()["elmo-zh-small"], load_results(path)))
    table = card.split("## Evaluation\n\n", 1)[1].split("\n\n", 1)[0].splitlines()
    assert table == [
        "| Measure | Result | Target | Command |",
        "| --- | --- | --- | --- |",
        "| MSRA test F1 | 80.1 | >= 90: missed | `python a.py --x 1` |",
        "| PD test F1 | 97.1 | >= 95.5: met | `python b.py` |",
    ]


def test_results_value_must_be_a_number(tmp_path):
    results = json.loads((CARDS / "results" / "elmo-zh-ner.json").read_text())
    results["results"][0]["metric_value"] = "91.2"
    path = tmp_path / "results.json"
    path.write_text(json.dumps(results))
    with pytest.raises(ValueError, match="must be a number or null"):
        load_results(path)


def test_ner_card_reports_the_committed_experiment_on_the_whole_test_split():
    """The NER card's numbers are the committed `pd-elmo` experiment's, not typed in separately."""
    experiment = json.loads((CARDS.parent / "benchmarks" / "results" / "pd-elmo.json").read_text(encoding="utf-8"))
    scores = experiment["results"]["test"]
    card = {r["metric_type"]: r["metric_value"] for r in load_results(CARDS / "results" / "elmo-zh-ner.json")["results"]}
    assert card == {metric: round(100 * scores[metric], 2) for metric in ("f1", "precision", "recall")}
    assert experiment["results"]["data"]["test_sentences"] == 4760  # the whole seeded test split


def test_cards_name_the_packages_their_code_needs():
    from hf_elmo.utils.model_card import builtin_specs

    for name, spec in builtin_specs().items():
        usage = spec.usage
        assert "pip install torch transformers" in usage, name
        chinese = "elmo-zh" in name
        assert ("jieba" in usage) == chinese, name
