from hf_elmo.finetuning.character_words import (
    WORD_POSITIONS,
    character_labelled_decision,
    is_one_character,
    single_character_share,
    characters_as_words,
    group_tokens,
    words_and_positions,
)
from hf_elmo.finetuning.predict import tag_spans


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


class Sentence:
    def __init__(self, words):
        self.words = words


# A social-media sentence labelled one character a line: Chinese, Latin letters, digits, punctuation and emoji.
WEIBO_STYLE = [Sentence(list("今天和Amy在1号线见面") + ["！", "👍🏻", "❤️", "👨‍👩‍👧", "é"]),
               Sentence(list("转发@小米：OK") + ["🙂"])]


def test_character_labelled_files_are_recognised_by_their_shape_not_their_script():
    assert all(is_one_character(token) for sentence in WEIBO_STYLE for token in sentence.words)
    assert single_character_share(WEIBO_STYLE) == 1.0
    read_as_characters, why = character_labelled_decision(WEIBO_STYLE)
    assert read_as_characters and why.startswith("the training data is read as character-labelled: 100.0% of its "
                                                 "tokens are one character each (from 90% on)")


def test_files_of_words_are_read_as_words_whatever_their_script_and_the_figure_is_given():
    words = [Sentence(["张三", "在", "北京", "工作", "。"]), Sentence(["Alice", "met", "Bob", "in", "Rome", "."])]  # 3 of 11
    assert not is_one_character("北京") and not is_one_character("ab") and not is_one_character("")
    read_as_characters, why = character_labelled_decision(words)
    assert not read_as_characters
    assert why.startswith("the training data is read as words: 27.3% of its tokens are one character each")
    assert character_labelled_decision([]) == (False, why.replace("27.3%", "0.0%"))
