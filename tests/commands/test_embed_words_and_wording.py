"""`hf-elmo embed` records the words its rows belong to; `--user-dict` (a jieba user dictionary) for `embed`,
`similar` and `finetune predict`; errors from Python name Python arguments, the commands name their flags."""

from __future__ import annotations

import json
import shutil

import h5py
import huggingface_hub
import pytest

from hf_elmo import Embedder, cli
from hf_elmo.loading import ModelNotFoundError
from hf_elmo.models.elmo.tokenization_elmo import ElmoTokenizer
from helpers_embed import SENTENCES, save_tiny_model

# jieba alone splits this as 张伟住 / 在 / 南京 / 。
NAMED = "张伟住在南京。"


@pytest.fixture(scope="module")
def model_dir(tmp_path_factory):
    return save_tiny_model(tmp_path_factory.mktemp("tiny-elmo"))


@pytest.fixture(scope="module")
def jieba_model_dir(model_dir, tmp_path_factory):
    pytest.importorskip("jieba")
    folder = tmp_path_factory.mktemp("tiny-elmo-jieba") / "model"
    shutil.copytree(model_dir, folder)
    ElmoTokenizer(segmenter="jieba").save_pretrained(folder)
    return folder


@pytest.fixture
def user_dict(tmp_path):
    path = tmp_path / "names.txt"
    path.write_text("张伟 10 nr\n", encoding="utf-8")
    return path


def run(*argv) -> int:
    return cli.main([str(arg) for arg in argv])


def hdf5_words(path) -> list[list[str]]:
    with h5py.File(path, "r") as handle:
        group = handle["words"]
        return [[word.decode("utf-8") for word in group[str(i)][...]] for i in range(len(group))]


def test_embed_hdf5_records_each_lines_words_row_by_row(tmp_path, model_dir):
    corpus = tmp_path / "sentences.txt"
    lines = [*SENTENCES, ""]  # a blank line kept is a line of no words
    corpus.write_text("\n".join(lines) + "\n", encoding="utf-8")
    output = tmp_path / "out.hdf5"
    assert run("embed", corpus, output, "--split", "whitespace", "--blank-lines", "keep", "--model", model_dir) == 0
    assert hdf5_words(output) == [line.split() for line in lines]
    with h5py.File(output, "r") as handle:
        for i in range(len(lines)):
            assert handle[str(i)].shape[-2] == len(handle["words"][str(i)])


def test_embed_keeps_a_user_dictionary_word_whole(tmp_path, jieba_model_dir, user_dict):
    text = tmp_path / "in.txt"
    text.write_text(NAMED + "\n", encoding="utf-8")
    assert run("embed", text, tmp_path / "plain.hdf5", "--model", jieba_model_dir) == 0
    assert hdf5_words(tmp_path / "plain.hdf5")[0][0] == "张伟住"  # what the dictionary is for
    assert run("embed", text, tmp_path / "named.hdf5", "--model", jieba_model_dir, "--user-dict", user_dict) == 0
    assert hdf5_words(tmp_path / "named.hdf5")[0] == ["张伟", "住", "在", "南京", "。"]


def test_similar_keeps_a_user_dictionary_word_whole(tmp_path, jieba_model_dir, user_dict, capsys):
    corpus = tmp_path / "corpus.txt"
    corpus.write_text(NAMED + "\n张伟在北京。\n", encoding="utf-8")
    assert run("similar", "--corpus", corpus, "--sentence", NAMED, "--word", "张伟", "--same-word", "--json",
               "--model", jieba_model_dir, "--user-dict", user_dict) == 0
    results = json.loads(capsys.readouterr().out)
    assert [item["words"][:2] for item in results] == [["张伟", "住"], ["张伟", "在"]]


def test_a_user_dictionary_for_text_that_is_split_already_is_refused(tmp_path, model_dir, user_dict, capsys):
    text = tmp_path / "in.txt"
    text.write_text("a b\n", encoding="utf-8")
    assert run("embed", text, tmp_path / "out.hdf5", "--split", "whitespace", "--user-dict", user_dict,
               "--model", model_dir) == 2
    assert "--user-dict" in capsys.readouterr().err
    assert run("finetune", "predict", "--model", model_dir, "--split-into-words", "--user-dict", user_dict, "a") == 2
    assert "--split-into-words" in capsys.readouterr().err
    assert not (tmp_path / "out.hdf5").exists()


@pytest.fixture
def offline(monkeypatch):
    """No network: an unknown Hub name is refused at once."""
    monkeypatch.setattr(huggingface_hub.constants, "HF_HUB_OFFLINE", True)


def test_an_unknown_model_from_python_is_explained_in_python_words(offline):
    with pytest.raises(ModelNotFoundError) as error:
        Embedder("org/x")
    message = str(error.value)
    assert "'org/x'" in message and "'default'" in message
    assert "--" not in message, message


@pytest.mark.parametrize("argv", [["info"], ["finetune", "predict", "a"], ["similar", "--corpus", "{tmp}/in.txt",
                                                                          "--word", "a", "--types"]])
def test_an_unknown_model_from_a_command_is_explained_with_its_flag(argv, tmp_path, offline, capsys):
    (tmp_path / "in.txt").write_text("a b\n", encoding="utf-8")
    argv = [arg.replace("{tmp}", str(tmp_path)) for arg in argv]
    assert run(*argv, "--model", "org/x") == 2
    assert "use --model default" in capsys.readouterr().err


def test_python_after_a_command_speaks_python_again(tmp_path, offline, capsys):
    assert run("info", "--model", "org/x") == 2
    with pytest.raises(ModelNotFoundError, match="'default' or hf_elmo.DEFAULT_MODEL"):
        Embedder("org/x")


def test_finetune_predict_keeps_a_user_dictionary_word_whole(tmp_path, user_dict, capsys):
    pytest.importorskip("jieba")
    from head_helpers import tagger

    folder = tmp_path / "tagger"
    tagger().save_pretrained(folder)
    ElmoTokenizer(segmenter="jieba").save_pretrained(folder)
    assert run("finetune", "predict", "--model", folder, NAMED) == 0
    assert json.loads(capsys.readouterr().out)["words"][0] == "张伟住"
    assert run("finetune", "predict", "--model", folder, "--user-dict", user_dict, NAMED) == 0
    assert json.loads(capsys.readouterr().out)["words"] == ["张伟", "住", "在", "南京", "。"]


def test_a_user_dictionary_that_is_no_regular_file_is_refused_at_once(tmp_path, jieba_model_dir, capsys, monkeypatch):
    """Issue 46 #9: `--user-dict /dev/zero` read until memory ran out, a FIFO blocked forever."""
    import os

    import hf_elmo.loading

    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    monkeypatch.setattr(hf_elmo.loading, "load_model_and_tokenizer", lambda *args, **kwargs: pytest.fail("loaded"))
    text = tmp_path / "in.txt"
    text.write_text("张伟住在南京。\n", encoding="utf-8")
    for path in ("/dev/zero", fifo):
        assert run("embed", text, tmp_path / "out.hdf5", "--model", jieba_model_dir, "--user-dict", path) == 2
        assert f"--user-dict {path} is not a regular file" in capsys.readouterr().err
        assert run("similar", "--corpus", text, "--sentence", "张伟", "--word", "张伟", "--model", jieba_model_dir,
                   "--user-dict", path) == 2
        assert "is not a regular file" in capsys.readouterr().err
    assert not (tmp_path / "out.hdf5").exists()
