"""``python -m lit_docemb predict`` writes the embeddings of the DataModule's predict documents where it says."""

from __future__ import annotations

import numpy as np
import pyarrow.parquet as pq
from runs import tiny_args

from lit_docemb.commands import main
from lit_docemb.eval.embedding import embed_documents


def test_predict_writes_one_row_per_document_and_says_where(tiny_encoder_dir, corpus_jsonl, tmp_path, capsys):
    logger = ["--trainer.logger=lightning.pytorch.loggers.CSVLogger", f"--trainer.logger.save_dir={tmp_path}"]
    cli = main(["predict", *tiny_args(tiny_encoder_dir, corpus_jsonl, tmp_path), *logger])
    assert not (tmp_path / "lightning_logs").exists()  # the config's logger opens no folder (or wandb run) for it
    table = pq.read_table(tmp_path / "predictions" / "rank-00000.parquet")
    data = cli.datamodule
    predicted = data.all_set if data.predict_split == "all" else data.val_set  # the predict documents
    documents = [predicted[i] for i in range(len(predicted))]
    assert table.column("id").to_pylist() == [d.id for d in documents] and table.num_rows > 0
    vectors = np.array(table.column("embeddings").to_pylist(), dtype=np.float32)
    np.testing.assert_allclose(vectors, embed_documents(cli.model.eval(), documents).numpy(), atol=1e-5)
    assert f"predict: wrote {table.num_rows} rows to {tmp_path / 'predictions'}/rank-*.parquet" in capsys.readouterr().out
