"""docs/embedding.md, "Coming from TF Hub or AllenNLP": every TF Hub output, AllenNLP `ElmoEmbedder` call and argument
of AllenNLP's `Elmo` module has a row, and the hf-elmo call each row gives runs as written with the shape the row
states."""

from __future__ import annotations

import re

import h5py
import numpy as np
import pytest

import hf_elmo
from hf_elmo import cli
from paths import REPO_ROOT

GUIDE = REPO_ROOT / "docs" / "embedding.md"
TEXTS = ["我爱北京天安门。", "小米发布了新款手机。", "好"]


def section() -> str:
    text = GUIDE.read_text(encoding="utf-8")
    found = re.search(r"^## Coming from TF Hub or AllenNLP\n(.*?)(?=^## )", text, flags=re.S | re.M)
    assert found, "docs/embedding.md has no section 'Coming from TF Hub or AllenNLP'"
    return found.group(1)


def table_rows(header: str) -> list[list[str]]:
    """The cells of each row of the section's table whose header row starts with `header`."""
    lines = section().splitlines()
    start = next((i for i, line in enumerate(lines) if line.startswith(f"| {header} |")), None)
    assert start is not None, f"no table headed {header!r}"
    rows = []
    for line in lines[start + 2:]:
        if not line.startswith("|"):
            break
        rows.append([cell.strip() for cell in line.strip().strip("|").split(" | ")])
    return rows


def code(cell: str) -> str:
    """The first `code` span of a cell."""
    return re.search(r"`([^`]+)`", cell).group(1)


@pytest.fixture(scope="module")
def embedder():
    return hf_elmo.Embedder(hf_elmo.DEFAULT_MODEL)


def test_every_tf_hub_output_maps_to_an_hf_elmo_call_that_runs_with_the_stated_shape(embedder):
    """Issue 36: no table mapped TF Hub's outputs (`default`, `elmo`, `word_emb`, `lstm_outputs1/2`) to hf-elmo's
    calls."""
    rows = {code(cells[0]): cells for cells in table_rows("TF Hub output")}
    assert set(rows) == {"default", "elmo", "word_emb", "lstm_outputs1", "lstm_outputs2"}
    P = embedder.config.projection_dim
    words = [len(sentence) for sentence in embedder.tokenize(TEXTS)]
    width = {"(texts, 2P)": None, "(words, 2P) per text": 2 * P, "(words, P) per text": P}
    results = {}
    for name, cells in rows.items():
        results[name] = eval(code(cells[2]), {"embedder": embedder, "texts": TEXTS, "P": P})  # noqa: S307
        stated = cells[3].replace("`", "")
        assert stated in width, f"{name}: unknown shape {stated!r}"
        if width[stated] is None:
            assert np.asarray(results[name]).shape == (len(TEXTS), 2 * P), name
        else:
            assert [np.asarray(one).shape for one in results[name]] == [(n, width[stated]) for n in words], name
    layers = embedder.embed(TEXTS)
    for index in range(len(TEXTS)):
        np.testing.assert_allclose(results["default"][index], results["elmo"][index].mean(axis=0), rtol=1e-5, atol=1e-6)
        assert np.array_equal(results["word_emb"][index], layers[index][0][:, :P])
        assert np.array_equal(results["lstm_outputs1"][index], layers[index][1])
        assert np.array_equal(results["lstm_outputs2"][index], layers[index][2])


def test_every_allennlp_elmo_embedder_call_maps_to_an_hf_elmo_call_that_runs(embedder, tmp_path):
    """Issue 36: no table mapped AllenNLP's `ElmoEmbedder` methods (and `allennlp elmo`) to hf-elmo's calls."""
    rows = table_rows("AllenNLP")
    names = {re.match(r"[a-z_]+", code(cells[0])).group(0): cells for cells in rows}
    assert {"embed_sentence", "embed_sentences", "embed_batch", "embed_file"} <= set(names)
    assert any("allennlp elmo" in cells[0] for cells in rows)
    P, tokens = embedder.config.projection_dim, ["我", "爱", "北京"]
    sentence = eval(code(names["embed_sentence"][1]), {"embedder": embedder, "tokens": tokens})  # noqa: S307
    assert sentence.shape == (embedder.num_layers, len(tokens), 2 * P)
    calls = (("embed_sentences", {"sentences": [tokens, ["好"]]}), ("embed_batch", {"batch": [tokens]}))
    for name, variables in calls:
        given = next(iter(variables.values()))
        arrays = eval(code(names[name][1]), {"embedder": embedder, **variables})  # noqa: S307
        assert [array.shape for array in arrays] == [(embedder.num_layers, len(one), 2 * P) for one in given], name

    command = code(names["embed_file"][1])
    assert command.startswith("hf-elmo embed INPUT OUTPUT")
    (tmp_path / "in.txt").write_text("我 爱 北京\n好\n", encoding="utf-8")
    argv = command.replace("[--forget-sentences]", "").split()[1:]  # without "hf-elmo"
    for layers, shape in (("all", (embedder.num_layers, 3, 2 * P)), ("top", (3, 2 * P)), ("average", (3, 2 * P))):
        output = tmp_path / f"{layers}.hdf5"
        filled = " ".join(argv).replace("INPUT", str(tmp_path / "in.txt")).replace("OUTPUT", str(output))
        filled = filled.replace("all / top / average", layers)
        assert cli.main([*filled.split(), "--model", hf_elmo.DEFAULT_MODEL]) == 0
        with h5py.File(output, "r") as handle:
            assert handle["0"].shape == shape and handle["1"].shape[-2] == 1


ELMO_ARGUMENTS = ("num_output_representations", "dropout", "do_layer_norm", "requires_grad", "keep_sentence_boundaries",
                  "scalar_mix_parameters")


@pytest.fixture(scope="module")
def converted_allennlp_fixture(tmp_path_factory):
    from hf_elmo.convert.bilm_hdf5 import convert_bilm_to_folder
    from reference_fixtures import ALLENNLP

    folder = tmp_path_factory.mktemp("allennlp") / "elmo"
    return convert_bilm_to_folder(ALLENNLP / "options.json", ALLENNLP / "lm_weights.hdf5", folder)


def test_every_allennlp_elmo_module_argument_maps_to_hf_elmo_calls_that_run_with_the_stated_shapes(
        converted_allennlp_fixture):
    """Issue 45: the AllenNLP mapping covered `ElmoEmbedder` but not `allennlp.modules.elmo.Elmo`, the module most
    AllenNLP models use. Each row of its table runs as written on a folder converted from AllenNLP's test biLM and
    gives the shape it states; the rows for `do_layer_norm`, `scalar_mix_parameters` and `keep_sentence_boundaries`
    together give AllenNLP's own outputs for those arguments."""
    import json

    import torch
    from transformers import AutoTokenizer

    from hf_elmo import ElmoModel
    from numerics import bilm_tolerance, float32_tolerance, magnitude
    from reference_fixtures import ALLENNLP

    rows = {}
    for cells in table_rows("AllenNLP `Elmo`"):
        allennlp = code(cells[0])
        key = next((name for name in ELMO_ARGUMENTS if allennlp.startswith(f"{name}=")),
                   re.match(r"[A-Za-z_]+", allennlp).group(0))
        rows.setdefault(key, []).append((allennlp, code(cells[1]), code(cells[2])))
    assert set(ELMO_ARGUMENTS) <= set(rows), sorted(set(ELMO_ARGUMENTS) - set(rows))
    assert {"Elmo", "batch_to_ids", "elmo"} <= set(rows)

    fixture = ALLENNLP.parent / "allennlp_layer_norm_mix"
    inputs = json.loads((fixture / "inputs.json").read_text(encoding="utf-8"))
    sentences = inputs["sentences"]
    MODEL = str(converted_allennlp_fixture)
    tokenizer = AutoTokenizer.from_pretrained(MODEL)
    B, W = len(sentences), max(len(words) for words in sentences)

    def run(line: str, namespace: dict):
        """The value of an expression, or None after running statements."""
        try:
            compiled = compile(line, "docs/embedding.md", "eval")
        except SyntaxError:
            exec(compile(line, "docs/embedding.md", "exec"), namespace)  # noqa: S102
            return None
        return eval(compiled, namespace)  # noqa: S307

    def namespace(**extra) -> dict:
        model = ElmoModel.from_pretrained(MODEL)
        return {"torch": torch, "ElmoModel": ElmoModel, "MODEL": MODEL, "tokenizer": tokenizer,
                "sentences": sentences, "model": model, "character_ids": tokenizer.batch_to_ids(sentences), **extra}

    def shape(stated: str, P: int):
        return {"(B, W, 50)": (B, W, 50), "(B, W, 2P)": (B, W, 2 * P), "(B, W)": (B, W),
                "(B, W + 2, 2P)": (B, W + 2, 2 * P), "1": 1, "2": 2}[stated]

    def forward(model, **kwargs):
        with torch.no_grad():
            return model(tokenizer.batch_to_ids(sentences), **kwargs)

    for key, (allennlp, hf_elmo_call, stated) in ((key, row) for key, value in rows.items() if key != "elmo"
                                                   for row in value):
        names = namespace()
        value = run(hf_elmo_call, names)
        model = names["model"]
        P = model.config.projection_dim
        if key in ("Elmo", "num_output_representations"):
            assert isinstance(model, ElmoModel) and len(model.scalar_mixes) == shape(stated, P), key
            assert [tuple(mix.shape) for mix in forward(model).elmo_representations] == [(B, W, 2 * P)] * len(model.scalar_mixes)
        elif key == "batch_to_ids":
            assert tuple(names["character_ids"].shape) == shape(stated, P)
            padded = tokenizer(sentences, is_split_into_words=True, padding=True, return_tensors="pt")["input_ids"]
            assert torch.equal(names["character_ids"], padded)
        elif key == "dropout":
            assert [tuple(mix.shape) for mix in value] == [shape(stated, P)]
        elif key == "do_layer_norm":
            assert all(mix.layer_norm for mix in model.scalar_mixes)
            assert tuple(forward(model).elmo_representations[0].shape) == shape(stated, P)
        elif key == "requires_grad":
            assert tuple(forward(model).elmo_representations[0].shape) == shape(stated, P)
            trained = {name for name, parameter in model.named_parameters() if parameter.requires_grad}
            everything = {name for name, _ in model.named_parameters()}
            if allennlp == "requires_grad=True":
                assert trained == everything
            else:
                assert trained == {name for name in everything if name.startswith("scalar_mixes.")} and trained
        elif key == "keep_sentence_boundaries":
            assert tuple(value.elmo_representations[0].shape) == shape(stated, P)
            assert tuple(value.mask.shape) == (B, W + 2)
        elif key == "scalar_mix_parameters":
            assert not any(parameter.requires_grad for parameter in model.scalar_mixes.parameters())
            output = forward(model)
            assert tuple(output.elmo_representations[0].shape) == shape(stated, P)
            assert torch.equal(output.elmo_representations[0], output.hidden_states[1])  # [-9e10, 1, -9e10]: layer 1
        else:
            raise AssertionError(f"no check for the row {allennlp!r}")
    for allennlp, hf_elmo_call, stated in rows["elmo"]:
        names = namespace()
        value = run(hf_elmo_call, names)
        P = names["model"].config.projection_dim
        if allennlp.endswith('["mask"]'):
            assert tuple(value.shape) == shape(stated, P)
            assert value.long().tolist() == [[int(i < len(words)) for i in range(W)] for words in sentences]
        else:
            assert isinstance(value, tuple) and [tuple(mix.shape) for mix in value] == [shape(stated, P)]

    # Elmo(do_layer_norm=True, keep_sentence_boundaries=..., scalar_mix_parameters=MIX_WEIGHTS, dropout=0.0) is the
    # three rows together; AllenNLP's outputs for it are a fixture.
    expected = np.load(fixture / "expected.npz", allow_pickle=False)
    names = namespace()
    run(rows["do_layer_norm"][0][1], names)
    mix_weights = rows["scalar_mix_parameters"][0][0].split("=", 1)[1]
    run(rows["scalar_mix_parameters"][0][1].replace(mix_weights, repr(inputs["mix_weights"])), names)
    for keep, name in ((False, "words_only"), (True, "with_boundaries")):
        call = rows["keep_sentence_boundaries"][0][1] if keep else rows["elmo"][0][1].removesuffix(".elmo_representations")
        with torch.no_grad():
            output = run(call, names)
        assert output.mask.long().tolist() == expected[f"{name}_mask"].tolist()
        mix, want = output.elmo_representations[0].numpy(), expected[f"{name}_mix"]
        tolerance = bilm_tolerance(names["model"].config, want) + float32_tolerance(
            magnitude(want), int(output.mask.sum()) * 2 * names["model"].config.projection_dim)
        assert mix.shape == want.shape and float(np.abs(mix - want).max()) <= tolerance, name
