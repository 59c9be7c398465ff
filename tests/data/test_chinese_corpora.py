"""The Chinese corpora read from PyPI packages, with the counts DATA.md documents."""

import pytest

import hf_elmo.cli

from hf_elmo.pretraining.chinese_corpora import bmes_to_bio, msra_official_split, peoples_daily_sentences, pos_to_entity_bio, reviews, split_peoples_daily


def test_peoples_daily_sentences_and_fixed_split():
    sentences = peoples_daily_sentences()
    assert len(sentences) == 47_592
    assert sum(len(words) for words, _ in sentences) == 1_121_447
    split = split_peoples_daily()
    assert {name: len(part) for name, part in split.items()} == {"train": 38_073, "dev": 4_759, "test": 4_760}
    assert split == split_peoples_daily()  # seeded: the same split every time
    as_text = {name: {" ".join(words) for words, _ in part} for name, part in split.items()}
    # Sentences are assigned by index; identical sentence texts may still occur in two parts, but few do.
    assert len(as_text["test"] & as_text["train"]) < 0.05 * len(as_text["test"])


def test_entity_tags_from_pos_tags():
    assert pos_to_entity_bio(["nt", "n", "w", "nr", "nr", "ns", "ns", "v", "ns"]) == [
        "B-ORG", "O", "O", "B-PER", "I-PER", "B-LOC", "I-LOC", "O", "B-LOC"
    ]
    assert bmes_to_bio(["O", "B-PER", "M-PER", "E-PER", "S-LOC"]) == ["O", "B-PER", "I-PER", "I-PER", "B-LOC"]


def test_reviews_are_deduplicated_and_labelled():
    data = reviews()
    assert 17_000 < len(data) < 17_500
    assert len({text for text, _ in data}) == len(data)
    assert {label for _, label in data} == {0, 1}


def test_msra_official_split():
    split = msra_official_split()
    assert len(split["train"]) == 50_658 and len(split["test"]) == 4_631
    assert "".join(split["test"][0][0]).startswith("中共中央致中国致公党十一大的贺词")
    assert sum(len(chars) for chars, _ in split["test"]) == 172_601


def test_write_pretraining_corpus_leaves_user_files_named_like_its_temporaries_alone(tmp_path, monkeypatch):
    """The writer once used the fixed names train.txt.tmp / dev.txt.tmp and so replaced a user's own files of
    those names; a failed write must also leave neither a half-written file nor a stray temporary behind."""
    import hf_elmo.pretraining.data
    from hf_elmo.pretraining import chinese_corpora

    # Tiny stand-ins for the real corpora (reading and segmenting them takes minutes).
    monkeypatch.setattr(chinese_corpora, "split_peoples_daily", lambda seed: {"train": [(["我", "们"], ["r", "r"])], "dev": [(["好"], ["a"])], "test": []})
    monkeypatch.setattr(chinese_corpora, "reviews", lambda: [("很 好", 1)])
    monkeypatch.setattr(chinese_corpora, "msra_official_split", lambda: {"train": [(["中", "国"], ["B-LOC", "E-LOC"])], "test": []})
    monkeypatch.setattr(hf_elmo.pretraining.data, "segment_raw_text", lambda lines, segmenter: (" ".join(text.split()) for text in lines))
    for name in ("train.txt.tmp", "dev.txt.tmp"):
        (tmp_path / name).write_text("notes\n", encoding="utf-8")
    assert chinese_corpora.write_pretraining_corpus(tmp_path) == {"train.txt": 3, "dev.txt": 1}
    assert (tmp_path / "train.txt").read_text(encoding="utf-8") == "我 们\n很 好\n中国\n"
    for name in ("train.txt.tmp", "dev.txt.tmp"):
        assert (tmp_path / name).read_text(encoding="utf-8") == "notes\n"

    def broken_reviews():
        raise OSError("disk gone")

    monkeypatch.setattr(chinese_corpora, "reviews", broken_reviews)
    (tmp_path / "train.txt").unlink()
    with pytest.raises(OSError, match="disk gone"):
        chinese_corpora.write_pretraining_corpus(tmp_path)
    assert sorted(path.name for path in tmp_path.iterdir()) == ["dev.txt", "dev.txt.tmp", "train.txt.tmp"]
    assert (tmp_path / "train.txt.tmp").read_text(encoding="utf-8") == "notes\n"


def test_write_pretraining_corpus_refuses_an_output_that_is_a_file(tmp_path):
    from hf_elmo.pretraining.chinese_corpora import write_pretraining_corpus

    (tmp_path / "afile").write_text("mine\n", encoding="utf-8")
    with pytest.raises(ValueError, match="afile is a file, not a folder"):
        write_pretraining_corpus(tmp_path / "afile")


SHOPPING_CSV = (
    "cat,label,review\n"
    "平板,1,\ufeff小米平板很好用，屏幕清楚\n"
    "水果,0,苹果烂了\n"
    "平板,0,\n"
    "手机,1,\"小米手机,拍照好\"\n"
    "水果,0,苹果烂了\n"
)


def test_shopping_review_part_is_a_fixed_hash_of_the_text():
    from hf_elmo.pretraining.chinese_corpora import shopping_review_part

    # Pinned values: a change of the hash would silently move reviews between pretraining and test.
    texts = ("苹果烂了", "小米手机,拍照好", "很好", "房间干净", "一般")
    assert [shopping_review_part(text) for text in texts] == ["train", "train", "test", "train", "dev"]
    parts = [shopping_review_part(f"评论{i}") for i in range(2000)]
    assert 0.77 < parts.count("train") / 2000 < 0.83 and 0.08 < parts.count("test") / 2000 < 0.12
    assert parts != [shopping_review_part(f"评论{i}", salt="x") for i in range(2000)]


def test_online_shopping_split_reads_labels_and_keeps_duplicates_together(tmp_path):
    from hf_elmo.pretraining.chinese_corpora import online_shopping_reviews, shopping_review_part, split_online_shopping

    path = tmp_path / "shop.csv"
    path.write_text(SHOPPING_CSV, encoding="utf-8")
    rows = online_shopping_reviews(path)
    assert rows[0] == {"category": "平板", "label": 1, "text": "小米平板很好用，屏幕清楚"}  # BOM gone, empty row dropped
    assert [row["text"] for row in rows] == ["小米平板很好用，屏幕清楚", "苹果烂了", "小米手机,拍照好", "苹果烂了"]
    parts = split_online_shopping(path)
    assert sum(map(len, parts.values())) == 4
    for name, part in parts.items():
        assert all(shopping_review_part(row["text"]) == name for row in part)
    assert sum(row["text"] == "苹果烂了" for row in parts[shopping_review_part("苹果烂了")]) == 2


def test_online_shopping_refuses_a_file_that_is_not_the_csv(tmp_path):
    from hf_elmo.pretraining.chinese_corpora import online_shopping_reviews

    path = tmp_path / "bad.csv"
    path.write_text("label,text\n1,好\n", encoding="utf-8")
    with pytest.raises(ValueError, match="expected the header"):
        online_shopping_reviews(path)
    path.write_text("cat,label,review\n水果,2,好\n", encoding="utf-8")
    with pytest.raises(ValueError, match="bad.csv:2"):
        online_shopping_reviews(path)


def test_corpus_shopping_command_writes_labelled_parts_and_train_only_pretraining_text(tmp_path, monkeypatch, capsys):
    import hf_elmo.pretraining.data
    from hf_elmo.pretraining import chinese_corpora

    monkeypatch.setattr(hf_elmo.pretraining.data, "segment_raw_text", lambda lines, segmenter: (" ".join(text) for text in lines))
    path = tmp_path / "shop.csv"
    path.write_text(SHOPPING_CSV, encoding="utf-8")
    out = tmp_path / "out"
    assert hf_elmo.cli.main(["corpus", "shopping", "--input", str(path), "--output-dir", str(out)]) == 0
    parts = chinese_corpora.split_online_shopping(path)
    for name, rows in parts.items():
        sentiment = (out / f"{name}.sentiment.tsv").read_text(encoding="utf-8").splitlines()
        assert sentiment == [f"{row['label']}\t{row['text']}" for row in rows]
        category = (out / f"{name}.category.tsv").read_text(encoding="utf-8").splitlines()
        assert category == [f"{row['category']}\t{row['text']}" for row in rows]
    pretrain = (out / "pretrain.txt").read_text(encoding="utf-8").splitlines()
    assert pretrain == [" ".join(row["text"]) for row in parts["train"]]
    assert f"pretrain.txt={len(parts['train'])}" in capsys.readouterr().out
    assert hf_elmo.cli.main(["corpus", "shopping", "--input", str(tmp_path / "missing.csv"), "--output-dir", str(out)]) == 2

def test_split_reviews_is_seeded_and_its_test_part_stays_out_of_the_pretraining_corpus(tmp_path, monkeypatch):
    import hf_elmo.pretraining.data
    from hf_elmo.pretraining import chinese_corpora

    fake_reviews = [(f"评论{i}", i % 2) for i in range(40)]
    monkeypatch.setattr(chinese_corpora, "reviews", lambda: list(fake_reviews))
    split = chinese_corpora.split_reviews(seed=7)
    assert split == chinese_corpora.split_reviews(seed=7)
    assert split != chinese_corpora.split_reviews(seed=8)
    assert len(split["test"]) == 4 and sorted(split["train"] + split["test"]) == sorted(fake_reviews)
    monkeypatch.setattr(chinese_corpora, "split_peoples_daily", lambda seed: {"train": [], "dev": [(["好"], ["a"])], "test": []})
    monkeypatch.setattr(chinese_corpora, "msra_official_split", lambda: {"train": [], "test": []})
    monkeypatch.setattr(hf_elmo.pretraining.data, "segment_raw_text", lambda lines, segmenter: iter(list(lines)))
    chinese_corpora.write_pretraining_corpus(tmp_path, seed=7)
    written = set((tmp_path / "train.txt").read_text(encoding="utf-8").split())
    assert written == {text for text, _ in split["train"]}
    assert not written & {text for text, _ in split["test"]}


# The seven files of `corpus shopping` are one unit (issue 37 #3) ------------------------------------------------


@pytest.fixture
def shopping(tmp_path, monkeypatch):
    """A CSV, an output folder holding a complete earlier split (salt "old"), and a fake jieba."""
    import hf_elmo.pretraining.data
    from hf_elmo.pretraining import chinese_corpora

    monkeypatch.setattr(hf_elmo.pretraining.data, "segment_raw_text", lambda lines, segmenter: (" ".join(text) for text in lines))
    path = tmp_path / "shop.csv"
    rows = "".join(f"类{i % 3},{i % 2},评论{i}号\n" for i in range(200))
    path.write_text("cat,label,review\n" + rows, encoding="utf-8")
    out = tmp_path / "out"
    chinese_corpora.write_online_shopping(path, out, salt="old")
    return path, out, {name: (out / name).read_text(encoding="utf-8") for name in chinese_corpora.SHOPPING_FILES}


def snapshot(out):
    return {path.name: path.read_text(encoding="utf-8") for path in out.iterdir()}


def test_shopping_refuses_to_replace_results_without_overwrite(shopping, capsys):
    import hf_elmo.pretraining.data

    path, out, before = shopping
    assert hf_elmo.cli.main(["corpus", "shopping", "--input", str(path), "--output-dir", str(out), "--salt", "new"]) == 2
    assert "--overwrite" in capsys.readouterr().err
    assert snapshot(out) == before
    assert hf_elmo.cli.main(["corpus", "shopping", "--input", str(path), "--output-dir", str(out), "--salt", "new",
                                 "--overwrite"]) == 0
    after = snapshot(out)
    assert set(after) == set(before) and after != before


@pytest.mark.parametrize("fault", [KeyboardInterrupt, lambda: OSError(28, "No space left on device")])
def test_an_interrupted_or_failed_shopping_run_leaves_the_previous_set_whole(shopping, monkeypatch, fault):
    import hf_elmo.pretraining.data

    path, out, before = shopping

    def segment_then_fail(lines, segmenter):
        yield "一 句"
        raise fault() if not isinstance(fault, type) else fault

    monkeypatch.setattr(hf_elmo.pretraining.data, "segment_raw_text", segment_then_fail)
    status = hf_elmo.cli.main(["corpus", "shopping", "--input", str(path), "--output-dir", str(out), "--salt", "new",
                                   "--overwrite"])
    assert status == (130 if fault is KeyboardInterrupt else 2)
    assert snapshot(out) == before  # pretrain.txt is still the one of the same split as the test files


KILLED_SHOPPING = """
import os, sys
import hf_elmo.pretraining.data
from hf_elmo.utils import io as file_io
from hf_elmo.pretraining import chinese_corpora
hf_elmo.pretraining.data.segment_raw_text = lambda lines, segmenter: (" ".join(text) for text in lines)
csv, out, moment = sys.argv[1:]
if moment == "while writing":
    real_open = open
    def open_then_die(path, *args, **kwargs):
        if str(path).endswith("pretrain.txt"):
            os._exit(9)
        return real_open(path, *args, **kwargs)
    chinese_corpora.open = open_then_die
else:  # while moving the complete set in
    moved = []
    real_replace = os.replace
    def replace_then_die(source, destination):
        real_replace(source, destination)
        moved.append(destination)
        if len(moved) == 4:
            os._exit(9)
    file_io.os.replace = replace_then_die
chinese_corpora.write_online_shopping(csv, out, salt="new", overwrite=True)
"""


@pytest.mark.parametrize("moment", ["while writing", "while moving in"])
def test_a_killed_shopping_run_is_finished_or_undone_by_the_next(shopping, tmp_path, moment):
    import subprocess
    import sys

    from hf_elmo.pretraining import chinese_corpora
    from hf_elmo.utils.io import remove_stale_temporaries

    path, out, before = shopping
    killed = subprocess.run([sys.executable, "-c", KILLED_SHOPPING, str(path), str(out), moment])
    assert killed.returncode == 9
    assert [p.name for p in out.iterdir() if p.name.startswith(".")]  # what the killed run left
    expected = tmp_path / "expected"
    chinese_corpora.write_online_shopping(path, expected, salt="new")
    chinese_corpora.write_online_shopping(path, tmp_path / "rerun", salt="other")  # another folder is not swept
    assert [p.name for p in out.iterdir() if p.name.startswith(".")]
    remove_stale_temporaries(out / "online_shopping")  # what the next run does first
    assert snapshot(out) == (before if moment == "while writing" else snapshot(expected))
    chinese_corpora.write_online_shopping(path, out, salt="new", overwrite=True)
    assert snapshot(out) == snapshot(expected)
