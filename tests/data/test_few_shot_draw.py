"""DocSplit Table 2's few-shot training sets (``few_shot_per_class``, ``few_shot_seed``): exactly k training
documents per class, the same for a seed whatever the file order, another for another seed, drawn from the full
run's training split only (its validation and test unchanged), and a class with fewer than k refused in one line."""

from __future__ import annotations

from collections import Counter

import pytest
from corpus_files import write_arxiv_snapshot, write_fakenews

from lit_docemb.data.corpora.arxiv import ArxivDataModule
from lit_docemb.data.corpora.labelled import LabelledTextDataModule
from lit_docemb.errors import ConfigError

COUNTS = {"fake": 30, "reliable": 20}


def fakenews(path, **kwargs) -> LabelledTextDataModule:
    options = {"text_column": "content", "label_column": "type", "title_column": "title", "id_column": "id",
               "test_split": None, "cache_dir": str(path.parent / "cache"), "num_workers": 0, "val_fraction": 0.1,
               "test_fraction": 0.2, "stratified": True, **kwargs}
    datamodule = LabelledTextDataModule(str(path), **options)
    datamodule.setup("fit")
    return datamodule


def ids(split) -> set[str]:
    return {document.id for document in split}


def test_exactly_k_per_class_from_the_training_split_with_validation_and_test_unchanged(tmp_path):
    path = write_fakenews(tmp_path / "news_cleaned_2018_02_13.csv", COUNTS)
    full = fakenews(path)
    few = fakenews(path, few_shot_per_class=5, few_shot_seed=3)
    assert Counter(document.label for document in few.train_set) == Counter(fake=5, reliable=5)
    assert ids(few.train_set) <= ids(full.train_set)
    assert ids(few.val_set) == ids(full.val_set) and ids(few.test_set) == ids(full.test_set)
    assert few.data_stats["few-shot draw (seed 3)"]["train"] == 10


def test_a_seed_gives_the_same_draw_whatever_the_file_order_and_seeds_differ(tmp_path):
    path = write_fakenews(tmp_path / "a" / "news_cleaned_2018_02_13.csv", COUNTS)
    reversed_file = write_fakenews(tmp_path / "b" / "news_cleaned_2018_02_13.csv", COUNTS, reverse=True)
    draws = [ids(fakenews(path, few_shot_per_class=3, few_shot_seed=seed).train_set) for seed in range(10)]
    assert ids(fakenews(reversed_file, few_shot_per_class=3, few_shot_seed=0).train_set) == draws[0]
    assert ids(fakenews(path, few_shot_per_class=3, few_shot_seed=0).train_set) == draws[0]
    assert len({frozenset(draw) for draw in draws}) >= 9  # C(24, 3) * C(16, 3) draws: repeats are rare


def test_a_class_with_fewer_than_k_training_documents_is_refused_in_one_line(tmp_path):
    path = write_fakenews(tmp_path / "news_cleaned_2018_02_13.csv", COUNTS)  # 14 reliable training documents
    with pytest.raises(ConfigError) as refused:
        fakenews(path, few_shot_per_class=15)
    message = str(refused.value)
    assert "\n" not in message and message.startswith("data.init_args.few_shot_per_class 15:")
    assert "reliable: 14" in message and "fake" not in message
    with pytest.raises(ConfigError, match=r"1 class\(es\) \(absent: 0\)"):  # a named class absent from the split
        fakenews(path, few_shot_per_class=14, classes=["fake", "reliable", "absent"])
    assert len(fakenews(path, few_shot_per_class=14).train_set) == 28
    with pytest.raises(ConfigError, match="few_shot_per_class: must be >= 1"):
        LabelledTextDataModule(str(path), few_shot_per_class=0)


def test_the_arxiv_snapshot_draws_per_archive_from_its_training_split(tmp_path):
    """DocSplit's arXiv set (ArxivDataModule, label_by archive) draws the same way; its test split stays the full
    run's."""
    snapshot = write_arxiv_snapshot(tmp_path / "arxiv-metadata-oai-snapshot.json", n=40)
    options = {"source": str(snapshot), "label_by": "archive", "cache_dir": str(tmp_path / "cache"), "num_workers": 0,
               "val_fraction": 0.1, "test_fraction": 0.2}
    full, few, other = (ArxivDataModule(**options, **extra) for extra in (
        {}, {"few_shot_per_class": 4}, {"few_shot_per_class": 4, "few_shot_seed": 1}))
    for datamodule in (full, few, other):
        datamodule.setup("fit")
    drawn = [{few.documents[int(i)].id for i in d.train_set.indices} for d in (few, other)]
    assert Counter(few.documents[int(i)].label for i in few.train_set.indices) == Counter(cs=4, math=4)
    assert drawn[0] != drawn[1] and drawn[0] <= {full.documents[int(i)].id for i in full.train_set.indices}
    assert list(few.test_set.indices) == list(full.test_set.indices)
    with pytest.raises(ConfigError, match="data.init_args.few_shot_per_class 40: .* fewer than 40"):
        ArxivDataModule(**options, few_shot_per_class=40).setup("fit")
