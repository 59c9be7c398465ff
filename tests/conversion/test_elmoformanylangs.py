"""ELMoForManyLangs conversion: parity with `Embedder.sents2elmo` and the dictionary input layer.

The fixture (tests/fixtures/elmoformanylangs, built by make_fixture.py with the reference package) holds a tiny
random model in ELMoForManyLangs' format and that package's outputs for the sentences in sentences.json.
"""

from __future__ import annotations

import importlib.util
import json
import shutil
from pathlib import Path

import h5py
import numpy as np
import pytest
import torch
from transformers import AutoModel, AutoTokenizer, pipeline

import hf_elmo  # noqa: F401  (registers the Auto classes)
from hf_elmo import ElmoConfig, ElmoModel, ElmoTokenizer
from hf_elmo.convert.elmoformanylangs import (
    PACKAGED_MODEL_CONFIGS,
    convert_elmoformanylangs_to_folder,
    load_model_from_elmoformanylangs,
    read_dictionary,
    resolve_model_config,
)
from numerics import bilm_tolerance
from paths import REPO_ROOT, FIXTURES

pytestmark = pytest.mark.numerics  # also run under forced AVX2 kernels by .ci/run

FIXTURE = FIXTURES / "elmoformanylangs"
MODEL_DIR = FIXTURE / "model"
OUTPUT_LAYERS = (0, 1, 2, -1, -2)



def _load_cli():
    path = REPO_ROOT / "conversion" / "convert_elmoformanylangs.py"
    spec = importlib.util.spec_from_file_location("convert_elmoformanylangs", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


cli = _load_cli()


@pytest.fixture(scope="module")
def sentences() -> list[list[str]]:
    with open(FIXTURE / "sentences.json", encoding="utf-8") as handle:
        return json.load(handle)


@pytest.fixture(scope="module")
def expected() -> dict[int, list[np.ndarray]]:
    with h5py.File(FIXTURE / "expected.hdf5", "r") as handle:
        return {
            layer: [handle[f"layer_{layer}"][str(i)][...] for i in range(len(handle[f"layer_{layer}"]))]
            for layer in OUTPUT_LAYERS
        }


@pytest.fixture(scope="module")
def converted(tmp_path_factory) -> Path:
    output = tmp_path_factory.mktemp("converted") / "elmo-zh-tiny"
    assert cli.main(["--model-dir", str(MODEL_DIR), "--output", str(output)]) == 0
    return output


def sents2elmo_like(model, tokenizer, sentences, output_layer, batch_size=64) -> list[np.ndarray]:
    """Our model's answer to `Embedder.sents2elmo(sentences, output_layer)`."""
    results = []
    for start in range(0, len(sentences), batch_size):
        batch = sentences[start : start + batch_size]
        encoding = tokenizer(batch, is_split_into_words=True, padding=True, return_tensors="pt")
        with torch.no_grad():
            layers = torch.stack(model(**encoding).hidden_states)  # (L + 1, B, W, 2P)
        for row, words in enumerate(batch):
            data = layers[:, row, : len(words)].numpy()
            if output_layer == -1:
                results.append(data.mean(axis=0))
            elif output_layer == -2:
                results.append(data)
            else:
                results.append(data[output_layer])
    return results


# Parity ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize("output_layer", OUTPUT_LAYERS)
def test_converted_model_matches_sents2elmo(converted, sentences, expected, output_layer):
    model = AutoModel.from_pretrained(converted).eval()
    tokenizer = AutoTokenizer.from_pretrained(converted)
    assert isinstance(model, ElmoModel) and isinstance(tokenizer, ElmoTokenizer)
    ours = sents2elmo_like(model, tokenizer, sentences, output_layer)
    assert len(ours) == len(expected[output_layer]) == len(sentences) >= 20
    for index, (mine, theirs) in enumerate(zip(ours, expected[output_layer])):
        assert mine.shape == theirs.shape, f"sentence {index}"
        assert np.abs(mine - theirs).max() <= bilm_tolerance(model.config, theirs), f"sentence {index} {sentences[index][:3]}"


def test_parity_does_not_depend_on_batching(converted, sentences, expected):
    """Stateless: the same sentences in batches of 5 still match the reference's single batch."""
    model = ElmoModel.from_pretrained(converted).eval()
    tokenizer = ElmoTokenizer.from_pretrained(converted)
    for mine, theirs in zip(sents2elmo_like(model, tokenizer, sentences, -2, batch_size=5), expected[-2]):
        assert np.abs(mine - theirs).max() <= bilm_tolerance(model.config, theirs)


def test_fixture_covers_the_hard_cases(sentences):
    words = [word for sentence in sentences for word in sentence]
    chars = read_dictionary(MODEL_DIR / "char.dic")
    assert len(sentences) >= 20
    assert any(len(word) > 48 for word in words), "long words"
    assert any(char not in chars for word in words for char in word), "OOV characters"
    assert "<bos>" in words, "literal boundary token"


# The dictionary input layer --------------------------------------------------------------------------


@pytest.fixture(scope="module")
def model_and_tokenizer():
    return load_model_from_elmoformanylangs(MODEL_DIR)


def test_config_describes_the_dictionary_input_layer(model_and_tokenizer):
    model, _ = model_and_tokenizer
    config = model.config
    chars = read_dictionary(MODEL_DIR / "char.dic")
    words = read_dictionary(MODEL_DIR / "word.dic")
    assert config.char_scheme == "dictionary"
    assert config.char_vocab_size == len(chars) + 1
    assert config.lstm_forget_bias == 0.0 and config.use_skip_connections
    pad = chars["<pad>"] + 1
    assert config.bos_char_ids == [chars["<eow>"] + 1, chars["<bos>"] + 1, chars["<bow>"] + 1] + [pad] * 47
    assert config.eos_char_ids == [chars["<eow>"] + 1, chars["<eos>"] + 1, chars["<bow>"] + 1] + [pad] * 47
    assert config.word_vocab_size == len(words)
    assert (config.bos_word_id, config.eos_word_id) == (words["<bos>"], words["<eos>"])
    assert torch.all(model.char_encoder.char_embedding.weight[0] == 0)
    assert torch.any(model.char_encoder.char_embedding.weight[pad] != 0), "the <pad> character row is trained"


def test_tokenizer_writes_rows_like_the_reference(model_and_tokenizer):
    model, tokenizer = model_and_tokenizer
    chars = read_dictionary(MODEL_DIR / "char.dic")
    words = read_dictionary(MODEL_DIR / "word.dic")
    shifted = {name: chars[name] + 1 for name in ("<bow>", "<eow>", "<pad>", "<oov>")}
    row = tokenizer.word_to_char_ids("今天龘")
    assert row[:5] == [shifted["<eow>"], chars["今"] + 1, chars["天"] + 1, shifted["<oov>"], shifted["<bow>"]]
    assert row[5:] == [shifted["<pad>"]] * 45
    long_word = "中华人民共和国" * 9
    assert tokenizer.word_to_char_ids(long_word) == tokenizer.word_to_char_ids(long_word[:48])
    assert tokenizer.word_to_id(long_word) == words[long_word[:48]] != words["<oov>"]
    assert tokenizer.word_to_id("没见过的词") == words["<oov>"]
    # A literal "<bos>" word gets the sentence-boundary row, as in the reference.
    assert tokenizer.word_to_char_ids("<bos>") == model.config.bos_char_ids
    encoding = tokenizer([["今天", "好"], ["好"]], is_split_into_words=True, padding=True, return_tensors="pt")
    assert encoding["word_ids"].tolist() == [[words["今天"], words["好"]], [words["好"], words["<pad>"]]]
    assert encoding["input_ids"][1, 1].eq(0).all(), "padded word positions are all zeros"
    assert tokenizer.decode(encoding["input_ids"][0]) == "今天 好"


def test_tokenizer_round_trips_through_save_pretrained(tmp_path, model_and_tokenizer, sentences):
    _, tokenizer = model_and_tokenizer
    tokenizer.save_pretrained(tmp_path)
    assert (tmp_path / "char_vocab.json").is_file() and (tmp_path / "word_vocab.json").is_file()
    for reloaded in (ElmoTokenizer.from_pretrained(tmp_path), AutoTokenizer.from_pretrained(tmp_path)):
        assert reloaded.char_scheme == "dictionary"
        assert reloaded.model_input_names == ["input_ids", "attention_mask", "word_ids"]
        before = tokenizer(sentences, is_split_into_words=True, padding=True, return_tensors="pt")
        after = reloaded(sentences, is_split_into_words=True, padding=True, return_tensors="pt")
        assert before.keys() == after.keys()
        for key in before:
            assert torch.equal(before[key], after[key]), key


def test_byte_scheme_is_unchanged(tmp_path):
    config = ElmoConfig()
    assert config.char_scheme == "bytes"
    assert config.bos_char_ids == [259, 257, 260] + [261] * 47
    assert config.eos_char_ids == [259, 258, 260] + [261] * 47
    tokenizer = ElmoTokenizer()
    assert "word_ids" not in tokenizer("今天 天气")
    tokenizer.save_pretrained(tmp_path)
    assert not (tmp_path / "char_vocab.json").exists()
    assert ElmoTokenizer.from_pretrained(tmp_path).char_scheme == "bytes"


def test_model_checks_word_ids(model_and_tokenizer):
    model, tokenizer = model_and_tokenizer
    encoding = tokenizer([["今天", "好"]], is_split_into_words=True, return_tensors="pt")
    with pytest.raises(ValueError, match="pass `word_ids`"):
        model(input_ids=encoding["input_ids"])
    with pytest.raises(ValueError, match="shape"):
        model(input_ids=encoding["input_ids"], word_ids=encoding["word_ids"][:, :1])
    with pytest.raises(ValueError, match="word id"):  # values are checked on request (forward reads no tensor value)
        model.validate_inputs(encoding["input_ids"], word_ids=encoding["word_ids"] + model.config.word_vocab_size)
    tiny = ElmoModel(
        ElmoConfig(char_embedding_dim=4, char_cnn_filters=[[1, 4]], num_highway_layers=1, projection_dim=4,
                   lstm_cell_dim=8, num_lstm_layers=1)
    )
    with pytest.raises(ValueError, match="no word embedding"):
        tiny(input_ids=ElmoTokenizer()("好", return_tensors="pt")["input_ids"], word_ids=torch.zeros(1, 1).long())


def test_config_rejects_bad_input_layers():
    with pytest.raises(ValueError, match="bos_char_ids is required"):
        ElmoConfig(char_scheme="dictionary", char_vocab_size=10)
    with pytest.raises(ValueError, match="char_scheme"):
        ElmoConfig(char_scheme="morphemes")
    row = [1] * 50
    with pytest.raises(ValueError, match="bos_word_id"):
        ElmoConfig(char_scheme="dictionary", char_vocab_size=10, bos_char_ids=row, eos_char_ids=row,
                   word_vocab_size=5, word_embedding_dim=3)
    with pytest.raises(ValueError, match="both be positive"):
        ElmoConfig(word_embedding_dim=3)


# Bad inputs ------------------------------------------------------------------------------------------


@pytest.fixture
def model_copy(tmp_path) -> Path:
    return Path(shutil.copytree(MODEL_DIR, tmp_path / "zh.model"))


@pytest.mark.parametrize("name", ["char.dic", "word.dic", "token_embedder.pkl", "encoder.pkl", "config.json"])
def test_missing_file(model_copy, name):
    (model_copy / name).unlink()
    with pytest.raises(ValueError, match=f"missing file: .*{name}"):
        load_model_from_elmoformanylangs(model_copy)


def test_wrong_shape_and_missing_and_unexpected_keys(model_copy):
    path = model_copy / "encoder.pkl"
    state = torch.load(path, weights_only=True)
    state["forward_layer_1.state_projection.weight"] = torch.zeros(3, 3)
    del state["backward_layer_0.state_linearity.bias"]
    state["forward_layer_2.input_linearity.weight"] = torch.zeros(1)
    torch.save(state, path)
    with pytest.raises(ValueError) as error:
        load_model_from_elmoformanylangs(model_copy)
    message = str(error.value)
    assert "encoder.pkl" in message
    assert "'forward_layer_1.state_projection.weight' has shape (3, 3), expected (8, 16)" in message
    assert "missing keys ['backward_layer_0.state_linearity.bias']" in message
    assert "unexpected keys ['forward_layer_2.input_linearity.weight']" in message


def test_embedding_table_must_cover_the_dictionary(model_copy):
    path = model_copy / "token_embedder.pkl"
    state = torch.load(path, weights_only=True)
    state["word_emb_layer.embedding.weight"] = state["word_emb_layer.embedding.weight"][:10]
    torch.save(state, path)
    with pytest.raises(ValueError, match="word.dic has ids .* outside the 10 rows"):
        load_model_from_elmoformanylangs(model_copy)


class NotATensor:
    pass


def test_refuses_pickles_that_are_not_plain_tensors(model_copy):
    torch.save({"projection.weight": NotATensor()}, model_copy / "token_embedder.pkl")
    with pytest.raises(ValueError, match="token_embedder.pkl cannot be loaded as plain tensors, so it is refused") as refused:
        load_model_from_elmoformanylangs(model_copy)
    # The project's advice only (issue 46.11): not torch's hint that weights_only=False "will likely succeed".
    message = str(refused.value)
    assert "NotATensor" in message and "weights_only" not in message and "likely succeed" not in message
    assert "\n" not in message
    (model_copy / "token_embedder.pkl").write_text("every word here is text\n")
    with pytest.raises(ValueError, match="cannot read .*token_embedder.pkl as a PyTorch file"):
        load_model_from_elmoformanylangs(model_copy)


def test_missing_specials(model_copy):
    lines = (model_copy / "char.dic").read_text(encoding="utf-8").splitlines()
    (model_copy / "char.dic").write_text("\n".join(l for l in lines if not l.startswith("<bow>")) + "\n", "utf-8")
    with pytest.raises(ValueError, match=r"char.dic lacks the special entries \['<bow>'\]"):
        load_model_from_elmoformanylangs(model_copy)


def test_missing_model_config_and_path_override(model_copy, tmp_path, sentences, expected):
    moved = tmp_path / "elsewhere.json"
    shutil.move(model_copy / "cnn_tiny.json", moved)
    with pytest.raises(ValueError, match="config-path"):
        load_model_from_elmoformanylangs(model_copy)
    model, tokenizer = load_model_from_elmoformanylangs(model_copy, config_path=moved)
    mine = sents2elmo_like(model, tokenizer, sentences[:3], -2)
    for index in range(3):
        assert np.abs(mine[index] - expected[-2][index]).max() <= bilm_tolerance(model.config, expected[-2][index])


def test_config_files_may_start_with_a_byte_order_mark(model_copy, sentences, expected):
    for name in ("config.json", "cnn_tiny.json"):
        path = model_copy / name
        path.write_bytes(b"\xef\xbb\xbf" + path.read_bytes())
    model, tokenizer = load_model_from_elmoformanylangs(model_copy)
    mine = sents2elmo_like(model, tokenizer, sentences[:2], -2)
    for index in range(2):
        assert np.abs(mine[index] - expected[-2][index]).max() <= bilm_tolerance(model.config, expected[-2][index])


def test_packaged_model_configs_are_the_fallback(model_copy):
    args = json.loads((model_copy / "config.json").read_text(encoding="utf-8"))
    args["config_path"] = "/users/somebody/configs/cnn_50_100_512_4096_sample.json"
    (model_copy / "config.json").write_text(json.dumps(args), encoding="utf-8")
    config, source = resolve_model_config(model_copy)
    assert config == PACKAGED_MODEL_CONFIGS["cnn_50_100_512_4096_sample.json"]
    assert config["token_embedder"]["word_dim"] == 100 and config["encoder"]["dim"] == 4096
    assert "cnn_50_100_512_4096_sample.json" in source


def test_read_dictionary_reproduces_the_reference_parser(tmp_path):
    path = tmp_path / "char.dic"
    path.write_text("好\t0\n \t1\n\u3000\t2\nab \t3\n好\t4\n", encoding="utf-8")
    # Whitespace-only tokens are stripped away and become U+3000; later lines win.
    assert read_dictionary(path) == {"好": 4, "\u3000": 2, "ab ": 3}
    path.write_text("a\tb\tc\n", encoding="utf-8")
    with pytest.raises(ValueError, match="token<TAB>id"):
        read_dictionary(path)


def test_cli_errors_leave_no_output(model_copy, tmp_path, capsys):
    (model_copy / "encoder.pkl").unlink()
    output = tmp_path / "out"
    assert cli.main(["--model-dir", str(model_copy), "--output", str(output)]) == 2
    assert "missing file" in capsys.readouterr().err
    assert not output.exists()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["zh.model"]


def test_cli_refuses_existing_output_and_overwrites_on_request(tmp_path, capsys):
    output = tmp_path / "out"
    output.mkdir()
    (output / "config.json").write_text("{}")  # an earlier output: --overwrite replaces only those
    (output / "keep.txt").write_text("x")
    assert cli.main(["--model-dir", str(MODEL_DIR), "--output", str(output)]) == 2
    assert "already exists" in capsys.readouterr().err
    assert (output / "keep.txt").exists()
    assert cli.main(["--model-dir", str(MODEL_DIR), "--output", str(output), "--overwrite"]) == 0
    assert not (output / "keep.txt").exists() and (output / "model.safetensors").is_file()


def test_convert_function_writes_a_loadable_folder(tmp_path):
    output = convert_elmoformanylangs_to_folder(MODEL_DIR, tmp_path / "out", tokenizer_kwargs={"segmenter": "chars"})
    tokenizer = AutoTokenizer.from_pretrained(output)
    assert tokenizer.segmenter == "chars"
    assert tokenizer.tokenize("今天天气") == ["今", "天", "天", "气"]


def test_export_to_bilm_tf_names_what_the_format_cannot_hold(converted, tmp_path):
    from hf_elmo.convert.bilm_hdf5 import export_folder_to_bilm

    with pytest.raises(ValueError, match="byte-scheme models without a word embedding.*ELMoForManyLangs"):
        export_folder_to_bilm(converted, tmp_path / "bilm")
    assert not (tmp_path / "bilm").exists()


# Fine-tuning a model with a word embedding ---------------------------------------------------------------


def test_collator_gives_word_ids_like_the_tokenizer(model_and_tokenizer, sentences):
    from hf_elmo import ElmoDataCollator

    _, tokenizer = model_and_tokenizer
    collate = ElmoDataCollator(tokenizer)
    pair = [list(sentences[0]), list(sentences[1])]
    batch = collate([{"words": words} for words in pair])
    encoding = tokenizer(pair, is_split_into_words=True, padding=True, return_tensors="pt")
    assert torch.equal(batch["word_ids"], encoding["word_ids"])
    assert torch.equal(batch["input_ids"], encoding["input_ids"])
    # Examples given as ids carry their word ids along.
    rows = [{"input_ids": encoding["input_ids"][i, :n], "word_ids": encoding["word_ids"][i, :n]}
            for i, n in enumerate(len(words) for words in pair)]
    assert torch.equal(collate(rows)["word_ids"], encoding["word_ids"])
    with pytest.raises(ValueError, match="some examples have word_ids and some do not"):
        collate([rows[0], {"input_ids": rows[1]["input_ids"]}])
    with pytest.raises(ValueError, match="example 0: word_ids must hold one id per word"):
        collate([{"input_ids": rows[0]["input_ids"], "word_ids": rows[0]["word_ids"][:-1]}])


@pytest.mark.parametrize("extra", [[], ["--token-features"], ["--no-freeze"]])
def test_finetune_tags_with_a_word_embedding_model(converted, tmp_path, extra, capsys):
    from hf_elmo.cli import main as hf_elmo_main

    def finetune_main(argv):
        return hf_elmo_main(["finetune", *argv])

    sentences = [[("张三", "B-PER"), ("在", "O"), ("北京", "B-LOC")], [("李四", "B-PER"), ("去", "O"), ("上海", "B-LOC")]]
    data = tmp_path / "train.txt"
    data.write_text("\n\n".join("\n".join(f"{w}\t{t}" for w, t in s) for s in sentences * 4) + "\n", encoding="utf-8")
    output = tmp_path / "tagger"
    arguments = ["train", "--model", str(converted), "--train", str(data), "--dev", str(data), "--epochs", "1",
                 "--output-dir", str(output)] + extra
    assert finetune_main(arguments) == 0
    assert finetune_main(["predict", "--model", str(output), "张三在北京", "李四"]) == 0
    results = [json.loads(line) for line in capsys.readouterr().out.strip().splitlines()[-2:]]
    assert ["".join(result["words"]) for result in results] == ["张三在北京", "李四"]
    assert all(len(result["tags"]) == len(result["words"]) for result in results)
    tagger = pipeline("elmo-token-classification", model=str(output), trust_remote_code=True)
    batched = tagger(["张三在北京", "李四"], batch_size=2, return_tags=True)
    assert [result["tags"] for result in batched] == [result["tags"] for result in results]
