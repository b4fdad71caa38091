"""OpenWebText readers on fixture files in the release's real layout: xz-compressed tar archives of .txt files
(nested in an outer ``openwebtext.tar.xz``, or extracted), loose .txt / .xz files, and a local Hugging Face copy.

Every sentence here is invented.
"""

from __future__ import annotations

import lzma
import os
from collections import Counter

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from corpus_files import BRIDGE, GULLS, KETTLE, tar_bytes, texts, write_release

from lit_docemb.data.corpora.openwebtext import OpenWebTextDataModule
from lit_docemb.data.corpora.openwebtext_formats import iter_openwebtext
from lit_docemb.data.core.reading import MalformedInputError, ReadContext

ORCHARD = "An orchard of glass pears stood behind the museum.\n\nVisitors were asked not to touch them."


def test_release_folder_parsed_with_paragraphs_and_counts(tmp_path):
    write_release(tmp_path / "openwebtext")
    context = ReadContext()
    documents = list(iter_openwebtext(str(tmp_path / "openwebtext"), context=context))
    assert [d.id for d in documents] == ["owt:urlsf_subset00-1_data/0000000-9f1c.txt",
                                         "owt:urlsf_subset00-1_data/0000001-77ab.txt",
                                         "owt:urlsf_subset00-1_data/0000003-b4d5.txt",
                                         "owt:urlsf_subset00-2_data/0000000-c3d2.txt"]
    gulls = documents[0]
    assert len(gulls.sections) == 1 and gulls.sections[0].heading == "" and gulls.title == ""
    assert gulls.text == ("The lighthouse keeper counted seventeen gulls before breakfast.\nShe wrote the number on "
                          "the wall.\n\nA storm arrived in the afternoon and the gulls left.")
    assert documents[2].text == "Caf\ufffd tables were painted \ufffd blue.\n\nThen the painter left town."
    assert context.stats == Counter(empty_document=1, undecodable_record=1, non_text_member=1)


def test_outer_archive_streamed_gives_the_same_documents_as_the_extracted_folder(tmp_path):
    archives = write_release(tmp_path / "extracted" / "openwebtext")
    outer = {f"openwebtext/{name}": data for name, data in archives.items()}
    (tmp_path / "openwebtext.tar.xz").write_bytes(lzma.compress(tar_bytes(outer)))
    from_outer = list(iter_openwebtext(str(tmp_path / "openwebtext.tar.xz"), context=ReadContext()))
    from_folder = list(iter_openwebtext(str(tmp_path / "extracted"), context=ReadContext()))
    assert len(from_outer) == 4
    assert texts(from_outer) == texts(from_folder)


def test_loose_text_and_xz_files(tmp_path):
    (tmp_path / "web" / "b").mkdir(parents=True)
    (tmp_path / "web" / "a.txt").write_text(KETTLE)
    (tmp_path / "web" / "b" / "c.txt.xz").write_bytes(lzma.compress(ORCHARD.encode()))
    (tmp_path / "web" / "b" / "list.csv").write_text("x,y\n")
    context = ReadContext()
    assert texts(iter_openwebtext(str(tmp_path / "web"), context=context)) == {"owt:a.txt": KETTLE,
                                                                              "owt:b/c.txt": ORCHARD}
    assert context.stats == Counter(unexpected_file=1)


def test_truncated_archive_is_counted_or_raises_when_strict(tmp_path):
    write_release(tmp_path / "owt")
    many = {f"{i:07d}-x.txt": (ORCHARD + f" Pear number {i}.").encode() for i in range(200)}
    data = lzma.compress(tar_bytes(many))
    (tmp_path / "owt" / "urlsf_subset00-3_data.xz").write_bytes(data[: len(data) // 2])
    context = ReadContext()
    documents = list(iter_openwebtext(str(tmp_path / "owt"), context=context))
    assert context.stats["corrupt_archive"] == 1
    assert {d.id.split("/")[0] for d in documents} >= {"owt:urlsf_subset00-1_data", "owt:urlsf_subset00-2_data"}
    with pytest.raises(MalformedInputError, match=r"urlsf_subset00-3_data\.xz: corrupt or truncated archive"):
        list(iter_openwebtext(str(tmp_path / "owt"), context=ReadContext(strict=True)))


def test_missing_path_describes_the_layout(tmp_path):
    dm = OpenWebTextDataModule(source=str(tmp_path / "openwebtext"), cache_dir=str(tmp_path / "cache"))
    with pytest.raises(FileNotFoundError, match=r"(?s)OpenWebText not found.*urlsf_subset<NN>-<M>_data\.xz"):
        dm.setup("fit")


def test_datamodule_setup_batches_and_second_run_uses_the_cache(tmp_path):
    write_release(tmp_path / "openwebtext")
    kwargs = {"source": str(tmp_path / "openwebtext"), "cache_dir": str(tmp_path / "cache"), "batch_size": 2,
              "num_workers": 0, "val_fraction": 0.0}
    dm = OpenWebTextDataModule(**kwargs)
    dm.collate_fn = list
    dm.setup("fit")
    assert dm.stats == Counter(empty_document=1, undecodable_record=1, non_text_member=1)
    assert len(dm.train_set) == 4
    batch = next(iter(dm.train_dataloader()))
    assert len(batch) == 2 and {d.id for d in batch} <= set(dm.train_set.documents.ids)
    arrow_file = dm.train_set.documents.table.cache_files[0]["filename"]

    again = OpenWebTextDataModule(**kwargs)
    again.setup("fit")
    assert again.train_set.documents.table.cache_files[0]["filename"] == arrow_file
    assert again.stats == dm.stats  # the counts of the cached conversion are reported again

    (tmp_path / "openwebtext" / "extra.txt").write_text(ORCHARD)  # changed inputs: converted again
    changed = OpenWebTextDataModule(**kwargs)
    changed.setup("fit")
    assert changed.train_set.documents.table.cache_files[0]["filename"] != arrow_file
    assert "owt:extra.txt" in changed.train_set.documents.ids


def test_local_hugging_face_copy_is_read_without_conversion(tmp_path):
    pq.write_table(pa.table({"text": [GULLS, KETTLE, BRIDGE]}), tmp_path / "owt.parquet")
    dm = OpenWebTextDataModule(source=str(tmp_path / "owt.parquet"), cache_dir=str(tmp_path / "cache"),
                               batch_size=3, num_workers=0, val_fraction=0.0)
    dm.collate_fn = list
    dm.setup("fit")
    assert dm.train_set.documents.ids == ["owt:0", "owt:1", "owt:2"]
    assert dm.train_set.documents[1].text == KETTLE
    assert not os.path.exists(tmp_path / "cache" / "lit_docemb_stats")  # memory-mapped as is, nothing converted
    assert sorted(d.id for d in next(iter(dm.train_dataloader()))) == ["owt:0", "owt:1", "owt:2"]


def test_save_to_disk_copy_and_hub_name_go_through_datasets(tmp_path, monkeypatch):
    import datasets

    table = datasets.Dataset.from_dict({"text": [GULLS, "", BRIDGE]})
    datasets.DatasetDict({"train": table}).save_to_disk(str(tmp_path / "owt_saved"))
    dm = OpenWebTextDataModule(source=str(tmp_path / "owt_saved"), cache_dir=str(tmp_path / "cache"),
                               val_fraction=0.0)
    dm.setup("fit")
    assert dm.all_set.documents.ids == ["owt:0", "owt:1", "owt:2"] and dm.all_set.documents[2].text == BRIDGE

    calls = []

    def load_dataset(name, subset=None, cache_dir=None):  # the hub, which these tests cannot reach
        calls.append((name, subset, cache_dir))
        return datasets.DatasetDict({"train": table})

    monkeypatch.setattr(datasets, "load_dataset", load_dataset)
    hub = OpenWebTextDataModule(source="Skylion007/openwebtext", cache_dir=str(tmp_path / "cache"), val_fraction=0.0)
    hub.setup("fit")
    assert calls == [("Skylion007/openwebtext", None, str(tmp_path / "cache"))]
    assert hub.all_set.documents[0].text == dm.all_set.documents[0].text
    with pytest.raises(ValueError, match="no split 'validation'"):
        OpenWebTextDataModule(source="Skylion007/openwebtext", split="validation").setup("fit")
