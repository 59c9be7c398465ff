"""benchmarks/eval_zh_model.py end to end on a tiny random model with its LM softmax (no shared data)."""

from __future__ import annotations

import importlib.util
import json
import math
from pathlib import Path

import numpy as np
import pytest
import torch

from hf_elmo import ElmoTokenizer
from hf_elmo.pretraining.language_model import ElmoForPreTraining
from paths import REPO_ROOT
from small_models import tiny_config

pytest.importorskip("sklearn")
pytest.importorskip("jieba")  # the 小米 files need 小米 kept as one word

SCRIPT = REPO_ROOT / "benchmarks" / "eval_zh_model.py"
REVIEWS = {
    "train": [("质量很好，很满意", 1), ("太差了，再也不买", 0), ("物流很快，好评", 1), ("坏了，退货", 0),
              ("非常喜欢这个", 1), ("不好用，失望", 0)],
    "test": [("很好，推荐", 1), ("很差，失望", 0)],
}


@pytest.fixture(scope="module")
def evaluation():
    spec = importlib.util.spec_from_file_location("eval_zh_model", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def save_tiny_pretraining_run(folder: Path) -> Path:
    torch.manual_seed(0)
    vocabulary = ["<S>", "</S>", "<UNK>", "小米", "的", "了", "。"]
    ElmoForPreTraining(tiny_config(lm_vocab=vocabulary)).save_pretrained(folder)
    ElmoTokenizer().save_pretrained(folder)
    return folder


def write_shopping_csv(path: Path) -> Path:
    rows = ["cat,label,review"]
    for category, words in (("水果", ["苹果很甜", "橙子新鲜", "香蕉好吃", "葡萄不错"]), ("书籍", ["这本书好看", "小说情节精彩", "作者写得好", "印刷清楚"])):
        rows += [f"{category},1,{text}第{number}次" for text in words for number in range(8)]  # 32 distinct each
    rows.append("书籍,0,")  # an empty review, as the real file has
    path.write_text("\ufeff" + "\n".join(rows) + "\n", encoding="utf-8")
    return path


def test_evaluate_runs_end_to_end_and_writes_json_and_markdown(evaluation, tmp_path, monkeypatch):
    model = save_tiny_pretraining_run(tmp_path / "run")
    csv_path = write_shopping_csv(tmp_path / "shopping.csv")
    results = evaluation.evaluate(str(model), shopping_csv=str(csv_path), reviews_split=REVIEWS,
                                  dev_lines=["小米 的 手机 了 。", "今天 天气 好 。"])
    perplexity = results["dev_perplexity"]
    # 9 words + one sentence boundary per sentence; a random softmax over 7 words sits near 7, never below 1.
    assert perplexity["sentences"] == 2 and perplexity["predictions"] == 11 and 1 < perplexity["perplexity"] < 50
    xiaomi = results["xiaomi"]
    assert xiaomi["occurrences"] == {"xiaomi.txt": 22, "pooled": 34}
    assert set(xiaomi["same_sense_nearest_neighbour_by_layer"]) == {"0", "1", "2"}
    # Layer 0 gives every 小米 one vector: ties go to the earlier occurrence, a grain sentence in both files.
    assert xiaomi["same_sense_nearest_neighbour_by_layer"]["0"] == {"xiaomi.txt": 12, "pooled": 18}
    assert 0 <= xiaomi["readme_command_grain_in_top5"] <= 5
    polysemy = results["polysemy"]
    assert polysemy["occurrences"] == 48 and {w: f["occurrences"] for w, f in polysemy["words"].items()} == {
        "苹果": 12, "运动": 12, "单位": 12, "花": 12}
    # Layer 0: one vector per word, so every occurrence's nearest neighbour is the word's first sentence (6 of 12).
    assert polysemy["same_sense_nearest_neighbour_by_layer"]["0"] == 4 * 6
    reviews = results["reviews_sentiment"]
    assert (reviews["train_size"], reviews["test_size"], reviews["classes"]) == (6, 2, 2)
    assert set(reviews["elmo_mean_pooled_logreg"]) == {"average", "layer 0", "layer 1", "layer 2"}
    shopping = results["shopping_categories"]
    assert 0 < shopping["test_size"] < shopping["train_size"] and shopping["classes"] == 2
    table = evaluation.markdown_table(results)
    assert "| 小米 same-sense nearest neighbour, layer 0 | 12/22 (xiaomi.txt), 18/34 (both files pooled) |" in table
    assert "| other words (polysemy.tsv) same-sense nearest neighbour, layer 0 | 24/48 (苹果 6/12, 运动 6/12, 单位 6/12, 花 6/12) |" in table

    monkeypatch.setattr(evaluation, "evaluate", lambda *args, **kwargs: results)
    assert evaluation.main(["--model", str(model), "--out", str(tmp_path / "r.json"), "--markdown", str(tmp_path / "r.md")]) == 0
    assert json.loads((tmp_path / "r.json").read_text(encoding="utf-8")) == json.loads(json.dumps(results))
    assert (tmp_path / "r.md").read_text(encoding="utf-8") == table


def test_encoder_only_folder_has_no_perplexity(evaluation, tmp_path):
    from hf_elmo import ElmoModel

    ElmoModel(tiny_config()).save_pretrained(tmp_path)
    assert evaluation.dev_perplexity(str(tmp_path), dev_lines=["小米 。"]) is None
    assert evaluation.dev_perplexity(None) is None


def test_same_sense_nearest_neighbours_counts_and_tie_rule(evaluation):
    vectors = np.array([[1.0, 0.0], [0.9, 0.1], [0.0, 1.0], [0.1, 0.9]])
    assert evaluation.same_sense_nearest_neighbours(vectors, ["a", "a", "b", "b"]) == 4
    assert evaluation.same_sense_nearest_neighbours(vectors, ["a", "b", "a", "b"]) == 0
    assert evaluation.same_sense_nearest_neighbours(np.ones((3, 2)), ["a", "a", "b"]) == 2  # all tie: rows 1, 2 -> 0; row 0 -> 1


def test_sense_files_match_their_labels_and_refuse_a_line_without_xiaomi(evaluation, tmp_path):
    from hf_elmo import Embedder, ElmoModel

    folder = REPO_ROOT / "docs" / "examples"
    for name, senses in evaluation.SENSE_FILES.items():
        lines = [line for line in (folder / name).read_text(encoding="utf-8").splitlines() if line.strip()]
        assert len(lines) == len(senses) and all(line.count("小米") == 1 for line in lines)
    embedder = Embedder(ElmoModel(tiny_config()), tokenizer=ElmoTokenizer(), device="cpu")
    with pytest.raises(ValueError, match="line 2"):
        evaluation.word_occurrences(embedder, {"x.txt": (["我买了小米。", "我买了大米。"], ["grain", "grain"])})


def test_polysemy_file_is_read_by_word_and_refuses_bad_lines(evaluation, tmp_path):
    words = evaluation.read_polysemy_file(REPO_ROOT / "docs" / "examples" / "polysemy.tsv")
    for word, (sentences, senses) in words.items():
        assert len(sentences) == 12 and sorted(set(senses.count(sense) for sense in senses)) == [6]
        assert all(word in sentence for sentence in sentences)
    path = tmp_path / "p.tsv"
    path.write_text("花\tflower\t花开了。\n花\tspend\t花了钱。\n\n", encoding="utf-8")
    assert evaluation.read_polysemy_file(path) == {"花": (["花开了。", "花了钱。"], ["flower", "spend"])}
    path.write_text("花\tflower\t花开了。\n花\tflower\t一朵花。\n", encoding="utf-8")
    with pytest.raises(ValueError, match="exactly two senses"):
        evaluation.read_polysemy_file(path)
    path.write_text("\n\n", encoding="utf-8")
    with pytest.raises(ValueError, match="holds no sentences"):
        evaluation.read_polysemy_file(path)
    path.write_text("花\tflower 花开了。\n", encoding="utf-8")
    with pytest.raises(ValueError, match="line 1: expected word<TAB>sense<TAB>sentence"):
        evaluation.read_polysemy_file(path)


def test_shopping_split_is_seeded_skips_empty_reviews_and_reads_the_byte_order_mark(evaluation, tmp_path):
    path = write_shopping_csv(tmp_path / "shopping.csv")
    train, test = evaluation._shopping_split(path)
    from hf_elmo.pretraining.chinese_corpora import shopping_review_part

    assert (train, test) == evaluation._shopping_split(path)
    assert 0 < len(test) < len(train) and len(train) + len(test) <= 64  # the dev part left out, the empty review skipped
    assert all(shopping_review_part(text) == "test" for text, _ in test)
    assert all(shopping_review_part(text) == "train" for text, _ in train)
    assert {category for _, category in train + test} == {"水果", "书籍"}
    assert math.isclose(len(evaluation.subsample(train, 5)), 5)
