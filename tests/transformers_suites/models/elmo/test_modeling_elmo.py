"""transformers' common model and config tests (`ModelTesterMixin`, `ConfigTester`) on a tiny ELMo, in the style of
transformers' tests/models/bert/test_modeling_bert.py."""

import unittest
from unittest import mock

import pytest
from transformers import is_torch_available
from transformers.models.auto import modeling_auto
from transformers.testing_utils import require_torch, torch_device

from ... import test_modeling_common
from ...test_configuration_common import ConfigTester
from ...test_modeling_common import ModelTesterMixin, ids_tensor

if is_torch_available():
    import torch

    from hf_elmo import (
        ElmoConfig,
        ElmoForCharacterTagging,
        ElmoForPreTraining,
        ElmoForSequenceClassification,
        ElmoForTokenClassification,
        ElmoModel,
    )
    from hf_elmo.models.elmo.text_elmo import character_places

# Character ids in the manner of the dictionary scheme (hf_elmo/models/elmo/text_elmo.py) with a small character vocabulary: 0
# marks a padded word position, 1-5 are special characters, the rest real characters. A word's row is
# [<eow>, its characters, <bow>, <pad>...], as ELMoForManyLangs writes it. The `<S>` / `</S>` rows use only the
# lowest ids (the sentence-boundary character, then <pad>), so that they stay valid in the 4-character vocabulary
# transformers' test_resize_tokens_embeddings builds.
SENTENCE_BEGIN, SENTENCE_END, CHARACTER_PAD, WORD_BEGIN, WORD_END = 1, 2, 3, 4, 5
FIRST_CHARACTER = 6

# The tables transformers' tests read to tell a base model from a task head (e.g. test_training skips base models,
# _prepare_for_class picks the labels); every in-library model is listed there. Patched for these tests only.
ELMO_IN_TRANSFORMERS_TABLES = {
    "MODEL_MAPPING_NAMES": "ElmoModel",
    "MODEL_FOR_PRETRAINING_MAPPING_NAMES": "ElmoForPreTraining",
    "MODEL_FOR_SEQUENCE_CLASSIFICATION_MAPPING_NAMES": "ElmoForSequenceClassification",
    "MODEL_FOR_TOKEN_CLASSIFICATION_MAPPING_NAMES": ("ElmoForTokenClassification", "ElmoForCharacterTagging"),
}
_tables_patch = pytest.MonkeyPatch()


def setUpModule():
    for table, class_names in ELMO_IN_TRANSFORMERS_TABLES.items():
        _tables_patch.setitem(getattr(modeling_auto, table), "elmo", class_names)


def tearDownModule():
    _tables_patch.undo()


class ElmoModelTester:
    def __init__(
        self,
        parent,
        batch_size=13,
        seq_length=7,
        is_training=True,
        use_input_mask=True,
        use_labels=True,
        char_vocab_size=40,
        char_embedding_dim=4,
        char_cnn_filters=((1, 4), (2, 4)),
        num_highway_layers=1,
        max_characters_per_token=5,
        projection_dim=4,
        lstm_cell_dim=8,
        num_hidden_layers=2,
        num_labels=3,
        lm_vocab_size=12,
        word_vocab_size=0,
        head_options=None,
        scope=None,
    ):
        self.parent = parent
        self.batch_size = batch_size
        self.seq_length = seq_length
        self.is_training = is_training
        self.use_input_mask = use_input_mask
        self.use_labels = use_labels
        self.char_vocab_size = char_vocab_size
        self.char_embedding_dim = char_embedding_dim
        self.char_cnn_filters = [list(f) for f in char_cnn_filters]
        self.num_highway_layers = num_highway_layers
        self.max_characters_per_token = max_characters_per_token
        self.projection_dim = projection_dim
        self.lstm_cell_dim = lstm_cell_dim
        self.num_hidden_layers = num_hidden_layers
        self.num_labels = num_labels
        self.lm_vocab_size = lm_vocab_size
        # An optional word embedding beside the characters (ELMoForManyLangs): `word_ids` join every input.
        self.word_vocab_size = word_vocab_size
        # ElmoConfig fields of the task heads and the layer mix, for a tester of other head options.
        self.head_options = head_options or {}
        self.scope = scope
        # Every ELMo layer is [forward; backward].
        self.hidden_size = 2 * projection_dim

    def word_char_ids(self, num_words):
        """`(num_words, max_characters_per_token)` rows of random words, as the tokenizer writes them."""
        rows = torch.full((num_words, self.max_characters_per_token), CHARACTER_PAD, dtype=torch.long)
        lengths = ids_tensor([num_words], self.max_characters_per_token - 2) + 1
        characters = ids_tensor([num_words, self.max_characters_per_token - 2],
                                self.char_vocab_size - FIRST_CHARACTER) + FIRST_CHARACTER
        for row, length, chars in zip(rows, lengths.tolist(), characters):
            row[0] = WORD_END
            row[1 : 1 + length] = chars[:length]
            row[1 + length] = WORD_BEGIN
        return rows

    def char_ids_tensor(self, shape, vocab_size):
        """`ids_tensor` for ELMo input ids: `shape` (batch, words) of rows of `max_characters_per_token` character ids
        below `vocab_size`, none of them 0 (a padding id)."""
        return ids_tensor([*shape, self.max_characters_per_token], vocab_size - 1) + 1

    def prepare_config_and_inputs(self):
        # A batch as ElmoTokenizer pads it: each sentence's words first, then padded positions (all-zero rows).
        num_words = ids_tensor([self.batch_size], self.seq_length) + 1
        num_words[0] = self.seq_length  # one sentence fills the batch, so that the output has seq_length positions
        input_mask = (torch.arange(self.seq_length) < num_words.unsqueeze(1)).long()
        input_ids = self.word_char_ids(self.batch_size * self.seq_length).view(self.batch_size, self.seq_length, -1)
        input_ids = input_ids * input_mask.unsqueeze(-1)
        word_ids = None
        if self.word_vocab_size:
            word_ids = ids_tensor([self.batch_size, self.seq_length], self.word_vocab_size) * input_mask
        if not self.use_input_mask:
            input_mask = None

        sequence_labels = token_labels = lm_labels = None
        if self.use_labels:
            sequence_labels = ids_tensor([self.batch_size], self.num_labels)
            token_labels = ids_tensor([self.batch_size, self.seq_length], self.num_labels)
            lm_labels = ids_tensor([self.batch_size, self.seq_length], self.lm_vocab_size)

        config = self.get_config()

        return config, input_ids, input_mask, word_ids, sequence_labels, token_labels, lm_labels

    def get_config(self):
        """
        Returns a tiny configuration by default.
        """
        sentence_begin, sentence_end = (
            [boundary] + [CHARACTER_PAD] * (self.max_characters_per_token - 1)
            for boundary in (SENTENCE_BEGIN, SENTENCE_END)
        )
        return ElmoConfig(
            char_scheme="dictionary",
            char_vocab_size=self.char_vocab_size,
            bos_char_ids=sentence_begin,
            eos_char_ids=sentence_end,
            char_embedding_dim=self.char_embedding_dim,
            char_cnn_filters=self.char_cnn_filters,
            num_highway_layers=self.num_highway_layers,
            max_characters_per_token=self.max_characters_per_token,
            projection_dim=self.projection_dim,
            lstm_cell_dim=self.lstm_cell_dim,
            num_lstm_layers=self.num_hidden_layers,
            classifier_hidden_size=self.hidden_size,
            task_encoder_hidden_size=self.projection_dim,
            lm_vocab=["<S>", "</S>", "<UNK>"] + [f"word{i}" for i in range(self.lm_vocab_size - 3)],
            **self.word_embedding_options(),
            **self.head_options,
        )

    def word_embedding_options(self):
        if not self.word_vocab_size:
            return {}
        return {"word_vocab_size": self.word_vocab_size, "word_embedding_dim": self.projection_dim,
                "bos_word_id": 1, "eos_word_id": 2}

    def character_tagging_inputs(self, input_ids, attention_mask):
        """The character tagger's extra inputs for a batch of words, one entry per character of each word (the real
        characters of its row): `token_word_index` (the word of each character, -1 at padding) and `token_positions`
        (its place in the word, an index into WORD_POSITIONS), both `(batch_size, num_characters)`. A function of the
        batch, as the tokenizer's outputs are: every call on the same batch gives the same inputs."""
        words = (input_ids > 0).any(-1) if attention_mask is None else attention_mask.bool()
        characters_per_word = ((input_ids >= FIRST_CHARACTER).sum(-1) * words).tolist()
        word_index, positions = [], []
        for lengths in characters_per_word:
            _, sentence_index, sentence_positions = character_places(["x" * length for length in lengths if length])
            word_index.append(sentence_index)
            positions.append(sentence_positions)
        num_characters = max(len(sentence) for sentence in word_index)
        token_word_index = torch.tensor([s + [-1] * (num_characters - len(s)) for s in word_index])
        token_positions = torch.tensor([s + [0] * (num_characters - len(s)) for s in positions])
        inputs = {
            "token_word_index": token_word_index.to(torch_device),
            "token_positions": token_positions.to(torch_device),
        }
        if self.head_options.get("task_character_features"):
            # Each character read as a word alone: [<eow>, the character, <bow>, <pad>...]; zeros at padding.
            rows = torch.zeros(len(word_index), num_characters, self.max_characters_per_token, dtype=torch.long)
            for sentence, (sentence_rows, lengths) in enumerate(zip(input_ids.tolist(), characters_per_word)):
                characters = [c for row, length in zip(sentence_rows, lengths) for c in row[1 : 1 + length]]
                for place, character in enumerate(characters):
                    rows[sentence, place] = torch.tensor(
                        [WORD_END, character, WORD_BEGIN] + [CHARACTER_PAD] * (self.max_characters_per_token - 3)
                    )
            inputs["character_input_ids"] = rows.to(torch_device)
        return inputs

    def create_and_check_model(
        self, config, input_ids, input_mask, word_ids, sequence_labels, token_labels, lm_labels
    ):
        model = ElmoModel(config=config)
        model.to(torch_device)
        model.eval()
        result = model(input_ids, attention_mask=input_mask, word_ids=word_ids)
        result = model(input_ids, word_ids=word_ids)
        self.parent.assertEqual(result.last_hidden_state.shape, (self.batch_size, self.seq_length, self.hidden_size))
        self.parent.assertEqual(len(result.hidden_states), self.num_hidden_layers + 1)

    def create_and_check_for_pretraining(
        self, config, input_ids, input_mask, word_ids, sequence_labels, token_labels, lm_labels
    ):
        model = ElmoForPreTraining(config=config)
        model.to(torch_device)
        model.eval()
        result = model(input_ids, attention_mask=input_mask, word_ids=word_ids, labels=lm_labels)
        self.parent.assertEqual(result.loss.shape, ())
        self.parent.assertEqual(
            # The top layer of each direction over the words and the `<S>`, `</S>` positions.
            result.forward_hidden_states.shape, (self.batch_size, self.seq_length + 2, self.projection_dim)
        )

    def create_and_check_for_sequence_classification(
        self, config, input_ids, input_mask, word_ids, sequence_labels, token_labels, lm_labels
    ):
        config.num_labels = self.num_labels
        model = ElmoForSequenceClassification(config)
        model.to(torch_device)
        model.eval()
        result = model(input_ids, attention_mask=input_mask, word_ids=word_ids, labels=sequence_labels)
        self.parent.assertEqual(result.logits.shape, (self.batch_size, self.num_labels))

    def create_and_check_for_token_classification(
        self, config, input_ids, input_mask, word_ids, sequence_labels, token_labels, lm_labels
    ):
        config.num_labels = self.num_labels
        model = ElmoForTokenClassification(config=config)
        model.to(torch_device)
        model.eval()
        result = model(input_ids, attention_mask=input_mask, word_ids=word_ids, labels=token_labels)
        self.parent.assertEqual(result.logits.shape, (self.batch_size, self.seq_length, self.num_labels))

    def create_and_check_for_character_tagging(
        self, config, input_ids, input_mask, word_ids, sequence_labels, token_labels, lm_labels
    ):
        config.num_labels = self.num_labels
        model = ElmoForCharacterTagging(config=config)
        model.to(torch_device)
        model.eval()
        characters = self.character_tagging_inputs(input_ids, input_mask)
        num_characters = characters["token_word_index"].shape[1]
        character_labels = ids_tensor([self.batch_size, num_characters], self.num_labels)
        result = model(input_ids, attention_mask=input_mask, word_ids=word_ids, labels=character_labels, **characters)
        self.parent.assertEqual(result.logits.shape, (self.batch_size, num_characters, self.num_labels))

    def prepare_config_and_inputs_for_common(self):
        config, input_ids, input_mask, word_ids, *_ = self.prepare_config_and_inputs()
        inputs_dict = {"input_ids": input_ids, "attention_mask": input_mask}
        if word_ids is not None:
            inputs_dict["word_ids"] = word_ids
        return config, inputs_dict


@require_torch
class ElmoModelTest(ModelTesterMixin, unittest.TestCase):
    all_model_classes = (
        (
            ElmoModel,
            ElmoForPreTraining,
            ElmoForSequenceClassification,
            ElmoForTokenClassification,
            ElmoForCharacterTagging,
        )
        if is_torch_available()
        else ()
    )
    # A character-CNN biLSTM has no attention layers: no attention weights to return, no attn_implementation.
    has_attentions = False
    # hf-elmo's files carry no `# Copyright YYYY` line, from which the mixin would take the model for one from before
    # 2023 and skip this test; ELMo is new to transformers' tests and held to the current standard.
    test_can_init_all_missing_weights_before_2023 = True

    def _prepare_for_class(self, inputs_dict, model_class, return_labels=False):
        inputs_dict = super()._prepare_for_class(inputs_dict, model_class, return_labels=return_labels)
        if model_class is ElmoForCharacterTagging:
            # The character tagger tags characters: it reads the words' character ids and, per character, its word
            # and its place in the word; its labels are one per character.
            inputs_dict.update(
                self.model_tester.character_tagging_inputs(inputs_dict["input_ids"], inputs_dict.get("attention_mask"))
            )
            if return_labels:
                inputs_dict["labels"] = torch.zeros_like(inputs_dict["token_word_index"])
        elif model_class is ElmoForPreTraining and return_labels:
            # One word id of config.lm_vocab per input word.
            inputs_dict["labels"] = torch.zeros(
                (self.model_tester.batch_size, self.model_tester.seq_length), dtype=torch.long, device=torch_device
            )
        return inputs_dict

    def setUp(self):
        self.model_tester = ElmoModelTester(self)
        # Attention-free, as transformers' Mamba: the common properties without num_attention_heads.
        self.config_tester = ConfigTester(
            self, config_class=ElmoConfig, projection_dim=37, common_properties=["hidden_size", "num_hidden_layers"]
        )

    def test_load_with_mismatched_shapes(self):
        # Ids are rows of character ids, not scalars: the common test's last step runs the reloaded base model on
        # `ids_tensor((2, 8), 10)`, which for ELMo means 2 sentences of 8 words of character ids below 10.
        with mock.patch.object(test_modeling_common, "ids_tensor", self.model_tester.char_ids_tensor):
            super().test_load_with_mismatched_shapes()

    def test_config(self):
        self.config_tester.run_common_tests()

    def test_model(self):
        config_and_inputs = self.model_tester.prepare_config_and_inputs()
        self.model_tester.create_and_check_model(*config_and_inputs)

    def test_for_pretraining(self):
        config_and_inputs = self.model_tester.prepare_config_and_inputs()
        self.model_tester.create_and_check_for_pretraining(*config_and_inputs)

    def test_for_sequence_classification(self):
        config_and_inputs = self.model_tester.prepare_config_and_inputs()
        self.model_tester.create_and_check_for_sequence_classification(*config_and_inputs)

    def test_for_token_classification(self):
        config_and_inputs = self.model_tester.prepare_config_and_inputs()
        self.model_tester.create_and_check_for_token_classification(*config_and_inputs)

    def test_for_character_tagging(self):
        config_and_inputs = self.model_tester.prepare_config_and_inputs()
        self.model_tester.create_and_check_for_character_tagging(*config_and_inputs)


@require_torch
class ElmoModelWithEveryOptionTest(ElmoModelTest):
    """The same suites on ELMo with its optional parts switched on: a word embedding beside the characters (as
    ELMoForManyLangs has), two layer-normalised learned mixes, and heads with a biLSTM encoder, a CRF, their own word
    and character vectors, and a biLM that trains with them."""

    def setUp(self):
        super().setUp()
        self.model_tester = ElmoModelTester(
            self,
            word_vocab_size=11,
            head_options={
                "num_output_representations": 2,
                "scalar_mix_layer_norm": True,
                "feature_layer": "mix",
                "task_encoder": "bilstm",
                "task_encoder_num_layers": 1,
                "use_crf": True,
                "task_token_features": True,
                "task_character_features": True,
                "freeze_elmo": False,
            },
        )

    @unittest.skip(reason="scalar_mix_layer_norm normalises each layer over every word of the batch (AllenNLP's "
                          "definition, held by the parity fixtures): a normalised mix depends on its batch by design")
    def test_batching_equivalence(self):
        pass

    @unittest.skip(reason="a model with a word embedding reads word_ids beside input_ids, and the common test's last "
                          "step runs the reloaded base model on input_ids alone")
    def test_load_with_mismatched_shapes(self):
        pass
