"""benchmarks/msra_seen_entities.py: recall split by whether the tagger saw an entity in training."""

from __future__ import annotations

import importlib.util
import sys

from paths import REPO_ROOT


def load_script():
    sys.path.insert(0, str(REPO_ROOT / "benchmarks"))
    spec = importlib.util.spec_from_file_location("msra_seen_entities", REPO_ROOT / "benchmarks" / "msra_seen_entities.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_recall_counts_each_gold_entity_as_seen_or_new_and_found_or_missed():
    script = load_script()
    gold = [(list("张三在北京"), ["B-PER", "I-PER", "O", "B-LOC", "I-LOC"]),
            (list("李四去上海"), ["B-PER", "I-PER", "O", "B-LOC", "I-LOC"])]
    predicted = [["B-PER", "I-PER", "O", "B-LOC", "O"],  # 北京 cut short: missed
                 ["B-PER", "I-PER", "O", "B-LOC", "I-LOC"]]
    known = {("PER", "张三"), ("LOC", "北京"), ("PER", "上海")}  # 上海 seen, but as another type: new
    assert script.recall_by_novelty(gold, predicted, known) == {"seen": (1, 2), "new": (2, 2)}
