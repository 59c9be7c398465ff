"""text_elmo.py: the character schemes, their constants and vocabulary files, the segmenters, and that the
module needs nothing beyond the standard library to import."""

import json
import subprocess
import sys

import pytest

import hf_elmo
from hf_elmo import ElmoConfig, ElmoTokenizer
from hf_elmo.models.elmo import text_elmo
from hf_elmo.models.elmo.text_elmo import (
    BEGINNING_OF_SENTENCE,
    BEGINNING_OF_SENTENCE_BYTE,
    CHAR_SCHEMES,
    CHARACTER_SCHEMES,
    END_OF_SENTENCE,
    END_OF_SENTENCE_BYTE,
    ByteScheme,
    DictionaryScheme,
    byte_boundary_char_ids,
    make_segmenter,
)
from small_models import tiny_config_kwargs

SPECIALS = ("<bos>", "<eos>", "<oov>", "<pad>", "<bow>", "<eow>")


@pytest.mark.parametrize("width", [3, 4, 20, 50])
def test_byte_boundary_rows_are_those_of_the_configuration(width):
    config = ElmoConfig(**tiny_config_kwargs(max_characters_per_token=width))
    assert byte_boundary_char_ids(BEGINNING_OF_SENTENCE, width) == config.bos_char_ids
    assert byte_boundary_char_ids(BEGINNING_OF_SENTENCE_BYTE, width) == config.bos_char_ids
    assert byte_boundary_char_ids(END_OF_SENTENCE, width) == config.eos_char_ids
    assert byte_boundary_char_ids(END_OF_SENTENCE_BYTE, width) == config.eos_char_ids
    assert ByteScheme(width).sentence_boundary_ids() == (config.bos_char_ids, config.eos_char_ids)
    with pytest.raises(ValueError, match="boundary must be '<S>' or '</S>'"):
        byte_boundary_char_ids("<s>", width)


def test_the_dictionary_boundary_rows_are_the_shipped_models():
    tokenizer = ElmoTokenizer.from_pretrained(hf_elmo.DEFAULT_MODEL)
    config = ElmoConfig.from_pretrained(hf_elmo.DEFAULT_MODEL)
    assert tokenizer.char_scheme == config.char_scheme == "dictionary"
    assert tokenizer.sentence_boundary_char_ids() == (config.bos_char_ids, config.eos_char_ids)


def test_every_scheme_is_chosen_by_its_name_and_reads_its_words_back():
    assert CHAR_SCHEMES == ("bytes", "dictionary") and ElmoConfig().char_scheme in CHAR_SCHEMES
    vocabulary = {entry: index for index, entry in enumerate(SPECIALS + tuple("北京ab"), start=1)}
    for name, scheme_class in CHARACTER_SCHEMES.items():
        assert scheme_class.name == name
        scheme = scheme_class.from_options(10, vocabulary if scheme_class.name == "dictionary" else None)
        for word in ("北京", "ab", "a"):
            ids = scheme.word_ids(word)
            assert len(ids) == 10 and 0 not in ids
            assert scheme.decode_word(ids) == word
        assert max(max(row) for row in scheme.sentence_boundary_ids()) < scheme.vocab_size


def test_a_character_vocabulary_with_a_repeated_id_or_entry_is_refused_naming_the_file(tmp_path):
    repeated_id = {entry: index for index, entry in enumerate(SPECIALS + ("北", "京"), start=1)}
    repeated_id["京"] = repeated_id["北"]
    path = tmp_path / "char_vocab.json"
    path.write_text(json.dumps(repeated_id, ensure_ascii=False), encoding="utf-8")
    with pytest.raises(ValueError, match=f"character vocabulary {path}: '北' and '京' have the same id 7"):
        ElmoTokenizer(char_scheme="dictionary", char_vocab_file=str(path))
    with pytest.raises(ValueError, match="the character vocabulary: '北' and '京' have the same id 7"):
        ElmoTokenizer(char_scheme="dictionary", char_vocab=repeated_id)
    path.write_text('{"<bos>": 1, "<eos>": 2, "<oov>": 3, "<pad>": 4, "<bow>": 5, "<eow>": 6, "北": 7, "北": 8}')
    with pytest.raises(ValueError, match=f"character vocabulary {path} lists '北' twice"):
        ElmoTokenizer(char_scheme="dictionary", char_vocab_file=str(path))
    # A saved folder is refused the same way.
    ElmoTokenizer(segmenter="chars").save_pretrained(tmp_path)
    options = json.loads((tmp_path / "tokenizer_config.json").read_text())
    (tmp_path / "tokenizer_config.json").write_text(json.dumps({**options, "char_scheme": "dictionary"}))
    with pytest.raises(ValueError, match="char_vocab.json lists '北' twice"):
        ElmoTokenizer.from_pretrained(tmp_path)


def test_vocabulary_files_that_are_not_vocabularies_are_one_line(tmp_path):
    path = tmp_path / "char_vocab.json"
    for content, message in (("[1, 2]", "must map strings to integer ids"), ("{", "is not valid JSON"),
                             ('{"a": 1}', "lacks the special entries")):
        path.write_text(content)
        with pytest.raises(ValueError, match=message):
            ElmoTokenizer(char_scheme="dictionary", char_vocab_file=str(path))
    with pytest.raises(ValueError, match="character vocabulary file not found"):
        ElmoTokenizer(char_scheme="dictionary", char_vocab_file=str(tmp_path / "nothing.json"))
    with pytest.raises(ValueError, match="ids must be >= 1"):
        DictionaryScheme(10, {entry: index for index, entry in enumerate(SPECIALS)})


def test_segmenters_by_name():
    assert make_segmenter("whitespace")("a,b  c") == ["a,b", "c"]
    assert make_segmenter("chars")("我爱 NLP!") == ["我", "爱", "NLP", "!"]
    assert make_segmenter("jieba")("我爱北京天安门") == ["我", "爱", "北京", "天安门"]
    assert make_segmenter("auto").name == "jieba"  # jieba is a dependency
    with pytest.raises(ValueError, match="segmenter must be one of"):
        make_segmenter("spacy")


def test_the_module_imports_with_the_standard_library_only():
    """configuration_elmo.py takes its constants from here; remote code imports it flat, without hf_elmo."""
    script = f"""
import importlib.util, sys
for name in ("torch", "transformers", "tokenizers", "jieba", "numpy", "hf_elmo"):
    sys.modules[name] = None
spec = importlib.util.spec_from_file_location("elmo_text", {text_elmo.__file__!r})
module = importlib.util.module_from_spec(spec)
spec.loader.exec_module(module)
print(module.ByteScheme(5).word_ids("a"), module.byte_boundary_char_ids("<S>", 5),
      module.make_segmenter("whitespace")("x y"))
"""
    result = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, result.stderr
    expected = (ByteScheme(5).word_ids("a"), byte_boundary_char_ids("<S>", 5), make_segmenter("whitespace")("x y"))
    assert result.stdout.strip() == " ".join(map(str, expected))
