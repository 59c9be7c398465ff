"""ElmoTokenizer: the byte scheme of the references, the HF call API, segmentation and edge cases."""

import json

import numpy as np
import pytest
import torch

import hf_elmo
import hf_elmo.models.elmo.text_elmo as text_elmo
from hf_elmo import ElmoConfig, ElmoModel, ElmoTokenizer
from hf_elmo.utils.transformers_versions import TRANSFORMERS_MAJOR
from small_models import tiny_config_kwargs
from transformers import AutoTokenizer

PAD_WORD = [0] * 50


def char_ids(*raw):
    """A word's expected ids: begin-of-word, the given ids, end-of-word, char padding (all already +1)."""
    ids = [259, *raw, 260]
    return ids + [261] * (50 - len(ids))


@pytest.fixture(scope="module")
def tokenizer():
    return ElmoTokenizer()


# The examples of tests/fixtures/bilm_tf/README.md ------------------------------------------------


def test_readme_word_ids(tokenizer):
    assert tokenizer.word_to_char_ids("The") == [259, 85, 105, 102, 260] + [261] * 45
    assert tokenizer.word_to_char_ids("The") == char_ids(ord("T") + 1, ord("h") + 1, ord("e") + 1)


def test_readme_batch_without_boundaries(tokenizer):
    """Batcher gives (2, 5, 50) with <S>/</S>; our tokenizer leaves the boundaries to the model: (2, 3, 50)."""
    batch = [["The", "first", "sentence"], ["Second", "."]]
    encoded = tokenizer(batch, is_split_into_words=True, padding=True, return_tensors="pt")
    assert encoded["input_ids"].shape == (2, 3, 50)
    assert encoded["input_ids"][0, 0].tolist() == [259, 85, 105, 102, 260] + [261] * 45
    assert encoded["input_ids"][1, 2].tolist() == PAD_WORD  # positions after the sentence end are all 0
    assert encoded["attention_mask"].tolist() == [[1, 1, 1], [1, 1, 0]]


def test_readme_batch_with_boundaries_as_the_model_sees_it(tokenizer):
    """The ids the model feeds its character CNN are the Batcher's (2, 5, 50) rows, <S> and </S> included."""
    batch = [["The", "first", "sentence"], ["Second", "."]]
    torch.manual_seed(0)
    model = ElmoModel(ElmoConfig(**tiny_config_kwargs())).eval()
    model.set_lstm_implementation("reference")  # the plain model runs its char_encoder on every position
    start, end = model.sentence_boundary_char_ids().tolist()
    assert start == [259, 257, 260] + [261] * 47
    assert end == [259, 258, 260] + [261] * 47

    batcher = np.zeros((2, 5, 50), dtype=np.int64)  # what bilm-tf's Batcher(vocab, 50) returns
    for row, words in enumerate(batch):
        rows = [start] + [tokenizer.word_to_char_ids(word) for word in words] + [end]
        batcher[row, : len(rows)] = rows
    assert batcher[1, 4].tolist() == PAD_WORD

    seen = []
    hook = model.char_encoder.register_forward_pre_hook(lambda module, args: seen.append(args[0].clone()))
    try:
        with torch.no_grad():
            model(**tokenizer(batch, is_split_into_words=True, padding=True, return_tensors="pt"))
    finally:
        hook.remove()
    assert torch.equal(seen[0], torch.from_numpy(batcher.reshape(-1, 50)))  # all-zero rows past each sentence


def test_utf8_bytes_and_truncation(tokenizer):
    assert tokenizer.word_to_char_ids("é") == char_ids(0xC3 + 1, 0xA9 + 1)
    long_word = "x" * 200
    ids = tokenizer.word_to_char_ids(long_word)
    assert len(ids) == 50 and ids[0] == 259 and ids[49] == 260 and ids[1:49] == [ord("x") + 1] * 48
    # 67 Chinese characters = 201 bytes: cut to 48 bytes = 16 characters, as the references do.
    chinese = "中" * 67
    assert tokenizer.word_to_char_ids(chinese) == tokenizer.word_to_char_ids("中" * 16)
    # A cut inside a multi-byte character keeps the partial bytes (encode("utf-8")[:48]).
    ids = tokenizer.word_to_char_ids("a" + "中" * 20)
    assert [i - 1 for i in ids[1:49]] == list(("a" + "中" * 20).encode("utf-8")[:48])


# Input forms ---------------------------------------------------------------------------------


def test_single_string(tokenizer):
    encoded = tokenizer("Hello world")
    assert encoded["input_ids"] == [char_ids(*[b + 1 for b in b"Hello"]), char_ids(*[b + 1 for b in b"world"])]
    assert encoded["attention_mask"] == [1, 1]
    assert tokenizer("Hello world", return_tensors="pt")["input_ids"].shape == (1, 2, 50)


def test_list_of_strings_is_a_batch(tokenizer):
    encoded = tokenizer(["Hello world", "Hi"], padding=True)
    assert len(encoded["input_ids"]) == 2
    assert encoded["input_ids"][1][1] == PAD_WORD
    assert encoded["attention_mask"] == [[1, 1], [1, 0]]


def test_pre_split_words(tokenizer):
    one = tokenizer(["New York", "!"], is_split_into_words=True)
    assert one["input_ids"][0] == tokenizer.word_to_char_ids("New York")  # a pre-split word is kept whole
    assert one["attention_mask"] == [1, 1]
    batch = tokenizer([["a", "b"], ["c"]], is_split_into_words=True, padding=True, return_tensors="pt")
    assert batch["input_ids"].shape == (2, 2, 50)
    assert torch.equal(tokenizer.batch_to_ids([["a", "b"], ["c"]]), batch["input_ids"])
    with pytest.raises(TypeError, match="is_split_into_words"):
        tokenizer("a b", is_split_into_words=True)
    with pytest.raises(TypeError, match="strings"):
        tokenizer([["a", 3]], is_split_into_words=True)


def test_raw_text_and_pre_split_agree(tokenizer):
    text = "The cat sat on the mat ."
    assert tokenizer(text)["input_ids"] == tokenizer(text.split(), is_split_into_words=True)["input_ids"]


def test_bad_input_types(tokenizer):
    wrong_type = TypeError if TRANSFORMERS_MAJOR >= 5 else (TypeError, ValueError)  # 4.x checks inputs itself first
    with pytest.raises(wrong_type):
        tokenizer(42)
    with pytest.raises(wrong_type):
        tokenizer(["fine", 42])
    with pytest.raises(TypeError, match="unexpected arguments"):
        tokenizer("a", strides=2)  # transformers' own `stride` is accepted (it goes with return_overflowing_tokens)


# padding, truncation, tensors ---------------------------------------------------------------


def test_padding_modes(tokenizer):
    batch = ["a b c", "d"]
    assert tokenizer(batch)["attention_mask"] == [[1, 1, 1], [1]]  # no padding by default
    for padding in (True, "longest"):
        assert tokenizer(batch, padding=padding)["attention_mask"] == [[1, 1, 1], [1, 0, 0]]
    encoded = tokenizer(batch, padding="max_length", max_length=5, return_tensors="np")
    assert encoded["input_ids"].shape == (2, 5, 50)
    assert encoded["attention_mask"].tolist() == [[1, 1, 1, 0, 0], [1, 0, 0, 0, 0]]
    assert not encoded["input_ids"][1, 1:].any()
    with pytest.raises(ValueError, match="max_length"):
        tokenizer(batch, padding="max_length")
    with pytest.raises(ValueError, match="truncation=True"):
        tokenizer(batch, padding="max_length", max_length=2)
    with pytest.raises(ValueError, match="not a valid PaddingStrategy"):  # transformers' check
        tokenizer(batch, padding="sideways")
    with pytest.raises(ValueError, match="padding=True"):
        tokenizer(batch, return_tensors="pt")


def test_truncation_counts_words(tokenizer):
    encoded = tokenizer(["a b c d", "e"], truncation=True, max_length=2, padding=True, return_tensors="pt")
    assert encoded["input_ids"].shape == (2, 2, 50)
    assert encoded["input_ids"][0, 1].tolist() == tokenizer.word_to_char_ids("b")
    assert tokenizer("a b c", truncation=False, max_length=1)["attention_mask"] == [1, 1, 1]
    assert tokenizer(["a b c", "d"], padding="max_length", truncation=True, max_length=2)["attention_mask"] == [
        [1, 1],
        [1, 0],
    ]
    for bad in (-1, 2.5, "3"):  # -1 used to slice off the last word
        with pytest.raises(ValueError, match="max_length must be a whole number"):
            tokenizer(["a b c"], truncation=True, max_length=bad)


def test_return_tensors_and_attention_mask(tokenizer):
    pt = tokenizer(["a b", "c"], padding=True, return_tensors="pt")
    np_ = tokenizer(["a b", "c"], padding=True, return_tensors="np")
    assert pt["input_ids"].dtype == torch.int64 and isinstance(np_["input_ids"], np.ndarray)
    assert np.array_equal(pt["input_ids"].numpy(), np_["input_ids"])
    assert np.array_equal(pt["attention_mask"].numpy(), np_["attention_mask"])
    assert "attention_mask" not in tokenizer("a b", return_attention_mask=False)
    with pytest.raises(ValueError, match="return_tensors"):
        tokenizer("a", return_tensors="tf")
    words = tokenizer(["Hi, you", "x"], return_words=True)["words"]
    assert words == [["Hi", ",", "you"], ["x"]]


# transformers' tokenizer contract (issue 41 #5) -------------------------------------------------------------------


def test_encode_gives_the_rows_call_gives_and_decode_reads_them(tokenizer):
    assert tokenizer.encode("Hello, 世界") == tokenizer("Hello, 世界")["input_ids"]
    assert tokenizer.encode("a b c", max_length=2, truncation=True) == tokenizer("a b")["input_ids"]
    assert tokenizer.encode(["New York", "!"], is_split_into_words=True) == tokenizer.convert_tokens_to_ids(
        ["New York", "!"])
    assert tokenizer.encode("a b", return_tensors="pt").shape == (1, 2, 50)
    assert tokenizer.decode(tokenizer.encode("Hello, 世界 😀")) == "Hello , 世界 😀"


def test_call_takes_transformers_positional_order_and_reads_a_pair_as_one_sentence(tokenizer):
    """`tok(text, text_pair)`: the words of the text then of the pair, token_type_ids 0 then 1."""
    pair = tokenizer("Is it?", "Yes, it is.", return_token_type_ids=True)
    assert pair["input_ids"] == tokenizer("Is it? Yes, it is.")["input_ids"]
    assert pair["token_type_ids"] == [0, 0, 0, 1, 1, 1, 1, 1]
    batch = tokenizer(["a", "b c"], ["d e", "f"], padding=True, return_token_type_ids=True, return_tensors="pt")
    assert batch["token_type_ids"].tolist() == [[0, 1, 1], [0, 0, 1]]
    assert batch["attention_mask"].tolist() == [[1, 1, 1], [1, 1, 1]]
    assert tokenizer(["a", "b"], ["c"], is_split_into_words=True)["input_ids"] == tokenizer("a b c")["input_ids"]
    assert tokenizer(text="a", text_pair="b")["input_ids"] == tokenizer("a b")["input_ids"]
    assert tokenizer([("a", "b c"), ("d", "e")]) == tokenizer(["a", "d"], ["b c", "e"])  # a batch of pairs
    if TRANSFORMERS_MAJOR >= 5:  # 4.x's own input check refuses a batch of pairs of word lists
        assert tokenizer([(["a"], ["b", "c"])], is_split_into_words=True) == tokenizer(["a"], ["b c"])
    with pytest.raises(ValueError if TRANSFORMERS_MAJOR >= 5 else TypeError, match="text_pair`? must be"):  # 4.x's own
        tokenizer(["a", "b"], "c")
    # truncation of a pair as transformers truncates one: longest first, or only one side
    assert tokenizer("a b c", "d", truncation=True, max_length=3)["input_ids"] == tokenizer("a b d")["input_ids"]
    only_second = tokenizer("a b", "c d e", truncation="only_second", max_length=3, return_overflowing_tokens=True)
    assert only_second["input_ids"] == tokenizer("a b c")["input_ids"]
    assert only_second["overflowing_tokens"] == tokenizer("d e")["input_ids"]
    with pytest.raises(ValueError, match="only_first"):
        tokenizer("a b", "c d e", truncation=True, max_length=3, return_overflowing_tokens=True)
    with pytest.raises(ValueError, match="no token vocabulary to add to: every word is read by its characters"):
        tokenizer.add_tokens(["[NEW]"])


def test_every_init_argument_is_kept_and_a_saved_dictionary_tokenizer_loads_as_it_was(tmp_path):
    import inspect

    names = dictionary_tokenizer().init_kwargs
    for name, parameter in inspect.signature(ElmoTokenizer.__init__).parameters.items():
        assert parameter.default is inspect.Parameter.empty or name in names, name
    (tmp_path / "names.txt").write_text("张伟 10 nr\n", encoding="utf-8")
    original = ElmoTokenizer(char_scheme="dictionary", char_vocab=dictionary_tokenizer().char_vocab,
                             word_vocab={"<oov>": 0, "<pad>": 1, "张伟": 2}, user_dict=tmp_path / "names.txt")
    original.save_pretrained(tmp_path / "saved")
    saved = json.loads((tmp_path / "saved" / "tokenizer_config.json").read_text())
    assert not {"char_vocab", "word_vocab", "user_dict", "char_vocab_file"} & {k for k, v in saved.items() if v}
    loaded = ElmoTokenizer.from_pretrained(tmp_path / "saved")
    assert loaded.init_kwargs["char_vocab_file"].endswith("char_vocab.json")
    assert loaded.init_kwargs["user_dict"].endswith("jieba_user_dict.txt")
    assert loaded("张伟住在南京")["word_ids"] == original("张伟住在南京")["word_ids"] == [2, 0, 0, 0]


def test_padding_options_are_checked_as_transformers_checks_them(tokenizer):
    with pytest.raises(ValueError, match=r"truncation length \(5\) is not a multiple of pad_to_multiple_of \(4\)"):
        tokenizer(["a b c"], padding="max_length", truncation=True, max_length=5, pad_to_multiple_of=4)
    for bad in (0, -3, 2.5):
        with pytest.raises(ValueError, match="pad_to_multiple_of must be a whole number of words >= 1"):
            tokenizer(["a b c"], padding=True, pad_to_multiple_of=bad)
    assert tokenizer(["a b c", "d"], padding=True, padding_side="right")["attention_mask"] == [[1, 1, 1], [1, 0, 0]]
    with pytest.raises(ValueError, match="right only"):
        tokenizer(["a b c", "d"], padding=True, padding_side="left")
    left = ElmoTokenizer(truncation_side="left")
    encoded = left("a b c d", truncation=True, max_length=2, stride=1, return_overflowing_tokens=True)
    assert encoded["input_ids"] == tokenizer("c d")["input_ids"]
    assert encoded["overflowing_tokens"] == tokenizer("a b c")["input_ids"] and encoded["num_truncated_tokens"] == 2
    assert "overflowing_tokens" not in left(["a b c"], truncation=True, max_length=2, return_overflowing_tokens=True,
                                            return_tensors="pt")  # as transformers' Python tokenizers: lists only


def test_offsets_give_each_word_in_its_text_for_every_segmenter_and_scheme():
    """Issue 45 #6: `return_offsets_mapping=True` gives each word's (start, end) in its text (a dropped lone surrogate
    stays inside the word's span, a surrogate pair is one character)."""
    text = "张伟住在南京，2024年买了 iPhone 15😀！ＡＢＣ１２３ x-ray, İstanbul\x00ok\ud800 \ud83d\ude00。"
    for tokenizer in (*(ElmoTokenizer(segmenter=name) for name in ("jieba", "chars", "whitespace")),
                      ElmoTokenizer(segmenter="chars", do_lower_case=True), dictionary_tokenizer()):
        encoded = tokenizer([text, "a b"], return_offsets_mapping=True, return_words=True)
        words, offsets = encoded["words"][0], encoded["offset_mapping"][0]
        assert len(words) == len(offsets) > 5 and offsets == sorted(offsets) and encoded["offset_mapping"][1] == [
            (0, 1), (2, 3)]
        for word, (start, end) in zip(words, offsets):
            piece = text_elmo.without_surrogates(text[start:end])
            assert (piece.lower() if tokenizer.do_lower_case else piece) == word
        padded = tokenizer([text, "a b"], return_offsets_mapping=True, padding=True, return_tensors="pt")
        assert padded["offset_mapping"].shape == (2, len(words), 2) and padded["offset_mapping"][1, 2:].eq(0).all()
    pre_split = ElmoTokenizer()(["New York", "!"], is_split_into_words=True, return_offsets_mapping=True)
    assert pre_split["offset_mapping"] == [(0, 8), (0, 1)]  # as a fast tokenizer gives them: within each word


# save / load ---------------------------------------------------------------------------------


def test_save_and_load(tmp_path):
    original = ElmoTokenizer(segmenter="chars", do_lower_case=True)
    original.save_pretrained(tmp_path)
    saved = json.loads((tmp_path / "tokenizer_config.json").read_text())
    assert saved["tokenizer_class"] == "ElmoTokenizer" and saved["segmenter"] == "chars"
    for loaded in (ElmoTokenizer.from_pretrained(tmp_path), AutoTokenizer.from_pretrained(tmp_path)):
        assert isinstance(loaded, ElmoTokenizer)
        assert loaded.segmenter == "chars" and loaded.do_lower_case is True
        text = ["我爱北京 Hello", "Bye"]
        assert loaded(text, padding=True)["input_ids"] == original(text, padding=True)["input_ids"]


def test_a_failed_vocabulary_save_keeps_the_old_file_and_leaves_no_temporary(tmp_path, monkeypatch):
    tokenizer = ElmoTokenizer.from_pretrained(hf_elmo.DEFAULT_MODEL)
    tokenizer.save_pretrained(tmp_path)
    before = (tmp_path / "char_vocab.json").read_bytes()
    real_dump = json.dump

    def dump_half_then_fail(value, handle, **kwargs):
        real_dump(dict(list(value.items())[:10]), handle, **kwargs)
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(text_elmo.json, "dump", dump_half_then_fail)
    with pytest.raises(OSError, match="No space left"):
        tokenizer.save_vocabulary(str(tmp_path))
    assert (tmp_path / "char_vocab.json").read_bytes() == before
    assert sorted(path.name for path in tmp_path.iterdir() if path.name.startswith(".")) == []
    monkeypatch.setattr(text_elmo.json, "dump", real_dump)
    assert tokenizer.save_vocabulary(str(tmp_path)) == (str(tmp_path / "char_vocab.json"),)
    assert (tmp_path / "char_vocab.json").read_bytes() == before


def test_auto_tokenizer_from_model_folder(tmp_path):
    ElmoModel(ElmoConfig(**tiny_config_kwargs())).save_pretrained(tmp_path)
    ElmoTokenizer().save_pretrained(tmp_path)
    assert isinstance(AutoTokenizer.from_pretrained(tmp_path), ElmoTokenizer)


def test_decode(tokenizer):
    encoded = tokenizer(["Hello , 世界 😀", "x"], padding=True, return_tensors="pt")
    assert tokenizer.decode(encoded["input_ids"][0]) == "Hello , 世界 😀"
    assert tokenizer.decode(encoded["input_ids"][1]) == "x"  # padded positions are skipped
    # A batch (what transformers' batch_decode passes to decode) gives one string per sentence.
    assert tokenizer.batch_decode(encoded["input_ids"]) == ["Hello , 世界 😀", "x"]
    assert tokenizer.decode(encoded["input_ids"]) == ["Hello , 世界 😀", "x"]
    with pytest.raises(ValueError, match="flat list of ids"):
        tokenizer.decode([72, 101])


# Pre-tokenisation ----------------------------------------------------------------------------


def test_english_punctuation_split(tokenizer):
    assert tokenizer.tokenize("Hello, world! It's 3.5 (ok)") == [
        "Hello", ",", "world", "!", "It", "'", "s", "3", ".", "5", "(", "ok", ")"
    ]  # fmt: skip
    assert ElmoTokenizer(segmenter="whitespace").tokenize("Hello, world!") == ["Hello,", "world!"]
    assert ElmoTokenizer(do_lower_case=True).tokenize("The U.S.") == ["the", "u", ".", "s", "."]


def test_chinese_with_jieba():
    jieba_tokenizer = ElmoTokenizer(segmenter="jieba")
    auto = ElmoTokenizer()  # jieba is a dependency, so "auto" uses it
    assert jieba_tokenizer.chinese_segmentation == auto.chinese_segmentation == "jieba"
    words = jieba_tokenizer.tokenize("我爱北京天安门。")
    assert "北京" in words and "天安门" in words and words[-1] == "。"
    assert auto.tokenize("我爱北京天安门。") == words
    assert "".join(words) == "我爱北京天安门。"


def test_chinese_characters_fallback(monkeypatch):
    chars = ElmoTokenizer(segmenter="chars")
    assert chars.chinese_segmentation == "chars"
    assert chars.tokenize("我爱北京，NLP和Python3") == ["我", "爱", "北", "京", "，", "NLP", "和", "Python3"]
    # Without jieba installed, "auto" falls back to one word per CJK character and "jieba" refuses.
    monkeypatch.setattr(text_elmo, "_load_jieba", lambda: None)
    auto = ElmoTokenizer()
    assert auto.chinese_segmentation == "chars"
    assert auto.tokenize("我爱北京") == ["我", "爱", "北", "京"]
    with pytest.raises(ImportError, match="jieba"):
        ElmoTokenizer(segmenter="jieba")


def test_text_without_spaces_is_not_one_giant_word(tokenizer):
    text = "今天天气很好我们一起去公园散步吧然后去吃饭"
    assert len(tokenizer.tokenize(text)) > 5
    assert ElmoTokenizer(segmenter="whitespace").tokenize(text) == [text]  # the documented opt-out


def test_bad_tokenizer_options():
    with pytest.raises(ValueError, match="segmenter"):
        ElmoTokenizer(segmenter="spacy")
    with pytest.raises(ValueError, match="max_characters_per_token"):
        ElmoTokenizer(max_characters_per_token=2)


# Edge cases (policy documented in README.md) --------------------------------------------------


def test_empty_sentence(tokenizer):
    assert tokenizer("")["input_ids"] == []
    assert tokenizer("   ", return_tensors="pt")["input_ids"].shape == (1, 0, 50)
    encoded = tokenizer(["", "a b"], padding=True, return_tensors="pt")
    assert encoded["attention_mask"].tolist() == [[0, 0], [1, 1]]
    torch.manual_seed(0)
    model = ElmoModel(ElmoConfig(**tiny_config_kwargs())).eval()
    with torch.no_grad():
        output = model(**encoded, keep_sentence_boundaries=True)
    assert output.mask[0].tolist() == [True, True, False, False]  # <S> </S> still run
    assert not output.last_hidden_state[0, 2:].any()


def test_empty_batch_is_a_clean_error(tokenizer):
    with pytest.raises(ValueError, match="empty batch"):
        tokenizer([])
    with pytest.raises(ValueError, match="empty batch"):
        tokenizer([], is_split_into_words=True)


def test_thousand_word_sentence(tokenizer):
    text = " ".join(f"w{i}" for i in range(1000))
    encoded = tokenizer(text, return_tensors="pt")
    assert encoded["input_ids"].shape == (1, 1000, 50)
    torch.manual_seed(0)
    model = ElmoModel(ElmoConfig(**tiny_config_kwargs())).eval()
    with torch.no_grad():
        output = model(**encoded)
    assert output.last_hidden_state.shape == (1, 1000, 16) and torch.isfinite(output.last_hidden_state).all()


def test_emoji_and_four_byte_characters(tokenizer):
    assert tokenizer.tokenize("hi 😀 𠀀x") == ["hi", "😀", "𠀀", "x"]  # U+20000 is a CJK ideograph
    assert tokenizer.word_to_char_ids("😀") == char_ids(*[b + 1 for b in "😀".encode("utf-8")])
    assert tokenizer.word_to_char_ids("👍🏽") == char_ids(*[b + 1 for b in "👍🏽".encode("utf-8")])


def test_control_characters(tokenizer):
    # In raw text C0/C1 control characters separate words; tab/newline are ordinary whitespace.
    assert tokenizer.tokenize("a\x00b\x07c\x1fd\x7fe\x9ff\tg\nh") == list("abcdefgh")
    assert tokenizer.tokenize("\x00\x01") == []
    # Pre-split words are the caller's choice: control characters stay as bytes.
    assert tokenizer(["a\x00b"], is_split_into_words=True)["input_ids"][0] == char_ids(98, 1, 99)


def test_lone_surrogates_are_dropped(tokenizer):
    assert tokenizer.tokenize("a\ud800b c\udfff") == ["ab", "c"]
    assert tokenizer.tokenize("\ud83d\ude00") == ["😀"]  # a surrogate pair is one character in disguise
    assert tokenizer("\ud800", return_tensors="pt")["input_ids"].shape == (1, 0, 50)
    assert tokenizer.word_to_char_ids("x\ud800") == tokenizer.word_to_char_ids("x")
    assert tokenizer.word_to_char_ids("\ud83d\ude00") == tokenizer.word_to_char_ids("😀")


def test_a_jieba_tokenizer_and_its_collator_pickle_and_copy():
    """DataLoader workers started with "spawn" pickle the collator, and with it the tokenizer."""
    import copy
    import pickle

    from hf_elmo.finetuning.collator import ElmoDataCollator

    jieba_tokenizer = ElmoTokenizer(segmenter="jieba")
    texts = ["小米发布了新手机。", "我爱北京天安门"]
    for duplicate in (pickle.loads(pickle.dumps(jieba_tokenizer)), copy.deepcopy(jieba_tokenizer)):
        assert duplicate.chinese_segmentation == "jieba"
        assert duplicate(texts)["input_ids"] == jieba_tokenizer(texts)["input_ids"]
    collator = pickle.loads(pickle.dumps(ElmoDataCollator(tokenizer=jieba_tokenizer)))
    assert collator.tokenizer.chinese_segmentation == "jieba"


def test_the_segmentation_auto_chose_is_saved_and_needed_on_load(tmp_path):
    """A tokenizer used with jieba must not silently split into characters where jieba is missing."""
    import json
    import subprocess
    import sys

    from paths import REPO_ROOT

    ElmoTokenizer().save_pretrained(tmp_path)  # segmenter "auto", jieba installed here
    saved = json.loads((tmp_path / "tokenizer_config.json").read_text())
    assert saved["segmenter"] == "jieba"
    without_jieba = (
        "import sys\nsys.modules['jieba'] = None\n"
        "from transformers import AutoTokenizer\nimport hf_elmo\n"
        f"AutoTokenizer.from_pretrained({str(tmp_path)!r})\n"
    )
    result = subprocess.run([sys.executable, "-c", without_jieba], capture_output=True, text=True, cwd=REPO_ROOT)
    assert result.returncode != 0
    assert "segments Chinese with jieba" in result.stderr and "pip install jieba" in result.stderr


def test_a_saved_tokenizer_config_holds_no_loading_options(tmp_path):
    import json
    from pathlib import Path

    import hf_elmo

    for source in (hf_elmo.DEFAULT_MODEL, tmp_path / "first"):
        if source != hf_elmo.DEFAULT_MODEL:
            ElmoTokenizer.from_pretrained(hf_elmo.DEFAULT_MODEL).save_pretrained(source)
        saved = json.loads((Path(source) / "tokenizer_config.json").read_text())
        assert not {"is_local", "local_files_only"} & set(saved), saved
        assert saved["segmenter"] == "jieba"


# transformers' own tools (issue 36): collators, pad, token <-> id conversion, word_ids ------------------


def dictionary_tokenizer():
    """A dictionary-scheme tokenizer with a word vocabulary whose `<pad>` word id is not 0."""
    entries = ("<bos>", "<eos>", "<oov>", "<pad>", "<bow>", "<eow>", "我", "爱")
    chars = {entry: index for index, entry in enumerate(entries, 1)}
    words = {"<oov>": 0, "<pad>": 1, "我": 2}
    return ElmoTokenizer(char_scheme="dictionary", char_vocab=chars, word_vocab=words, segmenter="chars",
                         max_characters_per_token=8)


def test_the_tokenizer_has_a_pad_token_and_pad_id_0_also_after_reload(tmp_path):
    tokenizer = ElmoTokenizer(segmenter="chars")
    assert tokenizer.pad_token == "<pad>" and tokenizer.pad_token_id == 0
    tokenizer.save_pretrained(tmp_path)
    for loaded in (ElmoTokenizer.from_pretrained(tmp_path), ElmoTokenizer.from_pretrained(hf_elmo.DEFAULT_MODEL)):
        assert loaded.pad_token == "<pad>" and loaded.pad_token_id == 0


def test_stock_data_collator_with_padding_adds_all_zero_word_rows():
    from transformers import DataCollatorWithPadding

    tokenizer = ElmoTokenizer(segmenter="chars")
    texts = ["我爱北京", "Hi !", "x"]
    encoded = tokenizer(texts)
    features = [{"input_ids": ids, "attention_mask": mask, "label": label}
                for ids, mask, label in zip(encoded["input_ids"], encoded["attention_mask"], (2, 0, 1))]
    batch = DataCollatorWithPadding(tokenizer)(features)
    expected = tokenizer(texts, padding=True, return_tensors="pt")
    assert torch.equal(batch["input_ids"], expected["input_ids"]) and batch["input_ids"].shape == (3, 4, 50)
    assert torch.equal(batch["attention_mask"], expected["attention_mask"])
    assert not batch["input_ids"][2, 1:].any()
    assert batch["labels"].tolist() == [2, 0, 1]


def test_stock_token_classification_collator_pads_labels_with_minus_100():
    from transformers import DataCollatorForTokenClassification

    tokenizer = ElmoTokenizer(segmenter="chars")
    sentences = [["张", "伟", "住", "在", "南京"], ["我"]]
    tags = [[1, 2, 0, 0, 3], [0]]
    features = []
    for words, labels in zip(sentences, tags):  # as run_ner.py aligns labels, through word_ids
        encoded = tokenizer(words, is_split_into_words=True)
        features.append({**encoded, "labels": [labels[index] for index in encoded.word_ids(0)]})
    batch = DataCollatorForTokenClassification(tokenizer)(features)
    assert batch["input_ids"].shape == (2, 5, 50)
    assert batch["labels"].tolist() == [[1, 2, 0, 0, 3], [0, -100, -100, -100, -100]]
    assert batch["attention_mask"].tolist() == [[1, 1, 1, 1, 1], [1, 0, 0, 0, 0]]
    assert torch.equal(batch["input_ids"], tokenizer(sentences, is_split_into_words=True, padding=True,
                                                     return_tensors="pt")["input_ids"])


def test_pad_takes_lists_arrays_tensors_and_whole_encodings():
    tokenizer = ElmoTokenizer(segmenter="chars")
    texts = ["a b c", "d", ""]
    expected = tokenizer(texts, padding=True, return_tensors="np")
    unpadded = tokenizer(texts)
    padded = tokenizer.pad(unpadded)  # a batch as __call__ returns it, lists stay lists
    assert padded["input_ids"] == expected["input_ids"].tolist()
    assert padded["attention_mask"] == expected["attention_mask"].tolist()
    per_sentence = [tokenizer(text, return_tensors="pt") for text in texts]
    from_tensors = tokenizer.pad([{key: value[0] for key, value in one.items()} for one in per_sentence])
    assert isinstance(from_tensors["input_ids"], torch.Tensor)  # tensors in, tensors out, as transformers' pad
    assert np.array_equal(from_tensors["input_ids"].numpy(), expected["input_ids"])
    as_arrays = tokenizer.pad({"input_ids": [np.asarray(ids) for ids in unpadded["input_ids"]]}, return_tensors="np")
    assert np.array_equal(as_arrays["input_ids"], expected["input_ids"])
    assert as_arrays["attention_mask"].tolist() == [[1, 1, 1], [1, 0, 0], [0, 0, 0]]
    one = tokenizer.pad(tokenizer("a b"), padding="max_length", max_length=4, return_tensors="pt")
    assert one["input_ids"].shape == (1, 4, 50) and one["attention_mask"].tolist() == [[1, 1, 0, 0]]
    assert tokenizer.pad(unpadded, pad_to_multiple_of=4, return_tensors="pt")["input_ids"].shape == (3, 4, 50)
    assert tokenizer(texts, padding=True, pad_to_multiple_of=8, return_tensors="pt")["input_ids"].shape == (3, 8, 50)


def test_pad_checks_every_key_against_the_words_and_pad_to_multiple_of_in_one_line():
    """Issue 46 #7: a mask shorter than the words hid real words, a longer one or pad_to_multiple_of=-3 raised numpy's
    "inhomogeneous shape"."""
    tokenizer = ElmoTokenizer(segmenter="chars")
    encoded = tokenizer(["a b c", "d"])
    for key, values, row in (("attention_mask", [[1], [1]], 0), ("attention_mask", [[1, 1, 1], [1, 1]], 1),
                             ("special_tokens_mask", [[0, 0, 0], 0], 1)):
        with pytest.raises(ValueError, match=f"row {row}: {key} must hold one value per word") as error:
            tokenizer.pad({**encoded, key: values})
        assert "\n" not in str(error.value)
    with pytest.raises(ValueError, match="attention_mask holds 1 sentences, input_ids 2"):
        tokenizer.pad({**encoded, "attention_mask": [[1, 1, 1]]})
    with pytest.raises(ValueError, match="row 1: attention_mask"):
        tokenizer.pad([{"input_ids": ids, "attention_mask": [1, 1, 1]} for ids in encoded["input_ids"]])
    for bad in (-3, 0, 1.5, True):
        with pytest.raises(ValueError, match=f"pad_to_multiple_of must be a whole number of words >= 1, got {bad}"):
            tokenizer.pad(encoded, pad_to_multiple_of=bad)


def test_text_mostly_unknown_to_a_dictionary_model_is_warned_of_once_with_the_share_and_script(caplog):
    """Issue 45 #5: English text to a Chinese model ran without a word."""
    import logging

    from hf_elmo.finetuning.collator import ElmoDataCollator

    tokenizer = dictionary_tokenizer()  # knows 我 and 爱
    with caplog.at_level(logging.WARNING, logger=text_elmo.__name__):
        tokenizer("我爱")
        assert not caplog.records
        tokenizer(["I love it", "我"])
        tokenizer("and again, all unknown")
        ElmoTokenizer(segmenter="chars")("Привет мир")  # the byte scheme knows every character
    assert [record.getMessage().split(" (")[0] for record in caplog.records] == [
        "88% of the characters are unknown to this Chinese model"]  # 7 of 8
    for encode in (lambda tokenizer: tokenizer.batch_to_ids([["Привет", "мир"]]),  # embed, similar
                   lambda tokenizer: ElmoDataCollator(tokenizer)([{"text": "Привет мир"}])):  # tag, training
        caplog.clear()
        with caplog.at_level(logging.WARNING, logger=text_elmo.__name__):
            encode(ElmoTokenizer.from_pretrained(hf_elmo.DEFAULT_MODEL))
        assert "100% of the characters are unknown to this Chinese model" in caplog.records[-1].getMessage()


def test_pad_uses_the_pad_word_id_of_a_word_vocabulary():
    tokenizer = dictionary_tokenizer()
    encoded = tokenizer(["我爱", "我"])
    padded = tokenizer.pad([{key: value[i] for key, value in encoded.items()} for i in range(2)], return_tensors="pt")
    assert padded["word_ids"].tolist() == [[2, 0], [2, 1]]  # "爱" is unknown (<oov> 0), the padded position <pad> 1
    assert torch.equal(padded["input_ids"], tokenizer(["我爱", "我"], padding=True, return_tensors="pt")["input_ids"])


def test_pad_refuses_what_it_cannot_pad_in_one_line():
    tokenizer = ElmoTokenizer(segmenter="chars")
    with pytest.raises(ValueError, match="right only"):
        tokenizer.pad(tokenizer(["a b", "c"]), padding_side="left")
    with pytest.raises(ValueError, match="right only"):
        ElmoTokenizer(segmenter="chars", padding_side="left")
    with pytest.raises(ValueError, match="one row of 50 character ids per word"):
        tokenizer.pad([{"input_ids": [101, 2023, 102]}, {"input_ids": [101, 102]}])  # a BERT encoding
    with pytest.raises(ValueError, match="input_ids"):
        tokenizer.pad([{"attention_mask": [1]}])
    with pytest.raises(ValueError, match="empty list"):
        tokenizer.pad([])


def test_convert_ids_to_tokens_reads_rows_of_character_ids():
    for tokenizer in (ElmoTokenizer(segmenter="chars"), ElmoTokenizer.from_pretrained(hf_elmo.DEFAULT_MODEL)):
        words = ["我", "爱", "Hello", ","]
        rows = tokenizer.convert_tokens_to_ids(words)
        assert rows == tokenizer(words, is_split_into_words=True)["input_ids"]
        assert tokenizer.convert_tokens_to_ids("我") == rows[0]
        assert tokenizer.convert_ids_to_tokens(rows) == words
        assert tokenizer.convert_ids_to_tokens(rows[2]) == "Hello"
        padded = tokenizer(["我 爱 Hello ,", "我"], padding=True, return_tensors="pt")["input_ids"][1]
        assert tokenizer.convert_ids_to_tokens(padded) == ["我", "<pad>", "<pad>", "<pad>"]
        assert tokenizer.convert_ids_to_tokens(padded, skip_special_tokens=True) == ["我"]


def test_one_id_per_token_is_refused_naming_the_rows():
    tokenizer = ElmoTokenizer(segmenter="chars")
    for ids in (5, [72, 101], [[72, 101]]):
        with pytest.raises(ValueError, match="row of max_characters_per_token character ids, not one id") as error:
            tokenizer.convert_ids_to_tokens(ids)
        assert "\n" not in str(error.value)
    with pytest.raises(TypeError, match="a word or a list of words"):
        tokenizer.convert_tokens_to_ids([3])


def test_special_tokens_mask_marks_only_padding():
    """Issue 36: transformers' token-classification pipeline asks for `return_special_tokens_mask` (and `is_fast`);
    both were missing. A word is never special, a padded position always is, also after `pad`."""
    tokenizer = ElmoTokenizer(segmenter="chars")
    assert tokenizer.is_fast is False
    encoded = tokenizer(["a b c", "d"], padding=True, return_special_tokens_mask=True, return_tensors="pt")
    assert encoded["special_tokens_mask"].tolist() == [[0, 0, 0], [0, 1, 1]]
    unpadded = tokenizer(["a b c", "d"], return_special_tokens_mask=True)
    assert tokenizer.pad(unpadded)["special_tokens_mask"] == [[0, 0, 0], [0, 1, 1]]


def test_word_ids_of_an_encoding_map_positions_to_words():
    import copy
    import pickle

    tokenizer = ElmoTokenizer(segmenter="chars")
    batch = tokenizer(["a b c", "d", ""], padding=True, return_tensors="pt")
    assert [batch.word_ids(i) for i in range(3)] == [[0, 1, 2], [0, None, None], [None, None, None]]
    assert batch.word_ids() == [0, 1, 2] and batch.word_ids(-1) == [None, None, None]
    unpadded = tokenizer(["a b c", "d"])
    assert unpadded.word_ids(1) == [0]
    assert tokenizer("a b").word_ids(0) == [0, 1]
    assert tokenizer(["x", "y z"], is_split_into_words=True).word_ids(0) == [0, 1]
    for duplicate in (pickle.loads(pickle.dumps(batch)), copy.deepcopy(batch)):
        assert duplicate.word_ids(1) == [0, None, None]
    with pytest.raises(IndexError, match="3 sentence"):
        batch.word_ids(3)
    padded = tokenizer.pad(unpadded, return_tensors="pt")
    assert padded.word_ids(1) == [0, None, None]


# A jieba user dictionary (issue 36: `finetune predict "张伟住在南京。"` tagged 张伟住 as a person) -----------


@pytest.fixture
def user_dict(tmp_path):
    path = tmp_path / "names.txt"
    path.write_text("\ufeff张伟 10 nr\n", encoding="utf-8")  # jieba's format; editors may add a byte order mark
    return path


def test_a_user_dictionary_changes_the_split_and_travels_with_the_saved_tokenizer(tmp_path, user_dict):
    text = "张伟住在南京。"
    assert ElmoTokenizer(segmenter="jieba").tokenize(text)[0] == "张伟住"  # jieba's own dictionary
    tokenizer = ElmoTokenizer(segmenter="jieba", user_dict=user_dict)
    words = tokenizer.tokenize(text)
    assert words[0] == "张伟" and words[1:3] == ["住", "在"] and "".join(words) == text
    tokenizer.save_pretrained(tmp_path / "saved")
    user_dict.unlink()  # the saved folder holds its own copy
    assert (tmp_path / "saved" / "jieba_user_dict.txt").read_text(encoding="utf-8") == "张伟 10 nr\n"
    saved_options = json.loads((tmp_path / "saved" / "tokenizer_config.json").read_text())
    assert not any("user_dict" in key or "names.txt" in str(value) for key, value in saved_options.items())
    for load in (ElmoTokenizer.from_pretrained, AutoTokenizer.from_pretrained):
        loaded = load(tmp_path / "saved")
        assert loaded.tokenize(text) == words
        assert loaded(text)["input_ids"] == tokenizer(text)["input_ids"]


def test_a_user_dictionary_changes_nothing_outside_its_tokenizer(user_dict):
    import jieba

    text = "张伟住在南京。"
    before, frequency = jieba.lcut(text), jieba.dt.FREQ.get("张伟")
    tokenizer = ElmoTokenizer(segmenter="auto", user_dict=user_dict)  # "auto" with a user dictionary is jieba
    assert tokenizer.segmenter == "jieba" and tokenizer.tokenize(text)[0] == "张伟"
    assert jieba.lcut(text) == before and jieba.dt.FREQ.get("张伟") == frequency
    assert ElmoTokenizer(segmenter="jieba").tokenize(text)[0] == "张伟住"


def test_a_tokenizer_with_a_user_dictionary_pickles_and_copies(user_dict):
    import copy
    import pickle

    tokenizer = ElmoTokenizer(segmenter="jieba", user_dict=user_dict)
    for duplicate in (pickle.loads(pickle.dumps(tokenizer)), copy.deepcopy(tokenizer)):
        assert duplicate.tokenize("张伟住在南京。")[0] == "张伟"


def test_user_dictionary_mistakes_are_one_line_naming_the_file(tmp_path, user_dict):
    with pytest.raises(ValueError, match="needs segmenter='jieba'"):
        ElmoTokenizer(segmenter="chars", user_dict=user_dict)
    with pytest.raises(ValueError, match="jieba user dictionary not found: .*missing.txt"):
        ElmoTokenizer(segmenter="jieba", user_dict=tmp_path / "missing.txt")
    latin1 = tmp_path / "latin1.txt"
    latin1.write_bytes("Zürich 5\n".encode("latin-1"))
    with pytest.raises(ValueError, match="latin1.txt is not UTF-8"):
        ElmoTokenizer(segmenter="jieba", user_dict=latin1)
    with pytest.raises(ValueError, match="user_dict must be the path"):
        ElmoTokenizer(segmenter="jieba", user_dict=["张伟"])


# Files a model folder names (issue 46 #2 and #9) -------------------------------------------------------------------


def test_files_a_model_folder_names_are_read_only_from_inside_it(tmp_path, user_dict):
    """A folder whose jieba_user_dict.txt or char_vocab.json links to a file elsewhere (one a malicious repository
    planted) was read, and saved again as a regular file into every output."""
    planted = tmp_path / "elsewhere.txt"
    planted.write_text("秘密 10 n\n", encoding="utf-8")
    folder = tmp_path / "model"
    ElmoTokenizer(segmenter="jieba", user_dict=user_dict).save_pretrained(folder)
    (folder / "jieba_user_dict.txt").unlink()
    (folder / "jieba_user_dict.txt").symlink_to(planted)
    for load in (ElmoTokenizer.from_pretrained, AutoTokenizer.from_pretrained):
        with pytest.raises(ValueError, match=r"jieba_user_dict.txt resolves outside its model folder") as error:
            load(folder)
        assert "\n" not in str(error.value)
    dictionary = tmp_path / "dictionary"
    dictionary_tokenizer().save_pretrained(dictionary)
    (dictionary / "char_vocab.json").rename(tmp_path / "vocab.json")
    (dictionary / "char_vocab.json").symlink_to(tmp_path / "vocab.json")
    with pytest.raises(ValueError, match=r"char_vocab.json resolves outside its model folder"):
        ElmoTokenizer.from_pretrained(dictionary)
    # A link inside the folder is fine, and so is a link the caller names itself.
    (dictionary / "vocabularies").mkdir()
    (tmp_path / "vocab.json").rename(dictionary / "vocabularies" / "vocab.json")
    (dictionary / "char_vocab.json").unlink()
    (dictionary / "char_vocab.json").symlink_to(dictionary / "vocabularies" / "vocab.json")
    assert ElmoTokenizer.from_pretrained(dictionary).char_vocab == dictionary_tokenizer().char_vocab
    assert ElmoTokenizer(segmenter="jieba", user_dict=folder / "jieba_user_dict.txt").tokenize("秘密") == ["秘密"]


def test_a_folder_without_tokenizer_config_reads_its_char_vocab_only_from_inside_it(tmp_path):
    """The tokenizer built from a bare dictionary-scheme folder's char_vocab.json (hf_elmo.loading) is checked too."""
    from hf_elmo.loading import ModelNotFoundError, load_tokenizer

    config = ElmoConfig.from_pretrained(hf_elmo.DEFAULT_MODEL)
    folder = tmp_path / "bare"
    folder.mkdir()
    (folder / "char_vocab.json").symlink_to(f"{hf_elmo.DEFAULT_MODEL}/char_vocab.json")
    with pytest.raises(ModelNotFoundError, match=r"char_vocab.json resolves outside its model folder"):
        load_tokenizer(str(folder), config)


def test_a_hub_cache_entry_may_link_to_its_own_blobs_only(tmp_path):
    """The Hub cache's snapshots/<revision>/ files are links into the entry's blobs/."""
    entry = tmp_path / "models--someone--elmo"
    snapshot = entry / "snapshots" / "0123abc"
    snapshot.mkdir(parents=True)
    (entry / "blobs").mkdir()
    dictionary_tokenizer().save_pretrained(tmp_path / "saved")
    for name in ("tokenizer_config.json", "char_vocab.json"):
        (tmp_path / "saved" / name).rename(entry / "blobs" / name)
        (snapshot / name).symlink_to(f"../../blobs/{name}")
    assert ElmoTokenizer.from_pretrained(snapshot).char_vocab == dictionary_tokenizer().char_vocab
    (entry / "blobs" / "char_vocab.json").rename(tmp_path / "outside.json")
    (snapshot / "char_vocab.json").unlink()
    (snapshot / "char_vocab.json").symlink_to(tmp_path / "outside.json")
    with pytest.raises(ValueError, match=f"resolves outside its model folder {entry}"):
        ElmoTokenizer.from_pretrained(snapshot)


def test_user_dictionaries_and_vocabularies_must_be_regular_files_of_a_readable_size(tmp_path, monkeypatch):
    import os

    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    for path in ("/dev/zero", fifo):  # read until memory ran out / blocked forever
        with pytest.raises(ValueError, match=f"jieba user dictionary {path} is not a regular file"):
            ElmoTokenizer(segmenter="jieba", user_dict=path)
        with pytest.raises(ValueError, match=f"character vocabulary file {path} is not a regular file"):
            ElmoTokenizer(char_scheme="dictionary", char_vocab_file=str(path))
    big = tmp_path / "big.txt"
    big.write_text("张伟 10 nr\n" * 10, encoding="utf-8")
    monkeypatch.setattr(text_elmo, "MAX_TEXT_FILE_BYTES", 50)
    with pytest.raises(ValueError, match=r"big.txt holds 130 bytes, more than the 50 read whole"):
        ElmoTokenizer(segmenter="jieba", user_dict=big)
