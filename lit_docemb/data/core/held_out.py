"""Validation and test documents drawn from one pool: fractions by id hash or per label, stratified k-fold
cross-validation, and duplicate texts kept on one side of every split.

Every draw is a function of the documents' ids (and, with duplicates grouped, their texts) and a seed, never of
the file order. The unit of a draw is a *group*: one document, or with ``group_duplicates`` every document whose
normalised text (:func:`normalised_text`) is the same, keyed by its smallest id, so that a pool without duplicates
splits exactly as it does ungrouped. A group's label is its first document's (duplicates of a release carry one
label; BBC's 98 groups do).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from lit_docemb.data.core.datamodule import stable_fraction

TRAIN, VALIDATION, TEST = 0, 1, 2


def normalised_text(title: str, texts: Sequence[str]) -> str:
    """What two duplicates share: the title and the section texts, whitespace runs collapsed to one space."""
    return " ".join(" ".join([title, *texts]).split())


def texts_at(documents, rows: np.ndarray) -> list[str]:
    """:func:`normalised_text` of ``documents`` at ``rows``: an Arrow cache's title and text columns alone, else
    each document's."""
    table = getattr(documents, "table", None)
    if table is not None:
        arrow = table.with_format("arrow")
        titles, texts = (arrow[column].take(rows).to_pylist() for column in ("title", "texts"))
        return [normalised_text(title or "", sections) for title, sections in zip(titles, texts, strict=True)]
    found = [documents[int(i)] for i in rows]
    return [normalised_text(d.title, [s.text for s in d.sections]) for d in found]


def duplicate_groups(ids: Sequence[str], texts: Sequence[str] | None) -> list[list[int]]:
    """Positions grouped by identical text (``texts`` None: one group per position), each group sorted by id and the
    groups by their first id."""
    if texts is None:
        return [[p] for p in sorted(range(len(ids)), key=lambda p: ids[p])]
    by_text: dict[str, list[int]] = {}
    for position in sorted(range(len(ids)), key=lambda p: ids[p]):
        by_text.setdefault(texts[position], []).append(position)
    return sorted(by_text.values(), key=lambda group: ids[group[0]])


def draw_parts(ids: Sequence[str], labels: Sequence[str | None] | None, seed: int, *, val_fraction: float = 0.0,
               test_fraction: float = 0.0, stratified: bool = False, folds: int | None = None, fold: int = 0,
               texts: Sequence[str] | None = None) -> np.ndarray:
    """(N,) int8: :data:`TRAIN`, :data:`VALIDATION` or :data:`TEST` for each document.

    Args:
        ids: The documents' ids (unique).
        labels: Their labels (needed when ``stratified`` or ``folds``).
        seed: Seed of the id hash.
        val_fraction: Share held out for validation (of what the test part leaves, with ``folds``).
        test_fraction: Share held out as test (not with ``folds``).
        stratified: Draw validation and test per label: in each class the groups in the order of their seeded
            hash, the first ones test until ``round(test_fraction * n)`` documents are, then validation likewise;
            else a group is test or validation by where its hash falls, as
            :class:`~lit_docemb.data.core.datamodule.DocumentDataModule` holds validation out.
        folds: Stratified k-fold cross-validation: in each class, the groups in the order of their seeded hash each
            join the fold holding the fewest documents of that class (ties: the fewest documents overall, then the
            lowest index), so every fold keeps the class proportions to a document; fold ``fold`` is the test part.
        fold: The test fold, in ``[0, folds)``.
        texts: Normalised texts: documents with the same text are one group (None: every document its own).
    """
    groups = duplicate_groups(ids, texts)
    keys = [ids[group[0]] for group in groups]
    hashes = np.fromiter((stable_fraction(key, seed) for key in keys), dtype=np.float64, count=len(groups))
    order = sorted(range(len(groups)), key=lambda g: (hashes[g], keys[g]))
    by_label: dict[str | None, list[int]] = {}
    for g in order:
        by_label.setdefault(labels[groups[g][0]] if labels is not None else None, []).append(g)
    part_of_group = np.full(len(groups), TRAIN, dtype=np.int8)
    if folds is not None:
        fold_of = _folds(groups, by_label, folds)
        part_of_group[fold_of == fold] = TEST
    if stratified:
        for members in by_label.values():
            rest = [g for g in members if part_of_group[g] != TEST]
            n = sum(len(groups[g]) for g in rest)
            _take(groups, rest, round(test_fraction * n), part_of_group, TEST)
            _take(groups, [g for g in rest if part_of_group[g] == TRAIN], round(val_fraction * n), part_of_group,
                  VALIDATION)
    else:
        free = part_of_group == TRAIN
        part_of_group[free & (hashes < val_fraction)] = VALIDATION
        part_of_group[free & (hashes >= val_fraction) & (hashes < val_fraction + test_fraction)] = TEST
    parts = np.empty(len(ids), dtype=np.int8)
    for g, group in enumerate(groups):
        parts[group] = part_of_group[g]
    return parts


def _take(groups: list[list[int]], candidates: list[int], documents: int, part_of_group: np.ndarray,
          part: int) -> None:
    """Gives ``part`` to the first ``candidates`` until they hold ``documents`` documents (a group whole)."""
    taken = 0
    for g in candidates:
        if taken >= documents:
            return
        part_of_group[g] = part
        taken += len(groups[g])


def _folds(groups: list[list[int]], by_label: dict[str | None, list[int]], folds: int) -> np.ndarray:
    fold_of = np.zeros(len(groups), dtype=np.int64)
    overall = np.zeros(folds, dtype=np.int64)
    for members in by_label.values():
        mine = np.zeros(folds, dtype=np.int64)
        for g in members:
            chosen = min(range(folds), key=lambda f: (mine[f], overall[f], f))
            fold_of[g] = chosen
            mine[chosen] += len(groups[g])
            overall[chosen] += len(groups[g])
    return fold_of
