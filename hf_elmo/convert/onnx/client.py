"""elmo_client.py: run an `hf-elmo export --format onnx` folder with numpy and onnxruntime alone (and jieba, for a
model that segments Chinese with it). No torch, transformers, tokenizers or hf-elmo: from the model's own files, only
its text_elmo.py, which the export writes beside this one, for the entity spans of tags and a character tagger's units.

    import sys; sys.path.insert(0, "ner-onnx")      # the export folder holds this file
    from elmo_client import ElmoClient
    client = ElmoClient("ner-onnx")
    client.predict(["张三在北京工作。"])              # taggers: entity spans; classifiers: labels with scores
    client.sentence_vectors(["我们喝小米粥。"])        # any model: one vector per text

Text becomes words exactly as hf-elmo's `ElmoTokenizer` splits it, from what the export wrote in client.json:
surrogates are joined into their characters (lone ones dropped) and control characters become spaces; words are
split at the code points where the `tokenizers` library's BertPreTokenizer splits (whitespace removed, punctuation
isolated: the export lists both sets, so the Python version running this file does not matter); runs of Chinese
characters are cut by jieba or into characters; lower-casing, where the model does it, uses the exported table.
Every word keeps its (start, end) offsets in the text it came from: `text[start:end]` is the word as written.
This file is the same as hf_elmo/convert/onnx/client.py in the package, which the export copies beside the model.
"""

from __future__ import annotations

import json
import logging
import math
import re
from bisect import bisect_right
from pathlib import Path

import numpy as np

try:  # in an export folder: the model's text_elmo.py, which the tokenizer saved beside this file
    from text_elmo import character_places, tag_spans
except ImportError:  # inside the hf_elmo package
    from ...models.elmo.text_elmo import character_places, tag_spans

CLIENT_FILE, CLIENT_CONFIG = "elmo_client.py", "client.json"
FORMAT_VERSION = 1
_SURROGATE = re.compile("[\ud800-\udfff]")
_LAYER_CHOICES = ("all", "top", "average", "mix")
_WORD_POSITIONS = 4  # S, B, M, E: a character's place in its word


class Word(tuple):
    """(word, start, end): the word as the model reads it (lower-cased where the model does that) and its span in
    the text."""

    __slots__ = ()

    def __new__(cls, word: str, start: int, end: int):
        return super().__new__(cls, (word, start, end))

    word = property(lambda self: self[0])
    start = property(lambda self: self[1])
    end = property(lambda self: self[2])


def _ranges_class(ranges) -> str:
    """A regular-expression character class body from [[first, last], ...] code points."""
    def char(code):
        return re.escape(chr(code))
    return "".join(char(a) if a == b else f"{char(a)}-{char(b)}" for a, b in ranges)


class _RangeSet:
    def __init__(self, ranges):
        self.starts = [a for a, _ in ranges]
        self.ends = [b for _, b in ranges]

    def __contains__(self, code: int) -> bool:
        index = bisect_right(self.starts, code) - 1
        return index >= 0 and code <= self.ends[index]


class Tokenizer:
    """`ElmoTokenizer`'s text -> words -> character ids, from an export folder's client.json and vocabularies."""

    def __init__(self, folder, options: dict):
        folder = Path(folder)
        self.width = options["max_characters_per_token"]
        self.segmenter = options["segmenter"]
        self.lower_case = options["do_lower_case"]
        self.char_scheme = options["char_scheme"]
        self._control = re.compile(options["control"])
        self._cjk_run = re.compile(options["cjk_run"])
        whitespace = _ranges_class(options["split_whitespace"])
        punctuation = _ranges_class(options["split_punctuation"])
        # BertPreTokenizer: whitespace separates and is removed; each punctuation code point is a word of its own.
        self._pieces = re.compile(f"[{punctuation}]|[^{punctuation}{whitespace}]+")
        self._python_whitespace = re.compile(f"[^{_ranges_class(options['python_whitespace'])}]+")
        self._lower = {int(code): text for code, text in options.get("lowercase", {}).items()}
        self._case_ignorable = _RangeSet(options.get("case_ignorable", []))
        self._cased = _RangeSet(options.get("cased", []))
        self._jieba = None
        if self.segmenter == "jieba":
            self._jieba = _jieba_tokenizer(folder / options["user_dict"] if options.get("user_dict") else None)
        self.chars = self.words = None
        if self.char_scheme == "dictionary":
            self.chars = json.loads((folder / "char_vocab.json").read_text(encoding="utf-8"))
        if options.get("word_vocab"):
            self.words = json.loads((folder / "word_vocab.json").read_text(encoding="utf-8"))

    # text -> cleaned text with the offsets of each cleaned character in the original ----------------------------
    @staticmethod
    def _clean(text: str) -> tuple[str, list[int] | None, list[int] | None]:
        """Surrogate pairs joined, lone surrogates dropped (as `text_elmo.without_surrogates`); (text, starts, ends)
        with the original span of each character, or None where nothing moved."""
        if _SURROGATE.search(text) is None:
            return text, None, None
        characters, starts, ends = [], [], []
        index, length = 0, len(text)
        while index < length:
            code = ord(text[index])
            if 0xD800 <= code <= 0xDBFF and index + 1 < length and 0xDC00 <= ord(text[index + 1]) <= 0xDFFF:
                characters.append(chr(0x10000 + ((code - 0xD800) << 10) + (ord(text[index + 1]) - 0xDC00)))
                starts.append(index)
                ends.append(index + 2)
                index += 2
                continue
            if not 0xD800 <= code <= 0xDFFF:
                characters.append(text[index])
                starts.append(index)
                ends.append(index + 1)
            index += 1
        return "".join(characters), starts, ends

    def lower(self, word: str) -> str:
        """`str.lower` of the exporting Python: its table, and Greek capital sigma's final form by its rule."""
        if not self._lower:
            return word
        out = []
        for index, character in enumerate(word):
            if character == "\u03a3":
                out.append("\u03c2" if self._final_sigma(word, index) else "\u03c3")
            else:
                out.append(self._lower.get(ord(character), character))
        return "".join(out)

    def _final_sigma(self, word: str, index: int) -> bool:
        before = index - 1
        while before >= 0 and ord(word[before]) in self._case_ignorable:
            before -= 1
        if before < 0 or ord(word[before]) not in self._cased:
            return False
        after = index + 1
        while after < len(word) and ord(word[after]) in self._case_ignorable:
            after += 1
        return after == len(word) or ord(word[after]) not in self._cased

    def words_of(self, text: str) -> list[Word]:
        """The words of `text` with their (start, end) in it."""
        if not isinstance(text, str):
            raise TypeError(f"texts must be strings, got {type(text).__name__}")
        cleaned, starts, ends = self._clean(text)
        cleaned = self._control.sub(" ", cleaned)
        spans = []
        if self.segmenter == "whitespace":
            spans = [(match.group(), match.start()) for match in self._python_whitespace.finditer(cleaned)]
        else:
            for piece in self._pieces.finditer(cleaned):
                offset, last = piece.start(), 0
                text_of_piece = piece.group()
                for run in self._cjk_run.finditer(text_of_piece):
                    if run.start() > last:
                        spans.append((text_of_piece[last:run.start()], offset + last))
                    spans += self._segment(run.group(), offset + run.start())
                    last = run.end()
                if last < len(text_of_piece):
                    spans.append((text_of_piece[last:], offset + last))
        words = []
        for word, start in spans:
            end = start + len(word)
            if starts is not None:
                start, end = starts[start], ends[end - 1]
            words.append(Word(self.lower(word) if self.lower_case else word, start, end))
        return words

    def _segment(self, run: str, offset: int) -> list[tuple[str, int]]:
        parts = list(run) if self._jieba is None else self._jieba.lcut(run)
        if "".join(parts) != run:  # jieba covers its input; anything else would lose the offsets
            raise RuntimeError(f"jieba's words do not cover {run!r}")
        spans, position = [], offset
        for part in parts:
            spans.append((part, position))
            position += len(part)
        return spans

    # words -> ids -----------------------------------------------------------------------------------------------
    def char_ids(self, word: str) -> list[int]:
        """The `max_characters_per_token` character ids of a word (`ElmoTokenizer.word_to_char_ids`)."""
        word = self.lower(word) if self.lower_case else word
        if self.chars is None:  # UTF-8 bytes + 1 between begin (259) and end (260) of word, padded with 261
            data = Tokenizer._clean(word)[0].encode("utf-8")[: self.width - 2]
            return [259, *(byte + 1 for byte in data), 260] + [261] * (self.width - len(data) - 2)
        vocabulary = self.chars
        if word in ("<bos>", "<eos>"):
            characters = [vocabulary[word]]
        else:
            unknown = vocabulary["<oov>"]
            characters = [vocabulary.get(character, unknown) for character in word[: self.width - 2]]
        ids = [vocabulary["<eow>"], *characters, vocabulary["<bow>"]]  # ELMoForManyLangs' order: end mark first
        return ids + [vocabulary["<pad>"]] * (self.width - len(ids))

    def word_id(self, word: str) -> int:
        word = self.lower(word) if self.lower_case else word
        return self.words.get(word[: self.width - 2], self.words["<oov>"])


def _jieba_tokenizer(user_dict: Path | None):
    import io

    import jieba

    jieba.setLogLevel(logging.WARNING)
    if user_dict is None:
        return jieba
    own = jieba.Tokenizer()
    with open(user_dict, encoding="utf-8-sig") as handle:
        own.load_userdict(io.StringIO(handle.read()))
    return own


class ElmoClient:
    """An exported hf-elmo model: `predict` (taggers: entity spans; sentence classifiers: labels with scores),
    `embed` / `sentence_vectors` (any model: its biLM layers), `tokenize`, and `run` on ids."""

    def __init__(self, folder, threads: int | None = None, batch_size: int = 32, session_options=None):
        import onnxruntime

        self.folder = Path(folder)
        self.config = json.loads((self.folder / CLIENT_CONFIG).read_text(encoding="utf-8"))
        if self.config.get("format_version", 0) > FORMAT_VERSION:
            raise ValueError(f"{self.folder} was written by a newer hf-elmo (client format "
                             f"{self.config['format_version']}); use the elmo_client.py written beside it")
        self.kind = self.config["kind"]
        self.labels = self.config.get("labels")
        self.num_layers = self.config["num_layers"]
        self.dim = self.config["dim"]
        self.tokenizer = Tokenizer(self.folder, self.config["tokenizer"])
        self.batch_size = int(batch_size)
        if self.batch_size < 1:
            raise ValueError(f"batch_size must be >= 1, got {batch_size}")
        crf = self.config.get("crf")
        self._crf = None if crf is None else {key: np.asarray(value, dtype=np.float32) for key, value in crf.items()}
        options = session_options or onnxruntime.SessionOptions()
        if threads:
            options.intra_op_num_threads = int(threads)
            options.inter_op_num_threads = 1
        self.session = onnxruntime.InferenceSession(str(self.folder / "model.onnx"), options,
                                                    providers=["CPUExecutionProvider"])
        self._inputs = {item.name for item in self.session.get_inputs()}

    # text -> words and ids ----------------------------------------------------------------------------------------
    def tokenize(self, texts) -> list[list[Word]]:
        """The words of each text, as (word, start, end) with `text[start:end]` the word as written."""
        return [self.tokenizer.words_of(text) for text in _texts(texts)]

    def encode(self, sentences: list[list[str]]) -> dict:
        """The graph's inputs for sentences of words (lists of strings), padded to the longest (at least one
        position, so that a batch of empty sentences still runs)."""
        longest = max([len(words) for words in sentences] + [1])
        width = self.tokenizer.width
        feeds = {"input_ids": np.zeros((len(sentences), longest, width), np.int64),
                 "attention_mask": np.zeros((len(sentences), longest), np.int64)}
        if self.tokenizer.words is not None:
            feeds["word_ids"] = np.full((len(sentences), longest), self.tokenizer.words.get("<pad>", 0), np.int64)
        for row, words in enumerate(sentences):
            for column, word in enumerate(words):
                feeds["input_ids"][row, column] = self.tokenizer.char_ids(word)
                feeds["attention_mask"][row, column] = 1
                if "word_ids" in feeds:
                    feeds["word_ids"][row, column] = self.tokenizer.word_id(word)
        if self.kind == "character-tagging":
            feeds.update(self._character_inputs(sentences))
        return feeds

    def _character_inputs(self, sentences: list[list[str]]) -> dict:
        """Each character's word and its place in it (`text_elmo.character_places`)."""
        places = [character_places(words) for words in sentences]
        longest = max([len(characters) for characters, _, _ in places] + [1])
        word_index = np.full((len(sentences), longest), -1, np.int64)
        positions = np.zeros((len(sentences), longest), np.int64)
        character_ids = None
        if "character_input_ids" in self._inputs:
            character_ids = np.zeros((len(sentences), longest, self.tokenizer.width), np.int64)
        for row, (characters, index, place) in enumerate(places):
            word_index[row, : len(index)] = index
            positions[row, : len(place)] = place
            if character_ids is not None:
                for column, character in enumerate(characters):
                    character_ids[row, column] = self.tokenizer.char_ids(character)
        feeds = {"token_word_index": word_index, "token_positions": positions}
        if character_ids is not None:
            feeds["character_input_ids"] = character_ids
        return feeds

    def check(self, feeds: dict) -> None:
        """ValueError unless the ids lie inside the model's vocabularies (negative ones too: onnxruntime's Gather
        would read them from the end of the table) and the mask is ones then zeros."""
        limits = {"input_ids": self.config["char_vocab_size"], "character_input_ids": self.config["char_vocab_size"],
                  "word_ids": self.config.get("word_vocab_size") or 0}
        missing = sorted(name for name in self._inputs if name not in feeds)
        if missing:
            raise ValueError(f"the model needs the input(s) {', '.join(missing)}")
        for name, size in limits.items():
            if name in feeds:
                ids = np.asarray(feeds[name])
                if ids.size and (ids.min() < 0 or ids.max() >= size):
                    bad = int(ids[(ids < 0) | (ids >= size)].flat[0])
                    raise ValueError(f"{name} contains id {bad}, outside [0, {size - 1}]")
        mask = np.asarray(feeds["attention_mask"])
        if mask.size and not np.isin(mask, (0, 1)).all():
            raise ValueError("attention_mask must hold only 0 (padding) and 1 (a word)")
        if mask.size and not (np.diff(mask, axis=-1) <= 0).all():
            raise ValueError("padding must come after the words: each row's mask must be ones then zeros")

    def run(self, feeds: dict, outputs=None) -> dict:
        """The graph's outputs (names -> arrays) for checked inputs."""
        self.check(feeds)
        feeds = {name: np.ascontiguousarray(value, dtype=np.int64) for name, value in feeds.items()
                 if name in self._inputs}
        names = list(outputs) if outputs else [item.name for item in self.session.get_outputs()]
        return dict(zip(names, self.session.run(names, feeds)))

    def _batches(self, sentences: list[list[str]], outputs):
        """(indices, outputs) per batch of sentences sorted by length."""
        order = sorted(range(len(sentences)), key=lambda i: -len(sentences[i]))
        for begin in range(0, len(order), self.batch_size):
            chunk = order[begin : begin + self.batch_size]
            yield chunk, self.run(self.encode([sentences[i] for i in chunk]), outputs)

    # vectors ------------------------------------------------------------------------------------------------------
    def _select(self, result: dict, layers):
        stacked = result["layers"]  # (L+1, B, W, 2P)
        if layers == "all":
            return stacked.transpose(1, 0, 2, 3)
        if layers == "top":
            return stacked[-1]
        if layers == "average":
            return stacked.mean(axis=0)
        if layers == "mix":
            if "mixes" not in result:
                raise ValueError("this export has no learned mix of the encoder (a task model mixes in its head)")
            return result["mixes"][:, 0]
        return stacked[layers]

    def _check_layers(self, layers):
        if isinstance(layers, bool) or not (layers in _LAYER_CHOICES or isinstance(layers, int)):
            raise ValueError(f"layers must be one of {_LAYER_CHOICES} or a layer index, got {layers!r}")
        if isinstance(layers, int) and not -self.num_layers <= layers < self.num_layers:
            raise ValueError(f"layer index {layers} out of range: this model has layers 0..{self.num_layers - 1}")
        return layers

    def _outputs(self, layers):
        return ["layers", "mixes"] if layers == "mix" and "mixes" in self._output_names else ["layers"]

    @property
    def _output_names(self):
        return {item.name for item in self.session.get_outputs()}

    def embed(self, texts, layers="average") -> list[np.ndarray]:
        """Word vectors of each text: (words, 2P), or (L+1, words, 2P) for `layers="all"`; `"top"`, `"average"`,
        `"mix"` (an encoder's first learned mix) or a layer index, as `hf_elmo.Embedder.embed`."""
        layers = self._check_layers(layers)
        sentences = [[word for word, _, _ in words] for words in self.tokenize(texts)]
        results = [None] * len(sentences)
        for chunk, result in self._batches(sentences, self._outputs(layers)):
            selected = self._select(result, layers)
            for row, index in enumerate(chunk):
                count = len(sentences[index])
                results[index] = (selected[row, :, :count] if layers == "all" else selected[row, :count]).copy()
        return results

    def sentence_vectors(self, texts, layers="average", return_words: bool = False):
        """The mean of each text's word vectors (zeros for a text without words): (texts, 2P), as
        `hf_elmo.Embedder.sentence_vectors`; with `return_words`, also the words of each text."""
        layers = self._check_layers(layers)
        sentences = [[word for word, _, _ in words] for words in self.tokenize(texts)]
        shape = (len(sentences),) + ((self.num_layers,) if layers == "all" else ()) + (self.dim,)
        vectors = np.zeros(shape, np.float32)
        for chunk, result in self._batches(sentences, self._outputs(layers)):
            selected = self._select(result, layers)
            for row, index in enumerate(chunk):
                count = len(sentences[index])
                if count:
                    vectors[index] = selected[row, ..., :count, :].sum(axis=-2) / count
        return (vectors, sentences) if return_words else vectors

    # predictions --------------------------------------------------------------------------------------------------
    def predict(self, texts) -> list[dict]:
        """Per text: a tagger's `{"text", "words", "offsets", "tags", "entities"}` (entities: `{entity, word, start,
        end, word_start, word_end, score}`, start/end in the text), or a sentence classifier's `{"text", "words",
        "label", "score", "scores"}` (label and score None for a text without words)."""
        texts = _texts(texts)
        if self.kind in ("token-classification", "character-tagging"):
            return self._tag(texts)
        if self.kind == "sequence-classification":
            return self._classify(texts)
        raise ValueError("this export is an encoder: it gives vectors (embed, sentence_vectors), not predictions")

    def _tag(self, texts: list[str]) -> list[dict]:
        tokenized = [self.tokenizer.words_of(text) for text in texts]
        sentences = [[word for word, _, _ in words] for words in tokenized]
        results = [None] * len(texts)
        for chunk, result in self._batches(sentences, ["logits"]):
            for row, index in enumerate(chunk):
                words = tokenized[index]
                units, offsets = _units(words, texts[index]) if self.kind == "character-tagging" else (
                    [word for word, _, _ in words], [(start, end) for _, start, end in words])
                emissions = result["logits"][row, : len(units)].astype(np.float64)
                best, scores = self._decode(emissions)
                tags = [self.labels[i] for i in best]
                results[index] = {"text": texts[index], "words": units, "offsets": offsets, "tags": tags,
                                  "entities": _entities(texts[index], units, offsets, tags, scores)}
        return results

    def _decode(self, emissions: np.ndarray) -> tuple[list[int], list[float]]:
        """Best tags and each one's probability: Viterbi and CRF marginals, or argmax and softmax."""
        if not len(emissions):
            return [], []
        if self._crf is None:
            probabilities = np.exp(emissions - emissions.max(axis=1, keepdims=True))
            probabilities /= probabilities.sum(axis=1, keepdims=True)
            best = emissions.argmax(axis=1)
            return best.tolist(), probabilities[np.arange(len(best)), best].tolist()
        crf = {key: value.astype(np.float64) for key, value in self._crf.items()}
        best = viterbi(emissions, **crf)
        return best, crf_marginals(emissions, **crf, best=best)

    def _classify(self, texts: list[str]) -> list[dict]:
        tokenized = [[word for word, _, _ in words] for words in self.tokenize(texts)]
        results = [{"text": text, "words": words, "label": None, "score": None, "scores": {}}
                   for text, words in zip(texts, tokenized)]
        with_words = [index for index, words in enumerate(tokenized) if words]
        for chunk, result in self._batches([tokenized[i] for i in with_words], ["logits"]):
            logits = result["logits"].astype(np.float64)
            probabilities = np.exp(logits - logits.max(axis=1, keepdims=True))
            probabilities /= probabilities.sum(axis=1, keepdims=True)
            for row, position in enumerate(chunk):
                scores = probabilities[row].tolist()
                best = max(range(len(scores)), key=scores.__getitem__)
                results[with_words[position]].update(label=self.labels[best], score=scores[best],
                                                     scores=dict(zip(self.labels, scores)))
        return results

    def __call__(self, texts):
        return self.sentence_vectors(texts) if self.kind == "encoder" else self.predict(texts)


def _texts(texts) -> list[str]:
    if isinstance(texts, str):
        raise TypeError("pass a list of texts (a single string would be read as one text: use [text])")
    texts = list(texts)
    for index, text in enumerate(texts):
        if not isinstance(text, str):
            raise TypeError(f"text {index} must be a string, got {type(text).__name__}")
    return texts


def _units(words: list[Word], text: str) -> tuple[list[str], list[tuple[int, int]]]:
    """The characters a character tagger labels and each one's span: its own, or its word's where lowercasing or a
    dropped surrogate changed the word's length (as `modeling_elmo.unit_offsets`)."""
    units, offsets = [], []
    for word, start, end in words:
        own = end - start == len(word)
        for number, character in enumerate(word):
            units.append(character)
            offsets.append((start + number, start + number + 1) if own else (start, end))
    return units, offsets


def viterbi(emissions, start_transitions, end_transitions, transitions) -> list[int]:
    """The best tag path of one sentence under a linear-chain CRF (`ElmoCrf.viterbi_decode`)."""
    score = start_transitions + emissions[0]
    backpointers = []
    for step in emissions[1:]:
        candidates = score[:, None] + transitions  # [from, to]
        backpointers.append(candidates.argmax(axis=0))
        score = candidates.max(axis=0) + step
    path = [int((score + end_transitions).argmax())]
    for pointers in reversed(backpointers):
        path.append(int(pointers[path[-1]]))
    return path[::-1]


def _logsumexp(values, axis):
    top = values.max(axis=axis, keepdims=True)
    return (top + np.log(np.exp(values - top).sum(axis=axis, keepdims=True))).squeeze(axis)


def crf_marginals(emissions, start_transitions, end_transitions, transitions, best=None) -> list[float]:
    """p(the best tag at each word | sentence) by forward-backward (`ElmoCrf.marginals`), for the Viterbi path."""
    best = viterbi(emissions, start_transitions, end_transitions, transitions) if best is None else best
    alphas = [start_transitions + emissions[0]]
    for step in emissions[1:]:
        alphas.append(_logsumexp(alphas[-1][:, None] + transitions + step[None, :], axis=0))
    betas = [end_transitions]
    for step in emissions[:0:-1]:
        betas.append(_logsumexp(transitions + (step + betas[-1])[None, :], axis=1))
    betas = betas[::-1]
    log_z = _logsumexp(alphas[-1] + end_transitions, axis=0)
    return [float(math.exp(alphas[t][tag] + betas[t][tag] - log_z)) for t, tag in enumerate(best)]


def _entities(text, units, offsets, tags, scores) -> list[dict]:
    entities = []
    for entity, first, end in tag_spans(tags):
        start, stop = offsets[first][0], offsets[end - 1][1]
        entities.append({"entity": entity, "word": text[start:stop], "start": start, "end": stop, "word_start": first,
                         "word_end": end, "score": float(sum(scores[first:end]) / (end - first))})
    return entities


if __name__ == "__main__":  # python elmo_client.py FOLDER "text" ...: one JSON line per text
    import sys

    client = ElmoClient(sys.argv[1])
    for text, result in zip(sys.argv[2:], client(sys.argv[2:])):
        print(json.dumps(result if isinstance(result, dict) else {"text": text, "vector": result.tolist()},
                         ensure_ascii=False))


__all__ = ["ElmoClient", "Tokenizer", "Word", "crf_marginals", "tag_spans", "viterbi"]
