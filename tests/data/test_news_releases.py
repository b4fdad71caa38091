"""BBC News and 20 Newsgroups read from the archives their sites publish, unpacked as they unpack (DocSplit Tables
1-2, Graph-RoBERTa Tables 1-2 without the hub copies): one folder per class, Latin-1 text. Every text is invented."""

from __future__ import annotations

from collections import Counter

from corpus_files import write_20news_bydate, write_bbc_release

from lit_docemb.data.corpora.labelled import LabelledTextDataModule


def test_bbc_fulltext_release_topics_text_and_held_out_splits(tmp_path):
    root = write_bbc_release(tmp_path / "bbc")
    dm = LabelledTextDataModule(source=str(root), encoding="latin-1", test_split=None, val_fraction=0.25,
                                test_fraction=0.25, stratified=True, batch_size=4, num_workers=0,
                                cache_dir=str(tmp_path / "cache"))
    dm.collate_fn = list
    dm.setup("fit")
    assert dm.labels == ["business", "sport"]
    assert dm.stats == Counter(file_outside_class_folder=1)  # README.TXT beside the topic folders
    splits = {name: Counter(d.label for d in split) for name, split in
              [("train", dm.train_set), ("val", dm.val_set), ("test", dm.test_set)]}
    assert splits == {"train": {"business": 6, "sport": 6}, "val": {"business": 3, "sport": 3},
                      "test": {"business": 3, "sport": 3}}
    documents = {d.id: d for part in (dm.train_set, dm.val_set, dm.test_set) for d in part}
    first = documents["business/001.txt"]
    assert first.label == "business" and first.text.startswith("Compiler and the compiler\n\nThe compiler and")
    assert first.text.endswith("It costs \u00a3100.")  # the release's 0xA3 byte, read as Latin-1
    assert max(documents) == "sport/012.txt" and len(documents) == 24


def test_20news_bydate_release_train_and_test_folders(tmp_path):
    root = write_20news_bydate(tmp_path / "20news-bydate")
    dm = LabelledTextDataModule(source=str(root), train_split="20news-bydate-train",
                                test_split="20news-bydate-test", encoding="latin-1", val_fraction=0.25,
                                batch_size=4, num_workers=0, cache_dir=str(tmp_path / "cache"))
    dm.collate_fn = list
    dm.setup("fit")
    assert dm.labels == ["comp.graphics", "sci.space"] and dm.stats == Counter()
    assert len(dm.train_set) + len(dm.val_set) == 24 and len(dm.val_set) > 0
    test = list(dm.test_set)
    assert len(test) == 8 and Counter(d.label for d in test) == {"comp.graphics": 4, "sci.space": 4}
    assert {d.id for d in test} >= {"20news-bydate-test/comp.graphics/60000", "20news-bydate-test/sci.space/60007"}
    training = {d.id: d for part in (dm.train_set, dm.val_set) for d in part}
    first = training["20news-bydate-train/comp.graphics/38000"]
    assert first.text.startswith("From: jose@example.edu (Jos\u00e9 Example)\nSubject: The compiler and the")
