"""Back-translation (DECA §3.3) through two local seq2seq checkpoints, translations cached on disk.

A document is split into sentences, and a sentence too long for the models into pieces of at most ``max_length // 2``
words (so that no piece is cut: a cleaned corpus without full stops is one long "sentence" per document, and the
paper translates the document, §3.3); each piece goes source → pivot language with the forward model and
back with the backward model (beam search, deterministic), e.g. Marian's ``opus-mt-en-de`` and
``opus-mt-de-en`` saved with ``save_pretrained``. A translation may run to :meth:`BackTranslator.generation_cap` new
tokens, which follows the piece's own token length (pieces are batched by length, so the cap of a batch is that of
pieces of about one length): a short piece that starts repeating itself stops near its own length, not at
``max_length``. Every round trip is stored in a SQLite file keyed by the two
checkpoints and the sentence, so a corpus is translated once and later epochs, runs and dataloader workers
read the cache (SQLite serialises concurrent writers).
"""

from __future__ import annotations

import hashlib
import math
import sqlite3
from pathlib import Path

import torch

from lit_docemb.data.core.text import split_sentences


class TranslationCache:
    """A ``key → translation`` table in one SQLite file (created with its folder on first use)."""

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path).expanduser()
        self.path.parent.mkdir(parents=True, exist_ok=True)
        with self._connect() as db:
            db.execute("CREATE TABLE IF NOT EXISTS translations (key TEXT PRIMARY KEY, text TEXT NOT NULL)")

    def _connect(self) -> sqlite3.Connection:
        return sqlite3.connect(self.path, timeout=60)

    def get_many(self, keys: list[str]) -> dict[str, str]:
        with self._connect() as db:
            found = {}
            for start in range(0, len(keys), 500):
                part = keys[start:start + 500]
                rows = db.execute(f"SELECT key, text FROM translations WHERE key IN ({','.join('?' * len(part))})",
                                  part)
                found.update(rows.fetchall())
        return found

    def put_many(self, items: dict[str, str]) -> None:
        with self._connect() as db:
            db.executemany("INSERT OR REPLACE INTO translations VALUES (?, ?)", list(items.items()))

    def __len__(self) -> int:
        with self._connect() as db:
            return db.execute("SELECT COUNT(*) FROM translations").fetchone()[0]


class BackTranslator:
    """Round-trip translation of texts, sentence by sentence, with a disk cache.

    Args:
        forward_model: Local folder of the source → pivot seq2seq model and its tokenizer.
        backward_model: Local folder of the pivot → source model and its tokenizer.
        cache_path: SQLite file of the cached round trips.
        max_length: Token limit of a piece and the most any translation may take; sentences are cut into pieces of
            at most ``max_length // 2`` words (about 1.3 subword tokens a word in English, so a piece fits with room).
        num_beams: Beam width of generation.
        batch_size: Sentences translated per forward pass.
    """

    #: A translation of a piece of n tokens may take ``ceil(n * LENGTH_RATIO) + LENGTH_MARGIN`` new tokens (at most
    #: ``max_length``): room for a language that needs more tokens than English (German about 1.2 x), no more.
    LENGTH_RATIO, LENGTH_MARGIN = 1.5, 8

    def __init__(self, forward_model: str, backward_model: str, cache_path: str, max_length: int = 128,
                 num_beams: int = 4, batch_size: int = 16) -> None:
        for name, path in (("forward_model", forward_model), ("backward_model", backward_model)):
            if not (Path(path).expanduser() / "config.json").is_file():
                raise FileNotFoundError(f"{name}: no seq2seq checkpoint (config.json) at {path!r}; save one with "
                                        f"save_pretrained, e.g. Helsinki-NLP/opus-mt-en-de and opus-mt-de-en")
        self.paths = (str(Path(forward_model).expanduser()), str(Path(backward_model).expanduser()))
        self.cache = TranslationCache(cache_path)
        self.max_length, self.num_beams, self.batch_size = max_length, num_beams, batch_size
        self.identity = (f"{self.paths[0]}|{self.paths[1]}|{max_length}|{num_beams}|"
                         f"cap {self.LENGTH_RATIO}x+{self.LENGTH_MARGIN}")
        self._models = None  # loaded on first use, in the process that translates (not pickled to workers)

    def __getstate__(self) -> dict:
        return {**self.__dict__, "_models": None}

    def key(self, sentence: str) -> str:
        return hashlib.sha256(f"{self.identity}\n{sentence}".encode()).hexdigest()

    def _load(self):
        if self._models is None:
            from transformers import AutoModelForSeq2SeqLM, AutoTokenizer

            models = [(AutoTokenizer.from_pretrained(p), AutoModelForSeq2SeqLM.from_pretrained(p).eval())
                      for p in self.paths]
            for path, (_, model) in zip(self.paths, models):
                positions = getattr(model.config, "max_position_embeddings", None)
                if positions is not None and self.max_length > positions:
                    raise ValueError(f"max_length={self.max_length} exceeds the {positions} positions of {path!r}")
            self._models = models
        return self._models

    def generation_cap(self, input_tokens: int) -> int:
        """New tokens a translation of a piece of ``input_tokens`` tokens (special tokens included) may take."""
        return max(1, min(self.max_length, math.ceil(input_tokens * self.LENGTH_RATIO) + self.LENGTH_MARGIN))

    @torch.no_grad()
    def _translate(self, sentences: list[str], tokenizer, model) -> list[str]:
        """Translations in the order of ``sentences``, translated in batches of pieces of about one length, each
        batch capped by its longest piece (:meth:`generation_cap`)."""
        lengths = [len(ids) for ids in tokenizer(sentences, truncation=True, max_length=self.max_length)["input_ids"]]
        order = sorted(range(len(sentences)), key=lengths.__getitem__)
        out = [""] * len(sentences)
        for start in range(0, len(order), self.batch_size):
            rows = order[start:start + self.batch_size]
            inputs = tokenizer([sentences[i] for i in rows], return_tensors="pt", padding=True, truncation=True,
                               max_length=self.max_length)
            cap = self.generation_cap(max(lengths[i] for i in rows))
            generated = model.generate(**inputs, max_new_tokens=cap, num_beams=self.num_beams)
            for i, text in zip(rows, tokenizer.batch_decode(generated, skip_special_tokens=True)):
                out[i] = text
        return out

    def round_trip(self, sentences: list[str]) -> list[str]:
        """Back-translations of ``sentences``, from the cache where present; new ones are added to it."""
        keys = [self.key(s) for s in sentences]
        cached = self.cache.get_many(list(set(keys)))
        todo = sorted({s for s, k in zip(sentences, keys) if k not in cached})
        if todo:
            (src_tok, src_model), (back_tok, back_model) = self._load()
            back = self._translate(self._translate(todo, src_tok, src_model), back_tok, back_model)
            new = {self.key(s): t for s, t in zip(todo, back)}
            self.cache.put_many(new)
            cached.update(new)
        return [cached[k] for k in keys]

    def pieces(self, text: str) -> list[str]:
        """The document's sentences, each longer than ``max_length // 2`` words cut into pieces of that many."""
        size, out = max(1, self.max_length // 2), []
        for sentence in split_sentences(text):
            words = sentence.split()
            out += [sentence] if len(words) <= size else [" ".join(words[i:i + size])
                                                           for i in range(0, len(words), size)]
        return out

    def __call__(self, text: str) -> str:
        """The back-translation of a whole document: its pieces translated and joined by spaces."""
        pieces = self.pieces(text)
        return " ".join(self.round_trip(pieces)) if pieces else ""
