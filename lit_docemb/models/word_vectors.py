"""Word vectors from the usual files (word2vec's binary and text formats, GloVe's text) and the stable hash that makes
gensim's training repeatable: shared by CTPE's pretrained token vectors (:mod:`lit_docemb.models.ctpe`) and the
classical word-vector average (:mod:`lit_docemb.models.classical`).

Plain functions: no Lightning, no ``torch.distributed``, no corpus names.
"""

from __future__ import annotations

import hashlib
from typing import Literal

from lit_docemb.errors import BadArgument

VectorsFormat = Literal["word2vec_binary", "word2vec_text", "glove_text"]
VECTORS_FORMATS = ("word2vec_binary", "word2vec_text", "glove_text")


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
