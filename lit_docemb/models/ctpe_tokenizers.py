"""CTPE's tokenizers: §4.1's word and sentence rules (:func:`preprocess_words`, :func:`preprocess_sentences`; the
classical baselines share them, :mod:`lit_docemb.views.classical`) and the text → ids encodings that CTPE's input
models (:mod:`lit_docemb.models.ctpe`) build with the token vectors their ids feed: :class:`WordTokenizer` (a corpus
vocabulary), :class:`HFTokenIds` (a Hugging Face tokenizer), :class:`CharacterIds` (ELMo's bytes) and
:class:`SentenceWordIds` (Skip-thoughts' dictionary). CTPE's collators (:mod:`lit_docemb.views.ctpe`) and its field
cache call their ``encode`` in dataloader workers: plain picklable objects, no ``nn.Module``.
"""

from __future__ import annotations

import hashlib
import html
import re
from collections import Counter
from collections.abc import Iterable, Sequence

from lit_docemb.data.caches.row_cache import tokenizer_fingerprint
from lit_docemb.models.encoder import load_tokenizer
from lit_docemb.models.skip_thoughts import dictionary_rows


_TAG = re.compile(r"<[^>]+>")


_WORD = re.compile(r"[^\W_]+(?:['’][^\W_]+)*")


PAD, UNK = "[PAD]", "[UNK]"


def preprocess_words(text: str) -> list[str]:
    """§4.1's five steps: lowercase, remove HTML tags, restore HTML escapes, split at punctuation and
    whitespace, drop tokens without a letter."""
    text = html.unescape(_TAG.sub(" ", text.lower()))
    return [w for w in _WORD.findall(text) if any(c.isalpha() for c in w)]


class WordTokenizer:
    """Words (after :func:`preprocess_words`) → ids of a fixed vocabulary; id 0 pads, id 1 is any unknown word.

    Args:
        words: The vocabulary without the two special entries, most frequent first.
    """

    def __init__(self, words: Sequence[str]) -> None:
        self.words = [PAD, UNK, *words]
        self.index = {w: i for i, w in enumerate(self.words)}
        if len(self.index) != len(self.words):
            raise ValueError("the vocabulary repeats a word")
        self.pad_id = 0

    @classmethod
    def from_texts(cls, texts: Iterable[str], min_count: int = 1, max_size: int | None = None) -> WordTokenizer:
        """The words seen at least ``min_count`` times, by count then alphabetically (the same on every rank)."""
        counts = Counter(w for text in texts for w in preprocess_words(text))
        kept = sorted((w for w, c in counts.items() if c >= min_count), key=lambda w: (-counts[w], w))
        return cls(kept[:max_size])

    def __len__(self) -> int:
        return len(self.words)

    def encode(self, text: str) -> list[int]:
        return [self.index.get(w, 1) for w in preprocess_words(text)]

    def key(self) -> str:
        """A hash of the vocabulary (what decides the ids besides :func:`preprocess_words`)."""
        return "words:" + hashlib.blake2b("\n".join(self.words).encode(), digest_size=16).hexdigest()


class HFTokenIds:
    """A Hugging Face tokenizer's ids without special tokens (the paper's BERT rows drop [CLS] and [SEP]).

    Args:
        name_or_path: Folder, hub name or ``package:<module>`` of the encoder whose tokenizer this is.
    """

    def __init__(self, name_or_path: str) -> None:
        self.tokenizer = load_tokenizer(name_or_path)
        self.pad_id = self.tokenizer.pad_token_id or 0

    def __len__(self) -> int:
        return len(self.tokenizer)

    def encode(self, text: str) -> list[int]:
        return self.tokenizer(text, add_special_tokens=False, verbose=False)["input_ids"]

    def key(self) -> str:
        """The tokenizer's fingerprint (its serialised state)."""
        return "hf:" + tokenizer_fingerprint(self.tokenizer)


class CharacterIds:
    """Text → the UTF-8 bytes of its words (after :func:`preprocess_words`), ``first_byte_id`` + byte, each word closed
    by ``unit_end_id``: ELMo reads characters, so any word encodes, and ``max_length`` counts words
    (:func:`~lit_docemb.views.ctpe.split_fields`)."""

    unit_end_id, first_byte_id, pad_id = 1, 2, 0

    def __len__(self) -> int:
        return 256 + self.first_byte_id

    def encode(self, text: str) -> list[int]:
        ids = []
        for word in preprocess_words(text):
            ids.extend(byte + self.first_byte_id for byte in word.encode("utf-8"))
            ids.append(self.unit_end_id)
        return ids

    def key(self) -> str:
        """The encoding's name (it has no vocabulary)."""
        return "utf-8-bytes"


_SENTENCE_END = re.compile(r"(?<=[.!?])\s+|\n+")


def preprocess_sentences(text: str) -> list[str]:
    """§4.1 for sentence embedding models: the text is cut into sentences at sentence-ending punctuation (. ! ?
    followed by whitespace) and at line breaks (a title, a paragraph) before the preprocessing, then each sentence's :func:`preprocess_words` are joined by
    spaces; sentences without a word are dropped."""
    sentences = (" ".join(preprocess_words(part)) for part in _SENTENCE_END.split(text))
    return [sentence for sentence in sentences if sentence]


class SentenceWordIds:
    """Text → the ids of its sentences' words, each sentence closed by ``unit_end_id`` (§4.1's sentences,
    :func:`preprocess_sentences`): a word's id is ``first_word_id`` plus its row in Skip-thoughts' ``dictionary.txt``
    (``UNK``'s row for a word it lacks), so any text encodes, and ``max_length`` counts sentences
    (:func:`~lit_docemb.views.ctpe.split_fields`).

    Args:
        dictionary: The words of ``dictionary.txt`` in order.
    """

    unit_end_id, first_word_id, pad_id = 1, 2, 0

    def __init__(self, dictionary: Sequence[str]) -> None:
        self.index = {word: row + self.first_word_id for word, row in dictionary_rows(dictionary).items()}
        self.unknown_id = self.index["UNK"]
        self.fingerprint = hashlib.blake2b("\n".join(dictionary).encode(), digest_size=16).hexdigest()
        self.size = len(dictionary) + self.first_word_id

    def __len__(self) -> int:
        return self.size

    def encode(self, text: str) -> list[int]:
        ids = []
        for sentence in preprocess_sentences(text):
            ids.extend(self.index.get(word, self.unknown_id) for word in sentence.split())
            ids.append(self.unit_end_id)
        return ids

    def key(self) -> str:
        """A hash of the dictionary (what decides the ids besides the sentence and word rules)."""
        return "skip-thoughts:" + self.fingerprint
