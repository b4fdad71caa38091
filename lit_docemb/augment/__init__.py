"""DECA's document augmentations (§3.3): thesaurus replacements and back-translation.

:class:`DocumentAugmenter` turns one configured augmentation into the picklable callable
``(text, seed) → words`` that a collator runs in dataloader workers.
"""

from __future__ import annotations

from typing import Literal

from lit_docemb.augment.back_translation import BackTranslator, TranslationCache
from lit_docemb.augment.thesaurus import (ReplacementTable, Vocabulary, antonym_table, draws_of, frequent_synonym_table,
                                          ppdb_table, rare_synonym_table, replace_uninformative, replace_words,
                                          synonym_table, words_of)
from lit_docemb.augment.wordnet import WordNetDatabase, load_wordnet

AugmentationName = Literal["wordnet", "antonym", "uninformative", "ppdb", "back_translation"]
#: The augmentations whose candidates can be drawn without the dictionary constraint.
UNCONSTRAINABLE = ("wordnet", "antonym", "ppdb")

__all__ = ["AugmentationName", "BackTranslator", "DocumentAugmenter", "ReplacementTable", "TranslationCache",
           "UNCONSTRAINABLE", "Vocabulary", "WordNetDatabase", "antonym_table", "frequent_synonym_table",
           "load_wordnet", "ppdb_table", "rare_synonym_table", "replace_uninformative", "replace_words",
           "synonym_table", "words_of"]


class DocumentAugmenter:
    """One augmentation over a corpus vocabulary: ``augmenter(text, seed)`` → the augmented document's words.

    Args:
        name: ``"wordnet"`` (synonyms), ``"antonym"`` (negated antonyms of adjectives and verbs),
            ``"uninformative"`` (rare words, or TF-IDF-chosen ones, to frequent synonyms), ``"ppdb"`` or
            ``"back_translation"``.
        vocabulary: Corpus statistics that filter the candidates and give TF-IDF.
        min_count: Corpus count a replacement needs (``None``: 5; dictionary constraint only).
        probability: Chance that a word with candidates is resampled (``wordnet``, ``antonym``, ``ppdb``; the
            paper resamples every word, 1.0, its original among the candidates), the chance that a rare word
            with frequent synonyms is replaced (``uninformative`` with ``selection="rare"``), or UDA's mean
            replacement rate (``selection="tf_idf"``). Back-translation has no rate: it must be 1.0.
        wordnet_dir: WordNet database folder (``None``: ``$LIT_DOCEMB_WORDNET`` or ``/usr/share/wordnet``).
        ppdb_path: PPDB lexical file (``ppdb`` only).
        translator: The back-translator (``back_translation`` only).
        dictionary_constraint: Replacements must be corpus words (DECA §4.5); ``False`` (Table 5's last row,
            ``wordnet``, ``antonym`` and ``ppdb`` only) draws from every thesaurus candidate.
        selection: Which words ``uninformative`` replaces: ``"rare"`` (the paper's reading, DECA §3.3: words seen
            fewer than ``rare_count`` times, by frequent synonyms of their lemmas) or ``"tf_idf"`` (UDA's
            low-TF-IDF rule, not the paper's; see :mod:`lit_docemb.augment.thesaurus`).
        rare_count: Corpus count below which a word is rare (``selection="rare"``; 10, Doc2VecC's UNK threshold).
    """

    def __init__(self, name: AugmentationName, vocabulary: Vocabulary, min_count: int | None = None,
                 probability: float = 1.0, wordnet_dir: str | None = None, ppdb_path: str | None = None,
                 translator: BackTranslator | None = None, dictionary_constraint: bool = True,
                 selection: Literal["rare", "tf_idf"] = "rare", rare_count: int = 10) -> None:
        if not 0.0 <= probability <= 1.0:
            raise ValueError(f"probability must be in [0, 1], got {probability}")
        if (name == "ppdb") != (ppdb_path is not None):
            raise ValueError("ppdb_path is needed by, and only by, the 'ppdb' augmentation")
        if (name == "back_translation") != (translator is not None):
            raise ValueError("a translator is needed by, and only by, the 'back_translation' augmentation")
        if name == "back_translation" and probability != 1.0:
            raise ValueError("back_translation translates whole documents: probability must be 1.0")
        if not dictionary_constraint:
            if name not in UNCONSTRAINABLE:
                raise ValueError(f"dictionary_constraint=False is for {UNCONSTRAINABLE} (candidates from a "
                                 f"thesaurus); {name!r} has none to lift (Table 5: '-')")
            if min_count is not None:
                raise ValueError("min_count is the dictionary constraint's corpus count: unset it with "
                                 "dictionary_constraint=False")
        elif min_count is None:
            min_count = 5
        if selection not in ("rare", "tf_idf"):
            raise ValueError(f"selection must be 'rare' or 'tf_idf', got {selection!r}")
        self.name, self.vocabulary, self.probability, self.translator = name, vocabulary, probability, translator
        self.selection = selection if name == "uninformative" else None
        self.table: ReplacementTable = {}
        if name == "ppdb":
            self.table = ppdb_table(ppdb_path, vocabulary, min_count)
        elif name == "uninformative" and selection == "rare":
            self.table = rare_synonym_table(vocabulary, load_wordnet(wordnet_dir), min_count, rare_count)
        elif name in ("wordnet", "antonym", "uninformative"):
            build = {"wordnet": synonym_table, "antonym": antonym_table, "uninformative": frequent_synonym_table}
            self.table = build[name](vocabulary, load_wordnet(wordnet_dir), min_count)
        elif name != "back_translation":
            raise ValueError(f"unknown augmentation {name!r}; choose one of {AugmentationName.__args__}")
        self.draws = draws_of(self.table)  # the table prepared once for replace_words

    @property
    def replaces_from_table(self) -> bool:
        """Whether the augmentation is :func:`replace_words` over :attr:`draws`: the thesaurus ones, those that
        :data:`UNCONSTRAINABLE` names, and the paper's uninformative-word replacement (rare words)."""
        return self.name in UNCONSTRAINABLE or self.selection == "rare"

    def __call__(self, text: str, seed: int | str, words: list[str] | None = None) -> list[str]:
        """The augmentation of ``text`` for ``seed``; ``words``: ``words_of(text)`` when the caller has it already
        (the collators), so that the text is not split twice."""
        if self.name == "back_translation":
            return words_of(self.translator(text))
        words = words_of(text) if words is None else words
        if self.selection == "tf_idf":
            return replace_uninformative(words, self.table, self.vocabulary, seed, self.probability)
        return replace_words(words, self.table, seed, self.probability, self.draws)
