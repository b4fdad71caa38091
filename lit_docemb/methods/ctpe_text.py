"""CTPE's text side (seed 004): the paper's word preprocessing, a word vocabulary with word2vec initialisation,
the token vocabulary of a transformer, and the split of a document at ``pos`` into former | latter part.

**Split** (§2.2, §4.4, §4.6). A document's fields are its title then its sections (a section headed "Title",
as the arXiv snapshot reader writes, stands for the title). ``pos`` is

* ``"title"``: former = the title, latter = every section after it (arXiv, DBLP: title | abstract);
* ``"before:<Heading>"``: former = the title and the sections before the first section headed ``<Heading>``
  (case-insensitive), latter = that section and the rest (USPTO: ``"before:Claims"``, title + abstract | claims);
* a number in (0, 1): the token ratio of the whole text (title and sections), as in Table 5 (0.2 ... 0.8).

A part is then cut to ``max_length`` tokens (l_max = 200). A document whose boundary is missing, or that leaves
a part without tokens, cannot be split (``None``): methods drop and count it.

**Token vectors** (§3.2, §4.5): :class:`WordEmbeddings` (word vectors over the training corpus's vocabulary,
word2vec or random) or :class:`TransformerTokens` (a frozen pretrained encoder's token states).
"""

from __future__ import annotations

import hashlib
import html
import re
from collections import Counter
from collections.abc import Iterable, Sequence
from typing import Literal

import torch

from lit_docemb.data.document import Document
from lit_docemb.models.ctpe import FrozenTransformerStates, WordVectors
from lit_docemb.models.encoder import resolve_model_path

_TAG = re.compile(r"<[^>]+>")
_WORD = re.compile(r"[^\W_]+(?:['’][^\W_]+)*")
PAD, UNK = "[PAD]", "[UNK]"


def preprocess_words(text: str) -> list[str]:
    """§4.1's five steps: lowercase, remove HTML tags, restore HTML escapes, split at punctuation and
    whitespace, drop tokens without a letter."""
    text = html.unescape(_TAG.sub(" ", text.lower()))
    return [w for w in _WORD.findall(text) if any(c.isalpha() for c in w)]


def _stable_hash(text: str) -> int:
    """gensim seeds each word's initial vector with ``hashfxn(word + seed)``; Python's ``hash`` changes from
    process to process, this does not (word2vec is then repeatable with ``workers=1``)."""
    return int.from_bytes(hashlib.blake2b(text.encode(), digest_size=4).digest(), "big")


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


class HFTokenIds:
    """A Hugging Face tokenizer's ids without special tokens (the paper's BERT rows drop [CLS] and [SEP]).

    Args:
        name_or_path: Folder, hub name or ``package:<module>`` of the encoder whose tokenizer this is.
    """

    def __init__(self, name_or_path: str) -> None:
        from transformers import AutoTokenizer

        self.tokenizer = AutoTokenizer.from_pretrained(resolve_model_path(name_or_path))
        self.pad_id = self.tokenizer.pad_token_id or 0

    def __len__(self) -> int:
        return len(self.tokenizer)

    def encode(self, text: str) -> list[int]:
        return self.tokenizer(text, add_special_tokens=False, verbose=False)["input_ids"]


def check_pos(pos: float | str) -> float | str:
    """Validates ``pos`` (see the module docstring) and returns it."""
    if isinstance(pos, int | float) and not isinstance(pos, bool):
        if not 0.0 < float(pos) < 1.0:
            raise ValueError(f"a token-ratio pos must lie strictly between 0 and 1, got {pos}")
        return float(pos)
    if pos == "title" or (isinstance(pos, str) and pos.startswith("before:") and pos[len("before:"):].strip()):
        return pos
    raise ValueError(f"pos must be 'title', 'before:<section heading>' or a ratio in (0, 1), got {pos!r}")


def document_fields(doc: Document) -> list[tuple[str, str]]:
    """(heading, text) of the title (heading "title") and of every section, in order."""
    fields = [(s.heading.strip().lower(), s.text) for s in doc.sections]
    if doc.title and not any(heading == "title" for heading, _ in fields):
        fields.insert(0, ("title", doc.title))
    return fields


def split_ids(doc: Document, pos: float | str, encode, max_length: int) -> tuple[list[int], list[int]] | None:
    """(former ids, latter ids) of ``doc`` split at ``pos``, each cut to ``max_length``; ``None`` when it cannot
    be split (``encode``: text → ids)."""
    fields = document_fields(doc)
    if isinstance(pos, float):
        ids = [i for _, text in fields for i in encode(text)]
        cut = round(pos * len(ids))
        former, latter = ids[:cut], ids[cut:]
    else:
        target = "title" if pos == "title" else pos[len("before:"):].strip().lower()
        headings = [heading for heading, _ in fields]
        if target not in headings:
            return None
        boundary = headings.index(target) + (1 if pos == "title" else 0)
        former = [i for _, text in fields[:boundary] for i in encode(text)]
        latter = [i for _, text in fields[boundary:] for i in encode(text)]
    if not former or not latter:
        return None
    return former[:max_length], latter[:max_length]


def train_word2vec(texts: Iterable[str], tokenizer: WordTokenizer, dim: int, window: int, epochs: int,
                   workers: int, seed: int) -> torch.Tensor:
    """Skip-gram word2vec (gensim) on the preprocessed ``texts``; returns (len(tokenizer), dim) vectors in
    the tokenizer's order: the padding row is 0, words word2vec did not keep (and [UNK]) get small random
    vectors as in word2vec's own initialisation."""
    try:
        from gensim.models import Word2Vec
    except ImportError as err:
        raise ImportError("word2vec initialisation needs gensim (pip install gensim), or use "
                          "init: random") from err
    sentences = [[w for w in preprocess_words(t) if w in tokenizer.index] for t in texts]
    sentences = [s for s in sentences if s]
    if not sentences:
        raise ValueError("no word of the vocabulary occurs in the training texts: cannot train word2vec")
    model = Word2Vec(sentences=sentences, vector_size=dim, window=window, min_count=1, sg=1, epochs=epochs,
                     workers=workers, seed=seed, hashfxn=_stable_hash)
    generator = torch.Generator().manual_seed(seed)
    vectors = (torch.rand(len(tokenizer), dim, generator=generator) - 0.5) / dim
    vectors[0] = 0.0
    for word, row in model.wv.key_to_index.items():
        vectors[tokenizer.index[word]] = torch.from_numpy(model.wv.vectors[row].copy())
    return vectors


class WordEmbeddings:
    """Trainable word vectors over the training corpus's vocabulary (paper: word2vec, 100 dimensions).

    Args:
        init: ``"word2vec"``: skip-gram word2vec trained on the training documents with gensim (window 10,
            §4.2's word2vec settings); ``"random"``: random vectors.
        dim: Vector dimension (paper: 100).
        min_count: Words seen fewer times are [UNK] (gensim's default, 5).
        max_vocabulary: Keep at most this many words, the most frequent (``None``: all).
        window: word2vec window.
        epochs: word2vec epochs (§4.2: 100 iterations).
        workers: word2vec threads; 1 makes the vectors repeatable.
        seed: word2vec seed.
    """

    def __init__(self, init: Literal["word2vec", "random"] = "word2vec", dim: int = 100, min_count: int = 5,
                 max_vocabulary: int | None = None, window: int = 10, epochs: int = 100, workers: int = 1,
                 seed: int = 1) -> None:
        if init not in ("word2vec", "random"):
            raise ValueError(f"init must be 'word2vec' or 'random', got {init!r}")
        self.init, self.dim, self.min_count, self.max_vocabulary = init, dim, min_count, max_vocabulary
        self.window, self.epochs, self.workers, self.seed = window, epochs, workers, seed

    def build(self, texts: Sequence[str]) -> tuple[WordTokenizer, WordVectors]:
        tokenizer = WordTokenizer.from_texts(texts, self.min_count, self.max_vocabulary)
        initial = None
        if self.init == "word2vec":
            initial = train_word2vec(texts, tokenizer, self.dim, self.window, self.epochs, self.workers, self.seed)
        return tokenizer, WordVectors(len(tokenizer), self.dim, initial)

    def restore(self, words: Sequence[str]) -> tuple[WordTokenizer, WordVectors]:
        """The tokenizer and (untrained) vectors of a saved vocabulary; the weights come from the checkpoint."""
        tokenizer = WordTokenizer(words)
        return tokenizer, WordVectors(len(tokenizer), self.dim)


class TransformerTokens:
    """A pretrained Hugging Face encoder's contextual token states, frozen (§4.5's deep language models).

    Args:
        encoder: Local folder, hub name or ``package:<module>`` of the encoder.
    """

    def __init__(self, encoder: str) -> None:
        self.encoder = encoder

    def build(self, texts: Sequence[str] = ()) -> tuple[HFTokenIds, FrozenTransformerStates]:
        return HFTokenIds(self.encoder), FrozenTransformerStates(self.encoder)
