"""The generic labelled-text readers on fixture files in the real layouts: CSV (quoted, multi-line, very long
fields), header-less TSV, JSON lines, folder-per-class trees (aclImdb / 20 Newsgroups style) and a local Hugging
Face dataset with a ClassLabel column. Every text here is invented."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

import pytest
from transformers import AutoTokenizer
from corpus_files import FAKENEWS_HEADER, write_fakenews, write_hyperpartisan, write_labelled_folder

from lit_docemb.data.caches.section_cache import SectionCache, TokenizedSections
from lit_docemb.data.core.document import Section
from lit_docemb.data.corpora.labelled import LabelledTextDataModule
from lit_docemb.data.corpora.labelled_formats import iter_class_folders, iter_labelled_table
from lit_docemb.data.core.reading import MalformedInputError, ReadContext
from lit_docemb.errors import ConfigError

LONG_TEXT = "The tortoise entered the marathon again. " * 4000  # 164,000 characters: over csv's default field limit

CSV_LINES = [
    b"id,text,label",
    b'a1,"A review of the moon, written from memory.",positive',
    b'a2,"The sequel to the moon.\n\nIt has a second paragraph, and a ""quote"".",negative',
    b"a3,only two fields",  # line 6 (a2 spans lines 3-5): two fields
    b'a4,"An opened "quote" that was never meant",positive',  # line 7: bad quoting
    b"a5,A film about a quiet lighthouse.,",  # line 8: empty label
    b"a6,,positive",  # line 9: empty text
    b"a1,The same id again.,negative",  # line 10: duplicate id
    b"a7,Caf\xe9 scenes were filmed at night.,neutral",  # line 11: latin-1 byte
    b'a8,"' + LONG_TEXT.encode() + b'",positive',
]


@pytest.fixture
def reviews_csv(tmp_path):
    path = tmp_path / "reviews.csv"
    path.write_bytes(b"\n".join(CSV_LINES) + b"\n")
    return path


def read_table(path, **kwargs):
    context = ReadContext(strict=kwargs.pop("strict", False))
    options = {"text_column": "text", "label_column": "label", **kwargs}
    return list(iter_labelled_table(str(path), context=context, **options)), context


def test_csv_records_quotes_multiline_and_long_fields(reviews_csv):
    documents, context = read_table(reviews_csv, table_format="csv", id_column="id")
    assert [(d.id, d.label) for d in documents] == [("a1", "positive"), ("a2", "negative"), ("a7", "neutral"),
                                                    ("a8", "positive")]
    assert documents[1].sections == [Section("", 'The sequel to the moon.\n\nIt has a second paragraph, and a '
                                                 '"quote".')]
    assert documents[2].text == "Caf\ufffd scenes were filmed at night."
    assert documents[3].text == LONG_TEXT.strip()
    assert context.stats == Counter(malformed_line=2, missing_label=1, empty_document=1, duplicate_id=1,
                                    undecodable_record=1)


def test_csv_strict_error_names_file_line_and_columns(reviews_csv):
    with pytest.raises(MalformedInputError, match=rf"{reviews_csv}:6: 2 fields instead of 3; expected ',"
                                                  rf"'-separated fields \['id', 'text', 'label'\]"):
        read_table(reviews_csv, table_format="csv", id_column="id", strict=True)


def test_headerless_tsv_keeps_quotes_and_positional_ids(tmp_path):
    path = tmp_path / "r8-train.tsv"
    path.write_text('earn\t"Quarterly pebbles" rose by four.\nacq\tA kettle maker bought a whistle maker.\n'
                    "grain\n\ncrude\tOil was found under the imaginary lake.\n", encoding="utf-8")
    documents, context = read_table(path, table_format="tsv", column_names=["label", "text"])
    assert [(d.id, d.label, d.text) for d in documents] == [
        ("r8-train.tsv:1", "earn", '"Quarterly pebbles" rose by four.'),
        ("r8-train.tsv:2", "acq", "A kettle maker bought a whistle maker."),
        ("r8-train.tsv:5", "crude", "Oil was found under the imaginary lake.")]
    assert context.stats == Counter(malformed_line=1)


def test_jsonl_records_several_text_columns_become_sections(tmp_path):
    path = tmp_path / "hyperpartisan.jsonl"
    lines = [json.dumps({"title": "Goats Elected", "text": "The goats won the vote.", "label": True}),
             "{not json", "[1, 2]", json.dumps({"title": "No body", "label": False}),
             json.dumps({"title": "Owls Resign", "text": "All owls resigned at dawn.", "label": False})]
    path.write_text("\n".join(lines) + "\n")
    documents, context = read_table(path, table_format="jsonl", text_column=["title", "text"])
    assert [(d.id, d.label) for d in documents] == [("hyperpartisan.jsonl:1", "True"),
                                                    ("hyperpartisan.jsonl:5", "False")]
    assert documents[0].sections == [Section("title", "Goats Elected"), Section("text", "The goats won the vote.")]
    assert context.stats == Counter(malformed_line=2, malformed_record=1)


def write_imdb_like(root):
    """aclImdb layout: {train,test}/{neg,pos}/<id>_<rating>.txt plus train/unsup and stray metadata files."""
    files = {"train/pos/0_9.txt": "A wonderful film about patient snails.",
             "train/pos/1_8.txt": "The snails were <br /><br />magnificent.",
             "train/neg/2_2.txt": "Too many snails, not enough plot.",
             "train/neg/3_1.txt": "",
             "train/unsup/4_0.txt": "Unlabelled snail thoughts.",
             "train/urls_pos.txt": "http://example.invalid/0",
             "test/pos/0_10.txt": "Snails again, and better.",
             "test/neg/0_3.txt": "I fell asleep before the snails arrived."}
    for name, text in files.items():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_text(text)


def test_class_folders_labels_ids_and_class_selection(tmp_path):
    write_imdb_like(tmp_path / "aclImdb")
    context = ReadContext()
    documents = list(iter_class_folders(str(tmp_path / "aclImdb" / "train"), classes=["neg", "pos"],
                                        id_prefix="train/", context=context))
    assert [(d.id, d.label) for d in documents] == [("train/neg/2_2.txt", "neg"), ("train/pos/0_9.txt", "pos"),
                                                    ("train/pos/1_8.txt", "pos")]
    assert context.stats == Counter(file_outside_class_folder=1, empty_document=1)
    with pytest.raises(ValueError, match=r"class folders \['neutral'\] not in"):
        list(iter_class_folders(str(tmp_path / "aclImdb" / "train"), classes=["neutral"], context=ReadContext()))


def test_datamodule_folder_splits_serve_the_test_split(tmp_path):
    write_imdb_like(tmp_path / "aclImdb")
    dm = LabelledTextDataModule(source=str(tmp_path / "aclImdb"), classes=["neg", "pos"], batch_size=2,
                                num_workers=0, val_fraction=0.0, cache_dir=str(tmp_path / "cache"))
    dm.collate_fn = list
    dm.setup("fit")
    assert len(dm.train_set) == 3 and dm.labels == ["neg", "pos"]
    assert dm.stats == Counter(file_outside_class_folder=1, empty_document=1)
    assert len(next(iter(dm.train_dataloader()))) == 2
    test_batch = next(iter(dm.test_dataloader()))
    assert sorted(d.id for d in test_batch) == ["test/neg/0_3.txt", "test/pos/0_10.txt"]


def test_fit_on_all_serves_train_test_and_unlabelled_reviews_while_the_probe_keeps_its_splits(tmp_path):
    """DECA §4.1 trains on all documents: aclImdb's train, test and unsup reviews, the test reviews served without
    their labels; the labelled splits stay as they are for the probes."""
    write_imdb_like(tmp_path / "aclImdb")
    options = {"source": str(tmp_path / "aclImdb"), "classes": ["neg", "pos"], "batch_size": 8, "num_workers": 0,
               "val_fraction": 0.0, "cache_dir": str(tmp_path / "cache")}
    dm = LabelledTextDataModule(fit_on="all", unlabelled_class="unsup", **options)
    dm.collate_fn = list
    dm.setup("fit")
    served = [d for batch in dm.train_dataloader() for d in batch]
    assert sorted((d.id, d.label) for d in served) == [  # the test split's labels never reach training
        ("test/neg/0_3.txt", None), ("test/pos/0_10.txt", None), ("train/neg/2_2.txt", "neg"),
        ("train/pos/0_9.txt", "pos"), ("train/pos/1_8.txt", "pos"), ("train/unsup/4_0.txt", None)]
    assert [d.label for d in dm.test_set] in (["neg", "pos"], ["pos", "neg"])  # still labelled where it is scored
    assert len(dm.train_set) == 3 and len(dm.test_set) == 2 and dm.labels == ["neg", "pos"]
    only_train = LabelledTextDataModule(**options)
    only_train.collate_fn = list
    only_train.setup("fit")
    assert sorted(d.id for batch in only_train.train_dataloader() for d in batch) == [
        "train/neg/2_2.txt", "train/pos/0_9.txt", "train/pos/1_8.txt"]
    with pytest.raises(ConfigError, match="unlabelled_class: .* set fit_on: all"):
        LabelledTextDataModule(unlabelled_class="unsup", **options)
    with pytest.raises(ConfigError, match="classes: name the labelled class folders"):
        LabelledTextDataModule(fit_on="all", unlabelled_class="unsup", **{**options, "classes": None})
    with pytest.raises(ConfigError, match="fit_on"):
        LabelledTextDataModule(fit_on="everything", **options)


def test_fit_on_all_serves_cached_rows_without_the_held_out_labels(tmp_path, tiny_encoder_dir):
    """CoLDE trains on its section cache's rows, which carry each document's label (its similarity group): with
    fit_on: all the training split's rows keep theirs and the test reviews reach training without."""
    write_imdb_like(tmp_path / "aclImdb")
    dm = LabelledTextDataModule(source=str(tmp_path / "aclImdb"), classes=["neg", "pos"], fit_on="all",
                                unlabelled_class="unsup", batch_size=8, num_workers=0, val_fraction=0.0,
                                cache_dir=str(tmp_path / "cache"))
    cache = SectionCache(AutoTokenizer.from_pretrained(tiny_encoder_dir), cache_dir=str(tmp_path / "sections"))
    dm.connect(lambda stage: list, cache)
    dm.setup("fit")
    served = [row for batch in dm.train_dataloader() for row in batch]
    assert sum(isinstance(row, TokenizedSections) for row in served) == 3  # the training split's, from the cache
    assert sorted((row.id, row.label) for row in served) == [
        ("test/neg/0_3.txt", None), ("test/pos/0_10.txt", None), ("train/neg/2_2.txt", "neg"),
        ("train/pos/0_9.txt", "pos"), ("train/pos/1_8.txt", "pos"), ("train/unsup/4_0.txt", None)]


def test_datamodule_train_and_test_tables_with_latin1(tmp_path):
    (tmp_path / "bbc").mkdir()
    (tmp_path / "bbc" / "train.csv").write_bytes("text,category\nCaf\xe9 owners count pebbles.,business\n"
                                                 "Goats win the cup.,sport\nA new kettle opera.,entertainment\n"
                                                 .encode("latin-1"))
    (tmp_path / "bbc" / "test.csv").write_bytes(b"text,category\nOwls vote on the budget.,politics\n")
    dm = LabelledTextDataModule(source=str(tmp_path / "bbc"), label_column="category", encoding="latin-1",
                                batch_size=3, num_workers=0, val_fraction=0.0, cache_dir=str(tmp_path / "cache"))
    dm.collate_fn = list
    dm.setup("fit")
    assert dm.labels == ["business", "entertainment", "sport"] and not dm.stats  # latin-1 decodes cleanly
    batch = next(iter(dm.train_dataloader()))
    assert "Café owners count pebbles." in {d.text for d in batch}
    assert [(d.id, d.label) for d in dm.test_set] == [("test.csv:2", "politics")]


def test_datamodule_local_hugging_face_dataset_with_class_labels(tmp_path):
    import datasets

    features = datasets.Features({"text": datasets.Value("string"),
                                  "label": datasets.ClassLabel(names=["sci.space", "rec.autos"])})
    folder = tmp_path / "newsgroups"
    folder.mkdir()
    datasets.Dataset.from_dict({"text": ["Rockets made of cheese.", "A car with square wheels.", "", "Unlabelled."],
                                "label": [0, 1, 1, -1]}, features=features).to_parquet(folder / "train.parquet")
    datasets.Dataset.from_dict({"text": ["A moon made of glass."], "label": [0]},
                               features=features).to_parquet(folder / "test.parquet")
    dm = LabelledTextDataModule(source=str(folder), batch_size=2, num_workers=0, val_fraction=0.0,
                                cache_dir=str(tmp_path / "cache"))
    dm.collate_fn = list
    dm.setup("fit")
    assert [(d.id, d.label) for d in dm.train_set] == [("train:0", "sci.space"), ("train:1", "rec.autos")]
    assert dm.stats == Counter(empty_document=1, missing_label=1)
    assert [(d.id, d.label) for d in dm.test_set] == [("test:0", "sci.space")]
    assert len(next(iter(dm.train_dataloader()))) == 2


def test_missing_paths_describe_the_layouts(tmp_path):
    cache = {"cache_dir": str(tmp_path / "cache")}
    with pytest.raises(FileNotFoundError, match=r"(?s)labelled-text source not found.*<label>/<document file>"):
        LabelledTextDataModule(source=str(tmp_path / "imdb.csv"), **cache).setup("fit")
    (tmp_path / "only_test" / "test" / "pos").mkdir(parents=True)
    (tmp_path / "only_test" / "test" / "pos" / "1.txt").write_text("A film with a happy tortoise.")
    with pytest.raises(FileNotFoundError, match="has a 'test' split but no 'train'"):
        LabelledTextDataModule(source=str(tmp_path / "only_test"), **cache).setup("fit")
    with pytest.raises(FileNotFoundError, match=r"test split not found at .*elsewhere\.csv"):
        LabelledTextDataModule(source=str(tmp_path / "only_test" / "test"), test_source=str(tmp_path / "elsewhere.csv"),
                               **cache).setup("fit")


def test_hyperpartisan_validation_is_its_published_dev_split(tmp_path):
    """Longformer's train/dev/test files (hp-splits.json): validation is dev.jsonl, nothing held out of train."""
    source = write_hyperpartisan(tmp_path / "hyperpartisan", counts=(12, 4, 6))
    datamodule = LabelledTextDataModule(str(source), id_column="id", val_split="dev", val_fraction=0.0, batch_size=4,
                                        num_workers=0, cache_dir=str(tmp_path / "cache"))
    datamodule.setup("fit")
    read = {name: [d.id for d in part] for name, part in
            (("train", datamodule.train_set), ("val", datamodule.val_set), ("test", datamodule.test_set))}
    assert read == {"train": [str(i) for i in range(1, 13)], "val": ["13", "14", "15", "16"],
                    "test": [str(i) for i in range(17, 23)]}
    assert datamodule.labels == ["false", "true"]
    datamodule.connect(lambda stage: list)
    assert [d.id for batch in datamodule.val_dataloader() for d in batch] == read["val"]


def test_a_published_validation_split_with_val_fraction_or_missing_is_refused(tmp_path):
    source = write_hyperpartisan(tmp_path / "hyperpartisan")
    with pytest.raises(ConfigError, match="set val_fraction to 0"):
        LabelledTextDataModule(str(source), val_split="dev", val_fraction=0.1)
    datamodule = LabelledTextDataModule(str(source), val_split="validation", val_fraction=0.0,
                                        cache_dir=str(tmp_path / "cache"))
    with pytest.raises(ConfigError, match="data.init_args.val_split: .* has no 'validation' split"):
        datamodule.setup("fit")


def test_fakenews_corpus_release_reads_with_its_columns(tmp_path):
    """several27/FakeNewsCorpus ``news_cleaned_2018_02_13.csv``: a leading unnamed index column, quoted multi-line
    ``content``, the class in ``type`` (DocSplit Table 1). Every article here is invented."""
    rows = [
        '0,141,awm.com,unreliable,http://awm.com/a,"Owls were seen\n\nreading the news.",2018-01-25,2018-02-02,'
        '2018-02-02,Owls Read,,,[\'\'],,,,',
        '1,256,beforeitsnews.com,fake,http://b.com/x,"Kettles, it is said, whistle in tune.",2018-01-25,2018-02-02,'
        '2018-02-02,Singing Kettles,A. Person,,[\'\'],,,,',
        '2,301,reuters.com,reliable,http://r.com/y,,2018-01-25,2018-02-02,2018-02-02,Empty Article,,,[\'\'],,,,',
    ]
    path = tmp_path / "news_cleaned_2018_02_13.csv"
    path.write_text(FAKENEWS_HEADER + "\n" + "\n".join(rows) + "\n", encoding="utf-8")
    datamodule = LabelledTextDataModule(str(path), text_column="content", label_column="type", title_column="title",
                                        id_column="id", test_split=None, val_fraction=0.0,
                                        cache_dir=str(tmp_path / "cache"))
    datamodule.setup("fit")
    documents = list(datamodule.train_set)
    assert [(d.id, d.label, d.title) for d in documents] == [("141", "unreliable", "Owls Read"),
                                                             ("256", "fake", "Singing Kettles")]
    assert "reading the news" in documents[0].text and datamodule.data_stats["documents"]["skipped"]


def _fakenews_module(path, **kwargs) -> LabelledTextDataModule:
    options = {"text_column": "content", "label_column": "type", "title_column": "title", "id_column": "id",
               "test_split": None, "cache_dir": str(path.parent / "cache"), "num_workers": 0, **kwargs}
    datamodule = LabelledTextDataModule(str(path), **options)
    datamodule.setup("fit")
    return datamodule


def _split_ids(datamodule) -> list[set[str]]:
    return [{document.id for document in split} for split in
            (datamodule.train_set, datamodule.val_set, datamodule.test_set)]


def test_stratified_split_keeps_class_proportions_whatever_the_file_order(tmp_path):
    """The FakeNews release publishes no split: validation and test are held out per class, seeded."""
    counts = {"fake": 30, "reliable": 10}
    path = write_fakenews(tmp_path / "a" / "news_cleaned_2018_02_13.csv", counts)
    datamodule = _fakenews_module(path, val_fraction=0.1, test_fraction=0.2, stratified=True)
    train, val, test = _split_ids(datamodule)
    assert not (train & val or train & test or val & test) and len(train | val | test) == 40  # the empty type too
    per_class = [Counter(document.label for document in split)
                 for split in (datamodule.val_set, datamodule.test_set)]
    assert per_class == [Counter(fake=3, reliable=1), Counter(fake=6, reliable=2)]
    assert datamodule.data_stats["stratified split"]["test"] == 8
    reversed_file = write_fakenews(tmp_path / "b" / "news_cleaned_2018_02_13.csv", counts, reverse=True)
    assert _split_ids(_fakenews_module(reversed_file, val_fraction=0.1, test_fraction=0.2, stratified=True)) == \
        [train, val, test]
    other_seed = _fakenews_module(path, val_fraction=0.1, test_fraction=0.2, stratified=True, seed=1)
    assert _split_ids(other_seed)[2] != test
    datamodule.collate_fn = list
    assert {document.id for batch in datamodule.test_dataloader() for document in batch} == test


def test_classes_keep_the_same_class_set_in_a_table_source(tmp_path):
    """FakeNews keeps the release's documented types: ``classes`` filters a table's rows as it does class folders,
    so a classifier's labels, the probe and the few-shot sampler all see the same classes; the rest are counted."""
    path = write_fakenews(tmp_path / "news_cleaned_2018_02_13.csv", {"fake": 12, "stray": 3})
    everything = _fakenews_module(path, val_fraction=0.0)
    assert {d.label for d in everything.train_set} >= {"fake", "stray"}
    kept = _fakenews_module(path, val_fraction=0.1, test_fraction=0.2, stratified=True, classes=["fake"])
    assert {d.label for split in (kept.train_set, kept.val_set, kept.test_set) for d in split} == {"fake"}
    assert kept.labels == ["fake"] and len(kept.train_set) + len(kept.val_set) + len(kept.test_set) == 12
    assert kept.data_stats["documents"]["skipped"]["other_class"] == 3


def test_test_fraction_by_id_hash_and_its_refusals(tmp_path):
    path = write_fakenews(tmp_path / "news_cleaned_2018_02_13.csv")
    datamodule = _fakenews_module(path, val_fraction=0.2, test_fraction=0.3)
    train, val, test = _split_ids(datamodule)
    assert test and val and train and not (train & test or val & test)
    assert len(train) + len(val) + len(test) == 24
    with pytest.raises(ConfigError, match="stratified .* val_fraction and test_fraction are both 0"):
        LabelledTextDataModule(str(path), val_fraction=0.0, stratified=True)
    with pytest.raises(ConfigError, match="test_fraction"):
        LabelledTextDataModule(str(path), val_fraction=0.5, test_fraction=0.5)
    folder = write_labelled_folder(tmp_path / "with_test")
    published = LabelledTextDataModule(str(folder), test_fraction=0.1, cache_dir=str(tmp_path / "cache"))
    with pytest.raises(ConfigError, match="has its own test split .* set test_fraction to 0, or test_split to null"):
        published.setup("fit")


def write_acl_imdb_release(root):
    """aclImdb_v1.tar.gz unpacked (Maas et al. 2011), every kind of file in its place: ``README``, ``imdb.vocab`` and
    ``imdbEr.txt`` at the root; ``{train,test}/{neg,pos}/<id>_<rating>.txt`` reviews (ratings 1-4 negative, 7-10
    positive), ``train/unsup/<id>_0.txt`` unlabelled ones; ``urls_<class>.txt`` and the bag-of-words ``labeledBow.feat``
    (``unsupBow.feat`` in train) beside the class folders. Reviews hold the release's ``<br /><br />`` line breaks
    and one Latin-1 byte (the release is UTF-8 with a few stray bytes)."""
    files = {"README": "Large Movie Review Dataset v1.0\n", "imdb.vocab": "the\nand\na\n", "imdbEr.txt": "0.0490\n",
             "train/labeledBow.feat": "0 0:9 1:1\n", "train/unsupBow.feat": "0 0:2\n", "test/labeledBow.feat": "0 0:9\n"}
    reviews = {"train/pos/0_9.txt": "A wonderful film about patient snails.<br /><br />See it twice.",
               "train/pos/10_7.txt": "Snails, but good ones.", "train/neg/0_3.txt": "Too many snails, not enough plot.",
               "train/neg/1_1.txt": "Dull.", "train/unsup/0_0.txt": "Unlabelled snail thoughts.",
               "train/unsup/1_0.txt": "More unlabelled thoughts.", "test/pos/0_10.txt": "Snails again, and better.",
               "test/neg/0_2.txt": "I fell asleep before the snails arrived."}
    for name, text in {**files, **reviews}.items():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_text(text, encoding="utf-8")
    for split, classes in (("train", ("neg", "pos", "unsup")), ("test", ("neg", "pos"))):
        for label in classes:
            (root / split / f"urls_{label}.txt").write_text("http://www.imdb.com/title/tt0000000/usercomments\n")
    (root / "train/neg/2_4.txt").write_bytes(b"Caf\xe9 scenes, no snails.")
    return root


def test_acl_imdb_release_reads_with_the_deca_config_options(tmp_path):
    """aclImdb read as configs/deca/imdb_dc_sc.yaml reads it: neg/pos labelled, train/unsup unlabelled and trained on
    (fit_on: all), the release's other files counted, never read as reviews; no review dropped for its bytes."""
    import yaml

    root = write_acl_imdb_release(tmp_path / "aclImdb")
    config = yaml.safe_load((Path(__file__).resolve().parents[2] / "configs/deca/imdb_dc_sc.yaml").read_text())
    data = config["data"]["init_args"]
    options = {key: data[key] for key in ("classes", "unlabelled_class", "fit_on")}
    assert options == {"classes": ["neg", "pos"], "unlabelled_class": "unsup", "fit_on": "all"}
    dm = LabelledTextDataModule(source=str(root), batch_size=4, num_workers=0, val_fraction=0.0,
                                cache_dir=str(tmp_path / "cache"), **options)
    dm.collate_fn = list
    dm.setup("fit")
    assert sorted((d.id, d.label) for d in dm.train_set) == [
        ("train/neg/0_3.txt", "neg"), ("train/neg/1_1.txt", "neg"), ("train/neg/2_4.txt", "neg"),
        ("train/pos/0_9.txt", "pos"), ("train/pos/10_7.txt", "pos")]
    assert sorted((d.id, d.label) for d in dm.test_set) == [("test/neg/0_2.txt", "neg"), ("test/pos/0_10.txt", "pos")]
    assert sorted(d.id for d in dm.unlabelled_set) == ["train/unsup/0_0.txt", "train/unsup/1_0.txt"]
    served = sorted(d.id for batch in dm.train_dataloader() for d in batch)
    assert len(served) == 9 and "train/unsup/1_0.txt" in served and "test/neg/0_2.txt" in served
    assert next(d for d in dm.train_set if d.id == "train/neg/2_4.txt").text == "Caf\xe9 scenes, no snails."
    assert next(d for d in dm.train_set if d.id == "train/pos/0_9.txt").text.endswith("<br /><br />See it twice.")
    # train: labeledBow.feat, unsupBow.feat and 3 urls files (read twice: the labelled and the unsup folders);
    # test: labeledBow.feat and 2 urls files; the root's README, imdb.vocab and imdbEr.txt are never looked at
    assert dm.stats == Counter(file_outside_class_folder=2 * 5 + 3, record_decoded_with_fallback_encoding=1)
    assert dm.labels == ["neg", "pos"]
