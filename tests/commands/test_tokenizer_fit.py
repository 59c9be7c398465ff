"""Issue 46.3 and 46.4: a tokenizer that does not fit its model is refused by every command that loads them.

A folder whose tokenizer_config.json says "char_scheme": "dictionary" beside a bytes-scheme model: `embed` exited 0
with vectors from another alphabet's ids, while `export` refused it by name. A char_vocab.json mapping a character to
100000 when the model has 120 rows: `embed` ended in torch's IndexError, `info` noticed nothing, `export` succeeded.
"""

from __future__ import annotations

import json
import shutil

import pytest

from hf_elmo import cli
from hf_elmo.models.elmo.configuration_elmo import ElmoConfig
from hf_elmo.models.elmo.modeling_elmo import ElmoModel
from hf_elmo.models.elmo.tokenization_elmo import ElmoTokenizer
from helpers_embed import save_tiny_model
from small_models import tiny_config_kwargs

CHARACTERS = {name: index for index, name in enumerate(("<bos>", "<eos>", "<oov>", "<pad>", "<bow>", "<eow>", "狗", "跑"),
                                                       start=1)}
WORDS = {"<oov>": 0, "<pad>": 1, "<bos>": 2, "<eos>": 3, "狗": 4}


def run(*argv) -> int:
    return cli.main([str(a) for a in argv])


def dictionary_model_with_words(folder):
    """A tiny dictionary-scheme model with a word embedding, and its tokenizer."""
    tokenizer = ElmoTokenizer(char_scheme="dictionary", char_vocab=CHARACTERS, word_vocab=WORDS, segmenter="chars",
                              max_characters_per_token=6)
    config = ElmoConfig(**tiny_config_kwargs(char_cnn_filters=[[1, 4], [2, 8]]), char_scheme="dictionary",
                        char_vocab_size=len(CHARACTERS) + 1, max_characters_per_token=6,
                        bos_char_ids=tokenizer.word_to_char_ids("<bos>"), eos_char_ids=tokenizer.word_to_char_ids("<eos>"),
                        word_vocab_size=len(WORDS), word_embedding_dim=4, bos_word_id=2, eos_word_id=3)
    ElmoModel(config).save_pretrained(folder)
    tokenizer.save_pretrained(folder)
    return folder


@pytest.fixture(scope="module")
def foreign_tokenizer_model(tmp_path_factory):
    """A bytes-scheme model with a dictionary-scheme tokenizer saved beside it."""
    folder = save_tiny_model(tmp_path_factory.mktemp("foreign-tokenizer"))
    for name in ("tokenizer_config.json", "special_tokens_map.json"):
        (folder / name).unlink(missing_ok=True)
    ElmoTokenizer(char_scheme="dictionary", char_vocab=CHARACTERS, segmenter="chars").save_pretrained(folder)
    return folder


@pytest.fixture
def text(tmp_path):
    path = tmp_path / "in.txt"
    path.write_text("狗 跑\n", encoding="utf-8")
    return path


def commands(model, text, tmp_path):
    train = tmp_path / "train.conll"
    train.write_text("狗\tB-ANIMAL\n跑\tO\n", encoding="utf-8")
    return {
        "embed": ["embed", text, tmp_path / "out.hdf5", "--model", model],
        "info": ["info", "--model", model],
        "similar": ["similar", "--corpus", text, "--word", "狗", "--types", "--model", model],
        "finetune train": ["finetune", "train", "--model", model, "--train", train, "--output-dir", tmp_path / "run",
                           "--epochs", "1", "--threads", "1"],
    }


@pytest.mark.parametrize("command", ["embed", "info", "similar", "finetune train"])
def test_a_tokenizer_of_another_scheme_is_refused_by_every_command(foreign_tokenizer_model, text, tmp_path, command,
                                                                   capsys):
    argv = commands(foreign_tokenizer_model, text, tmp_path)[command]
    assert run(*argv) == 2
    last = capsys.readouterr().err.strip().splitlines()[-1]
    assert last.startswith("hf-elmo: error: ") and "the tokenizer does not fit the model" in last, last
    assert "character scheme is 'dictionary', the model's 'bytes'" in last
    assert not (tmp_path / "out.hdf5").exists() and not (tmp_path / "run").exists()


def test_a_character_id_beyond_the_embedding_is_refused_naming_the_file_and_id(tmp_path, text, capsys):
    from hf_elmo import DEFAULT_MODEL

    folder = tmp_path / "model"
    shutil.copytree(DEFAULT_MODEL, folder)
    vocabulary = json.loads((folder / "char_vocab.json").read_text(encoding="utf-8"))
    vocabulary["狗"] = 100000
    (folder / "char_vocab.json").write_text(json.dumps(vocabulary, ensure_ascii=False), encoding="utf-8")
    for argv in (["embed", text, tmp_path / "out.hdf5", "--model", folder], ["info", "--model", folder]):
        assert run(*argv) == 2
        last = capsys.readouterr().err.strip().splitlines()[-1]
        assert last.startswith(f"hf-elmo: error: {folder / 'char_vocab.json'} maps '狗' to id 100000, beyond the "
                               "model's 5447 character embeddings"), last
    assert not (tmp_path / "out.hdf5").exists()


def test_a_word_id_beyond_the_embedding_is_refused_naming_the_file_and_id(tmp_path, text, capsys):
    folder = dictionary_model_with_words(tmp_path / "words")
    assert run("embed", text, tmp_path / "fits.hdf5", "--model", folder) == 0  # the model with its own vocabulary
    vocabulary = json.loads((folder / "word_vocab.json").read_text(encoding="utf-8"))
    vocabulary["狗"] = 100000
    (folder / "word_vocab.json").write_text(json.dumps(vocabulary, ensure_ascii=False), encoding="utf-8")
    capsys.readouterr()
    assert run("embed", text, tmp_path / "out.hdf5", "--model", folder) == 2
    last = capsys.readouterr().err.strip().splitlines()[-1]
    assert last == (f"hf-elmo: error: {folder / 'word_vocab.json'} maps '狗' to id 100000, beyond the model's 5 word "
                    "embeddings (ids 0-4): this vocabulary is not the model's; save the model's own tokenizer beside it")
    assert not (tmp_path / "out.hdf5").exists()


def test_the_library_loaders_run_the_same_check(foreign_tokenizer_model):
    from hf_elmo import Embedder
    from hf_elmo.loading import TokenizerMismatchError, load_model_and_tokenizer

    for load in (load_model_and_tokenizer, Embedder):
        with pytest.raises(TokenizerMismatchError, match="the tokenizer does not fit the model"):
            load(str(foreign_tokenizer_model))
