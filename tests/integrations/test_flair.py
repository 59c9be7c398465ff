"""hf_elmo.integrations.flair: ELMo vectors in a flair SequenceTagger, trained with flair's ModelTrainer, saved with the
tagger as where the model comes from (never its weights) and loaded again from there.

flair (0.15) requires transformers<5: these tests run in CI's transformers 4.x environment (.ci/run) and are skipped
where flair is not installed."""

from __future__ import annotations

import pickle

import numpy as np
import pytest
import torch

flair = pytest.importorskip("flair")

from flair.data import Sentence  # noqa: E402
from flair.datasets import ColumnCorpus  # noqa: E402
from flair.models import SequenceTagger  # noqa: E402
from flair.trainers import ModelTrainer  # noqa: E402

from hf_elmo import Embedder  # noqa: E402
from hf_elmo.integrations.flair import ElmoTokenEmbeddings  # noqa: E402
from hub_helpers import tiny_model, tiny_tokenizer  # noqa: E402

# A tiny NER set in CoNLL columns (word, tag): two sentence patterns, names and places.
PEOPLE, PLACES = ["张伟", "李四", "王五", "赵六"], ["南京", "上海", "北京", "杭州"]
WORDS = [["小米", "发布", "了", "新", "手机", "。"], ["今天", "天气", "很", "好"], []]


def conll_sentences() -> list[list[tuple[str, str]]]:
    sentences = []
    for i, person in enumerate(PEOPLE):
        for j, place in enumerate(PLACES):
            if (i + j) % 2:
                sentences.append([(person, "B-PER"), ("住在", "O"), (place, "B-LOC"), ("。", "O")])
            else:
                sentences.append([("我们", "O"), ("去", "O"), (place, "B-LOC"), ("找", "O"), (person, "B-PER")])
    return sentences


def write_conll(path, sentences) -> None:
    path.write_text("\n\n".join("\n".join(f"{word} {tag}" for word, tag in sentence) for sentence in sentences) + "\n",
                    encoding="utf-8")


@pytest.fixture(scope="module")
def model_folder(tmp_path_factory):
    folder = tmp_path_factory.mktemp("elmo")
    tiny_model(seed=5).save_pretrained(folder)
    tiny_tokenizer().save_pretrained(folder)
    return folder


@pytest.fixture(autouse=True)
def flair_on_cpu(monkeypatch):
    monkeypatch.setattr(flair, "device", torch.device("cpu"))


@pytest.mark.parametrize("layers", ["all", "top", "average", "mix", 1])
def test_tokens_get_the_embedders_vectors(model_folder, layers):
    embeddings = ElmoTokenEmbeddings(model_folder, layers=layers, batch_size=2)
    sentences = [Sentence(words) if words else Sentence("") for words in WORDS]
    embeddings.embed(sentences)
    expected = Embedder(str(model_folder), device="cpu", batch_size=2).embed(WORDS, layers=layers)
    width = 2 * tiny_model(seed=5).config.projection_dim
    assert embeddings.embedding_length == width * (3 if layers == "all" else 1)
    for sentence, words, vectors in zip(sentences, WORDS, expected):
        assert [token.text for token in sentence] == words
        if layers == "all":  # (L + 1, words, 2P) -> each word's layers side by side
            vectors = np.transpose(vectors, (1, 0, 2)).reshape(len(words), embeddings.embedding_length)
        got = np.stack([token.get_embedding().numpy() for token in sentence]) if words else vectors
        np.testing.assert_array_equal(got, vectors)  # the same batches: the same numbers


def test_options_are_checked_and_the_weights_are_no_parameters(model_folder):
    with pytest.raises(ValueError, match="layers must be one of"):
        ElmoTokenEmbeddings(model_folder, layers="bottom")
    with pytest.raises(ValueError, match="out of range"):
        ElmoTokenEmbeddings(model_folder, layers=7)
    embeddings = ElmoTokenEmbeddings(model_folder, layers="top")
    assert embeddings.state_dict() == {} and list(embeddings.parameters()) == []
    assert embeddings.to_params()["model"] == str(model_folder.resolve())
    # Pickling (older flair pickled embeddings whole) keeps the source and options, and loads the model again.
    data = pickle.dumps(embeddings)
    assert len(data) < 4096, len(data)
    copy = pickle.loads(data)
    sentence, again = Sentence(WORDS[0]), Sentence(WORDS[0])
    embeddings.embed(sentence)
    copy.embed(again)
    assert copy.embedder is not embeddings.embedder
    assert torch.equal(sentence[2].get_embedding(), again[2].get_embedding())


def test_sequence_tagger_trains_saves_reloads_and_tags_the_same(model_folder, tmp_path):
    data = tmp_path / "conll"
    data.mkdir()
    sentences = conll_sentences()
    write_conll(data / "train.txt", sentences[:12])
    write_conll(data / "dev.txt", sentences[12:14])
    write_conll(data / "test.txt", sentences[14:])
    corpus = ColumnCorpus(data, {0: "text", 1: "ner"}, train_file="train.txt", dev_file="dev.txt",
                          test_file="test.txt")
    torch.manual_seed(0)
    tagger = SequenceTagger(hidden_size=8, embeddings=ElmoTokenEmbeddings(model_folder, layers="average"),
                            tag_dictionary=corpus.make_label_dictionary("ner", add_unk=False), tag_type="ner",
                            use_crf=True)
    before = {name: value.clone() for name, value in tagger.state_dict().items()}
    result = ModelTrainer(tagger, corpus).train(tmp_path / "run", learning_rate=0.5, mini_batch_size=4, max_epochs=3,
                                                 create_file_logs=False, create_loss_file=False,
                                                 use_final_model_for_eval=True)  # the tagger in memory = final-model.pt
    assert "test_score" in result
    assert any(not torch.equal(before[name], value) for name, value in tagger.state_dict().items())  # it trained

    saved = tmp_path / "run" / "final-model.pt"
    state = torch.load(saved, map_location="cpu", weights_only=False)
    assert not [name for name in state["state_dict"] if name.startswith("embeddings.")]  # no ELMo weights
    assert state["embeddings"]["model"] == str(model_folder.resolve())
    assert state["embeddings"]["__cls__"] == "ElmoTokenEmbeddings"

    loaded = SequenceTagger.load(saved)
    assert isinstance(loaded.embeddings, ElmoTokenEmbeddings)
    assert loaded.embeddings.embedder.model.name_or_path == str(model_folder.resolve())
    texts = [[word for word, _ in sentence] for sentence in sentences] + [["李四", "去", "杭州", "了"]]
    tagged = {}
    for name, model in (("trained", tagger), ("loaded", loaded)):
        model.eval()
        batch = [Sentence(words) for words in texts]
        model.predict(batch, mini_batch_size=5)
        # BIO tags are read as spans: the entities found, with their tag and score
        tagged[name] = [[(span.text, span.tag, round(span.score, 5)) for span in sentence.get_spans("ner")]
                        for sentence in batch]
    assert tagged["loaded"] == tagged["trained"]
    assert sum(map(len, tagged["trained"])) >= 4, tagged["trained"]  # it tags entities, not only O
    assert {tag for spans in tagged["trained"] for _, tag, _ in spans} <= {"PER", "LOC"}
