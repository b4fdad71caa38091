"""DECA's augmentations (§3.3) as typed config components: one class per augmentation, each with only the options
that apply to it, built into a :class:`~lit_docemb.augment.DocumentAugmenter` once the corpus vocabulary is known.

A config names one with ``class_path`` / ``init_args`` (e.g. ``lit_docemb.augment.specs.PPDB`` with ``path``);
``problems`` lists out-of-range values for the method to raise as a :class:`~lit_docemb.errors.ConfigError`
under the component's full key.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from typing import Literal

from lit_docemb.augment.back_translation import BackTranslator
from lit_docemb.augment.thesaurus import Vocabulary


class Augmentation(ABC):
    """What the augmentation components share: their name in :class:`DocumentAugmenter` and their checks."""

    name: str
    #: Words the augmentation writes whatever the corpus holds (the antonyms' negation): a model with its own
    #: vocabulary (DECA's Doc2VecC) adds them, or they would vanish from every augmented document.
    added_words: tuple[str, ...] = ()

    def problems(self) -> dict[str, str]:
        """Argument name -> what is wrong with its value (empty when every value is in range)."""
        return {}

    @abstractmethod
    def build(self, vocabulary: Vocabulary):
        """The picklable ``(text, seed) -> words`` augmenter over ``vocabulary``."""


class _Replacement(Augmentation):
    """A thesaurus replacement: candidates filtered by corpus count, drawn with a probability."""

    def __init__(self, replacement_min_count: int | None, replacement_probability: float,
                 dictionary_constraint: bool = True) -> None:
        self.replacement_min_count = replacement_min_count
        self.replacement_probability = replacement_probability
        self.dictionary_constraint = dictionary_constraint

    def problems(self) -> dict[str, str]:
        found = {}
        if self.replacement_min_count is not None and self.replacement_min_count < 1:
            found["replacement_min_count"] = f"must be >= 1, got {self.replacement_min_count}"
        if not self.dictionary_constraint and self.replacement_min_count is not None:
            found["replacement_min_count"] = ("is the dictionary constraint's corpus count: unset it with "
                                              "dictionary_constraint: false")
        if not 0.0 <= self.replacement_probability <= 1.0:
            found["replacement_probability"] = f"must be in [0, 1], got {self.replacement_probability}"
        return found

    def _augmenter(self, vocabulary: Vocabulary, wordnet_dir: str | None = None, ppdb_path: str | None = None):
        from lit_docemb.augment import DocumentAugmenter

        return DocumentAugmenter(self.name, vocabulary, self.replacement_min_count, self.replacement_probability,
                                 wordnet_dir, ppdb_path, dictionary_constraint=self.dictionary_constraint)


class WordNet(_Replacement):
    """Synonym replacement from WordNet (§3.3; the augmentation of most Table 2 rows).

    Args:
        replacement_min_count: Corpus count a synonym needs (``None``: 5, or the Doc2VecC vocabulary's
            ``min_word_count`` in DECA; with the dictionary constraint only).
        replacement_probability: Chance that a word with synonyms is resampled (paper 1.0, its original among the
            candidates).
        dictionary_constraint: Synonyms must be corpus words (§4.5); ``False`` is Table 5's last row.
        wordnet_dir: WordNet database folder (``None``: ``$LIT_DOCEMB_WORDNET`` or ``/usr/share/wordnet``).
    """

    name = "wordnet"

    def __init__(self, replacement_min_count: int | None = None, replacement_probability: float = 1.0,
                 dictionary_constraint: bool = True, wordnet_dir: str | None = None) -> None:
        super().__init__(replacement_min_count, replacement_probability, dictionary_constraint)
        self.wordnet_dir = wordnet_dir

    def build(self, vocabulary: Vocabulary):
        return self._augmenter(vocabulary, wordnet_dir=self.wordnet_dir)


class Antonym(WordNet):
    """Negated antonyms of adjectives and verbs from WordNet (§3.3; Table 2's r8 and r52): "strong" becomes
    "not impotent". The antonym must pass the dictionary constraint; the negation "not" is written whatever the
    corpus holds (text_gcn's cleaned corpora have no stop words, "not" included).

    Args:
        replacement_min_count: Corpus count an antonym needs (``None``: 5, or the Doc2VecC vocabulary's
            ``min_word_count`` in DECA; with the dictionary constraint only).
        replacement_probability: Chance that a word with antonyms is resampled (paper 1.0).
        dictionary_constraint: Antonyms must be corpus words (§4.5); ``False`` is Table 5's last row.
        wordnet_dir: WordNet database folder (``None``: ``$LIT_DOCEMB_WORDNET`` or ``/usr/share/wordnet``).
    """

    name = "antonym"
    added_words = ("not",)  # antonym_table's negation


class Uninformative(_Replacement):
    """Uninformative-word replacement (§3.3): "we substitute these low frequent words with synonyms with high
    frequencies". Its candidates are corpus words by construction: it has no dictionary constraint to lift.

    Args:
        replacement_min_count: Corpus count a synonym needs (``None``: 5, or the Doc2VecC vocabulary's
            ``min_word_count`` in DECA).
        replacement_probability: ``selection: rare``: the chance that a rare word with frequent synonyms is
            replaced (``None``: 1.0, every one, by a uniform draw among its frequent synonyms, so each epoch's
            augmentation differs); ``selection: tf_idf``: UDA's mean replacement rate (``None``: 0.3).
        selection: ``rare`` (the paper's reading): words seen fewer than ``rare_count`` times in the corpus,
            replaced by frequent WordNet synonyms of their lemmas (Table 1: "slighter" → "thin"); ``tf_idf``:
            UDA's rule (low-TF-IDF words of each document), kept for comparison: it almost never picks a
            document's rarest words, the opposite of the paper's description.
        rare_count: Corpus count below which a word is rare (default 10, the "UNK" threshold that §3.3 cites).
        wordnet_dir: WordNet database folder (``None``: ``$LIT_DOCEMB_WORDNET`` or ``/usr/share/wordnet``).
    """

    name = "uninformative"

    def __init__(self, replacement_min_count: int | None = None, replacement_probability: float | None = None,
                 selection: Literal["rare", "tf_idf"] = "rare", rare_count: int = 10,
                 wordnet_dir: str | None = None) -> None:
        if replacement_probability is None:
            replacement_probability = 1.0 if selection == "rare" else 0.3
        super().__init__(replacement_min_count, replacement_probability)
        self.selection, self.rare_count, self.wordnet_dir = selection, rare_count, wordnet_dir

    def problems(self) -> dict[str, str]:
        found = super().problems()
        if self.selection not in ("rare", "tf_idf"):
            found["selection"] = f"must be 'rare' (the paper's) or 'tf_idf' (UDA's), got {self.selection!r}"
        if self.rare_count < 1:
            found["rare_count"] = f"must be >= 1, got {self.rare_count}"
        return found

    def build(self, vocabulary: Vocabulary):
        from lit_docemb.augment import DocumentAugmenter

        return DocumentAugmenter(self.name, vocabulary, self.replacement_min_count, self.replacement_probability,
                                 self.wordnet_dir, selection=self.selection, rare_count=self.rare_count)


class PPDB(_Replacement):
    """Paraphrase replacement from a PPDB lexical file (§3.3; Table 2's imdb).

    Args:
        path: The PPDB lexical file (e.g. ``ppdb-2.0-s-lexical``).
        replacement_min_count: Corpus count a paraphrase needs (``None``: 5; with the dictionary constraint only).
        replacement_probability: Chance that a word with paraphrases is resampled (paper 1.0).
        dictionary_constraint: Paraphrases must be corpus words (§4.5); ``False`` lifts it.
    """

    name = "ppdb"

    def __init__(self, path: str, replacement_min_count: int | None = None, replacement_probability: float = 1.0,
                 dictionary_constraint: bool = True) -> None:
        super().__init__(replacement_min_count, replacement_probability, dictionary_constraint)
        self.path = path

    def build(self, vocabulary: Vocabulary):
        return self._augmenter(vocabulary, ppdb_path=self.path)


class BackTranslation(Augmentation):
    """Back-translation through a pivot language (§3.3): every sentence translated and translated back.

    Args:
        models: Folders of the forward and the backward seq2seq models.
        cache: SQLite file caching the translations.
        max_length: Tokens of a translated piece and the most its translations may take (a longer sentence is cut
            into pieces of max_length // 2 words, so the whole document is translated; a translation's own cap follows
            its piece's length: :meth:`~lit_docemb.augment.back_translation.BackTranslator.generation_cap`).
    """

    name = "back_translation"

    def __init__(self, models: list[str], cache: str, max_length: int = 128) -> None:
        self.models, self.cache, self.max_length = list(models), cache, max_length

    def problems(self) -> dict[str, str]:
        found = {}
        if len(self.models) != 2:
            found["models"] = f"give the forward and the backward model folders, got {len(self.models)}"
        if self.max_length < 1:
            found["max_length"] = f"must be >= 1, got {self.max_length}"
        return found

    def build(self, vocabulary: Vocabulary):
        from lit_docemb.augment import DocumentAugmenter

        translator = BackTranslator(*self.models, cache_path=self.cache, max_length=self.max_length)
        return DocumentAugmenter(self.name, vocabulary, translator=translator)
