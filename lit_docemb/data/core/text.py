"""Text processing shared by all methods: sentences, ~100-word passages, token windows and sentence views.

Sentence splitting is a rule-based splitter written here rather than a library: NLTK's punkt needs a
trained model download (not available offline), spaCy/stanza need model downloads and a parser, and the
rule libraries (pysbd, syntok) would be a new dependency for what fits in ~150 lines here. The rules below
run at several MB/s on one core, in two passes that are both linear in the input:

1. **Blocks.** Blank lines end a block; a line that starts with a list marker (``-``, ``*``, ``•``,
   ``1.``, ``2)``, ``(a)``, ``iv.``...) starts a new block, so each list item is its own sentence. Any
   other single newline is treated as a space (hard-wrapped text).
2. **Boundaries inside a block.** A candidate is a run of terminal punctuation (``.``, ``!``, ``?``,
   ``…``), optionally followed by closing quotes/brackets, followed by whitespace. Decimals, version
   numbers, URLs and e-mails (``3.14``, ``v2.0.1``, ``www.x.org``) have no whitespace after the dot and are
   never candidates. A candidate is a boundary unless the next word starts with a lowercase letter, or the
   terminal is a single ``.`` after

   - a title or a reference abbreviation (``Dr.``, ``Mr.``, ``e.g.``, ``i.e.``, ``vs.``, ``cf.``);
   - a numbering abbreviation followed by a number (``Fig. 3``, ``No. 5``, ``Eq. (2)``, ``Jan. 2020``);
   - the list marker that opens the block (``1. First item``);
   - an ambiguous token, i.e. an initial (``J. R. R. Tolkien``), a dotted acronym (``U.S.``) or an
     abbreviation that also ends sentences (``etc.``, ``Inc.``, ``et al.``), unless the next word is a
     frequent sentence starter (``The``, ``It``, ``However``...).

   CJK full stops (``。！？``) always end a sentence, whitespace or not.

Sentences are stripped slices of the input, so joining them keeps every non-whitespace character in order.

Known limitations: a sentence starting with a lowercase word (``iPhone``, ``pH``, ``(see above.)``) stays
attached to the previous one; a sentence that really ends with an ambiguous token is only split before a
common starter word (``moved to the U.S. The`` splits, ``moved to the U.S. Prices rose`` does not); a
sentence never ends with a title (``on Main St. The house``); a heading line without punctuation followed by
a single newline is joined to the next line; only English abbreviations are listed.
"""

from __future__ import annotations

import random
import re
from collections.abc import Iterator
from dataclasses import dataclass

from lit_docemb.data.core.document import Document

_TITLES = frozenset(
    "mr mrs ms mx dr prof rev hon gen col capt lt sgt gov sen rep pres fr mt st messrs mme mlle".split()
)
_NEVER_FINAL = frozenset("e.g i.e cf vs viz approx ca resp incl esp dept univ".split())
_BEFORE_NUMBER = frozenset(
    "no nos nr fig figs eq eqs sec secs vol vols pp p ch chap art ref refs tab thm def lem app ex op para "
    "jan feb mar apr jun jul aug sep sept oct nov dec".split()
)
_AMBIGUOUS = frozenset("etc inc ltd co corp jr sr al bros llc plc a.m p.m ph.d".split())
_SENTENCE_STARTERS = frozenset(
    "The A An This That These Those It Its He She They We I You His Her Their Our My In On At For From "
    "By With But And Or So Thus Then However There Here When While After Before As If Also Although "
    "Since Because Many Most Some All Each Both One Two Yet What Who Why How Where Which Such Other "
    "Another Further Finally Instead Later Today".split()
)

_OPENERS = "\"'“‘„«‹([{¿¡"
_TRAILING = ",;:\"'”’»›)]}"
_CLOSERS = "\"'”’»›)\\]}」』）"
# A match must start at the first character of a terminal run, so a long run of dots is tried once and
# backtracked linearly instead of being retried from each of its positions. Each branch starts with a character
# class and checks "the previous character is not a terminal" with a two-character lookbehind *after* it: a
# pattern that starts with a character class lets ``re`` skip to the next terminal character in C instead of
# trying a match (lookbehind first) at every position, which makes ``finditer`` faster on prose
# (figures: docs/performance.md).
_BOUNDARY = re.compile(
    rf"(?P<terminal>[.!?…‽](?<![.!?…‽][.!?…‽])[.!?…‽]*)[{_CLOSERS}]*\s+"
    rf"|[。！？](?<![。！？][。！？])[。！？]*[{_CLOSERS}]*\s*"
)
_NEWLINE = re.compile(r"\r\n|\r|\n")
_ROMAN = r"(?:x{0,3}(?:ix|iv|v?i{1,3}|v)|x{1,3}|X{0,3}(?:IX|IV|V?I{1,3}|V)|X{1,3})"
_MARKER = rf"(?:[-*+•‣▪◦●–—]|\(?\d{{1,3}}[.)]|\(?[A-Za-z][.)]|\(?{_ROMAN}[.)]|\(\d{{1,3}}\)|\([A-Za-z]\))"
_LIST_ITEM = re.compile(rf"[^\S\r\n]*{_MARKER}\s")
_MARKER_WORD = re.compile(rf"\(?(?:\d{{1,3}}(?:\.\d{{1,3}})*|[A-Za-z]|{_ROMAN})")
_ACRONYM = re.compile(r"(?:[A-Za-z]\.)+[A-Za-z]")
_FIRST_NON_SPACE = re.compile(r"\S")
_WORD_WINDOW = 64  # longest token looked at around a candidate; abbreviations are far shorter


def split_sentences(text: str) -> list[str]:
    """Splits text into sentences with the offline rules described in the module docstring.

    Args:
        text: Any string (empty, whitespace-only and control characters are fine).

    Returns:
        Stripped, non-empty sentences in order; their concatenation keeps every non-whitespace character
        of ``text`` in order. Runs in time linear in ``len(text)``.
    """
    sentences: list[str] = []
    for start, end in _blocks(text):
        sentences.extend(_split_block(text[start:end]))
    return sentences


def _line_spans(text: str) -> Iterator[tuple[int, int]]:
    """(start, end) of every line, newline characters (``\r\n``, ``\r``, ``\n``) excluded."""
    start = 0
    if "\r" not in text:  # the common case: str.split is faster than the regex
        for line in text.split("\n"):
            yield start, start + len(line)
            start += len(line) + 1
        return
    for newline in _NEWLINE.finditer(text):
        yield start, newline.start()
        start = newline.end()
    yield start, len(text)


def _blocks(text: str) -> Iterator[tuple[int, int]]:
    """(start, end) of runs of non-blank lines; a list-item line always starts a new run."""
    block_start = block_end = -1
    for start, end in _line_spans(text):
        line = text[start:end]
        if line.isspace() or not line:
            if block_start >= 0:
                yield block_start, block_end
            block_start = -1
            continue
        if block_start >= 0 and _LIST_ITEM.match(line):
            yield block_start, block_end
            block_start = -1
        if block_start < 0:
            block_start = start
        block_end = end
    if block_start >= 0:
        yield block_start, block_end


def _split_block(block: str) -> list[str]:
    """Splits one block (no blank lines, at most one leading list marker) at sentence boundaries."""
    first = _FIRST_NON_SPACE.search(block)
    block_start = first.start() if first else 0
    sentences, start = [], 0
    for candidate in _BOUNDARY.finditer(block):
        if candidate.end() < len(block) and _is_boundary(block, candidate, block_start):
            sentences.append(block[start : candidate.end()].strip())
            start = candidate.end()
    sentences.append(block[start:].strip())
    return [sentence for sentence in sentences if sentence]


def _is_boundary(block: str, candidate: re.Match[str], block_start: int) -> bool:
    """Whether a terminal-punctuation candidate really ends a sentence."""
    terminal = candidate.group("terminal")
    if terminal is None:  # CJK full stop
        return True
    next_word = block[candidate.end() : candidate.end() + _WORD_WINDOW].split(None, 1)[0]
    stripped = next_word.lstrip(_OPENERS) or next_word
    if stripped[0].islower():
        return False
    if terminal != ".":  # "!", "?", ellipses
        return True
    window = block[max(0, candidate.start() - _WORD_WINDOW) : candidate.start()]
    if not window or window[-1].isspace():
        return True
    previous = window.split()[-1]
    if candidate.start() - len(previous) == block_start and _MARKER_WORD.fullmatch(previous):
        return False  # "1. First item", "(a. ..."
    return _ends_after_word(previous.lstrip(_OPENERS), stripped)


def _ends_after_word(word: str, next_word: str) -> bool:
    """Whether "<word>. <next_word>" is a sentence boundary (next_word does not start lowercase)."""
    key = word.lower()
    if key in _TITLES or key in _NEVER_FINAL:
        return False
    if key in _BEFORE_NUMBER:
        return not (next_word[0].isdigit() or next_word[0] == "(")
    if key in _AMBIGUOUS or (len(word) == 1 and word.isalpha()) or _ACRONYM.fullmatch(word):
        return next_word.rstrip(_TRAILING) in _SENTENCE_STARTERS
    return True


@dataclass
class Passage:
    """A run of whole sentences from one section.

    Attributes:
        text: The passage words joined by single spaces.
        section_index: Index of the section in ``Document.sections``.
        heading: That section's heading ("" for the lead or an untitled section).
    """

    text: str
    section_index: int
    heading: str


def chunk_passages(document: Document, words_per_passage: int = 100, max_passages: int | None = None,
                   with_title: bool = False) -> list[Passage]:
    """Splits a document into passages of about ``words_per_passage`` words (Graph-RoBERTa §3.1).

    Passages never cross a section boundary and break only between sentences. A sentence longer than
    ``2 * words_per_passage`` words is first cut at word boundaries into pieces of ``words_per_passage``
    words (the last one shorter), and pieces are packed like sentences. Packing is greedy: a sentence joins
    the current passage while the passage stays within the budget. So a passage has at most
    ``words_per_passage`` words, unless it is a single sentence of up to ``2 * words_per_passage`` words.
    Words are whitespace-separated tokens; every word of the document lands in exactly one passage, in
    order (until ``max_passages``).

    Args:
        document: The document to split; empty sections give no passages.
        words_per_passage: Word budget of a passage.
        max_passages: Keep only the first this many passages (None: all).
        with_title: The document's title, when it has one, is a passage of its own before the others, in the
            first section (counted in ``max_passages``; a title longer than the budget is not cut).

    Returns:
        Passages in document order.
    """
    if words_per_passage < 1:
        raise ValueError(f"words_per_passage must be >= 1, got {words_per_passage}")
    passages: list[Passage] = []
    title = " ".join(document.title.split()) if with_title and document.title else ""
    if title and max_passages != 0:
        passages.append(Passage(title, 0, document.sections[0].heading if document.sections else ""))
    for section_index, section in enumerate(document.sections):
        for words in _pack(_sentence_units(section.text, words_per_passage), words_per_passage):
            if max_passages is not None and len(passages) >= max_passages:
                return passages
            passages.append(Passage(" ".join(words), section_index, section.heading))
    return passages


def _sentence_units(text: str, words_per_passage: int) -> Iterator[list[str]]:
    """The words of each sentence, over-long sentences cut into ``words_per_passage``-word pieces."""
    for sentence in split_sentences(text):
        words = sentence.split()
        if len(words) <= 2 * words_per_passage:
            yield words
            continue
        for start in range(0, len(words), words_per_passage):
            yield words[start : start + words_per_passage]


def _pack(units: Iterator[list[str]], words_per_passage: int) -> Iterator[list[str]]:
    """Greedily concatenates word units while the result stays within the budget."""
    current: list[str] = []
    for unit in units:
        if current and len(current) + len(unit) > words_per_passage:
            yield current
            current = []
        current.extend(unit)
    if current:
        yield current


def token_windows(input_ids: list[int], max_tokens: int = 512, stride: int | None = None) -> list[list[int]]:
    """Cuts token ids into windows of at most ``max_tokens`` ids (CoLDE's 512-token chunks).

    Args:
        input_ids: Token ids of one document (no special tokens).
        max_tokens: Window length.
        stride: Offset between window starts; None means ``max_tokens`` (no overlap). Must not exceed
            ``max_tokens`` so that no id is skipped.

    Returns:
        Windows starting at 0, stride, 2*stride, ... until one reaches the end; [] for empty input.
    """
    stride = max_tokens if stride is None else stride
    if max_tokens < 1 or not 1 <= stride <= max_tokens:
        raise ValueError(f"need max_tokens >= 1 and 1 <= stride <= max_tokens, got {max_tokens=}, {stride=}")
    windows = []
    for start in range(0, len(input_ids), stride):
        windows.append(list(input_ids[start : start + max_tokens]))
        if start + max_tokens >= len(input_ids):
            break
    return windows


def split_views(sentences: list[str], rng: random.Random, n_views: int = 2) -> list[list[int]] | None:
    """Assigns each sentence to one of ``n_views`` views independently and uniformly at random (DocSplit).

    Every view must be non-empty. When a draw leaves views empty, each empty view (in random order) takes
    one sentence drawn uniformly from the sentences of views holding at least two. This stays close to the
    uniform independent draw: the repair runs only on the event that a view is empty, which has probability
    at most ``n_views * (1 - 1/n_views) ** len(sentences)`` (``2 ** (1 - n)`` for two views, under 0.2% from
    ten sentences on), so the output distribution is within that total-variation distance of the plain
    draw; it moves the fewest sentences possible; and since it treats view labels and sentences
    symmetrically, every sentence still lands in every view with probability exactly ``1 / n_views``.

    Args:
        sentences: The document's sentences (only their number is used).
        rng: Source of randomness; the same seed gives the same split.
        n_views: Number of views.

    Returns:
        For each view, its sentence indices in document order; None when ``len(sentences) < n_views``
        (the caller counts and skips such documents).
    """
    if n_views < 1:
        raise ValueError(f"n_views must be >= 1, got {n_views}")
    if len(sentences) < n_views:
        return None
    assignment = [rng.randrange(n_views) for _ in sentences]
    counts = [0] * n_views
    for view in assignment:
        counts[view] += 1
    empty_views = [view for view in range(n_views) if counts[view] == 0]
    rng.shuffle(empty_views)
    for empty_view in empty_views:
        donors = [index for index, view in enumerate(assignment) if counts[view] >= 2]
        moved = rng.choice(donors)
        counts[assignment[moved]] -= 1
        assignment[moved] = empty_view
        counts[empty_view] += 1
    return [[index for index, view in enumerate(assignment) if view == target] for target in range(n_views)]
