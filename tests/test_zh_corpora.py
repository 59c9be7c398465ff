"""The Chinese corpora read from PyPI packages, with the counts DATA.md documents."""

from hf_elmo.zh_corpora import bmes_to_bio, msra_official_split, peoples_daily_sentences, pos_to_entity_bio, reviews, split_peoples_daily


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
