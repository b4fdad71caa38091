"""WordNet 3.0 read straight from the database files of Debian's ``wordnet-base`` package (offline).

Only what DECA's thesaurus augmentations need: for every lemma, its synsets (with their part of speech), the
lemmas of each synset and the antonym pointers between lemmas. The four ``data.<pos>`` files are parsed
once per folder (about 2 s) in the format documented in WordNet's ``wndb(5)`` man page::

    synset_offset lex_filenum ss_type w_cnt word lex_id [word lex_id...] p_cnt [ptr...] [frames...] | gloss

where ``w_cnt`` is two hexadecimal digits and each pointer is ``symbol offset pos source/target`` (``!`` is
an antonym; ``source/target`` are two hexadecimal lemma numbers, ``0000`` for a pointer between synsets).

Lemmas are matched exactly (lower-cased) by :meth:`WordNetDatabase.synonyms`; :meth:`WordNetDatabase.lemmas` reduces an
inflected word to its WordNet base forms as WordNet's own ``morphy`` does (``morphy(7WN)``): the exception lists
``<pos>.exc`` (``slighter`` → ``slight`` is a detachment, ``better`` → ``good`` an exception), then the
detachment rules of each part of speech (``-ies`` → ``-y``, ``-ing`` → ``-e`` / ``-``, ``-er`` / ``-est`` → ``-``
/ ``-e``...), a form kept when WordNet has it in that part of speech. Multi-word lemmas (``able_bodied``) keep
their underscores and so never match a corpus word. Adjective markers such as ``(p)`` are removed.
"""

from __future__ import annotations

import os
from collections import defaultdict
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path

#: Where Debian's ``wordnet-base`` puts the database; override with ``LIT_DOCEMB_WORDNET`` or an argument.
DEFAULT_WORDNET_DIR = "/usr/share/wordnet"
POS_FILES = {"n": "noun", "v": "verb", "a": "adj", "r": "adv"}
#: WordNet's detachment rules (``morphy(7WN)``): per part of speech, (inflectional ending, ending of the base form).
DETACHMENTS = {"n": (("s", ""), ("ses", "s"), ("xes", "x"), ("zes", "z"), ("ches", "ch"), ("shes", "sh"),
                     ("men", "man"), ("ies", "y")),
               "v": (("s", ""), ("ies", "y"), ("es", "e"), ("es", ""), ("ed", "e"), ("ed", ""), ("ing", "e"),
                     ("ing", "")),
               "a": (("er", ""), ("est", ""), ("er", "e"), ("est", "e")),
               "r": ()}
INSTALL_HINT = ("install Debian's WordNet database: `apt-get install -y wordnet-base` (files in /usr/share/wordnet), "
                "or point wordnet_dir / LIT_DOCEMB_WORDNET at a folder holding WordNet 3.0's data.noun, data.verb, "
                "data.adj and data.adv")


@dataclass
class WordNetDatabase:
    """Lemma-level view of WordNet's database (DECA's augmentation that draws from it is
    :class:`lit_docemb.augment.specs.WordNet`).

    Attributes:
        synsets: lemma → list of (pos, synset offset); pos is ``n``, ``v``, ``a`` (adjective, satellites
            included) or ``r``.
        members: (pos, offset) → the synset's lemmas, in WordNet's order.
        antonyms: (pos, offset, lemma) → the lemmas that WordNet marks as antonyms of that lemma in that synset.
    """

    synsets: dict[str, list[tuple[str, int]]] = field(default_factory=lambda: defaultdict(list))
    members: dict[tuple[str, int], list[str]] = field(default_factory=dict)
    antonyms: dict[tuple[str, int, str], list[str]] = field(default_factory=lambda: defaultdict(list))
    exceptions: dict[tuple[str, str], list[str]] = field(default_factory=dict)

    def synonyms(self, word: str, pos: str | None = None) -> set[str]:
        """Lemmas sharing a synset with ``word`` (optionally of one part of speech), ``word`` excluded."""
        return {m for p, off in self.synsets.get(word, ()) if pos is None or p == pos
                for m in self.members[(p, off)] if m != word}

    def lemmas(self, word: str) -> list[str]:
        """The WordNet base forms of ``word`` in any part of speech, ``word`` itself first when WordNet has it
        (morphy: the ``<pos>.exc`` exceptions, then the detachment rules; see the module docstring)."""
        found = [word] if word in self.synsets else []
        for pos, rules in DETACHMENTS.items():
            forms = list(self.exceptions.get((pos, word), ()))
            forms += [word[:-len(end)] + base for end, base in rules if word.endswith(end) and len(word) > len(end)]
            found += [f for f in forms if f not in found and pos in self.pos_of(f)]
        return found

    def lemma_synonyms(self, word: str) -> set[str]:
        """Synonyms of ``word``'s base forms (:meth:`lemmas`): ``slighter`` → ``slight``'s, ``thin`` among them;
        ``word`` and its base forms excluded."""
        bases = self.lemmas(word)
        return {s for base in bases for s in self.synonyms(base)} - {word, *bases}

    def pos_of(self, word: str) -> set[str]:
        """The parts of speech of the synsets of ``word`` (empty when WordNet does not know it)."""
        return {p for p, _ in self.synsets.get(word, ())}

    def negatable_antonyms(self, word: str, pos: str) -> set[str]:
        """Antonyms of ``word`` and of its synonyms in its ``pos`` synsets (DECA's "strong" → "impotent" goes
        through strong's synonym "potent")."""
        return {a for p, off in self.synsets.get(word, ()) if p == pos
                for m in self.members[(p, off)] for a in self.antonyms.get((p, off, m), ())} - {word}


def _lemma(raw: str) -> str:
    raw = raw.lower()
    return raw[:raw.index("(")] if raw.endswith(")") and "(" in raw else raw


def _parse_line(line: str, wordnet: WordNetDatabase, pending: list) -> None:
    head = line.split(" | ", 1)[0]
    fields = head.split()
    offset, pos = int(fields[0]), "a" if fields[2] == "s" else fields[2]
    count = int(fields[3], 16)
    words = [_lemma(fields[4 + 2 * i]) for i in range(count)]
    wordnet.members[(pos, offset)] = words
    for word in words:
        wordnet.synsets[word].append((pos, offset))
    if " ! " not in head:  # no antonym pointer (nine synsets in ten): the pointers need no scan
        return
    at = 4 + 2 * count
    for k in range(int(fields[at])):
        symbol, target, target_pos, source_target = fields[at + 1 + 4 * k: at + 5 + 4 * k]
        if symbol == "!":
            target_pos = "a" if target_pos == "s" else target_pos
            pending.append((pos, offset, words, int(source_target[:2], 16), target_pos, int(target),
                            int(source_target[2:], 16)))


@lru_cache(maxsize=4)
def load_wordnet(wordnet_dir: str | None = None) -> WordNetDatabase:
    """Parses the WordNet database in ``wordnet_dir`` (default: ``$LIT_DOCEMB_WORDNET`` or
    ``/usr/share/wordnet``). Raises ``FileNotFoundError`` naming ``wordnet-base`` when files are missing."""
    folder = Path(wordnet_dir or os.environ.get("LIT_DOCEMB_WORDNET") or DEFAULT_WORDNET_DIR).expanduser()
    missing = [f"data.{name}" for name in POS_FILES.values() if not (folder / f"data.{name}").is_file()]
    if missing:
        raise FileNotFoundError(f"WordNet database not found in {str(folder)!r} (missing {', '.join(missing)}): "
                                f"{INSTALL_HINT}")
    wordnet, pending = WordNetDatabase(), []
    for name in POS_FILES.values():
        with open(folder / f"data.{name}", encoding="utf-8", errors="replace") as f:
            for line in f:
                if not line.startswith("  "):  # the licence header lines start with two spaces
                    _parse_line(line, wordnet, pending)
    for pos, name in POS_FILES.items():
        exception_file = folder / f"{name}.exc"
        if exception_file.is_file():  # "<inflected form> <base form> [<base form>...]" per line
            with open(exception_file, encoding="utf-8", errors="replace") as f:
                for line in f:
                    inflected, *bases = line.split()
                    if bases:
                        wordnet.exceptions[(pos, inflected.lower())] = [b.lower() for b in bases]
    for pos, offset, words, source, target_pos, target, target_word in pending:
        targets = wordnet.members[(target_pos, target)]
        sources = words if source == 0 else [words[source - 1]]
        for word in sources:
            found = targets if target_word == 0 else [targets[target_word - 1]]
            wordnet.antonyms[(pos, offset, word)].extend(found)
    return wordnet
