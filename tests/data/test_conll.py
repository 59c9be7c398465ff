"""Word-level tagged data and label<TAB>text files (conll.py): readers, checks, label ids."""

import logging

import pytest
from finetune_helpers import NOT_UTF8, write_conll

from hf_elmo.finetuning.conll import (
    DataError, TaggedSentence, encode_tags, label_list, read_classification_file, read_conll, read_text_lines,
    sentences_from_dataset, sentences_from_pairs,
)


def test_conll_formats(tmp_path):
    path = tmp_path / "mixed.txt"
    path.write_bytes(
        "-DOCSTART- -X- -X- O\r\n\r\nEU NNP B-NP B-ORG\r\nrejects VBZ B-VP O\r\n\r\n"
        "New York\tB-LOC\n张三 B-PER\n\n\n".encode("utf-8")
    )
    sentences = read_conll(path)
    assert [(s.words, s.tags) for s in sentences] == [
        (["EU", "rejects"], ["B-ORG", "O"]),
        (["New York", "张三"], ["B-LOC", "B-PER"]),
    ]
    assert sentences[1].where(1) == f"{path}:7"


@pytest.mark.parametrize(
    "content,message",
    [
        ("a\tO\nlonely\n", r":2: expected 'word<TAB>tag'"),
        ("a\tO\n\tO\n", r":2: expected"),
        ("a\tO\nb\t\n", r":2: expected"),
        ("a\tO\nb\tB X\n", r":2: tag 'B X' contains whitespace"),
        ("", "no sentences found"),
        ("\n\n  \n", "no sentences found"),
    ],
)
def test_malformed_conll_is_reported_with_file_and_line(tmp_path, content, message):
    path = tmp_path / "bad.txt"
    path.write_text(content, encoding="utf-8")
    with pytest.raises(DataError, match=message):
        read_conll(path)


def test_jsonl_and_pairs_check_word_and_tag_counts(tmp_path):
    path = tmp_path / "data.jsonl"
    path.write_text('{"words": ["a", "b"], "tags": ["O", "O"]}\n{"words": ["a"], "tags": ["O", "B-PER"]}\n')
    with pytest.raises(DataError, match=r"data.jsonl:2: 1 words but 2 tags"):
        read_conll(path)
    with pytest.raises(DataError, match="sentence 2 has 1 words but 0 tags"):
        sentences_from_pairs([(["a"], ["O"]), (["b"], [])])
    with pytest.raises(DataError, match="not found"):
        read_conll(tmp_path / "missing.txt")


def test_dataset_rows_with_class_label_names():
    class Names:
        names = ["O", "B-PER"]

    class Column:
        feature = Names()

    class FakeDataset(list):
        features = {"ner_tags": Column()}

    rows = FakeDataset([{"tokens": ["Alice", "ran"], "ner_tags": [1, 0]}])
    assert [(s.words, s.tags) for s in sentences_from_dataset(rows)] == [(["Alice", "ran"], ["B-PER", "O"])]


def test_unseen_labels_error_or_map_to_o(tmp_path, caplog):
    path = write_conll(tmp_path / "test.txt", [(["Alice", "in", "Paris"], ["B-PER", "O", "B-MISC"])])
    sentences = read_conll(path)
    label2id = {"O": 0, "B-PER": 1}
    with pytest.raises(DataError, match=r"test.txt:3: label 'B-MISC' does not occur in the training data"):
        encode_tags(sentences, label2id)
    with caplog.at_level(logging.WARNING, logger="hf_elmo.finetuning.conll"):
        examples = encode_tags(sentences, label2id, unseen_label="O", split="test")
    assert examples[0]["labels"] == [1, 0, 0]
    assert "B-MISC" in caplog.text


def test_jsonl_reader_reports_non_utf8_bytes(tmp_path):
    bad = tmp_path / "bad.jsonl"
    bad.write_bytes(b'{"words": ["a"], "tags": ["O"]}\n' + NOT_UTF8)
    with pytest.raises(DataError, match=r"bad.jsonl:2: not UTF-8"):
        read_conll(bad)


def test_a_few_hand_written_examples_may_each_have_their_own_label():
    from hf_elmo.finetuning.conll import check_classification_labels

    check_classification_labels([("好吃", "food"), ("好用", "phone"), ("好看", "film")])  # no error
    many = [(f"text {i}", f"label {i % 12}") for i in range(20)]
    with pytest.raises(ValueError, match="12 distinct labels for 20 examples"):
        check_classification_labels(many)


def test_text_lines_and_label_text_files(tmp_path):
    lines = tmp_path / "lines.txt"
    lines.write_bytes("\ufeffa\r\nb\rc\n\n".encode("utf-8"))  # a byte-order mark, three kinds of line end, a blank line
    assert read_text_lines(lines) == ["a", "b", "c", ""]
    lines.write_bytes(b"ok\n" + NOT_UTF8)
    with pytest.raises(DataError, match=r"lines.txt:2: not UTF-8"):
        read_text_lines(lines)
    pairs = tmp_path / "train.tsv"
    pairs.write_text("pos\tgood film\n\nneg\tbad film\n", encoding="utf-8")
    assert read_classification_file(str(pairs)) == [("good film", "pos"), ("bad film", "neg")]  # (text, label)
    pairs.write_text("pos\tfine\nno tab here\n", encoding="utf-8")
    with pytest.raises(DataError, match=r"train.tsv:2: expected 'label<TAB>text'"):
        read_classification_file(str(pairs))
    pairs.write_text("\n\n", encoding="utf-8")
    with pytest.raises(DataError, match="no examples found"):
        read_classification_file(str(pairs))


def test_label_list_puts_o_first_and_each_types_tags_together():
    sentences = [TaggedSentence(["a", "b", "c"], ["I-PER", "B-LOC", "O"]),
                 TaggedSentence(["d", "e", "f"], ["B-PER", "I-LOC", "B-MISC"])]
    assert label_list(sentences) == ["O", "B-LOC", "I-LOC", "B-MISC", "B-PER", "I-PER"]


def test_a_deeply_nested_jsonl_line_is_one_error_naming_the_line(tmp_path):
    """Issue 37 #11: json.loads raised RecursionError (a traceback) on such a line."""
    import pytest

    from hf_elmo.finetuning.conll import read_jsonl
    from hf_elmo.finetuning.conll import DataError

    path = tmp_path / "deep.jsonl"
    path.write_text('{"words": ["a"], "tags": ["O"]}\n' + "[" * 100_000 + "]" * 100_000 + "\n", encoding="utf-8")
    with pytest.raises(DataError, match=r"deep\.jsonl:2: the JSON is nested too deeply"):
        read_jsonl(path)
