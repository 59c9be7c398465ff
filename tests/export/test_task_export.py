"""The ONNX export of task models (issue 44) and the client it ships (issue 46, item 6).

A BiLSTM+CRF word tagger, a character tagger and a sentence classifier, exported, give through the shipped
`elmo_client.py`, in a process where torch (and transformers, tokenizers, hf_elmo) cannot be imported, the tags,
entity spans and labels of the PyTorch model on text with punctuation, Latin words, digits, emoji and empty strings.
The client's tokenizer equals `ElmoTokenizer` on thousands of random mixed-Unicode strings, offsets included.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys

import numpy as np
import pytest
import torch

pytest.importorskip("onnx")
pytest.importorskip("onnxruntime")

import task_models  # noqa: E402
from client_fuzz import random_strings  # noqa: E402
from task_models import TEXTS  # noqa: E402

from hf_elmo import ElmoForTokenClassification, ElmoModel, ElmoTokenizer  # noqa: E402
from hf_elmo.cli import main as cli_main  # noqa: E402
from hf_elmo.models.elmo.text_elmo import without_surrogates  # noqa: E402
from hf_elmo.convert.onnx import export_onnx  # noqa: E402
from hf_elmo.convert.onnx.client import ElmoClient, Tokenizer  # noqa: E402
from hf_elmo.convert.onnx.client_config import tokenizer_options  # noqa: E402
from hf_elmo.convert.onnx.heads import ExportRefused  # noqa: E402
from hf_elmo.finetuning.run import classify  # noqa: E402
from hf_elmo.finetuning.predict import tag  # noqa: E402

BLOCKED = ("torch", "transformers", "tokenizers", "hf_elmo")
RUN_CLIENT = """
import json, sys
sys.path.insert(0, sys.argv[1])
from elmo_client import ElmoClient
client = ElmoClient(sys.argv[1], threads=1)
texts = json.loads(sys.argv[2])
print(json.dumps({"predictions": client.predict(texts), "vectors": client.sentence_vectors(texts).tolist(),
                  "empty": [client.predict([]), client.embed([]), client.sentence_vectors([]).shape]}))
"""


@pytest.fixture(scope="module")
def blocked_path(tmp_path_factory):
    folder = tmp_path_factory.mktemp("blocked")
    for name in BLOCKED:
        (folder / name).mkdir()
        (folder / name / "__init__.py").write_text(f"raise ImportError('{name} is blocked in this test')\n")
    return folder


def run_without_torch(blocked_path, folder, texts) -> dict:
    environment = {**os.environ, "PYTHONPATH": str(blocked_path), "OMP_NUM_THREADS": "1"}
    result = subprocess.run([sys.executable, "-c", RUN_CLIENT, str(folder), json.dumps(texts)], env=environment,
                            capture_output=True, text=True, timeout=300, cwd=folder)
    assert result.returncode == 0, result.stderr[-3000:]
    return json.loads(result.stdout)


def spans(entities):
    return [(entity["entity"], entity["word"], entity["start"], entity["end"]) for entity in entities]


@pytest.mark.parametrize("make", [task_models.crf_tagger, task_models.character_tagger])
def test_taggers_give_the_pytorch_tags_and_spans_without_torch(make, blocked_path, tmp_path):
    model, tokenizer = make(), task_models.tokenizer()
    folder = export_onnx(model, tmp_path / "export", tokenizer=tokenizer)
    assert (folder / "elmo_client.py").is_file() and (folder / "client.json").is_file()
    got = run_without_torch(blocked_path, folder, TEXTS)
    expected = tag(model, tokenizer, TEXTS)
    for result, want, text in zip(got["predictions"], expected, TEXTS):
        assert result["words"] == want["words"] and result["tags"] == want["tags"]
        assert spans(result["entities"]) == spans(want["entities"])
        assert np.allclose([e["score"] for e in result["entities"]], [e["score"] for e in want["entities"]],
                           atol=1e-4)
        assert all(text[start:end] == word for word, (start, end) in zip(result["words"], result["offsets"]))
    assert sum(len(result["entities"]) for result in got["predictions"]) > 0  # the spans were really compared
    assert got["empty"] == [[], [], [0, model.config.hidden_size]]
    with torch.no_grad():
        from hf_elmo import Embedder

        vectors = Embedder(model.elmo, tokenizer=tokenizer, device="cpu").sentence_vectors(TEXTS)
    assert np.allclose(got["vectors"], vectors, atol=1e-5)


def test_a_classifier_gives_the_pytorch_labels_without_torch(blocked_path, tmp_path):
    model, tokenizer = task_models.classifier(), task_models.tokenizer()
    folder = export_onnx(model, tmp_path / "export", tokenizer=tokenizer)
    got = run_without_torch(blocked_path, folder, TEXTS)["predictions"]
    expected = classify(model, tokenizer, TEXTS)
    assert [result["label"] for result in got] == [want["label"] for want in expected]
    assert [result["label"] for result in got if not result["words"]] == [None, None]  # "" and "   "
    for result, want in zip(got, expected):
        assert result["scores"].keys() == want["scores"].keys()
        assert np.allclose(list(result["scores"].values()), list(want["scores"].values()), atol=1e-5)


def test_an_encoder_exports_its_layers_and_learned_mixes(tmp_path):
    torch.manual_seed(3)
    model = ElmoModel(task_models.tiny_config(num_output_representations=2, scalar_mix_layer_norm=True)).eval()
    with torch.no_grad():
        for mix in model.scalar_mixes:
            mix.scalar_parameters.normal_()
            mix.gamma.fill_(1.7)
    tokenizer = task_models.tokenizer()
    client = ElmoClient(export_onnx(model, tmp_path / "export", tokenizer=tokenizer))
    encoding = tokenizer(TEXTS, padding=True, return_tensors="pt")
    with torch.no_grad():
        expected = model(encoding["input_ids"], encoding["attention_mask"]).mixes.numpy()
    got = client.run({key: encoding[key].numpy() for key in ("input_ids", "attention_mask")})
    assert got["mixes"].shape == expected.shape
    assert np.allclose(got["mixes"], expected, atol=1e-5)


def test_a_layer_normalised_mix_and_own_word_vectors_in_a_linear_tagger(tmp_path):
    torch.manual_seed(4)
    model = task_models._randomised(ElmoForTokenClassification(task_models._config(
        task_models.TAGS, task_token_features=True, scalar_mix_layer_norm=True)), 4)
    tokenizer = task_models.tokenizer()
    client = ElmoClient(export_onnx(model, tmp_path / "export", tokenizer=tokenizer), batch_size=64)
    encoding = tokenizer(TEXTS, padding=True, return_tensors="pt")  # one batch: the mix normalises over it
    with torch.no_grad():
        expected = model(encoding["input_ids"], encoding["attention_mask"]).logits.numpy()
    got = client.run({key: encoding[key].numpy() for key in ("input_ids", "attention_mask")})["logits"]
    mask = encoding["attention_mask"].numpy().astype(bool)
    assert np.allclose(got[mask], expected[mask], atol=1e-4)


def test_the_client_tokenizes_as_elmo_tokenizer_on_random_strings(tmp_path):
    """Words, offsets and character ids on 3,000 random mixed-Unicode strings: surrogates, control characters,
    the punctuation where Python's unicodedata and the tokenizers library disagree, emoji, Greek sigmas."""
    texts = random_strings(3000)
    vocabulary = {s: i + 1 for i, s in enumerate(["<bos>", "<eos>", "<oov>", "<pad>", "<bow>", "<eow>", *"我们小米abcΣσς"])}
    tokenizers = [ElmoTokenizer(segmenter="jieba"), ElmoTokenizer(segmenter="chars", do_lower_case=True),
                  ElmoTokenizer(segmenter="whitespace"),
                  ElmoTokenizer(segmenter="jieba", char_scheme="dictionary", char_vocab=vocabulary, do_lower_case=True)]
    for number, elmo_tokenizer in enumerate(tokenizers):
        folder = tmp_path / str(number)
        elmo_tokenizer.save_pretrained(folder)
        client = Tokenizer(folder, json.loads(json.dumps(tokenizer_options(elmo_tokenizer))))
        for text in texts:
            words = client.words_of(text)
            assert [word for word, _, _ in words] == elmo_tokenizer.tokenize(text), repr(text)
            for word, start, end in words:
                written = without_surrogates(text[start:end])
                assert written == word or (elmo_tokenizer.do_lower_case and written.lower() == word), repr(text)
            if hasattr(elmo_tokenizer, "words_with_offsets"):  # the package's own offsets, where it has them
                assert [tuple(word) for word in words] == list(map(tuple, elmo_tokenizer.words_with_offsets(text)))
            assert [client.char_ids(word) for word, _, _ in words] == \
                [elmo_tokenizer.word_to_char_ids(word) for word, _, _ in words], repr(text)


def test_ids_outside_the_vocabulary_raise_and_no_texts_give_nothing(tmp_path):
    model, tokenizer = task_models.crf_tagger(), task_models.tokenizer()
    client = ElmoClient(export_onnx(model, tmp_path / "export", tokenizer=tokenizer))
    feeds = {key: value.numpy() for key, value in tokenizer(["Alice met Bob"], return_tensors="pt").items()}
    for bad in (-1, model.config.char_vocab_size):
        wrong = {**feeds, "input_ids": feeds["input_ids"].copy()}
        wrong["input_ids"][0, 0, 1] = bad
        with pytest.raises(ValueError, match=f"input_ids contains id {bad}, outside"):
            client.run(wrong)
    assert client.predict([]) == [] and client.tokenize([]) == [] and client.embed([]) == []
    assert client.sentence_vectors([]).shape == (0, model.config.hidden_size)
    with pytest.raises(TypeError, match="list of texts"):
        client.predict("one string")


def test_a_model_with_a_part_the_exporter_does_not_know_is_refused(tmp_path):
    model = task_models.crf_tagger()
    model.extra_layer = torch.nn.Linear(2, 2)  # e.g. a subclass's own layer
    with pytest.raises(ExportRefused, match=r"does not know its part\(s\) extra_layer; nothing was written"):
        export_onnx(model, tmp_path / "export", tokenizer=task_models.tokenizer())
    assert list(tmp_path.iterdir()) == []


def test_a_tagger_folder_exports_its_head_from_the_command_line(tmp_path, capsys):
    """`hf-elmo export` of a saved tagger writes the tagger (not its biLM alone), and --overwrite replaces the
    command's own earlier export (issue 46, item 5)."""
    model = task_models.crf_tagger()
    source = task_models.save(model, tmp_path / "ner")
    output = tmp_path / "ner-onnx"
    assert cli_main(["export", "--model", source, "--format", "onnx", "--output", str(output)]) == 0
    assert json.loads((output / "client.json").read_text())["kind"] == "token-classification"
    assert "UNEXPECTED" not in capsys.readouterr().err
    (output / "config.json").unlink(missing_ok=True)  # recognised by what export writes, not by a model's config
    assert cli_main(["export", "--model", source, "--format", "onnx", "--output", str(output), "--overwrite"]) == 0
    assert ElmoClient(output).predict(["Alice met Bob"])[0]["tags"] == tag(model, task_models.tokenizer(),
                                                                           ["Alice met Bob"])[0]["tags"]
    foreign = tmp_path / "photos"
    foreign.mkdir()
    (foreign / "holiday.jpg").write_bytes(b"\xff\xd8")
    assert cli_main(["export", "--model", source, "--output", str(foreign), "--overwrite"]) == 2
    assert (foreign / "holiday.jpg").exists()


def test_the_client_segments_with_the_models_jieba_user_dictionary(tmp_path):
    user_dict = tmp_path / "user_dict.txt"
    user_dict.write_text("张三在北京 100000 n\n", encoding="utf-8")
    tokenizer = ElmoTokenizer(segmenter="jieba", user_dict=str(user_dict))
    client = ElmoClient(export_onnx(task_models.crf_tagger(), tmp_path / "export", tokenizer=tokenizer))
    texts = ["我们喝小米粥。", "张三在北京工作。"]
    words = [[word for word, _, _ in sentence] for sentence in client.tokenize(texts)]
    assert words == [tokenizer.tokenize(text) for text in texts]
    assert "张三在北京" in words[1] and "张三在北京" not in task_models.tokenizer().tokenize(texts[1])
