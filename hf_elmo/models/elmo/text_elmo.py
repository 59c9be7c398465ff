"""Text -> words (word segmenters) -> `max_characters_per_token` ids per word (character schemes), 0 being kept
for a padded word position. Only the standard library is imported at module level (jieba and `tokenizers` when a
segmenter needs them). Ships as remote code."""

from __future__ import annotations

import collections
import io
import json
import logging
import os
import re
import stat
import unicodedata
import uuid
from collections.abc import Callable, Mapping, Sequence
from typing import ClassVar

logger = logging.getLogger(__name__)

# Raw ids of the byte scheme: 0-255 are UTF-8 bytes, then five markers.
BEGINNING_OF_SENTENCE_BYTE, END_OF_SENTENCE_BYTE, BEGINNING_OF_WORD_BYTE, END_OF_WORD_BYTE = 256, 257, 258, 259
PADDING_BYTE = 260
# Every byte-scheme id the model sees is the raw id + 1, so that 0 can mark a padded word position.
CHARACTER_ID_SHIFT = 1
PADDED_POSITION_ID = 0
BYTE_SCHEME_VOCAB_SIZE = PADDING_BYTE + CHARACTER_ID_SHIFT + 1
# The sentence boundaries the model adds around every sentence (bilm-tf's names).
BEGINNING_OF_SENTENCE, END_OF_SENTENCE = "<S>", "</S>"
_BOUNDARY_BYTES = {BEGINNING_OF_SENTENCE: BEGINNING_OF_SENTENCE_BYTE, END_OF_SENTENCE: END_OF_SENTENCE_BYTE}
# Special entries of the dictionary scheme's vocabularies (ELMoForManyLangs' names).
DICTIONARY_CHAR_SPECIALS = ("<bos>", "<eos>", "<oov>", "<pad>", "<bow>", "<eow>")
DICTIONARY_WORD_SPECIALS = ("<oov>", "<pad>")
PAD_TOKEN = "<pad>"  # the word a padded position stands for (the word vocabulary's entry for it too)
DICTIONARY_SENTENCE_BOUNDARIES = ("<bos>", "<eos>")  # as words, they are the `<S>` / `</S>` rows
# Entries of a dictionary-scheme row that are not characters of the word (an unknown one reads as U+FFFD).
_NON_CHARACTERS = set(DICTIONARY_CHAR_SPECIALS) - {"<oov>"}
CHAR_VOCAB_FILE, WORD_VOCAB_FILE, JIEBA_USER_DICT_FILE = "char_vocab.json", "word_vocab.json", "jieba_user_dict.txt"
_NO_VOCABULARIES = "the byte scheme has no vocabularies: pass char_scheme='dictionary' to use them"
MAX_TEXT_FILE_BYTES = 1 << 28  # a vocabulary or a user dictionary, read whole


def byte_boundary_char_ids(boundary: str | int, max_characters_per_token: int) -> list[int]:
    """The model's ids of the byte scheme's `<S>` / `</S>` pseudo-word; `boundary` is ``"<S>"``, ``"</S>"`` or a raw
    byte-scheme id such as `BEGINNING_OF_SENTENCE_BYTE`."""
    if isinstance(boundary, str):
        if boundary not in _BOUNDARY_BYTES:
            raise ValueError(f"boundary must be {BEGINNING_OF_SENTENCE!r} or {END_OF_SENTENCE!r}, got {boundary!r}")
        boundary = _BOUNDARY_BYTES[boundary]
    ids = [BEGINNING_OF_WORD_BYTE, boundary, END_OF_WORD_BYTE] + [PADDING_BYTE] * (max_characters_per_token - 3)
    return [i + CHARACTER_ID_SHIFT for i in ids[:max_characters_per_token]]


_SURROGATE = re.compile("[\ud800-\udfff]")
# C0 and C1 control characters other than tab, newline, vertical tab, form feed, carriage return and NEL.
_CONTROL = re.compile("[\x00-\x08\x0e-\x1f\x7f-\x84\x86-\x9f]")
_CJK_RUN = re.compile("([\u2e80-\u2fdf\u3005\u3007\u3021-\u3029\u3038-\u303b\u3400-\u4dbf\u4e00-\u9fff"
                      "\uf900-\ufaff\U00020000-\U0002ffff\U00030000-\U0003134f]+)")


def without_surrogates(text: str) -> str:
    """Join surrogate pairs into their character and drop lone surrogates, which UTF-8 cannot encode."""
    if _SURROGATE.search(text) is None:
        return text
    return text.encode("utf-16-le", "surrogatepass").decode("utf-16-le", "ignore")


def _clean_raw_text(text: str) -> tuple[str, list[tuple[int, int]] | None]:
    """`text` with control characters as spaces (the Rust pre-tokenizer cannot take surrogates, and control characters
    should not glue words) and surrogates as `without_surrogates` treats them, and each of its characters' `(start,
    end)` in `text` (None: the same places, no surrogates)."""
    text = _CONTROL.sub(" ", text)
    if _SURROGATE.search(text) is None:
        return text, None
    characters, places = [], []
    for match in re.finditer("[\ud800-\udbff][\udc00-\udfff]|[\ud800-\udfff]|.", text, re.DOTALL):
        character = without_surrogates(match.group())  # a pair joined, a lone surrogate dropped
        if character:
            characters.append(character)
            places.append(match.span())
    return "".join(characters), places


def _save_file(directory: str, filename_prefix: str | None, name: str, write: Callable[[io.TextIOBase], None]):
    """Written beside and renamed into place, so a killed save never leaves half a file; the temporary is hidden and
    named for its process and a random part, so that concurrent saves never write into one file."""
    name = (filename_prefix + "-" if filename_prefix else "") + name
    path = os.path.join(directory, name)
    temporary = os.path.join(directory, f".{name}.tmp-{os.getpid()}-0-{uuid.uuid4().hex}")
    try:
        with open(temporary, "w", encoding="utf-8") as handle:
            write(handle)
        os.replace(temporary, path)
    finally:
        if os.path.exists(temporary):
            os.remove(temporary)
    return (path,)


def open_file(path: str | os.PathLike, what: str, mode: str = "rb", **kwargs):
    """`path` opened for reading; one ValueError naming `what` and the path when it is missing, a folder or
    unreadable (the package's file readers use it too)."""
    try:
        return open(path, mode, **kwargs)
    except FileNotFoundError:
        raise ValueError(f"{what} not found: {os.fspath(path)}") from None
    except IsADirectoryError:
        raise ValueError(f"{what} {os.fspath(path)} is a folder, not a file") from None
    except OSError as error:
        raise ValueError(f"cannot read the {what} {os.fspath(path)}: {error.strerror or error}") from None


def check_text_file(path: str | os.PathLike, what: str) -> None:
    """One ValueError naming `what` and the path unless it is a regular file (a device or a FIFO would be read forever
    or block) of at most MAX_TEXT_FILE_BYTES (it is read whole); a missing file or a folder is left to `open_file`."""
    try:
        status = os.stat(path)
    except OSError:
        return
    if not (stat.S_ISREG(status.st_mode) or stat.S_ISDIR(status.st_mode)):
        raise ValueError(f"{what} {os.fspath(path)} is not a regular file")
    if status.st_size > MAX_TEXT_FILE_BYTES:
        raise ValueError(f"{what} {os.fspath(path)} holds {status.st_size} bytes, more than the "
                         f"{MAX_TEXT_FILE_BYTES} read whole")


def _read_text_file(path: str | os.PathLike, what: str) -> str:
    """A UTF-8 text file (a byte order mark is accepted) checked by `check_text_file`; a missing or undecodable file
    is one ValueError."""
    check_text_file(path, what)
    try:
        with open_file(path, what, "r", encoding="utf-8-sig") as handle:
            return handle.read()
    except UnicodeDecodeError as error:
        raise ValueError(f"{what} {os.fspath(path)} is not UTF-8 text ({error.reason} at byte {error.start})") from None


def check_inside_model_folder(path: str | os.PathLike, name_or_path: str | os.PathLike | None) -> None:
    """Refuse a file that a model folder names (`path`, found in the folder `name_or_path` or in a Hub cache entry)
    when it resolves outside that folder: a link planted in a repository must not bring another file of this
    machine into what is read, and saved again with the model."""
    path = os.path.abspath(path)
    snapshot = os.path.dirname(path)
    if os.path.basename(os.path.dirname(snapshot)) == "snapshots":  # the Hub's snapshots/<revision>/ link to blobs/
        root = os.path.dirname(os.path.dirname(snapshot))
    elif name_or_path and os.path.isdir(name_or_path) and path.startswith(os.path.abspath(name_or_path) + os.sep):
        root = os.path.abspath(name_or_path)
    else:
        return  # a file the caller names, not the folder
    if not os.path.realpath(path).startswith(os.path.realpath(root) + os.sep):
        raise ValueError(f"{path} resolves outside its model folder {root} (to {os.path.realpath(path)}): files a "
                         "model folder names are read only from inside it")


def _given_or_loaded(vocabulary, vocabulary_file, kind: str) -> tuple[Mapping, str]:
    """A vocabulary given itself or as a JSON file (`kind` "character" or "word"), and how errors name it."""
    if vocabulary is not None:
        return vocabulary, f"the {kind} vocabulary"
    source = f"{kind} vocabulary {os.fspath(vocabulary_file)}"
    text = _read_text_file(vocabulary_file, f"{kind} vocabulary file")

    def no_repeated_keys(pairs):
        seen = {}
        for key, value in pairs:
            if key in seen:
                raise ValueError(f"{source} lists {key!r} twice")
            seen[key] = value
        return seen

    try:
        return json.loads(text, object_pairs_hook=no_repeated_keys), source
    except json.JSONDecodeError as error:
        raise ValueError(f"{kind} vocabulary file {os.fspath(vocabulary_file)} is not valid JSON: {error}") from None


def _checked_vocabulary(vocabulary, source: str, specials, lowest_id: int, why: str = "") -> dict[str, int]:
    entries = vocabulary.items() if isinstance(vocabulary, Mapping) else None
    if entries is None or not all(isinstance(key, str) and isinstance(value, int) and not isinstance(value, bool)
                                  for key, value in entries):
        raise ValueError(f"{source} must map strings to integer ids")
    missing = [name for name in specials if name not in vocabulary]
    if missing:
        raise ValueError(f"{source} lacks the special entries {missing}")
    if min(vocabulary.values()) < lowest_id:
        raise ValueError(f"{source}: ids must be >= {lowest_id}{why}")
    return dict(vocabulary)


class CharacterScheme:
    """How a word becomes `max_characters_per_token` character ids (0 never: it marks a padded position). A scheme
    is made by `from_options(max_characters_per_token, vocabulary=None, vocabulary_file=None)` and gives
    `word_ids(word)`, `sentence_boundary_ids()` (the rows of `<S>` and `</S>`, which the model adds around every
    sentence) and `decode_word(ids)` (the word as far as the ids tell it)."""

    name: ClassVar[str]
    vocab_size: int  # size of the character id space, the padding id 0 included
    vocabulary: dict[str, int] | None = None  # character -> model id, for schemes with a vocabulary

    def __init__(self, max_characters_per_token: int):
        self.max_characters_per_token = max_characters_per_token

    def save(self, directory: str, filename_prefix: str | None = None) -> tuple[str, ...]:
        """Write what the scheme needs besides its options (a vocabulary file) and return the paths."""
        return ()

    def warn_if_mostly_unknown(self) -> None:
        """Warn (once) when most characters read since the last call were unknown to the vocabulary."""


class ByteScheme(CharacterScheme):
    """AllenNLP / bilm-tf: the UTF-8 bytes of the word cut to `max_characters_per_token - 2` (a multi-byte
    character may be cut, as in the references), between begin- and end-of-word markers, every id + 1."""

    name = "bytes"
    vocab_size = BYTE_SCHEME_VOCAB_SIZE

    @classmethod
    def from_options(cls, max_characters_per_token, vocabulary=None, vocabulary_file=None) -> ByteScheme:
        if vocabulary is not None or vocabulary_file is not None:
            raise ValueError(_NO_VOCABULARIES)
        return cls(max_characters_per_token)

    def word_ids(self, word: str) -> list[int]:
        data = without_surrogates(word).encode("utf-8")[: self.max_characters_per_token - 2]
        padding = [PADDING_BYTE] * (self.max_characters_per_token - len(data) - 2)
        return [i + CHARACTER_ID_SHIFT for i in [BEGINNING_OF_WORD_BYTE, *data, END_OF_WORD_BYTE, *padding]]

    def sentence_boundary_ids(self) -> tuple[list[int], list[int]]:
        return tuple(byte_boundary_char_ids(boundary, self.max_characters_per_token) for boundary in _BOUNDARY_BYTES)

    def decode_word(self, ids: list[int]) -> str:
        data = bytes(i - CHARACTER_ID_SHIFT for i in ids if CHARACTER_ID_SHIFT <= i <= 255 + CHARACTER_ID_SHIFT)
        return data.decode("utf-8", "replace")


class DictionaryScheme(CharacterScheme):
    """ELMoForManyLangs: each character of the word cut to `max_characters_per_token - 2` characters is looked up in
    the character vocabulary (unknown -> `<oov>`); the words `<bos>` / `<eos>` are the sentence-boundary rows."""

    name = "dictionary"

    def __init__(self, max_characters_per_token: int, vocabulary: Mapping[str, int], source="the character vocabulary"):
        super().__init__(max_characters_per_token)
        vocabulary = _checked_vocabulary(vocabulary, source, DICTIONARY_CHAR_SPECIALS, 1,
                                         " (0 marks a padded word position)")
        self._characters_by_id = {}
        for character, index in vocabulary.items():
            first = self._characters_by_id.setdefault(index, character)
            if first != character:
                raise ValueError(f"{source}: {first!r} and {character!r} have the same id {index}")
        self.vocabulary = vocabulary
        self.vocab_size = max(vocabulary.values()) + 1
        self._begin_id, self._end_id = vocabulary["<bow>"], vocabulary["<eow>"]
        self._pad_id, self._unknown_id = vocabulary["<pad>"], vocabulary["<oov>"]
        self._read = self._unknown = 0
        self._warned = False

    @classmethod
    def from_options(cls, max_characters_per_token, vocabulary=None, vocabulary_file=None) -> DictionaryScheme:
        if vocabulary is None and vocabulary_file is None:
            raise ValueError("char_scheme='dictionary' needs a character vocabulary (char_vocab_file or char_vocab)")
        return cls(max_characters_per_token, *_given_or_loaded(vocabulary, vocabulary_file, "character"))

    def word_ids(self, word: str) -> list[int]:
        characters = ([self.vocabulary[word]] if word in DICTIONARY_SENTENCE_BOUNDARIES else
                      [self.vocabulary.get(c, self._unknown_id) for c in word[: self.max_characters_per_token - 2]])
        if not self._warned:
            self._read, self._unknown = self._read + len(characters), self._unknown + characters.count(self._unknown_id)
        # The original writes `<eow>` first and `<bow>` last (its variables are swapped); the model was trained so.
        ids = [self._end_id, *characters, self._begin_id]
        return ids + [self._pad_id] * (self.max_characters_per_token - len(ids))

    def sentence_boundary_ids(self) -> tuple[list[int], list[int]]:
        return tuple(map(self.word_ids, DICTIONARY_SENTENCE_BOUNDARIES))

    def warn_if_mostly_unknown(self) -> None:
        # English text to a Chinese model is no error, but its vectors mean little: say so once.
        if not self._warned and self._unknown * 2 > self._read:
            self._warned = True
            scripts = collections.Counter(unicodedata.name(c, "?").split()[0] for c in self.vocabulary if c.isalpha())
            script = scripts.most_common(1)[0][0] if scripts else "?"  # the first word of most letters' names
            logger.warning("%d%% of the characters are unknown to this %s model (its character vocabulary): its "
                           "vectors for this text mean little", round(100 * self._unknown / self._read),
                           {"CJK": "Chinese"}.get(script, script.title()))
        self._read = self._unknown = 0

    def decode_word(self, ids: list[int]) -> str:
        characters = [self._characters_by_id.get(i, "\ufffd") for i in ids]
        return "".join(c if len(c) == 1 else "\ufffd" for c in characters if c not in _NON_CHARACTERS)

    def save(self, directory: str, filename_prefix: str | None = None) -> tuple[str, ...]:
        return _save_file(directory, filename_prefix, CHAR_VOCAB_FILE,
                          lambda handle: json.dump(self.vocabulary, handle, ensure_ascii=False, indent=0))


CHARACTER_SCHEMES: dict[str, type[CharacterScheme]] = {scheme.name: scheme for scheme in (ByteScheme, DictionaryScheme)}
CHAR_SCHEMES = tuple(CHARACTER_SCHEMES)


class WordVocabulary:
    """The word vocabulary of an ELMoForManyLangs model with a word embedding: word -> id, unknown words ->
    `<oov>`. Words are cut to `max_characters_per_token - 2` characters first, as for their characters."""

    def __init__(self, max_characters_per_token: int, vocabulary: Mapping[str, int], source="the word vocabulary"):
        self.max_characters_per_token = max_characters_per_token
        self.vocabulary = _checked_vocabulary(vocabulary, source, DICTIONARY_WORD_SPECIALS, 0)
        self.unknown_id, self.pad_id = self.vocabulary["<oov>"], self.vocabulary[PAD_TOKEN]

    @classmethod
    def from_options(cls, characters: CharacterScheme, vocabulary: Mapping[str, int] | None = None,
                     vocabulary_file: str | os.PathLike | None = None) -> WordVocabulary | None:
        """The word vocabulary given itself or as a file (None: neither); only dictionary-scheme models have one."""
        if vocabulary is None and vocabulary_file is None:
            return None
        if characters.vocabulary is None:
            raise ValueError(_NO_VOCABULARIES)
        return cls(characters.max_characters_per_token, *_given_or_loaded(vocabulary, vocabulary_file, "word"))

    def word_id(self, word: str) -> int:
        return self.vocabulary.get(word[: self.max_characters_per_token - 2], self.unknown_id)

    def save(self, directory: str, filename_prefix: str | None = None) -> tuple[str, ...]:
        return _save_file(directory, filename_prefix, WORD_VOCAB_FILE,
                          lambda handle: json.dump(self.vocabulary, handle, ensure_ascii=False, indent=0))


class WordSegmenter:
    """Called with raw text, gives its words; `name` is saved, `chinese_segmentation` says what Chinese gets."""

    name: ClassVar[str]
    chinese_segmentation: ClassVar[str]

    def __call__(self, text: str) -> list[str]:
        return [word for word, _, _ in self.words_with_offsets(text)]

    def words_with_offsets(self, text: str) -> list[tuple[str, int, int]]:
        """Each word of `text` with its `(start, end)` in `text` (a word may lack a surrogate that `text[start:end]`
        holds)."""
        cleaned, places = _clean_raw_text(text)
        words = self._split(cleaned)  # at their places in the cleaned text
        return words if places is None else [(word, places[start][0], places[end - 1][1]) for word, start, end in words]

    def save(self, directory: str, filename_prefix: str | None = None) -> tuple[str, ...]:
        """Write what the segmenter needs besides its name (a user dictionary) and return the paths."""
        return ()


class WhitespaceSegmenter(WordSegmenter):
    """Words are what whitespace separates: no punctuation splitting, no Chinese segmentation."""

    name = "whitespace"
    chinese_segmentation = "none"

    def _split(self, text: str) -> list[tuple[str, int, int]]:
        return [(match.group(), *match.span()) for match in re.finditer(r"\S+", text)]  # \s is str.split's space


class CharacterSegmenter(WordSegmenter):
    """Whitespace and punctuation separate words (BERT's pre-tokenizer); each CJK character is a word."""

    name = "chars"
    chinese_segmentation = "chars"

    def __init__(self):
        from tokenizers.pre_tokenizers import BertPreTokenizer

        self._pre_tokenizer = BertPreTokenizer()

    def _split(self, text: str) -> list[tuple[str, int, int]]:
        words = []
        for piece, (start, _) in self._pre_tokenizer.pre_tokenize_str(text):  # offsets in characters
            for part in _CJK_RUN.split(piece):  # a piece without CJK characters is its one part
                for word in self.split_cjk_run(part) if _CJK_RUN.fullmatch(part) else [part] if part else []:
                    words.append((word, start, start + len(word)))  # a run's words are the run, cut
                    start += len(word)
        return words

    def split_cjk_run(self, run: str) -> list[str]:
        return list(run)


def _load_jieba():
    try:
        import jieba
    except ImportError:
        return None
    jieba.setLogLevel(logging.WARNING)
    return jieba


class JiebaSegmenter(CharacterSegmenter):
    """As `CharacterSegmenter`, with runs of CJK characters cut into jieba's words. A user dictionary (jieba's format,
    UTF-8) goes into a jieba tokenizer of this segmenter's own: jieba's global one is never changed."""

    name = "jieba"
    chinese_segmentation = "jieba"

    def __init__(self, user_dict: str | os.PathLike | None = None):
        super().__init__()
        if user_dict is not None and not isinstance(user_dict, (str, os.PathLike)):
            raise ValueError(f"user_dict must be the path of a jieba user dictionary, got {user_dict!r}")
        self.user_dict_text = None if user_dict is None else _read_text_file(user_dict, "jieba user dictionary")
        self._jieba = self._make_jieba(self.user_dict_text)

    @staticmethod
    def _make_jieba(user_dict_text: str | None):
        jieba = _load_jieba()
        if jieba is None:
            raise ImportError("this tokenizer segments Chinese with jieba (segmenter='jieba'), which is not installed "
                              "here: pip install jieba (splitting into single characters instead would change every "
                              "result)")
        if user_dict_text is None:
            return jieba  # its default tokenizer, read only
        own = jieba.Tokenizer()
        own.load_userdict(io.StringIO(user_dict_text))
        return own

    def split_cjk_run(self, run: str) -> list[str]:
        return self._jieba.lcut(run)

    def save(self, directory: str, filename_prefix: str | None = None) -> tuple[str, ...]:
        if self.user_dict_text is None:
            return ()
        return _save_file(directory, filename_prefix, JIEBA_USER_DICT_FILE,
                          lambda handle: handle.write(self.user_dict_text))

    def __getstate__(self):
        # Neither a module nor a jieba tokenizer (it holds a lock) can be pickled, as DataLoader workers started
        # with "spawn" and copy.deepcopy need: keep the user dictionary's text and build jieba's side again.
        return {**self.__dict__, "_jieba": None}

    def __setstate__(self, state):
        self.__dict__.update(state, _jieba=self._make_jieba(state["user_dict_text"]))


SEGMENTERS = ("auto", "jieba", "chars", "whitespace")
_SEGMENTER_CLASSES = {kind.name: kind for kind in (JiebaSegmenter, CharacterSegmenter, WhitespaceSegmenter)}


def make_segmenter(name: str, user_dict: str | os.PathLike | None = None) -> WordSegmenter:
    """The segmenter of `name` (one of `SEGMENTERS`); `"auto"` is jieba when it is installed, else characters."""
    if name not in SEGMENTERS:
        raise ValueError(f"segmenter must be one of {', '.join(map(repr, SEGMENTERS))}, got {name!r}")
    if user_dict is not None:
        if name not in ("auto", JiebaSegmenter.name):
            raise ValueError(f"user_dict is a jieba user dictionary: it needs segmenter='jieba', not {name!r}")
        return JiebaSegmenter(user_dict)
    if name == "auto":
        if _load_jieba() is not None:
            return JiebaSegmenter()
        logger.warning("segmenter='auto' without jieba installed: Chinese text is split into single characters")
        return CharacterSegmenter()
    return _SEGMENTER_CLASSES[name]()


# A character tagger's units: the characters of words, for the tagging pipeline and the ONNX export's client.
def character_places(words: Sequence[Sequence[str]]) -> tuple[list[str], list[int], list[int]]:
    """The characters of `words` (strings, or lists of tokens), the word of each, and the index of its place in that
    word in the character tagger's `WORD_POSITIONS` (S, B, M, E)."""
    characters, word_index, positions = [], [], []
    for number, word in enumerate(words):
        characters += word
        word_index += [number] * len(word)
        positions += [0] if len(word) == 1 else [1] + [2] * (len(word) - 2) + [3]
    return characters, word_index, positions


# Tags of words -> entity spans, for the tagging pipeline and the ONNX export's client (which reads this file in the
# export folder). BIO (IOB2) is the main scheme; IOB1, BIOES/IOBES and BMES tags are read leniently, the way conlleval
# does: an `I-`/`M-`/`E-` tag after a different type starts a new entity, `S-`/`E-` close one.
def split_tag(tag: str) -> tuple[str, str | None]:
    """`"B-PER"` -> (`"B"`, `"PER"`); `"O"` (or anything without a known prefix) -> (`"O"`, None)."""
    prefix, sep, entity = tag.partition("-")
    if sep and prefix in ("B", "I", "E", "S", "M") and entity:
        return prefix, entity
    return "O", None


def tag_spans(tags: Sequence[str]) -> list[tuple[str, int, int]]:
    """Entities as (type, first word, end word exclusive)."""
    spans: list[tuple[str, int, int]] = []
    current: list | None = None  # [type, start]
    for index, tag in enumerate(tags):
        prefix, entity = split_tag(tag)
        if current is not None and (entity != current[0] or prefix in ("B", "S") or entity is None):
            spans.append((current[0], current[1], index))
            current = None
        if entity is not None and current is None:
            current = [entity, index]
        if current is not None and prefix in ("E", "S"):
            spans.append((current[0], current[1], index + 1))
            current = None
    if current is not None:
        spans.append((current[0], current[1], len(tags)))
    return spans
