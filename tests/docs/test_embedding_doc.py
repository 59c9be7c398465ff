"""docs/embedding.md, "Coming from TF Hub or AllenNLP": every TF Hub output and AllenNLP `ElmoEmbedder` call has a
row, and the hf-elmo call each row gives runs as written with the shape the row states."""

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
