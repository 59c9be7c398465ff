import pytest

from hf_elmo.char_words import (
    WORD_POSITIONS,
    character_bigrams,
    characters_as_words,
    group_tokens,
    lexicon_from_counts,
    lexicon_matches,
    words_and_positions,
)
from hf_elmo.tagging import tag_spans


def fixed_segmenter(words):
    """A stand-in for jieba that cuts the one expected text into `words`."""

    def segment(text):
        assert text == "".join(words), text
        return list(words)

    return segment


def test_characters_are_grouped_into_the_segmenter_words_with_bmes_positions():
    chars = list("张三在北京工作")
    words, word_index, positions = words_and_positions(chars, fixed_segmenter(["张三在", "北京", "工作"]))
    assert words == ["张三在", "北京", "工作"]
    assert word_index == [0, 0, 0, 1, 1, 2, 2]
    assert positions == ["B", "M", "E", "B", "E", "B", "E"]


def test_an_entity_across_a_word_boundary_keeps_its_character_tags():
    """张三 (PER) ends inside the jieba word 张三在: the characters keep their own tags, and the span read back
    from the character tags is exactly the gold one, so nothing is lost by grouping."""
    chars = list("张三在北京")
    tags = ["B-PER", "I-PER", "O", "B-LOC", "I-LOC"]
    words, word_index, positions = words_and_positions(chars, fixed_segmenter(["张三在", "北京"]))
    assert len(word_index) == len(tags) == len(chars)
    assert tag_spans(tags) == [("PER", 0, 2), ("LOC", 3, 5)]
    assert ["".join(chars[i] for i in range(len(chars)) if word_index[i] == w) for w in range(len(words))] == words


def test_a_word_ending_inside_a_token_is_extended_to_the_token():
    tokens = ["我", "爱", "NLP", "很", "久"]  # a multi-character token, as in mixed files
    groups = group_tokens(tokens, fixed_segmenter(["我爱N", "LP很", "久"]))
    assert groups == [(0, 4), (4, 5)]
    assert words_and_positions(tokens, fixed_segmenter(["我", "爱", "NLP", "很久"]))[2] == ["S", "S", "S", "B", "E"]


def test_jieba_grouping_covers_every_character_once():
    chars = list("中共中央致中国致公党十一大的贺词 ，")
    words, word_index, positions = words_and_positions(chars)
    assert "".join(words) == "".join(chars)
    assert word_index == sorted(word_index) and len(word_index) == len(chars)
    assert len(set(word_index)) == len(words)


def test_a_character_example_becomes_words_with_each_characters_word_and_position():
    example = {"words": list("张三在北京"), "labels": [1, 2, 0, 3, 4]}
    converted = characters_as_words(example, fixed_segmenter(["张三", "在", "北京"]))
    assert converted["words"] == ["张三", "在", "北京"]
    assert converted["token_word_index"] == [0, 0, 1, 2, 2]
    assert [WORD_POSITIONS[p] for p in converted["token_positions"]] == ["B", "E", "S", "B", "E"]
    assert converted["labels"] == example["labels"] and example["words"] == list("张三在北京")  # input untouched


def test_the_characters_are_kept_when_asked_for():
    example = {"words": list("张三在北京")}
    assert "characters" not in characters_as_words(example, fixed_segmenter(["张三", "在", "北京"]))
    kept = characters_as_words(example, fixed_segmenter(["张三", "在", "北京"]), keep_characters=True)
    assert kept["characters"] == list("张三在北京") and kept["words"] == ["张三", "在", "北京"]


def test_each_character_is_paired_with_the_next_when_bigrams_are_asked_for():
    example = {"words": list("张三在北京")}
    assert "bigrams" not in characters_as_words(example, fixed_segmenter(["张三", "在", "北京"]))
    kept = characters_as_words(example, fixed_segmenter(["张三", "在", "北京"]), keep_bigrams=True)
    assert kept["bigrams"] == ["张三", "三在", "在北", "北京", "京"]  # the last character has none after it
    assert character_bigrams(["我"]) == ["我"] and character_bigrams([]) == []
    assert character_bigrams(["1998", "年"]) == ["1998年", "年"]  # tokens of several characters join whole


def test_a_lexicon_from_plain_counts_holds_every_prefix_of_its_words():
    assert lexicon_from_counts({"北京大学": 5, "北京": 3}) == {"北": 0, "北京": 3, "北京大": 0, "北京大学": 5}
    # Without the prefixes the search would stop at 北京大 and never reach 北京大学.
    assert lexicon_matches(list("北京大学"), {"北京大学": 5})["lexicon_words"] == []
    assert lexicon_matches(list("北京大学"), lexicon_from_counts({"北京大学": 5}))["lexicon_words"] == ["北京大学"]
    with pytest.raises(ValueError, match="every word needs a count > 0"):
        lexicon_from_counts({"北京": 0})


def test_lexicon_matches_find_every_word_each_character_begins_is_inside_of_and_ends():
    lexicon = lexicon_from_counts({"北京": 30, "北京大学": 2, "大学": 20, "大学生": 5, "学生": 40, "在": 99})
    found = lexicon_matches(list("在北京大学生"), lexicon)
    assert found["lexicon_words"] == ["北京", "北京大学", "大学", "大学生", "学生"]
    assert found["lexicon_weights"] == [30.0, 2.0, 20.0, 5.0, 40.0]
    assert found["lexicon_matches"] == [
        [[], [], []],  # 在: a word of one character is not a lexicon word (the character has its own vector)
        [[0, 1], [], []],  # 北 begins 北京, 北京大学
        [[], [1], [0]],  # 京 is inside 北京大学, ends 北京
        [[2, 3], [1], []],  # 大 begins 大学, 大学生 and is inside 北京大学
        [[4], [3], [1, 2]],  # 学
        [[], [], [3, 4]],  # 生 ends 大学生, 学生
    ]


def test_lexicon_matches_join_whole_tokens_and_take_jiebas_dictionary_by_default():
    lexicon = lexicon_from_counts({"1998年": 7})
    assert lexicon_matches(["1998", "年", "春"], lexicon)["lexicon_words"] == ["1998年"]
    assert lexicon_matches(["199", "8年"], lexicon)["lexicon_words"] == ["1998年"]
    assert lexicon_matches([], lexicon) == {"lexicon_words": [], "lexicon_weights": [], "lexicon_matches": []}
    found = lexicon_matches(list("我在北京大学读书"))
    assert {"北京", "北京大学", "大学", "读书"} <= set(found["lexicon_words"])
    assert all(weight > 0 for weight in found["lexicon_weights"])
    example = characters_as_words({"words": list("北京大学")}, fixed_segmenter(["北京大学"]), keep_lexicon=True,
                                  lexicon=lexicon_from_counts({"北京": 3}))
    assert example["lexicon_words"] == ["北京"] and example["lexicon_matches"][1] == [[], [], [0]]


def test_a_word_added_to_jieba_is_a_lexicon_word_too():
    import jieba

    assert "粥铺小米" not in lexicon_matches(list("这家粥铺小米粥好"))["lexicon_words"]
    jieba.add_word("粥铺小米", 3)
    try:
        found = lexicon_matches(list("这家粥铺小米粥好"))
        number = found["lexicon_words"].index("粥铺小米")
        assert found["lexicon_weights"][number] == 3.0 and number in found["lexicon_matches"][2][0]
    finally:
        jieba.del_word("粥铺小米")
    assert "粥铺小米" not in lexicon_matches(list("这家粥铺小米粥好"))["lexicon_words"]
