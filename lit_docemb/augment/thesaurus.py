"""DECA's word-level augmentations (§3.3) as seeded pure functions over a corpus vocabulary.

Each augmentation is a *replacement table*, word → candidate replacements, built once from the corpus and a
thesaurus, and a pure function ``(words, table, seed) → words`` that draws from it with ``random.Random(seed)``:
the same words, table and seed give the same output in every process.

* Synonyms (WordNet): a word's candidates are itself plus its WordNet synonyms that occur in the corpus at
  least ``min_count`` times; every word is replaced by a uniform draw from its candidates (the paper keeps the
  original among them "for efficient computation").
* Negated antonyms: an adjective or verb becomes "not <antonym>" ("strong" → "not impotent"). Part of speech
  is WordNet's own (a word is an adjective / verb when it has an adjective / verb synset): context-free,
  because a tagger model (NLTK's perceptron) would need a download. Antonyms are those of the word and of its
  synonyms in those synsets, kept when in the corpus vocabulary; the original stays among the candidates.
* PPDB: candidates from a user-supplied PPDB lexical file (``LHS ||| phrase ||| paraphrase ||| ...``).
* Uninformative words, the paper's reading (``selection="rare"``, :func:`rare_synonym_table`): DECA §3.3
  "substitute these low frequent words with synonyms with high frequencies": a *rare* word, seen fewer than
  ``rare_count`` times in the corpus (10, the "UNK" threshold of Doc2VecC that §3.3 cites), is replaced by a
  uniform draw among the WordNet synonyms of its base forms (lemmatised, so Table 1's "slighter" finds
  "slight"'s synonym "thin") that are frequent: seen at least ``min_count`` times and more often than the word.
  Frequent words are never touched; the original is not among the candidates.
* Uninformative words, UDA's TF-IDF scheme (``selection="tf_idf"``, :func:`replace_uninformative`; Xie et al.
  2020, kept for comparison, not the paper's): in each document a word is replaced with probability
  ``min(1, p * (C - s_w) * n / sum_j (C - s_j))``, ``s`` its TF-IDF in the document, ``C`` the document's largest,
  so that high-TF-IDF words are kept and the mean rate is about ``p``, by a more frequent WordNet synonym
  (:func:`frequent_synonym_table`). A document's rarest words have its highest TF-IDF, so they are almost never
  replaced: the opposite of the paper's description.

The *dictionary constraint* (DECA §4.5, Table 5's last row) is ``min_count``: a replacement must occur in the
corpus that often. ``min_count=None`` lifts it for synonyms, antonyms and PPDB: every WordNet (or PPDB)
candidate is kept, in the corpus or not (WordNet's multi-word lemmas become several words, ``motor vehicle``).
The uninformative-word scheme compares corpus frequencies, so it has no unconstrained form.
"""

from __future__ import annotations

import math
import random
import re
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from lit_docemb.augment.wordnet import WordNetDatabase

WORD = re.compile(r"[a-z0-9]+(?:'[a-z]+)?")
ReplacementTable = dict[str, tuple[str, ...]]


def words_of(text: str) -> list[str]:
    """Lower-cased word tokens of a text (letters and digits, with an inner apostrophe)."""
    return WORD.findall(text.lower())


@dataclass(frozen=True)
class Vocabulary:
    """Corpus word statistics.

    Attributes:
        counts: word → occurrences in the corpus.
        document_frequency: word → documents containing it.
        num_documents: documents counted.
    """

    counts: dict[str, int]
    document_frequency: dict[str, int]
    num_documents: int

    @classmethod
    def from_texts(cls, texts: Iterable[str]) -> Vocabulary:
        counts, frequency, n = Counter(), Counter(), 0
        for text in texts:
            words = words_of(text)
            counts.update(words)
            frequency.update(set(words))
            n += 1
        if not counts:
            raise ValueError("cannot build a vocabulary: the corpus has no words")
        return cls(dict(counts), dict(frequency), n)

    def frequent(self, word: str, min_count: int) -> bool:
        return self.counts.get(word, 0) >= min_count

    def idf(self, word: str) -> float:
        return math.log((1 + self.num_documents) / (1 + self.document_frequency.get(word, 0))) + 1.0


def _check_min_count(min_count: int | None) -> None:
    if min_count is not None and min_count < 1:
        raise ValueError(f"min_count must be >= 1 or None (no dictionary constraint), got {min_count}")


def _allowed(candidate: str, vocabulary: Vocabulary, min_count: int | None) -> bool:
    """The dictionary constraint: in the corpus ``min_count`` times, or anything with ``min_count=None``."""
    return min_count is None or vocabulary.frequent(candidate, min_count)


def _lemma_words(lemma: str) -> str:
    return lemma.replace("_", " ")


def synonym_table(vocabulary: Vocabulary, wordnet: WordNetDatabase, min_count: int | None = 5) -> ReplacementTable:
    """word → (word, its in-vocabulary WordNet synonyms seen at least ``min_count`` times...), for the words
    that have at least one such synonym; ``min_count=None``: all its WordNet synonyms."""
    _check_min_count(min_count)
    table = {}
    for word in vocabulary.counts:
        found = sorted(_lemma_words(s) for s in wordnet.synonyms(word) if _allowed(s, vocabulary, min_count))
        if found:
            table[word] = (word, *found)
    return table


def antonym_table(vocabulary: Vocabulary, wordnet: WordNetDatabase, min_count: int | None = 5,
                  negation: str = "not") -> ReplacementTable:
    """adjective or verb → (itself, "<negation> <antonym>"...), antonyms in the vocabulary (``min_count``; all
    of them with ``None``)."""
    _check_min_count(min_count)
    table = {}
    for word in vocabulary.counts:
        antonyms = {a for pos in wordnet.pos_of(word) & {"a", "v"} for a in wordnet.negatable_antonyms(word, pos)}
        found = sorted(f"{negation} {_lemma_words(a)}" for a in antonyms if _allowed(a, vocabulary, min_count))
        if found:
            table[word] = (word, *found)
    return table


def ppdb_table(path: str | Path, vocabulary: Vocabulary, min_count: int | None = 5) -> ReplacementTable:
    """word → (word, its single-word PPDB paraphrases in the vocabulary (``min_count``; all with ``None``)...)
    from a PPDB file whose lines are
    ``[LHS] ||| phrase ||| paraphrase ||| features [||| alignment [||| entailment]]`` (PPDB 1.0 and 2.0 lexical
    packs). Multi-word phrases and paraphrases are skipped; malformed lines are an error with their number."""
    _check_min_count(min_count)
    path = Path(path).expanduser()
    if not path.is_file():
        raise FileNotFoundError(f"PPDB file not found: {str(path)!r} (download a lexical pack, e.g. "
                                f"ppdb-2.0-s-lexical, from paraphrase.org and pass its path)")
    found: dict[str, set[str]] = {}
    with open(path, encoding="utf-8") as f:
        for number, line in enumerate(f, 1):
            if not line.strip():
                continue
            fields = [x.strip() for x in line.split("|||")]
            if len(fields) < 4:
                raise ValueError(f"{path}:{number}: not a PPDB line (need 'LHS ||| phrase ||| paraphrase ||| "
                                 f"features'): {line.strip()[:120]!r}")
            phrase, paraphrase = fields[1].lower(), fields[2].lower()
            if (" " not in phrase and " " not in paraphrase and phrase != paraphrase
                    and phrase in vocabulary.counts and _allowed(paraphrase, vocabulary, min_count)):
                found.setdefault(phrase, set()).add(paraphrase)
    return {word: (word, *sorted(candidates)) for word, candidates in found.items()}


def frequent_synonym_table(vocabulary: Vocabulary, wordnet: WordNetDatabase, min_count: int = 5) -> ReplacementTable:
    """word → its WordNet synonyms that are more frequent than it in the corpus and seen ``min_count`` times."""
    if min_count is None:
        raise ValueError("uninformative-word replacement picks more frequent corpus words: it needs the "
                         "dictionary constraint (a min_count)")
    _check_min_count(min_count)
    table = {}
    for word, count in vocabulary.counts.items():
        found = sorted(s for s in wordnet.synonyms(word)
                       if vocabulary.counts.get(s, 0) > count and vocabulary.frequent(s, min_count))
        if found:
            table[word] = tuple(found)
    return table


def rare_synonym_table(vocabulary: Vocabulary, wordnet: WordNetDatabase, min_count: int = 5,
                       rare_count: int = 10) -> ReplacementTable:
    """rare word (corpus count < ``rare_count``) → the WordNet synonyms of its base forms
    (:meth:`~lit_docemb.augment.wordnet.WordNetDatabase.lemma_synonyms`) seen ``min_count`` times and more often than
    it; single-word synonyms only (a multi-word lemma is not a corpus word). DECA's uninformative-word
    replacement (see the module docstring)."""
    _check_min_count(min_count)
    if rare_count < 1:
        raise ValueError(f"rare_count must be >= 1, got {rare_count}")
    table = {}
    for word, count in vocabulary.counts.items():
        if count >= rare_count:
            continue
        found = sorted(s for s in wordnet.lemma_synonyms(word)
                       if vocabulary.counts.get(s, 0) > count and vocabulary.frequent(s, min_count))
        if found:
            table[word] = tuple(found)
    return table


#: A replacement table prepared for drawing: word → (candidates, their bit length, each one split into words).
Draws = dict[str, tuple[int, int, tuple[list[str], ...]]]


def draws_of(table: ReplacementTable) -> Draws:
    """``table`` prepared once for :func:`replace_words` (``DocumentAugmenter`` keeps it with its table)."""
    return {word: (len(candidates), len(candidates).bit_length(), tuple(c.split() for c in candidates))
            for word, candidates in table.items() if candidates}


def replace_words(words: list[str], table: ReplacementTable, seed: int | str, probability: float = 1.0,
                  draws: Draws | None = None) -> list[str]:
    """Each word with candidates is, with ``probability``, replaced by a uniform draw among them (a multi-word
    candidate such as "not weak" adds several words). Pure: same inputs and seed, same output.

    The draws are, per word with candidates, ``rng.random() < probability`` then ``rng.choice(candidates)`` of
    ``rng = random.Random(seed)``, with ``choice`` inlined as CPython's ``_randbelow_with_getrandbits`` (the
    top ``n.bit_length()`` bits of one output, drawn again while they are ``>= n``): the same generator calls,
    so the same words (``tests/augment/test_augment.py`` compares the two). ``draws``: :func:`draws_of` ``(table)``
    when the caller keeps it, else it is prepared for the words of this call."""
    if not 0.0 <= probability <= 1.0:
        raise ValueError(f"probability must be in [0, 1], got {probability}")
    if draws is None:
        draws = draws_of({w: table[w] for w in set(words) if w in table})
    rng, out, get = random.Random(seed), [], draws.get
    uniform, bits, append, extend = rng.random, rng.getrandbits, out.append, out.extend
    for word in words:
        entry = get(word)
        if entry is not None and uniform() < probability:
            n, k, choices = entry
            r = bits(k)
            while r >= n:
                r = bits(k)
            extend(choices[r])
        else:
            append(word)
    return out


def replace_uninformative(words: list[str], table: ReplacementTable, vocabulary: Vocabulary, seed: int | str,
                          probability: float = 0.3) -> list[str]:
    """UDA's TF-IDF word replacement with ``table``'s more frequent synonyms (see the module docstring)."""
    if not 0.0 <= probability <= 1.0:
        raise ValueError(f"probability must be in [0, 1], got {probability}")
    if not words:
        return []
    tf = Counter(words)
    scores = [tf[w] / len(words) * vocabulary.idf(w) for w in words]
    top = max(scores)
    total = sum(top - s for s in scores)
    rng, out = random.Random(seed), []
    for word, score in zip(words, scores):
        p = min(1.0, probability * (top - score) * len(words) / total) if total > 0 else probability
        candidates = table.get(word)
        out.append(rng.choice(candidates) if candidates and rng.random() < p else word)
    return out
