import pytest
import torch

from hf_elmo import ElmoDataCollator, ElmoTokenizer


@pytest.fixture
def collate():
    return ElmoDataCollator(ElmoTokenizer(segmenter="chars"))


def test_words_are_padded_with_zero_words_and_minus_100_labels(collate):
    tokenizer = ElmoTokenizer()
    batch = collate([{"words": ["ab", "c"], "labels": [1, 0]}, {"words": ["北京"], "labels": [2]}])
    assert batch["input_ids"].shape == (2, 2, 50)
    assert batch["attention_mask"].tolist() == [[1, 1], [1, 0]]
    assert batch["labels"].tolist() == [[1, 0], [2, -100]]
    assert batch["input_ids"][1, 1].eq(0).all()
    assert batch["input_ids"][1, 0].tolist() == tokenizer.word_to_char_ids("北京")


def test_input_ids_text_and_sentence_labels(collate):
    tokenizer = ElmoTokenizer(segmenter="chars")
    ids = tokenizer(["x", "yz"], is_split_into_words=True)["input_ids"]
    batch = collate([{"input_ids": ids, "labels": 1}, {"text": "北京 hello", "labels": 0}])
    assert batch["labels"].tolist() == [1, 0]
    assert batch["attention_mask"].tolist() == [[1, 1, 0], [1, 1, 1]]  # 北 京 hello
    assert batch["input_ids"][0, :2].tolist() == ids


def test_numpy_and_tensor_class_ids_are_sentence_labels(collate):
    import numpy as np

    for one, two in ((np.int64(1), np.int64(0)), (torch.tensor(1), torch.tensor(0)), (1, np.int32(0))):
        batch = collate([{"words": ["a"], "labels": one}, {"words": ["b", "c"], "labels": two}])
        assert batch["labels"].tolist() == [1, 0]
    batch = collate([{"words": ["a", "b"], "labels": np.array([3, 4])}])  # one label per word, as an array
    assert batch["labels"].tolist() == [[3, 4]]


def test_max_words_cuts_words_and_labels_together():
    collate = ElmoDataCollator(ElmoTokenizer(), max_words=2)
    batch = collate([{"words": list("abcd"), "labels": [1, 2, 3, 4]}])
    assert batch["labels"].tolist() == [[1, 2]] and batch["input_ids"].shape == (1, 2, 50)


def test_bad_examples_are_named(collate):
    with pytest.raises(ValueError, match="example 1: 2 words but 3 labels"):
        collate([{"words": ["a"], "labels": [0]}, {"words": ["a", "b"], "labels": [0, 1, 2]}])
    with pytest.raises(ValueError, match="some examples have labels"):
        collate([{"words": ["a"], "labels": [0]}, {"words": ["b"]}])
    with pytest.raises(ValueError, match="none of 'input_ids', 'words', 'text'"):
        collate([{"tokens": ["a"]}])
    with pytest.raises(ValueError, match="need ElmoDataCollator\\(tokenizer"):
        ElmoDataCollator()([{"words": ["a"]}])
    with pytest.raises(TypeError, match="list of strings"):
        collate([{"words": "abc"}])
    with pytest.raises(ValueError, match="empty list"):
        collate([])


def test_label_columns_named_like_datasets_and_regression_targets(collate):
    import numpy as np

    from hf_elmo.finetuning.run import precompute_elmo_layers
    from hf_elmo import ElmoConfig, ElmoModel

    for key in ("label", "label_ids"):  # the usual datasets column names
        assert collate([{"words": ["a"], key: 1}, {"words": ["b"], key: 0}])["labels"].tolist() == [1, 0]
    targets = collate([{"text": "好", "labels": 0.5}, {"text": "差", "labels": np.float32(-1.25)}])["labels"]
    assert targets.dtype == torch.float32 and targets.tolist() == [0.5, -1.25]
    torch.manual_seed(0)
    elmo = ElmoModel(ElmoConfig(char_cnn_filters=[[1, 4]], char_embedding_dim=4, num_highway_layers=1,
                                projection_dim=4, lstm_cell_dim=8, num_lstm_layers=1)).eval()
    precomputed = precompute_elmo_layers(elmo, collate, [{"words": ["a", "b"], "label": np.int64(2)}])
    assert int(precomputed[0]["labels"]) == 2 and collate(precomputed)["labels"].tolist() == [2]


def test_the_tokenizers_own_encoding_of_an_empty_text_is_collated_as_pad_pads_it():
    """Issue 46 #8: `tok("")` (input_ids `[]`) stopped a batch with "input_ids must be (words, characters)"."""
    tokenizer = ElmoTokenizer(segmenter="chars")
    encodings = [tokenizer(""), tokenizer("dog cat"), tokenizer("   ")]
    batch = ElmoDataCollator(tokenizer)([{**encoding, "labels": 1} for encoding in encodings])
    expected = tokenizer.pad(encodings, return_tensors="pt")
    assert torch.equal(batch["input_ids"], expected["input_ids"]) and batch["input_ids"].shape == (3, 2, 50)
    assert torch.equal(batch["attention_mask"], expected["attention_mask"])
    without_tokenizer = ElmoDataCollator()([{"input_ids": []}, {"input_ids": tokenizer("dog")["input_ids"]}])
    assert without_tokenizer["input_ids"].shape == (2, 1, 50) and without_tokenizer["attention_mask"].tolist() == [
        [0], [1]]
    assert ElmoDataCollator(tokenizer)([tokenizer("")])["input_ids"].shape == (1, 0, 50)
