"""Corpus files and vocabularies for pretraining (pretraining/data.py): reading, cutting, counting, saving."""

from __future__ import annotations

import pytest

from folder_listing import leftovers
from hf_elmo.pretraining.data import LineDataset, build_vocabulary, load_vocabulary, save_vocabulary
import paths

DATA = str(paths.FIXTURES / "bilm_tf" / "train" / "data.txt")


def test_build_vocabulary_orders_specials_then_frequency(tmp_path):
    corpus = tmp_path / "c.txt"
    corpus.write_text("b a a c\nc a b\n d \n", encoding="utf-8")
    assert build_vocabulary([corpus]) == ["<S>", "</S>", "<UNK>", "a", "b", "c", "d"]
    assert build_vocabulary([corpus], min_count=2) == ["<S>", "</S>", "<UNK>", "a", "b", "c"]
    assert build_vocabulary([corpus], max_size=4) == ["<S>", "</S>", "<UNK>", "a"]
    save_vocabulary(build_vocabulary([corpus]), tmp_path / "v.txt")
    assert load_vocabulary(tmp_path / "v.txt")[3] == "a"


@pytest.mark.parametrize(
    "text, message",
    [
        ("a\nb\n", "must start with the lines <S>, </S>, <UNK>"),
        ("<S>\n</S>\n<UNK>\nx y\n", ":4: expected one word per line"),
        ("<S>\n</S>\n<UNK>\n\nx\n", ":4: expected one word per line"),
        ("<S>\n</S>\n<UNK>\nx\nx\n", "appears more than once"),
    ],
)
def test_vocabulary_in_the_wrong_format_is_refused(tmp_path, text, message):
    path = tmp_path / "vocab.txt"
    path.write_text(text, encoding="utf-8")
    with pytest.raises(ValueError, match=message):
        load_vocabulary(path)


def test_long_sentences_are_cut_into_pieces(tmp_path):
    corpus = tmp_path / "c.txt"
    corpus.write_text(" ".join(str(i) for i in range(12)) + "\n\nx y\n", encoding="utf-8")
    dataset = LineDataset(corpus, max_words=5)
    assert [dataset[i] for i in range(len(dataset))] == [
        ["0", "1", "2", "3", "4"], ["5", "6", "7", "8", "9"], ["10", "11"], ["x", "y"]
    ]


def test_a_byte_order_mark_is_not_part_of_the_first_word(tmp_path, capsys):
    from hf_elmo.cli import main as cli_main
    from hf_elmo.pretraining.data import LineDataset, build_vocabulary

    raw = tmp_path / "raw.txt"
    raw.write_bytes("\ufeff小米 发布 了\r\n这家 小米\r\n".encode("utf-8"))
    assert LineDataset(raw)[0] == ["小米", "发布", "了"] and LineDataset(raw)[1] == ["这家", "小米"]
    words = build_vocabulary([raw])
    assert words[3] == "小米" and sorted(words[4:]) == sorted(["发布", "了", "这家"])
    assert cli_main(["corpus", "segment", "--input", str(raw), "--output", str(tmp_path / "s.txt"),
                     "--segmenter", "whitespace"]) == 0
    assert (tmp_path / "s.txt").read_text(encoding="utf-8").splitlines()[0] == "小米 发布 了"
    vocabulary = tmp_path / "v.txt"
    vocabulary.write_bytes("\ufeff<S>\n</S>\n<UNK>\n小米\n".encode("utf-8"))
    assert load_vocabulary(vocabulary) == ["<S>", "</S>", "<UNK>", "小米"]


def test_save_vocabulary_leaves_a_user_file_named_output_tmp_alone(tmp_path):
    (tmp_path / "v.txt.tmp").write_text("notes\n", encoding="utf-8")
    save_vocabulary(["<S>", "</S>", "<UNK>", "a"], tmp_path / "v.txt")
    assert (tmp_path / "v.txt.tmp").read_text(encoding="utf-8") == "notes\n"
    assert (tmp_path / "v.txt").read_text(encoding="utf-8") == "<S>\n</S>\n<UNK>\na\n"
    assert leftovers(tmp_path) == ["v.txt", "v.txt.tmp"]


def test_build_vocabulary_refuses_limits_that_leave_no_words(tmp_path):
    corpus = tmp_path / "c.txt"
    corpus.write_text("a a b\n", encoding="utf-8")
    with pytest.raises(ValueError, match="no word occurs at least 3 times"):
        build_vocabulary([corpus], min_count=3)
    with pytest.raises(ValueError, match="max_size 3 leaves no words"):
        build_vocabulary([corpus], max_size=3)
    with pytest.raises(ValueError, match="min_count must be at least 1"):
        build_vocabulary([corpus], min_count=0)
    assert build_vocabulary([corpus], max_size=4) == ["<S>", "</S>", "<UNK>", "a"]


def test_line_dataset_refuses_max_words_below_one():
    with pytest.raises(ValueError, match="max_words must be at least 1, got 0"):
        LineDataset(DATA, max_words=0)
