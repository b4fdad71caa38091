"""The held-out draws (lit_docemb.data.core.held_out): a function of ids, labels, texts and seed, not of order."""

from __future__ import annotations

import random
from collections import Counter

import numpy as np

from lit_docemb.data.core.held_out import TEST, TRAIN, VALIDATION, draw_parts


def _by_id(ids, parts) -> dict[str, int]:
    return dict(zip(ids, parts.tolist(), strict=True))


def test_draws_do_not_depend_on_the_order_and_folds_keep_the_class_proportions():
    ids = [f"doc{i}" for i in range(60)]
    labels = ["a" if i % 3 else "b" for i in range(60)]  # 40 a, 20 b
    texts = [f"text {i % 50}" for i in range(60)]  # 10 pairs of duplicates
    shuffled = list(range(60))
    random.Random(1).shuffle(shuffled)
    for options in ({"val_fraction": 0.1, "test_fraction": 0.2}, {"val_fraction": 0.1, "test_fraction": 0.2,
                                                                  "stratified": True, "texts": texts},
                    {"folds": 5, "fold": 2, "val_fraction": 0.2, "stratified": True}):
        parts = draw_parts(ids, labels, 3, **options)
        texts_shuffled = [texts[i] for i in shuffled] if "texts" in options else None
        again = draw_parts([ids[i] for i in shuffled], [labels[i] for i in shuffled], 3,
                           **{**options, "texts": texts_shuffled})
        assert _by_id(ids, parts) == _by_id([ids[i] for i in shuffled], again)
        assert {TRAIN, VALIDATION, TEST} == set(parts.tolist())
    folds = [draw_parts(ids, labels, 3, folds=5, fold=fold) for fold in range(5)]
    tested = np.stack([parts == TEST for parts in folds])
    assert (tested.sum(axis=0) == 1).all()  # every document tested once
    for parts in folds:
        assert Counter(label for label, part in zip(labels, parts, strict=True) if part == TEST) == Counter(a=8, b=4)


def test_duplicates_share_a_side_and_a_pool_without_them_splits_as_ungrouped():
    ids = [f"doc{i}" for i in range(40)]
    labels = ["a", "b"] * 20
    unique = [f"text {i}" for i in range(40)]
    for seed in range(3):
        plain = draw_parts(ids, labels, seed, val_fraction=0.2, test_fraction=0.2, stratified=True)
        assert (draw_parts(ids, labels, seed, val_fraction=0.2, test_fraction=0.2, stratified=True,
                           texts=unique) == plain).all()
    texts = [f"text {i % 8}" for i in range(40)]  # 8 texts, 5 copies each (one label a text)
    split_apart = 0
    for seed in range(5):
        grouped = draw_parts(ids, labels, seed, val_fraction=0.2, test_fraction=0.2, texts=texts)
        ungrouped = draw_parts(ids, labels, seed, val_fraction=0.2, test_fraction=0.2)
        sides = {text: {int(p) for t, p in zip(texts, grouped, strict=True) if t == text} for text in texts}
        assert all(len(side) == 1 for side in sides.values())
        split_apart += sum(len({int(p) for t, p in zip(texts, ungrouped, strict=True) if t == text}) > 1
                           for text in set(texts))
    assert split_apart  # what grouping prevents
