"""Word vectors from the usual files (word2vec's binary and text formats, GloVe's text) and the stable hash that makes
gensim's training repeatable: shared by CTPE's pretrained token vectors (:mod:`lit_docemb.models.ctpe`) and the
classical word-vector average (:mod:`lit_docemb.models.classical`); and the training of such a file on any corpus
(:func:`train_word_vectors`: word2vec by gensim, GloVe by :mod:`lit_docemb.models.glove`), which is how CTPE's
word2vec(full), GloVe and GloVe(full) vectors are made (the ``word-vectors`` command).

Plain functions: no Lightning, no ``torch.distributed``, no corpus names.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Iterable, Iterator, Sequence
from typing import Literal

import numpy as np

from lit_docemb.errors import BadArgument

VectorsFormat = Literal["word2vec_binary", "word2vec_text", "glove_text"]
VECTORS_FORMATS = ("word2vec_binary", "word2vec_text", "glove_text")
WordVectorMethod = Literal["word2vec", "glove"]
WORD_VECTOR_METHODS = ("word2vec", "glove")


def stable_hash(text: str) -> int:
    """gensim seeds each word's initial vector with ``hashfxn(word + seed)``; Python's ``hash`` changes from
    process to process, this does not (word2vec is then repeatable with ``workers=1``)."""
    return int.from_bytes(hashlib.blake2b(text.encode(), digest_size=4).digest(), "big")


def read_word_vectors(path: str, vectors_format: VectorsFormat):
    """gensim ``KeyedVectors`` of a pretrained file: word2vec's binary (``GoogleNews-vectors-negative300.bin`` and
    what ``save_word2vec_format(binary=True)`` writes), word2vec's text format (a ``<count> <dim>`` header line) or
    GloVe's text (``glove.6B.100d.txt``: no header). A missing or unreadable file is a :class:`BadArgument` of
    ``vectors`` naming it."""
    if vectors_format not in VECTORS_FORMATS:
        raise BadArgument("vectors_format", f"must be one of {', '.join(VECTORS_FORMATS)}, got {vectors_format!r}")
    from gensim.models import KeyedVectors

    try:
        return KeyedVectors.load_word2vec_format(path, binary=vectors_format == "word2vec_binary",
                                                 no_header=vectors_format == "glove_text")
    except FileNotFoundError as err:
        raise BadArgument("vectors", f"no file at {path!r} (a word2vec .bin or a GloVe .txt)") from err
    except (ValueError, UnicodeDecodeError, EOFError) as err:
        raise BadArgument("vectors", f"{path!r} is not in vectors_format {vectors_format!r} ({err})") from err


def lowered_keys(vectors) -> dict[str, str]:
    """Lower-cased word -> the file's first (most frequent) casing of it, for looking a lower-cased word up."""
    lowered: dict[str, str] = {}
    for key in vectors.index_to_key:
        lowered.setdefault(key.lower(), key)
    return lowered


class WordSentences:
    """The documents of ``texts`` as lists of words (``tokenize``: CTPE's §4.1 preprocessing by default), read afresh
    on every iteration: word2vec and GloVe read a corpus more than once (vocabulary, then counts or epochs) without
    holding it in memory.

    Args:
        texts: A function returning a new iterator over the documents' texts (one text per document).
        tokenize: Text → words.
    """

    def __init__(self, texts: Callable[[], Iterable[str]], tokenize: Callable[[str], list[str]] | None = None) -> None:
        if tokenize is None:
            from lit_docemb.models.ctpe_tokenizers import preprocess_words as tokenize
        self.texts, self.tokenize = texts, tokenize

    def __iter__(self) -> Iterator[list[str]]:
        for text in self.texts():
            words = self.tokenize(text)
            if words:
                yield words


def train_word_vectors(sentences: Iterable[Sequence[str]], method: WordVectorMethod = "word2vec", dim: int = 100,
                       window: int = 10, epochs: int = 100, min_count: int = 5, max_vocabulary: int | None = None,
                       workers: int = 1, seed: int = 1, x_max: float = 100.0, alpha: float = 0.75,
                       learning_rate: float = 0.05, log=None) -> tuple[list[str], np.ndarray]:
    """(words, (V, dim) float32 vectors) trained on ``sentences`` (lists of words, re-iterable), most frequent word
    first: ``"word2vec"`` is gensim's skip-gram (CTPE §4.3: window 10, 100 iterations) with negative sampling and
    gensim's other defaults; ``"glove"`` is :func:`lit_docemb.models.glove.train_glove` (``x_max``, ``alpha``,
    ``learning_rate`` are its). ``min_count`` 5 is both programs' default; ``workers=1`` makes either repeatable."""
    if method not in WORD_VECTOR_METHODS:
        raise BadArgument("method", f"must be one of {', '.join(WORD_VECTOR_METHODS)}, got {method!r}")
    if method == "glove":
        from lit_docemb.models.glove import train_glove

        words, vectors, _ = train_glove(sentences, dim, window, epochs, min_count, max_vocabulary, x_max, alpha,
                                        learning_rate, workers, seed, log)
        return words, vectors
    from gensim.models import Word2Vec

    model = Word2Vec(vector_size=dim, window=window, min_count=min_count, max_final_vocab=max_vocabulary, sg=1,
                     workers=workers, seed=seed, hashfxn=stable_hash)
    model.build_vocab(sentences)
    if not model.wv.index_to_key:
        raise ValueError(f"no word occurs {min_count} times or more: lower min_count or give a larger corpus")
    model.train(sentences, total_examples=model.corpus_count, epochs=epochs)
    return list(model.wv.index_to_key), model.wv.vectors.astype(np.float32)


def write_word_vectors(path: str, words: Sequence[str], vectors: np.ndarray,
                       vectors_format: VectorsFormat = "word2vec_binary") -> None:
    """Writes ``vectors`` (V, dim), row i the vector of ``words[i]``, in a format :func:`read_word_vectors` reads
    (and CTPE's ``init: pretrained`` with the same ``vectors_format``)."""
    if vectors_format not in VECTORS_FORMATS:
        raise BadArgument("vectors_format", f"must be one of {', '.join(VECTORS_FORMATS)}, got {vectors_format!r}")
    from gensim.models import KeyedVectors

    keyed = KeyedVectors(vectors.shape[1], dtype=np.float32)
    keyed.add_vectors(list(words), np.asarray(vectors, dtype=np.float32))
    keyed.save_word2vec_format(path, binary=vectors_format == "word2vec_binary",
                               write_header=vectors_format != "glove_text")
