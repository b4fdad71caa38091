"""Tests for lit_docemb.data.core.text: sentence splitting, passages, token windows and DocSplit views."""

from __future__ import annotations

import random
import re
import time

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from lit_docemb.data.core import text as text_module
from lit_docemb.data.core.document import Document, Section
from lit_docemb.data.core.text import (
    Passage,
    chunk_passages,
    split_sentences,
    split_views,
    token_windows,
)


def _non_whitespace(text: str) -> str:
    return "".join(text.split())


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("Dr. Smith met Mr. Jones. They talked.", ["Dr. Smith met Mr. Jones.", "They talked."]),
        ("Use tools, e.g. hammers, i.e. heavy ones. Done.", ["Use tools, e.g. hammers, i.e. heavy ones.", "Done."]),
        ("The U.S. Army is large. It moved.", ["The U.S. Army is large.", "It moved."]),
        ("He moved to the U.S. The weather was nice.", ["He moved to the U.S.", "The weather was nice."]),
        ("Apples, pears, etc. The end.", ["Apples, pears, etc.", "The end."]),
        ("See Fig. 3 and No. 5 vs. No. 6. Done.", ["See Fig. 3 and No. 5 vs. No. 6.", "Done."]),
        ("J. R. R. Tolkien wrote. John F. Kennedy read.", ["J. R. R. Tolkien wrote.", "John F. Kennedy read."]),
        ("Smith et al. (2020) showed it. Jan. 5 is a date.", ["Smith et al. (2020) showed it.", "Jan. 5 is a date."]),
        ("Vitamin C. It helps.", ["Vitamin C.", "It helps."]),
    ],
)
def test_abbreviations(text: str, expected: list[str]) -> None:
    assert split_sentences(text) == expected


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("Pi is 3.14 here. Next.", ["Pi is 3.14 here.", "Next."]),
        ("Install v2.0.1. Then run it.", ["Install v2.0.1.", "Then run it."]),
        ("It cost $3.50 in 1999. Prices rose.", ["It cost $3.50 in 1999.", "Prices rose."]),
    ],
)
def test_decimals_and_versions(text: str, expected: list[str]) -> None:
    assert split_sentences(text) == expected


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ('He said "Stop." Then he left.', ['He said "Stop."', "Then he left."]),
        ("It ended (see above.) Next one.", ["It ended (see above.)", "Next one."]),
        ("He left. \u201cStop,\u201d she said.", ["He left.", "\u201cStop,\u201d she said."]),
        ("'Really?' he asked. Yes!", ["'Really?' he asked.", "Yes!"]),
        ("Is it? Yes! Great.", ["Is it?", "Yes!", "Great."]),
        ("Wait... what? He paused\u2026 Then he left...", ["Wait... what?", "He paused\u2026", "Then he left..."]),
    ],
)
def test_quotes_brackets_questions_ellipses(text: str, expected: list[str]) -> None:
    assert split_sentences(text) == expected


def test_lists_and_newlines() -> None:
    text = "Steps:\n- mix the flour\n* bake it\n\u2022 eat\n1. First item\n2) Second item\n(a) alpha\nii. roman"
    assert split_sentences(text) == [
        "Steps:", "- mix the flour", "* bake it", "\u2022 eat", "1. First item", "2) Second item", "(a) alpha",
        "ii. roman",
    ]
    assert split_sentences("1. First item. Second sentence.") == ["1. First item.", "Second sentence."]
    paragraphs = "Para one\n\nPara two\nwrapped line. Three"
    assert split_sentences(paragraphs) == ["Para one", "Para two\nwrapped line.", "Three"]
    assert split_sentences("Windows\r\n\r\nline endings.\r- item") == ["Windows", "line endings.", "- item"]


def test_urls_emails_and_no_punctuation() -> None:
    text = "Visit https://example.com/a.b?c=d. Mail john.doe@example.org. See www.x.org/v1.2 now"
    assert split_sentences(text) == [
        "Visit https://example.com/a.b?c=d.", "Mail john.doe@example.org.", "See www.x.org/v1.2 now",
    ]
    assert split_sentences("no terminal punctuation at all") == ["no terminal punctuation at all"]
    assert split_sentences("これは文です。これも文です。") == ["これは文です。", "これも文です。"]
    assert split_sentences("") == []
    assert split_sentences(" \n\n\t ") == []


_TRICKY_TOKENS = [
    "Dr.", "e.g.", "U.S.", "etc.", "J.", "3.14", "v2.0.1", "...", "\u2026", '"Stop."', "(see", "above.)", "-", "*",
    "1.", "2)", "(a)", "ii.", "?", "!", "?!", "\u3002", "The", "word", "lower", "https://x.org/a.b", "a@b.co", ".",
    ")", '"', "\u201c", "No.", "5", "\x00", "\x1c", "\u2028",
]
_SEPARATORS = [" ", "  ", "\n", "\n\n", "\r\n", "\t", " \n \n", "\x0b", "\u00a0", ""]


@settings(max_examples=300, deadline=None)
@given(st.text())
def test_split_preserves_non_whitespace_arbitrary_text(text: str) -> None:
    sentences = split_sentences(text)
    assert _non_whitespace("".join(sentences)) == _non_whitespace(text)
    assert all(sentence and sentence == sentence.strip() for sentence in sentences)


@settings(max_examples=300, deadline=None)
@given(st.lists(st.tuples(st.sampled_from(_TRICKY_TOKENS), st.sampled_from(_SEPARATORS)), max_size=40))
def test_split_preserves_non_whitespace_tricky_text(pieces: list[tuple[str, str]]) -> None:
    text = "".join(token + separator for token, separator in pieces)
    sentences = split_sentences(text)
    assert _non_whitespace("".join(sentences)) == _non_whitespace(text)
    assert all(sentence and sentence == sentence.strip() for sentence in sentences)


def test_split_million_characters_is_not_quadratic() -> None:
    paragraph = (
        'Dr. Smith went to the U.S. on Jan. 5. He said "Stop." Then he left... (see above.) Next, visit '
        "https://example.com/x.y or mail a.b@c.org. Pi is 3.14!\n- item one\n1. First item\n\n"
    )
    text = paragraph * (1_000_000 // len(paragraph) + 1)
    start = time.process_time()
    sentences = split_sentences(text)
    assert time.process_time() - start < 10.0
    assert sentences == split_sentences(paragraph) * (1_000_000 // len(paragraph) + 1)
    assert len(split_sentences(paragraph)) == 7  # "...left... (see above.)" stays together: "(see" is lowercase
    for degenerate in ["." * 1_000_000, "a" * 1_000_000, ".)" * 500_000, "1. " * 300_000]:
        start = time.process_time()
        split_sentences(degenerate)
        assert time.process_time() - start < 10.0


def _random_document(rng: random.Random, words_per_passage: int) -> Document:
    """Sections of sentences of 1 to 3x the budget words (some over-long), some empty sections."""
    sections = []
    for section_index in range(rng.randint(1, 5)):
        sentences = []
        for _ in range(rng.randint(0, 12)):
            length = rng.choice([rng.randint(0, words_per_passage // 3), rng.randint(0, 3 * words_per_passage)])
            words = [rng.choice(["alpha", "beta", "e.g.", "3.14", "Dr.", "gamma"]) for _ in range(length)]
            sentences.append(" ".join(["Word"] + words) + rng.choice([".", "!", "?"]))
        separator = rng.choice([" ", "\n", "\n\n"])
        sections.append(Section(heading=f"heading {section_index}", text=separator.join(sentences)))
    return Document(id="doc", title="title", sections=sections)


def _unit_breaks(text: str, budget: int) -> list[int]:
    """Word offsets where a passage may start: sentence starts and cuts inside over-long sentences, plus the end."""
    breaks, offset = [], 0
    for sentence in split_sentences(text):
        length = len(sentence.split())
        step = budget if length > 2 * budget else length
        breaks.extend(range(offset, offset + length, step))
        offset += length
    return breaks + [offset]


def _check_passages(document: Document, passages: list[Passage], budget: int) -> None:
    """Passages tile each section's words in order, break between units, fill greedily, respect the budget."""
    assert [p.section_index for p in passages] == sorted(p.section_index for p in passages)
    for section_index, section in enumerate(document.sections):
        own = [passage for passage in passages if passage.section_index == section_index]
        assert all(passage.heading == section.heading for passage in own)
        assert [word for passage in own for word in passage.text.split()] == section.text.split()
        breaks = _unit_breaks(section.text, budget)
        offset = 0
        for passage in own:
            end = offset + len(passage.text.split())
            assert offset in breaks and end in breaks
            if end - offset > budget:  # the documented exception: one sentence of at most twice the budget
                assert breaks[breaks.index(offset) + 1] == end and end - offset <= 2 * budget
            if end < breaks[-1]:  # greedy: the next unit would not have fitted
                assert breaks[breaks.index(end) + 1] - offset > budget
            offset = end


@pytest.mark.parametrize("seed", range(30))
def test_chunk_passages_invariants(seed: int) -> None:
    budget = random.Random(seed).choice([1, 5, 20, 100])
    document = _random_document(random.Random(seed), budget)
    passages = chunk_passages(document, words_per_passage=budget)
    _check_passages(document, passages, budget)
    assert chunk_passages(document, words_per_passage=budget) == passages
    for max_passages in [0, 1, 3]:
        assert chunk_passages(document, budget, max_passages=max_passages) == passages[:max_passages]


def test_chunk_passages_example() -> None:
    sentence = "One two three four five six seven eight nine ten."
    document = Document(id="d", sections=[Section("Intro", " ".join([sentence] * 25)), Section("", ""),
                                          Section("Long", " ".join(["w"] * 450) + ".")])
    passages = chunk_passages(document, words_per_passage=100)
    assert [len(p.text.split()) for p in passages] == [100, 100, 50, 100, 100, 100, 100, 50]
    assert [p.section_index for p in passages] == [0, 0, 0, 2, 2, 2, 2, 2]
    assert passages[0].heading == "Intro" and passages[-1].heading == "Long"
    medium = Document(id="m", sections=[Section("", "Short one. W " + " ".join(["w"] * 149) + " end. Short two.")])
    assert [len(p.text.split()) for p in chunk_passages(medium, 100)] == [2, 151, 2]  # 151 > budget: one whole sentence
    with pytest.raises(ValueError):
        chunk_passages(document, words_per_passage=0)


@pytest.mark.parametrize("length", [0, 1, 511, 512, 513, 1500])
@pytest.mark.parametrize(("max_tokens", "stride"), [(512, None), (512, 256), (100, 1), (7, 7), (1, None)])
def test_token_windows_cover_input(length: int, max_tokens: int, stride: int | None) -> None:
    input_ids = list(range(1000, 1000 + length))
    windows = token_windows(input_ids, max_tokens=max_tokens, stride=stride)
    step = max_tokens if stride is None else stride
    if length == 0:
        assert windows == []
        return
    assert all(1 <= len(window) <= max_tokens for window in windows)
    assert [window[0] for window in windows] == [1000 + i * step for i in range(len(windows))]
    assert windows[-1][-1] == input_ids[-1] and len(windows) == max(1, -(-(length - max_tokens) // step) + 1)
    for window in windows:
        assert window == input_ids[window[0] - 1000 : window[0] - 1000 + len(window)]
    if stride is None:
        assert [token for window in windows for token in window] == input_ids


def test_token_windows_rejects_gaps() -> None:
    with pytest.raises(ValueError):
        token_windows([1, 2, 3], max_tokens=2, stride=3)
    with pytest.raises(ValueError):
        token_windows([1, 2, 3], max_tokens=0)


@pytest.mark.parametrize("n_views", [1, 2, 3])
def test_split_views_invariants(n_views: int) -> None:
    for n_sentences in range(n_views, 12):
        for seed in range(50):
            views = split_views(["s"] * n_sentences, random.Random(seed), n_views=n_views)
            assert views is not None and len(views) == n_views
            assert all(view and view == sorted(view) for view in views)
            assert sorted(index for view in views for index in view) == list(range(n_sentences))
            assert split_views(["s"] * n_sentences, random.Random(seed), n_views=n_views) == views
    assert split_views(["s"] * (n_views - 1), random.Random(0), n_views=n_views) is None


def test_split_views_random_and_uniform() -> None:
    sentences = ["s"] * 10
    draws = [split_views(sentences, random.Random(seed)) for seed in range(2000)]
    assert len({tuple(map(tuple, views)) for views in draws}) > 500  # 2**10 - 2 possible splits
    for index in range(len(sentences)):
        in_first = sum(index in views[0] for views in draws) / len(draws)
        assert 0.45 < in_first < 0.55  # binomial std 0.011
    # Two sentences, two views: each of the two splits is equally likely.
    pairs = [split_views(["a", "b"], random.Random(seed)) for seed in range(2000)]
    assert 0.45 < sum(views == [[0], [1]] for views in pairs) / len(pairs) < 0.55
    # Three views over three sentences: every sentence lands in every view a third of the time.
    triples = [split_views(["a", "b", "c"], random.Random(seed), n_views=3) for seed in range(3000)]
    for index in range(3):
        for view in range(3):
            assert 0.28 < sum(index in views[view] for views in triples) / len(triples) < 0.39


_TERMINALS, _CJK_TERMINALS = ".!?\u2026\u203d", "\u3002\uff01\uff1f"


def _reference_candidates(text: str) -> list[tuple[int, int, str | None]]:
    """Boundary candidates found by a plain scan (the definition the module docstring gives): a whole run of
    terminal punctuation, then closing quotes/brackets, then whitespace (required after ``.!?…‽``, optional
    after CJK stops); scanning resumes after the candidate. (start, end, terminal run or None for CJK)."""
    candidates, i = [], 0
    closers = "\"'\u201d\u2019\u00bb\u203a)\\]}\u300d\u300f\uff09"
    while i < len(text):
        terminals = _TERMINALS if text[i] in _TERMINALS else _CJK_TERMINALS if text[i] in _CJK_TERMINALS else ""
        if not terminals or (i > 0 and text[i - 1] in terminals):
            i += 1
            continue
        run_end = i
        while run_end < len(text) and text[run_end] in terminals:
            run_end += 1
        end = run_end
        while end < len(text) and text[end] in closers:
            end += 1
        space_end = end
        while space_end < len(text) and text[space_end].isspace():
            space_end += 1
        if terminals is _CJK_TERMINALS or space_end > end:
            candidates.append((i, space_end, text[i:run_end] if terminals is _TERMINALS else None))
            i = space_end
        else:
            i = run_end
    return candidates


@settings(max_examples=500, deadline=None)
@given(st.text(alphabet=st.sampled_from(list(_TERMINALS + _CJK_TERMINALS + "\"')]\u201d\u300d a\n\u00a0\t")),
               max_size=60))
def test_boundary_regex_matches_a_plain_scan(text: str) -> None:
    """The character-class-first boundary regex (a speed-up) finds exactly the candidates of the definition."""
    found = [(m.start(), m.end(), m.group("terminal")) for m in text_module._BOUNDARY.finditer(text)]
    assert found == _reference_candidates(text)


@settings(max_examples=300, deadline=None)
@given(st.text(alphabet=st.sampled_from(list("ab \n\r\t\u2028")), max_size=30))
def test_line_spans_match_the_newline_regex(text: str) -> None:
    """The str.split fast path for text without carriage returns gives the lines the regex gives."""
    expected, start = [], 0
    for newline in re.finditer(r"\r\n|\r|\n", text):
        expected.append((start, newline.start()))
        start = newline.end()
    assert list(text_module._line_spans(text)) == [*expected, (start, len(text))]
