"""The hf-elmo command line: the `allennlp elmo` hdf5 layout, bad input, similar/info/convert, 2-process embed."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import types
from pathlib import Path

import h5py
import numpy as np
import pytest
import torch

from hf_elmo import ElmoModel, Embedder
from hf_elmo import cli
from hf_elmo.cli import embed as embed_command
from hf_elmo.convert.bilm_hdf5 import load_model_from_bilm
from helpers_embed import FIXTURES, SENTENCES, allennlp_top_layers, model_layers, save_tiny_model
from paths import REPO_ROOT

torch.set_num_threads(1)
ATOL = 1e-6
REPO = REPO_ROOT


@pytest.fixture(scope="module")
def model_dir(tmp_path_factory):
    return save_tiny_model(tmp_path_factory.mktemp("tiny-elmo"))


@pytest.fixture(scope="module")
def model(model_dir):
    return ElmoModel.from_pretrained(model_dir).eval()


@pytest.fixture
def corpus(tmp_path):
    path = tmp_path / "sentences.txt"
    path.write_text("\n".join(SENTENCES) + "\n", encoding="utf-8")
    return path


def run(*argv, model_dir=None) -> int:
    argv = [str(a) for a in argv]
    if model_dir is not None:
        argv += ["--model", str(model_dir)]
    return cli.main(argv)


def read_hdf5(path) -> dict:
    """The datasets of the `allennlp elmo` layout (the `words` group beside them has its own test)."""
    with h5py.File(path, "r") as handle:
        return {key: handle[key][...] for key in handle if key != embed_command.WORDS_GROUP}


def leftovers(folder: Path, keep: set[str]) -> list[str]:
    return sorted(name for name in os.listdir(folder) if name not in keep)


# embed: the allennlp layout and values ----------------------------------------------------


def test_embed_hdf5_layout_and_values(tmp_path, corpus, model_dir, model):
    output = tmp_path / "out.hdf5"
    assert run("embed", corpus, output, "--split", "whitespace", "--batch-size", 2, model_dir=model_dir) == 0
    data = read_hdf5(output)
    assert set(data) == {str(i) for i in range(len(SENTENCES))} | {"sentence_to_index"}
    assert data["sentence_to_index"].shape == (1,)
    index = json.loads(data["sentence_to_index"][0])
    assert index == {sentence: str(i) for i, sentence in enumerate(SENTENCES)}
    for i, sentence in enumerate(SENTENCES):
        words = sentence.split()
        assert data[str(i)].shape == (3, len(words), 16) and data[str(i)].dtype == np.float32
        np.testing.assert_allclose(data[str(i)], model_layers(model, words)[0], rtol=0, atol=ATOL)
    assert leftovers(tmp_path, {"out.hdf5", "sentences.txt"}) == []


@pytest.mark.parametrize("layers", ["top", "average", "1"])
def test_embed_single_layer_choices(tmp_path, corpus, model_dir, model, layers):
    output = tmp_path / "out.hdf5"
    assert run("embed", corpus, output, "--split", "whitespace", "--layers", layers, model_dir=model_dir) == 0
    data = read_hdf5(output)
    for i, sentence in enumerate(SENTENCES):
        all_layers = model_layers(model, sentence.split())[0]
        expected = {"top": all_layers[-1], "average": all_layers.mean(axis=0), "1": all_layers[1]}[layers]
        np.testing.assert_allclose(data[str(i)], expected, rtol=0, atol=ATOL)


def test_embed_matches_allennlp_numbers(tmp_path):
    """`hf-elmo embed --layers top` on AllenNLP's fixture biLM reproduces AllenNLP's top layer."""
    words, tops = allennlp_top_layers()
    folder = tmp_path / "allennlp-model"
    assert run("convert", folder, "--from", "allennlp", "--options", FIXTURES / "options.json",
               "--weights", FIXTURES / "lm_weights.hdf5") == 0
    text = tmp_path / "in.txt"
    text.write_text("\n".join(" ".join(w) for w in words) + "\n", encoding="utf-8")
    output = tmp_path / "out.hdf5"
    assert run("embed", text, output, "--split", "whitespace", "--layers", "top", model_dir=folder) == 0
    data = read_hdf5(output)
    for i, top in enumerate(tops):
        np.testing.assert_allclose(data[str(i)], top, rtol=1e-6, atol=1e-6)


def test_embed_tokenizes_with_the_model_tokenizer(tmp_path, model_dir, model):
    text = tmp_path / "in.txt"
    text.write_text("小米粥\n", encoding="utf-8")
    assert run("embed", text, tmp_path / "out.hdf5", "--layers", "top", model_dir=model_dir) == 0
    data = read_hdf5(tmp_path / "out.hdf5")
    np.testing.assert_allclose(data["0"], model_layers(model, ["小", "米", "粥"])[0][-1], rtol=0, atol=ATOL)


def test_embed_npy_sentence_vectors(tmp_path, corpus, model_dir, model):
    output = tmp_path / "vectors.npy"
    assert run("embed", corpus, output, "--split", "whitespace", model_dir=model_dir) == 0
    vectors = np.load(output)
    assert vectors.shape == (len(SENTENCES), 16) and vectors.dtype == np.float32
    for vector, sentence in zip(vectors, SENTENCES):
        expected = model_layers(model, sentence.split())[0].mean(axis=0).mean(axis=0)
        np.testing.assert_allclose(vector, expected, rtol=0, atol=ATOL)
    assert run("embed", corpus, tmp_path / "all.npy", "--split", "whitespace", "--layers", "all", model_dir=model_dir) == 0
    assert np.load(tmp_path / "all.npy").shape == (len(SENTENCES), 3, 16)


def test_embed_stdin_and_forget_sentences(tmp_path, corpus, model_dir, monkeypatch):
    monkeypatch.setattr(sys, "stdin", types.SimpleNamespace(buffer=open(corpus, "rb")))
    output = tmp_path / "out.hdf5"
    assert run("embed", "-", output, "--forget-sentences", model_dir=model_dir) == 0
    assert set(read_hdf5(output)) == {str(i) for i in range(len(SENTENCES))}


def test_embed_is_batch_size_independent(tmp_path, corpus, model_dir):
    outputs = []
    for batch_size in (1, 4):
        path = tmp_path / f"b{batch_size}.hdf5"
        assert run("embed", corpus, path, "--batch-size", batch_size, model_dir=model_dir) == 0
        outputs.append(read_hdf5(path))
    for key in outputs[0]:
        if key != "sentence_to_index":
            np.testing.assert_allclose(outputs[0][key], outputs[1][key], rtol=0, atol=ATOL)


# embed: bad input ------------------------------------------------------------------------


def test_blank_lines_are_refused_with_line_numbers(tmp_path, model_dir, capsys):
    text = tmp_path / "in.txt"
    text.write_text("a b\n\nc\n   \nd\n", encoding="utf-8")
    assert run("embed", text, tmp_path / "out.hdf5", model_dir=model_dir) == 2
    error = capsys.readouterr().err
    assert "blank line(s) at line 2, 4" in error and "Traceback" not in error
    assert leftovers(tmp_path, {"in.txt"}) == []


def test_blank_lines_kept_as_empty_entries(tmp_path, model_dir):
    text = tmp_path / "in.txt"
    text.write_text("a b\n\nc\n", encoding="utf-8")
    assert run("embed", text, tmp_path / "out.hdf5", "--blank-lines", "keep", model_dir=model_dir) == 0
    data = read_hdf5(tmp_path / "out.hdf5")
    assert [data[str(i)].shape for i in range(3)] == [(3, 2, 16), (3, 0, 16), (3, 1, 16)]
    assert json.loads(data["sentence_to_index"][0]) == {"a b": "0", "": "1", "c": "2"}
    assert run("embed", text, tmp_path / "out.npy", "--blank-lines", "keep", model_dir=model_dir) == 0
    vectors = np.load(tmp_path / "out.npy")
    assert vectors.shape == (3, 16) and not vectors[1].any() and vectors[0].any()


def test_blank_lines_skipped(tmp_path, model_dir):
    text = tmp_path / "in.txt"
    text.write_text("a b\n\nc\n", encoding="utf-8")
    assert run("embed", text, tmp_path / "out.hdf5", "--blank-lines", "skip", model_dir=model_dir) == 0
    data = read_hdf5(tmp_path / "out.hdf5")
    assert json.loads(data["sentence_to_index"][0]) == {"a b": "0", "c": "1"}


def test_non_utf8_input_names_the_line(tmp_path, model_dir, capsys):
    text = tmp_path / "in.txt"
    text.write_bytes("第一行\n第二行\n".encode() + "第三行\n".encode("gbk"))
    assert run("embed", text, tmp_path / "out.hdf5", model_dir=model_dir) == 2
    error = capsys.readouterr().err
    assert "line 3 is not valid UTF-8" in error and "Traceback" not in error
    assert leftovers(tmp_path, {"in.txt"}) == []


def test_utf8_bom_and_crlf_are_accepted(tmp_path, model_dir):
    text = tmp_path / "in.txt"
    text.write_bytes(b"\xef\xbb\xbfa b\r\nc\r\n")
    assert run("embed", text, tmp_path / "out.hdf5", model_dir=model_dir) == 0
    assert json.loads(read_hdf5(tmp_path / "out.hdf5")["sentence_to_index"][0]) == {"a b": "0", "c": "1"}


def test_over_long_lines_are_refused_before_the_model_sees_them(tmp_path, model_dir, capsys, monkeypatch):
    text = tmp_path / "in.txt"
    text.write_text("a b\n" + "长" * 400_000 + "\n", encoding="utf-8")  # line 2: 1.2 MB, one "word"
    embedded = []
    monkeypatch.setattr(Embedder, "embed", lambda self, *a, **k: embedded.append(1))
    assert run("embed", text, tmp_path / "out.hdf5", "--split", "whitespace", model_dir=model_dir) == 2
    error = capsys.readouterr().err
    assert "in.txt: line 2 is 1,200,000 bytes, over --max-line-bytes 1,000,000" in error and "Traceback" not in error
    assert run("embed", text, tmp_path / "out.hdf5", "--max-line-bytes", "1200000", "--split", "whitespace",
               "--max-words-per-line", "1", model_dir=model_dir) == 2
    assert "sentence 1 has 2 words, over --max-words-per-line 1" in capsys.readouterr().err
    corpus = tmp_path / "corpus.txt"
    corpus.write_text("a b c\n", encoding="utf-8")
    assert run("similar", "--sentence", "a b c", "--word", "a", "--corpus", corpus, "--max-words-per-line", "2",
               model_dir=model_dir) == 2
    assert "sentence 1 has 3 words, over --max-words-per-line 2" in capsys.readouterr().err
    assert embedded == [] and leftovers(tmp_path, {"in.txt", "corpus.txt"}) == []
    with pytest.raises(SystemExit) as exit_status:
        run("embed", text, tmp_path / "out.hdf5", "--max-words-per-line", "0")
    assert exit_status.value.code == 2 and "expected a whole number >= 1, got 0" in capsys.readouterr().err


def test_missing_and_empty_input(tmp_path, model_dir, capsys):
    assert run("embed", tmp_path / "nothing.txt", tmp_path / "out.hdf5", model_dir=model_dir) == 2
    assert "input file not found" in capsys.readouterr().err
    (tmp_path / "empty.txt").write_text("")
    assert run("embed", tmp_path / "empty.txt", tmp_path / "out.hdf5", model_dir=model_dir) == 2
    assert "no sentences" in capsys.readouterr().err


def test_existing_output_is_refused_unless_overwrite(tmp_path, corpus, model_dir, capsys):
    output = tmp_path / "out.hdf5"
    output.write_bytes(b"precious")
    assert run("embed", corpus, output, model_dir=model_dir) == 2
    assert "already exists" in capsys.readouterr().err
    assert output.read_bytes() == b"precious"
    assert run("embed", corpus, output, "--overwrite", model_dir=model_dir) == 0
    assert len(read_hdf5(output)) == len(SENTENCES) + 1


def test_interrupted_run_leaves_nothing(tmp_path, corpus, model_dir, monkeypatch, capsys):
    written = []

    def interrupt_after_two(self, index, array):
        written.append(index)
        if len(written) == 2:
            raise KeyboardInterrupt

    monkeypatch.setattr(embed_command.Hdf5Writer, "write", interrupt_after_two)
    output = tmp_path / "out.hdf5"
    assert run("embed", corpus, output, model_dir=model_dir) == 130
    assert "no output was written" in capsys.readouterr().err
    assert leftovers(tmp_path, {"sentences.txt"}) == []
    # An existing file survives an interrupted --overwrite run untouched.
    output.write_bytes(b"old")
    written.clear()
    assert run("embed", corpus, output, "--overwrite", model_dir=model_dir) == 130
    assert output.read_bytes() == b"old"
    assert leftovers(tmp_path, {"sentences.txt", "out.hdf5"}) == []


def test_missing_model_is_one_clear_line(tmp_path, corpus, capsys):
    assert run("embed", corpus, tmp_path / "out.hdf5", "--model", tmp_path / "no-such-model") == 2
    error = capsys.readouterr().err
    assert error.strip().count("\n") == 0 and "model folder not found" in error
    assert leftovers(tmp_path, {"sentences.txt"}) == []


def test_bad_layers_option(tmp_path, corpus, model_dir, capsys):
    assert run("embed", corpus, tmp_path / "out.hdf5", "--layers", "5", model_dir=model_dir) == 2
    assert "out of range" in capsys.readouterr().err


# embed: two processes ------------------------------------------------------------------------


def test_two_processes_write_the_same_file_as_one(tmp_path, model_dir):
    """torchrun with 2 CPU (gloo) processes: each embeds its share, rank 0 merges; bytes equal a 1-process run."""
    lines = [" ".join(["词"] * (1 + i % 9) + [str(i)]) for i in range(40)]
    text = tmp_path / "in.txt"
    text.write_text("\n".join(lines) + "\n", encoding="utf-8")
    options = ["--split", "whitespace", "--batch-size", "2", "--model", str(model_dir)]
    single = tmp_path / "single.hdf5"
    assert cli.main(["embed", str(text), str(single)] + options) == 0

    double = tmp_path / "double.hdf5"
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(REPO), os.environ.get("PYTHONPATH", "")]),
               OMP_NUM_THREADS="1")
    command = [sys.executable, "-m", "torch.distributed.run", "--nproc_per_node", "2", "--rdzv-backend", "c10d",
               "--rdzv-endpoint", "localhost:0", "-m", "hf_elmo.cli", "embed", str(text), str(double)] + options
    result = subprocess.run(command, env=env, capture_output=True, text=True, timeout=600)
    assert result.returncode == 0, result.stderr[-3000:]
    assert double.read_bytes() == single.read_bytes()
    assert leftovers(tmp_path, {"in.txt", "single.hdf5", "double.hdf5"}) == []


def test_shards_are_disjoint_and_cover_every_line():
    for world in (1, 2, 3):
        seen = [i for rank in range(world) for chunk in embed_command._shard_chunks(103, 8, rank, world) for i in chunk]
        assert sorted(seen) == list(range(103))


# similar ---------------------------------------------------------------------------------


def test_similar_occurrences(corpus, model_dir, capsys):
    assert run("similar", "--corpus", corpus, "--sentence", SENTENCES[5], "--word", "小米", "--occurrence", 2,
               "--split", "whitespace", "--top", 5, "--json", model_dir=model_dir) == 0
    results = json.loads(capsys.readouterr().out)
    assert len(results) == 5
    # The query sentence is in the corpus, so the query occurrence itself comes first.
    assert (results[0]["line"], results[0]["position"], results[0]["word"]) == (6, 3, "小米")
    assert results[0]["cosine"] == pytest.approx(1.0, abs=1e-5)
    # Check every cosine against vectors computed here.
    embedder = Embedder(model_dir)
    query = embedder.embed([SENTENCES[5].split()], layers="top")[0][3]
    for item in results:
        vector = embedder.embed([item["words"]], layers="top")[0][item["position"]]
        cosine = vector @ query / np.linalg.norm(vector) / np.linalg.norm(query)
        assert item["cosine"] == pytest.approx(float(cosine), abs=1e-5)
    assert [r["cosine"] for r in results] == sorted((r["cosine"] for r in results), reverse=True)


def test_similar_same_word_and_table(corpus, model_dir, capsys):
    assert run("similar", "--corpus", corpus, "--sentence", "我们 喝 小米 粥", "--word", "小米", "--same-word",
               "--split", "whitespace", model_dir=model_dir) == 0
    rows = capsys.readouterr().out.strip().splitlines()
    assert len(rows) == 4 and all("【小米】" in row for row in rows)  # 小米 occurs 4 times in the corpus


def test_similar_word_types(corpus, model_dir, capsys):
    assert run("similar", "--corpus", corpus, "--word", "小米", "--types", "--min-count", 1, "--top", 100,
               "--split", "whitespace", "--json", model_dir=model_dir) == 0
    results = json.loads(capsys.readouterr().out)
    embedder = Embedder(model_dir)
    vectors = embedder.embed([s.split() for s in SENTENCES], layers="top")
    by_word: dict[str, list] = {}
    for sentence, matrix in zip(SENTENCES, vectors):
        for word, vector in zip(sentence.split(), matrix):
            by_word.setdefault(word, []).append(vector)
    means = {word: np.mean(v, axis=0) for word, v in by_word.items()}
    query = means["小米"]
    assert {r["word"] for r in results} == set(means) - {"小米"}
    for item in results:
        mean = means[item["word"]]
        assert item["count"] == len(by_word[item["word"]])
        assert item["cosine"] == pytest.approx(float(mean @ query / np.linalg.norm(mean) / np.linalg.norm(query)), abs=1e-5)


def test_similar_bad_queries(corpus, model_dir, capsys):
    assert run("similar", "--corpus", corpus, "--sentence", "我们 喝 粥", "--word", "小米",
               "--split", "whitespace", model_dir=model_dir) == 2
    assert "is not one of the words" in capsys.readouterr().err
    assert run("similar", "--corpus", corpus, "--word", "不存在", "--types", "--split", "whitespace", model_dir=model_dir) == 2
    assert "does not occur in the corpus" in capsys.readouterr().err
    assert run("similar", "--corpus", corpus, "--word", "小米", model_dir=model_dir) == 2
    assert "--sentence" in capsys.readouterr().err
    assert run("similar", "--corpus", corpus, "--word", "小米", "--sentence", "", model_dir=model_dir) == 2
    assert "--sentence is empty" in capsys.readouterr().err
    for top in (0, -2):
        assert run("similar", "--corpus", corpus, "--word", "小米", "--types", "--top", top, model_dir=model_dir) == 2
        assert f"--top must be >= 1, got {top}" in capsys.readouterr().err
    # Nothing to show: exit 0 with an empty list, and stderr says why.
    assert run("similar", "--corpus", corpus, "--word", "小米", "--types", "--min-count", 1000, "--json",
               "--split", "whitespace", model_dir=model_dir) == 0
    captured = capsys.readouterr()
    assert json.loads(captured.out) == [] and "at least --min-count 1000 times" in captured.err
    assert run("similar", "--corpus", corpus, "--sentence", "我们 喝 稀饭", "--word", "稀饭", "--same-word",
               "--split", "whitespace", model_dir=model_dir) == 0
    assert "'稀饭' does not occur in the corpus" in capsys.readouterr().err


def test_embed_output_that_is_a_folder_or_stdout_is_refused_before_any_work(corpus, model_dir, tmp_path, capsys):
    folder = tmp_path / "a_folder"
    folder.mkdir()
    assert run("embed", corpus, folder, "--overwrite", model_dir=model_dir) == 2
    assert "is a folder" in capsys.readouterr().err
    assert run("embed", corpus, "-", model_dir=model_dir) == 2
    assert "not to standard output" in capsys.readouterr().err
    assert not (tmp_path / "-").exists() and list(folder.iterdir()) == []


def test_options_that_would_have_no_effect_are_refused(corpus, model_dir, tmp_path, capsys):
    assert run("embed", corpus, tmp_path / "out.npy", "--forget-sentences", model_dir=model_dir) == 2
    assert "--forget-sentences applies to hdf5 output" in capsys.readouterr().err
    for name, output_format, named in (("out.hdf5", "npy", "hdf5"), ("out.H5", "npy", "hdf5"), ("out.npy", "hdf5", "npy")):
        assert run("embed", corpus, tmp_path / name, "--format", output_format, model_dir=model_dir) == 2
        assert f"--format {output_format} but {tmp_path / name} is named as {named}" in capsys.readouterr().err
        assert not (tmp_path / name).exists()
    assert run("convert", "--from", "allennlp", "--options", "o.json", "--weights", "w.hdf5", "--model", "m",
               tmp_path / "out") == 2
    assert "--model: not used with --from allennlp" in capsys.readouterr().err
    assert run("convert", "--to", "allennlp", "--model", "m", "--weights", "w.hdf5", tmp_path / "out") == 2
    assert "--weights: not used with --to allennlp" in capsys.readouterr().err
    assert [path.name for path in tmp_path.iterdir()] == ["sentences.txt"]  # the corpus only: nothing written


def test_convert_saves_the_segmenter_asked_for(tmp_path, capsys):
    from transformers import AutoTokenizer

    fixtures = FIXTURES
    assert run("convert", "--from", "allennlp", "--options", fixtures / "options.json", "--weights",
               fixtures / "lm_weights.hdf5", "--segmenter", "whitespace", tmp_path / "en") == 0
    tokenizer = AutoTokenizer.from_pretrained(tmp_path / "en")
    assert tokenizer.tokenize("The U.S. grew.") == ["The", "U.S.", "grew."]  # as `allennlp elmo` split lines
    assert run("convert", "--to", "allennlp", "--model", tmp_path / "en", "--segmenter", "chars", tmp_path / "x") == 2
    assert "--segmenter: not used with --to allennlp" in capsys.readouterr().err


def test_embedded_file_gets_the_usual_permissions(corpus, model_dir, tmp_path):
    old_mask = os.umask(0o022)
    try:
        assert run("embed", corpus, tmp_path / "out.npy", model_dir=model_dir) == 0
    finally:
        os.umask(old_mask)
    assert (tmp_path / "out.npy").stat().st_mode & 0o777 == 0o644


# info / convert / delegated commands ---------------------------------------------------------


def test_info(model_dir, model, capsys):
    assert run("info", "--json", model_dir=model_dir) == 0
    info = json.loads(capsys.readouterr().out)
    assert info["parameters"] == sum(p.numel() for p in model.parameters())
    assert (info["output_layers"], info["layer_dim"], info["lstm_layers"]) == (3, 16, 2)
    assert info["character_vocabulary"] == 262 and info["word_vocabulary"] == 0
    assert info["size_on_disk_bytes"] == sum(p.stat().st_size for p in Path(model_dir).iterdir())
    assert run("info", model_dir=model_dir) == 0
    assert "parameters:" in capsys.readouterr().out


def test_the_word_default_names_the_shipped_model_for_every_command(tmp_path, corpus, model_dir, capsys, monkeypatch):
    import shutil

    import hf_elmo
    from hf_elmo.loading import resolve_model_name
    from hf_elmo.cli import build_parser
    from hf_elmo.cli.finetune import _options

    assert run("info", "--json", "--model", "default") == 0
    assert json.loads(capsys.readouterr().out)["model"] == hf_elmo.DEFAULT_MODEL
    assert run("embed", corpus, tmp_path / "shipped.hdf5", "--model", "default") == 0
    assert read_hdf5(tmp_path / "shipped.hdf5")["0"].shape[-1] == 2 * hf_elmo.ElmoConfig.from_pretrained(
        hf_elmo.DEFAULT_MODEL).projection_dim
    for command in ("train", "train-classifier"):  # finetune starts from it unless --model says otherwise
        args = build_parser().parse_args(["finetune", command, "--train", "x.txt", "--output-dir", "out"])
        assert resolve_model_name(_options(args).model) == hf_elmo.DEFAULT_MODEL
    # A local folder of that name is what the user means.
    monkeypatch.chdir(tmp_path)
    shutil.copytree(model_dir, tmp_path / "default")
    assert resolve_model_name("default") == "default"
    assert run("info", "--json", "--model", "default") == 0
    assert json.loads(capsys.readouterr().out)["model"] == "default"


def test_convert_allennlp_both_ways(tmp_path, capsys):
    folder = tmp_path / "hf"
    assert run("convert", folder, "--from", "allennlp", "--options", FIXTURES / "options.json",
               "--weights", FIXTURES / "lm_weights.hdf5") == 0
    reference = load_model_from_bilm(FIXTURES / "options.json", FIXTURES / "lm_weights.hdf5")
    converted = ElmoModel.from_pretrained(folder)
    for name, tensor in reference.state_dict().items():
        assert torch.equal(tensor, converted.state_dict()[name]), name
    back = tmp_path / "bilm"
    assert run("convert", back, "--to", "allennlp", "--model", folder) == 0
    with h5py.File(back / "weights.hdf5", "r") as ours, h5py.File(FIXTURES / "lm_weights.hdf5", "r") as theirs:
        names = []
        theirs.visititems(lambda name, item: names.append(name) if isinstance(item, h5py.Dataset) else None)
        for name in names:
            np.testing.assert_array_equal(ours[name][...], theirs[name][...])
    assert run("convert", back, "--to", "allennlp", "--model", folder) == 2
    assert "already exists" in capsys.readouterr().err
    assert run("convert", tmp_path / "x", "--from", "allennlp", "--options", FIXTURES / "options.json") == 2
    assert "--weights" in capsys.readouterr().err


def test_convert_elmoformanylangs_hook(tmp_path, monkeypatch, capsys):
    calls = []
    fake = types.ModuleType("hf_elmo.convert.elmoformanylangs")
    fake.convert_elmoformanylangs_to_folder = lambda *args, **kwargs: calls.append((args, kwargs))
    monkeypatch.setitem(sys.modules, "hf_elmo.convert.elmoformanylangs", fake)
    assert run("convert", tmp_path / "out", "--from", "elmoformanylangs", "--model-dir", tmp_path / "zhs.model",
               "--config-path", tmp_path / "cnn_50_100.json") == 0
    assert calls == [((str(tmp_path / "zhs.model"), str(tmp_path / "out")),
                      {"overwrite": False, "config_path": str(tmp_path / "cnn_50_100.json")})]


@pytest.mark.parametrize("command", ["embed", "similar", "convert", "info"])
def test_help(command, capsys):
    with pytest.raises(SystemExit) as exit_info:
        cli.main([command, "--help"])
    assert exit_info.value.code == 0
    text = capsys.readouterr().out
    assert f"hf-elmo {command}" in text and "--model" in text or command == "convert"


def test_top_level_help_lists_every_command(capsys):
    assert cli.main([]) == 2
    text = capsys.readouterr().out
    for command in ("embed", "similar", "convert", "info", "pretrain", "finetune"):
        assert command in text


# Sysfs takes no new files, not even from root (for whom permission bits do not stop a write).
UNWRITABLE = Path("/sys")


@pytest.mark.skipif(not UNWRITABLE.is_dir(), reason="needs Linux's /sys as a folder nobody can write into")
def test_an_unwritable_output_folder_is_named_before_any_work(tmp_path, corpus, model_dir, capsys, monkeypatch):
    from hf_elmo.convert import bilm_hdf5
    def finetune_main(argv):
        return cli.main(["finetune", *argv])

    def corpus_main(argv):
        return cli.main(["corpus", *argv])

    def pretrain_main(argv):
        return cli.main(["pretrain", *argv])

    conll = tmp_path / "train.txt"
    conll.write_text("张三\tB-PER\n在\tO\n\n北京\tB-LOC\n", encoding="utf-8")
    fixture = ["--options", FIXTURES / "options.json", "--weights", FIXTURES / "lm_weights.hdf5"]
    tiny = ["--projection-dim", "8", "--cell-dim", "16", "--filters", "[[1,4]]", "--no-progress"]
    attempts = [
        lambda: run("embed", corpus, UNWRITABLE / "out.hdf5", model_dir=model_dir),
        lambda: run("convert", UNWRITABLE / "bilm", "--to", "allennlp", "--model", model_dir),
        lambda: run("convert", UNWRITABLE / "folder", "--from", "allennlp", *fixture),
        lambda: corpus_main(["segment", "--input", str(corpus), "--output", str(UNWRITABLE / "seg.txt")]),
        lambda: pretrain_main(["--train-file", str(corpus), "--output-dir", str(UNWRITABLE / "run"), *tiny]),
        lambda: finetune_main(["train", "--model", str(model_dir), "--train", str(conll),
                               "--output-dir", str(UNWRITABLE / "ner")]),
    ]

    def no_work(*args, **kwargs):
        raise AssertionError("the conversion started before the output folder was checked")

    monkeypatch.setattr(bilm_hdf5, "load_model_from_bilm", no_work)
    for number, attempt in enumerate(attempts):
        assert attempt() == 2, number
        assert f"cannot write to {UNWRITABLE}" in capsys.readouterr().err, number


def test_similar_says_which_lines_hold_the_word_only_inside_a_longer_word(tmp_path, model_dir, capsys):
    corpus = tmp_path / "apples.txt"
    corpus.write_text("我 吃 苹果\n苹果公司 发布 手机\n他 买 苹果\n苹果树 开花 了\n", encoding="utf-8")
    assert run("similar", "--corpus", corpus, "--sentence", "她 吃 苹果", "--word", "苹果", "--same-word",
               "--split", "whitespace", model_dir=model_dir) == 0
    captured = capsys.readouterr()
    assert len(captured.out.strip().splitlines()) == 2  # lines 1 and 3
    assert "2 lines (2, 4) hold '苹果' only inside a longer word" in captured.err


def test_similar_types_counts_in_words(tmp_path, model_dir, capsys):
    corpus = tmp_path / "counts.txt"
    corpus.write_text("小米 粥 好 喝\n小米 手机\n", encoding="utf-8")
    assert run("similar", "--corpus", corpus, "--word", "小米", "--types", "--min-count", 1,
               "--split", "whitespace", model_dir=model_dir) == 0
    out = capsys.readouterr().out
    assert "(1 occurrence)" in out and "occurrences)" not in out


def test_convert_and_embed_refuse_a_missing_output_folder_alike(tmp_path, corpus, model_dir, capsys):
    missing = tmp_path / "no" / "such"
    assert run("embed", corpus, missing / "out.hdf5", model_dir=model_dir) == 2
    embed_error = capsys.readouterr().err.strip()
    assert run("convert", missing / "model", "--from", "allennlp", "--options", FIXTURES / "options.json",
               "--weights", FIXTURES / "lm_weights.hdf5") == 2
    convert_error = capsys.readouterr().err.strip()
    assert embed_error == convert_error == f"hf-elmo: error: output folder does not exist: {missing}"
    assert not (tmp_path / "no").exists()


def test_commands_remove_what_killed_runs_left_and_say_so(tmp_path, corpus, model_dir, capsys):
    """A SIGKILLed run cannot clean up: its temporaries (named for its process) go at the next run."""
    import signal
    import subprocess
    import sys

    leave = ("import os, sys, time\nfrom hf_elmo.utils.io import temporary_name\n"
             "os.mkdir(os.path.join(sys.argv[1], temporary_name('out.hdf5')))\n"
             "open(os.path.join(sys.argv[1], temporary_name('out.hdf5')), 'w').close()\nprint('ok', flush=True)\n"
             "time.sleep(60)\n")
    process = subprocess.Popen([sys.executable, "-c", leave, str(tmp_path)], stdout=subprocess.PIPE, text=True)
    assert process.stdout.readline().strip() == "ok"
    process.send_signal(signal.SIGKILL)
    process.wait()
    assert len(list(tmp_path.glob(".out.hdf5.tmp-*"))) == 2
    assert run("embed", corpus, tmp_path / "out.hdf5", model_dir=model_dir) == 0
    assert "removed 2 temporary file(s) or folder(s) of killed runs" in capsys.readouterr().err
    assert not list(tmp_path.glob(".out.hdf5.*"))
