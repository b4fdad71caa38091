"""MSMARCODataModule on fixture files in the real MS MARCO document-ranking layout (gzip TSVs, TREC qrels and
runs). Every document and query is invented; only the file formats are MS MARCO's."""

from __future__ import annotations

import gzip
from collections import Counter
from pathlib import Path

import pytest
from corpus_files import MSMARCO_TOPICS, write_msmarco

from lit_docemb.data.core.document import Document
from lit_docemb.data.corpora.msmarco import MSMARCODataModule, iter_msmarco_documents
from lit_docemb.data.core.reading import MalformedInputError
from lit_docemb.data.retrieval.datamodule import RetrievalExample


@pytest.fixture(scope="module")
def root(tmp_path_factory) -> Path:
    return write_msmarco(tmp_path_factory.mktemp("msmarco"))


def _qrels(root: Path, split: str) -> dict[str, set[str]]:
    relevant: dict[str, set[str]] = {}
    with gzip.open(root / f"msmarco-doc{split}-qrels.tsv.gz", "rt") as f:
        for line in f:
            q, _, d, rel = line.split()
            if int(rel) > 0:
                relevant.setdefault(q, set()).add(d)
    return relevant


def _run(root: Path, split: str) -> dict[str, list[str]]:
    run: dict[str, list[str]] = {}
    with gzip.open(root / f"msmarco-doc{split}-top100.gz", "rt") as f:
        for line in f:
            run.setdefault(line.split()[0], []).append(line.split()[2])
    return run


def test_documents_are_parsed_with_bad_lines_counted(root):
    stats: Counter = Counter()
    docs = list(iter_msmarco_documents([str(root / "msmarco-docs.tsv.gz")], stats))
    assert [d.id for d in docs[:3]] == ["D100", "D101", "D102"]
    first = docs[0]
    assert first.title == "About the lantern 0" and first.metadata == {"url": "http://example.org/lantern/0"}
    assert len(first.sections) == 1 and first.sections[0].text.startswith("The lantern note number 0 describes")
    assert stats == Counter(malformed_document_line=1, undecodable_line=1)
    assert docs[-1].id == "D902" and "caf\ufffd with" in docs[-1].text  # replaced, not dropped
    assert docs[-2].id == "D901" and docs[-2].is_empty()  # dropped later, by the Arrow cache (counted)


def test_strict_mode_names_file_line_and_format(root, tmp_path):
    with pytest.raises(MalformedInputError, match=r"msmarco-docs\.tsv\.gz, line 31: 3 tab-separated.*docid<TAB>url"):
        list(iter_msmarco_documents([str(root / "msmarco-docs.tsv.gz")], Counter(), strict=True))
    dm = MSMARCODataModule(str(root), strict=True, cache_dir=str(tmp_path / "cache"), mode="retrieval")
    with pytest.raises(MalformedInputError, match=r"msmarco-docs\.tsv\.gz, line 31"):
        dm.setup()


def test_documents_mode_setup_and_batch(root, tmp_path):
    dm = MSMARCODataModule(str(root), cache_dir=str(tmp_path / "cache"), batch_size=4, num_workers=0,
                           val_fraction=0.2)
    dm.collate_fn = list
    dm.setup()
    assert dm.stats["empty_document"] == 1 and dm.stats["malformed_document_line"] == 1
    assert dm.stats["undecodable_line"] == 1
    assert len(dm.train_set) + len(dm.val_set) == 31  # 30 + the one with replaced bytes
    batch = next(iter(dm.train_dataloader()))
    assert len(batch) == 4 and all(isinstance(d, Document) and d.id.startswith("D") for d in batch)
    # a second DataModule reads the cache and reports the same skips
    again = MSMARCODataModule(str(root), cache_dir=str(tmp_path / "cache"), val_fraction=0.2)
    again.setup()
    assert again.stats == dm.stats


def test_retrieval_mode_negatives_come_from_the_run_and_are_never_relevant(root, tmp_path):
    dm = MSMARCODataModule(str(root), mode="retrieval", num_negatives=3, cache_dir=str(tmp_path / "cache"),
                           batch_size=5, num_workers=0, seed=7)
    dm.collate_fn = list
    dm.setup()
    relevant, run = _qrels(root, "train"), _run(root, "train")
    # 8 train queries x 3 relevant documents; the judged D999 is not in the corpus
    assert len(dm.train_set) == 24 and len(dm.val_set) == 9 and len(dm.test_set) == 0
    assert dm.stats["train/relevant_document_missing_from_corpus"] == 1
    assert dm.stats["train/malformed_query_line"] == 1 and dm.stats["dev/malformed_query_line"] == 1
    for i in range(len(dm.train_set)):
        example = dm.train_set[(0, i)]
        negatives = [d.id for d in example.negatives]
        assert example.positive.id in relevant[example.query_id]
        assert len(set(negatives)) == 3 and not set(negatives) & relevant[example.query_id]
        assert set(negatives) <= set(run[example.query_id])
        assert example.query == f"where is the {MSMARCO_TOPICS[int(example.query_id) % 10]} kept"
    batch = next(iter(dm.train_dataloader()))
    assert len(batch) == 5 and all(isinstance(e, RetrievalExample) for e in batch)
    assert all(len(e.negatives) == 3 for e in next(iter(dm.val_dataloader())))


def test_negatives_are_deterministic_and_change_with_epoch(root, tmp_path):
    def draw(seed: int, epoch: int) -> list[list[str]]:
        dm = MSMARCODataModule(str(root), mode="retrieval", num_negatives=2, seed=seed, negatives="uniform",
                               cache_dir=str(tmp_path / "cache"))
        dm.setup()
        return [[d.id for d in dm.train_set[(epoch, i)].negatives] for i in range(len(dm.train_set))]

    first = draw(3, 0)
    assert first == draw(3, 0)
    assert first != draw(3, 1) and first != draw(4, 0)
    relevant = _qrels(root, "train")
    dm = MSMARCODataModule(str(root), mode="retrieval", num_negatives=2, seed=3, negatives="uniform",
                           cache_dir=str(tmp_path / "cache"))
    dm.setup()
    for i, negatives in enumerate(first):
        assert not set(negatives) & relevant[dm.train_set[i].query_id]


def test_checkpoint_run_overrides_the_official_run(root, tmp_path):
    from lit_docemb.data.retrieval.trec import write_run

    checkpoint_run = tmp_path / "epoch5.run"
    # an "earlier checkpoint" ranked a relevant document first, then exactly two others
    write_run({str(q): {f"D{100 + q % 10}": 9.0, "D128": 5.0, "D129": 4.0} for q in range(1, 9)}, checkpoint_run)
    dm = MSMARCODataModule(str(root), mode="retrieval", num_negatives=2, negatives_run=str(checkpoint_run),
                           cache_dir=str(tmp_path / "cache"), val_split=None)
    dm.setup()
    for i in range(len(dm.train_set)):
        example = dm.train_set[i]
        expected = {"D128", "D129"} - _qrels(root, "train")[example.query_id]
        negatives = {d.id for d in example.negatives}
        assert expected <= negatives and not negatives & _qrels(root, "train")[example.query_id]


def test_validation_queries_held_out_from_training(root, tmp_path):
    dm = MSMARCODataModule(str(root), mode="retrieval", val_queries_from_train=2, cache_dir=str(tmp_path / "c"))
    dm.setup()
    train_queries, val_queries = set(dm.train_set.query_ids), set(dm.val_set.query_ids)
    assert len(val_queries) == 2 and not train_queries & val_queries and len(train_queries | val_queries) == 8


def test_plain_documents_file_and_missing_paths(tmp_path):
    root = write_msmarco(tmp_path / "plain", documents_gz=False)
    dm = MSMARCODataModule(str(root), documents="msmarco-docs.tsv.gz", cache_dir=str(tmp_path / "cache"))
    dm.setup()  # the name falls back to the plain file
    assert len(dm.train_set) + len(dm.val_set) == 31
    with pytest.raises(FileNotFoundError, match=r"msmarco-docs\.tsv.*docid<TAB>url<TAB>title<TAB>body"):
        MSMARCODataModule(str(tmp_path / "nowhere")).setup()
    (root / "msmarco-docdev-qrels.tsv.gz").unlink()
    with pytest.raises(FileNotFoundError, match=r"(?s)msmarco-docdev-qrels.*TREC qrels"):
        MSMARCODataModule(str(root), mode="retrieval", cache_dir=str(tmp_path / "cache")).setup()


def test_run_candidates_are_cached_for_the_next_start(root, tmp_path, monkeypatch):
    import lit_docemb.data.retrieval.datamodule as retrieval

    def negatives(dm: MSMARCODataModule) -> list[list[str]]:
        dm.setup()
        return [[d.id for d in dm.train_set[(1, i)].negatives] for i in range(len(dm.train_set))]

    kwargs = {"mode": "retrieval", "num_negatives": 2, "cache_dir": str(tmp_path / "cache"), "max_val_queries": 1}
    first = MSMARCODataModule(str(root), **kwargs)
    drawn = negatives(first)
    assert len(list((tmp_path / "cache" / "lit_docemb_run_pools").glob("*.npz"))) == 2  # train and dev
    assert len(first.val_set) == 3 and "val/qrels_query_not_in_queries" not in first.stats

    def unreachable(*args, **kwargs):
        raise AssertionError("the run file was read again")

    monkeypatch.setattr(retrieval, "read_run_pools", unreachable)
    second = MSMARCODataModule(str(root), **kwargs)
    assert negatives(second) == drawn and second.stats == first.stats


def test_trainer_epochs_reach_the_negatives_in_persistent_workers(root, tmp_path):
    import lightning as L
    import torch

    class Recorder(L.LightningModule):
        def __init__(self) -> None:
            super().__init__()
            self.weight = torch.nn.Parameter(torch.zeros(1))
            self.seen: dict[int, dict[tuple[str, str], tuple[str, ...]]] = {}

        def training_step(self, batch, batch_idx):
            for example in batch:
                key = (example.query_id, example.positive.id)
                self.seen.setdefault(self.current_epoch, {})[key] = tuple(d.id for d in example.negatives)
            return self.weight.sum() * 0

        def configure_optimizers(self):
            return torch.optim.SGD(self.parameters(), lr=0.1)

    dm = MSMARCODataModule(str(root), mode="retrieval", num_negatives=2, negatives="uniform", batch_size=6,
                           num_workers=2, cache_dir=str(tmp_path / "cache"), val_split=None)
    dm.collate_fn = list
    model = Recorder()
    trainer = L.Trainer(max_epochs=2, accelerator="cpu", logger=False, enable_checkpointing=False,
                        enable_progress_bar=False, enable_model_summary=False)
    trainer.fit(model, datamodule=dm)
    assert sorted(model.seen) == [0, 1] and len(model.seen[0]) == len(model.seen[1]) == 24  # every example once
    assert model.seen[0] != model.seen[1]  # new negatives in epoch 1, drawn in the (persistent) workers
    expected = {(e.query_id, e.positive.id): tuple(d.id for d in e.negatives)
                for e in (dm.train_set[(1, i)] for i in range(len(dm.train_set)))}
    assert model.seen[1] == expected  # the same draw as (epoch, example) gives in the main process
