"""transformers' common tokenizer tests (`TokenizerTesterMixin`) on `ElmoTokenizer`, in the style of transformers'
tests/models/*/test_tokenization_*.py."""

import unittest

import hf_elmo
from hf_elmo import ElmoTokenizer

from ...test_tokenization_common import TokenizerTesterMixin


class ElmoTokenizationTest(TokenizerTesterMixin, unittest.TestCase):
    tokenizer_class = ElmoTokenizer
    # The tokenizer of the Chinese model shipped inside the package (character dictionary, jieba words): a local
    # folder, so the suite's from_pretrained calls need no network.
    from_pretrained_id = [hf_elmo.DEFAULT_MODEL]
