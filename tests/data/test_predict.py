"""From word tags to entity spans (finetuning/predict.py; the spans are text_elmo.py's): split_tag, tag_spans, word_offsets, entities_from_tags."""

from hf_elmo.finetuning.predict import entities_from_tags, split_tag, tag_spans, word_offsets


def test_tag_spans_bio_bioes_and_stray_inside_tags():
    assert tag_spans(["B-PER", "I-PER", "O", "B-LOC", "B-LOC", "I-ORG"]) == [
        ("PER", 0, 2),
        ("LOC", 3, 4),
        ("LOC", 4, 5),
        ("ORG", 5, 6),
    ]
    assert tag_spans(["S-PER", "B-LOC", "M-LOC", "E-LOC", "E-LOC"]) == [("PER", 0, 1), ("LOC", 1, 4), ("LOC", 4, 5)]
    assert tag_spans(["I-PER", "I-PER", "I-LOC"]) == [("PER", 0, 2), ("LOC", 2, 3)]
    assert tag_spans([]) == []


def test_entities_carry_character_offsets():
    text = "张三在北京工作。"
    words = ["张三", "在", "北京", "工作", "。"]
    assert word_offsets(text, words) == [(0, 2), (2, 3), (3, 5), (5, 7), (7, 8)]
    entities = entities_from_tags(words, ["B-PER", "O", "B-LOC", "O", "O"], text=text, scores=[0.9, 1, 0.5, 1, 1])
    assert entities == [
        {"entity": "PER", "word": "张三", "start": 0, "end": 2, "word_start": 0, "word_end": 1, "score": 0.9},
        {"entity": "LOC", "word": "北京", "start": 3, "end": 5, "word_start": 2, "word_end": 3, "score": 0.5},
    ]
    pre_split = entities_from_tags(["New", "York"], ["B-LOC", "I-LOC"])
    assert pre_split[0]["word"] == "New York" and pre_split[0]["start"] is None



def test_split_tag_reads_known_prefixes_only():
    assert [split_tag(tag) for tag in ("B-PER", "I-LOC", "E-ORG", "S-MISC", "M-LOC")] == [
        ("B", "PER"), ("I", "LOC"), ("E", "ORG"), ("S", "MISC"), ("M", "LOC"),
    ]
    for outside in ("O", "X-PER", "B-", "PER", ""):  # no known prefix, or no entity type: outside any entity
        assert split_tag(outside) == ("O", None), outside
