"""Few-shot training sets: k documents of each class drawn from a training split (DocSplit Table 2, Appendix A.1:
"we sample 10 data instances per class ... we repeat every experiment 10 times").

The draw is a seeded hash of each document's id, per class: the documents with the lowest ``k`` hashes are kept. A
seed therefore gives the same documents whatever the order of the source file, another seed an independent draw, and
the paper's repeats are seeds ``0..9`` (``grids/docsplit_table2_few_shot.yaml``).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence

import numpy as np

from lit_docemb.data.core.datamodule import DocumentDataModule, DocumentDataset, stable_fraction
from lit_docemb.errors import ConfigError

OPTION = "data.init_args.few_shot_per_class"


def labels_at(documents, rows: np.ndarray) -> list[str | None]:
    """The labels of ``documents`` at ``rows``: an Arrow cache's label column alone, else each document's."""
    table = getattr(documents, "table", None)
    if table is not None:
        return table.with_format("arrow")["label"].take(rows).to_pylist()
    return [documents[int(i)].label for i in rows]


def ids_at(documents, rows: np.ndarray) -> list[str]:
    """The ids of ``documents`` at ``rows``: a lazy corpus's ``ids`` column, else each document's."""
    all_ids = getattr(documents, "ids", None)
    return [all_ids[i] for i in rows] if all_ids is not None else [documents[int(i)].id for i in rows]


def draw_per_class(ids: Sequence[str], labels: Sequence[str | None], per_class: int, seed: int,
                   classes: Sequence[str] | None = None) -> np.ndarray:
    """Sorted positions (into ``ids`` / ``labels``) of ``per_class`` documents of each class: ``classes``, else
    every label present (unlabelled documents are never drawn). A class with fewer documents is a
    :class:`~lit_docemb.errors.ConfigError` naming ``data.init_args.few_shot_per_class``, in one line."""
    by_label: dict[str, list[int]] = {}
    for position, label in enumerate(labels):
        if label is not None:
            by_label.setdefault(label, []).append(position)
    classes = list(classes) if classes is not None else sorted(by_label)
    short = {c: len(by_label.get(c, [])) for c in classes if len(by_label.get(c, [])) < per_class}
    if short:
        listed = ", ".join(f"{c}: {n}" for c, n in list(short.items())[:5])
        raise ConfigError(f"{OPTION} {per_class}: the training split has fewer than {per_class} documents of "
                          f"{len(short)} class(es) ({listed}): lower few_shot_per_class, or keep the classes that "
                          f"have them with data.init_args.classes")
    chosen: list[int] = []
    for label in classes:
        positions = by_label[label]
        hashes = {p: stable_fraction(f"few-shot:{ids[p]}", seed) for p in positions}
        chosen += sorted(positions, key=lambda p: (hashes[p], ids[p]))[:per_class]
    return np.sort(np.asarray(chosen, dtype=np.int64))


def few_shot_rows(documents, rows: np.ndarray, per_class: int, seed: int,
                  classes: Sequence[str] | None = None) -> np.ndarray:
    """The rows (of ``documents``) among ``rows`` that :func:`draw_per_class` keeps."""
    rows = np.asarray(rows, dtype=np.int64)
    return rows[draw_per_class(ids_at(documents, rows), labels_at(documents, rows), per_class, seed, classes)]


def keep_few_shot(data: DocumentDataModule, per_class: int, seed: int, classes: Sequence[str] | None = None) -> None:
    """Replaces ``data``'s training set by the :func:`few_shot_rows` of it, and reports the draw."""
    pool = data.train_set.indices
    rows = few_shot_rows(data.documents, pool, per_class, seed, classes)
    data.train_set = DocumentDataset(data.train_set.documents, rows)
    data.report_reading(f"few-shot draw (seed {seed})", len(pool), {"train": len(rows)}, Counter())
