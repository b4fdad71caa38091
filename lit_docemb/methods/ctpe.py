"""CTPE, coupled text pair embedding (seed paper 004): a document is the pair (v_f, v_b) of its former and
latter part, trained so that a coupled pair (f_i, b_i) beats an uncoupled one by a margin.

§3.2: split at ``pos`` (:mod:`ctpe_text`); token vectors (word2vec trained on the corpus, random, or a frozen
transformer); a former-part CNN and a latter-part CNN (widths 1, 2, 3, 5 x 1,024 filters, max-pool,
concatenation) shared by positive and negative pairs (:class:`~lit_docemb.models.ctpe.CoupledPairEncoder`);
the uncoupled pair is (f_i, b_j) or (f_j, b_i) at random, d_j drawn afresh every epoch, uniformly or by TF-IDF
sampling (§4.7, :mod:`ctpe_sampling`); CoupledMarginLoss with M = 0.1; Adam, lr 0.001, batch 200 (§4.3).
§3.3: documents are ranked by eq. 2, ``sim(d_i, d_j) = cos(v_f_i, v_b_j) + cos(v_f_j, v_b_i)``
(:meth:`CTPE.similarity`); ``embed`` and ``predict`` give the pair.

Reading chosen where the paper is silent: the word vocabulary, word2vec and the TF-IDF neighbours are built
from the DataModule's training split at ``setup("fit")`` (the paper trains on all candidate and test
documents: the configs hold nothing out) and the vocabulary is saved in the checkpoint; validation pairs take
their partner from the validation split, drawn from the document id (stable across epochs). Unsplittable
documents (no boundary, an empty part) are dropped and counted (``skipped_documents``). The word vectors are fixed
(``WordEmbeddings(trainable=False)``), as in the authors' released code, the paper not saying; the two parts keep
a CNN each, as the paper's Figure 1 has it (the authors' code shares one: ``share_part_encoders: true``).
"""

from __future__ import annotations

import functools
from collections.abc import Sequence
from typing import Literal

import torch
from lightning.pytorch.cli import LRSchedulerCallable, OptimizerCallable
from torch import Tensor

from lit_docemb.data.core.batches import CoupledDocumentBatch, CoupledPairBatch
from lit_docemb.data.caches.field_cache import FieldRows, FieldTokenCache
from lit_docemb.data.core.contract import DocumentSplits
from lit_docemb.data.core.document import Document
from lit_docemb.errors import BadArgument, ConfigError, require
from lit_docemb.losses import CoupledMarginLoss
from lit_docemb.methods.base import EmbeddingMethod
from lit_docemb.models.ctpe import (
    CoupledPairEncoder,
    ElmoTokens,
    SkipThoughtSentences,
    TransformerTokens,
    WordEmbeddings,
    coupled_pair_similarity,
)
from lit_docemb.models.ctpe_tokenizers import WordTokenizer
from lit_docemb.views.ctpe import (
    CoupledDocumentCollator,
    CoupledPairCollator,
    FieldIds,
    PairSplitter,
    PartnerSampler,
    check_pos,
    document_fields,
    tfidf_neighbours,
)


def _documents(dataset: Sequence[Document]) -> list[Document]:
    return [dataset[i] for i in range(len(dataset))]


def _sampler(dataset: Sequence[Document]) -> PartnerSampler:
    """Uniform partners from ``dataset`` (validation pairs)."""
    return PartnerSampler(dataset, [d.id for d in _documents(dataset)])


class CTPE(EmbeddingMethod):
    """Coupled text pair embedding.

    Args:
        embeddings: Token vectors: :class:`~lit_docemb.models.ctpe.WordEmbeddings` (default: word2vec
            on the training corpus, 100 dimensions, fixed as in the authors' code; ``trainable: true`` trains them)
            or
            :class:`~lit_docemb.models.ctpe.TransformerTokens` (a frozen pretrained encoder) or
            :class:`~lit_docemb.models.ctpe.ElmoTokens` (frozen ELMo, from allennlp's released files) or
            :class:`~lit_docemb.models.ctpe.SkipThoughtSentences` (frozen Skip-thoughts sentence vectors: the parts'
            tokens are then sentences).
        pos: Split position: ``"title"``, ``"before:<Section heading>"`` or a token ratio in (0, 1).
        max_length: l_max, tokens kept per part (paper: 200; words with ElmoTokens; sentences with
            SkipThoughtSentences, the paper's l = 20).
        n_filters: n_f, filters per kernel width (paper: 1,024).
        kernel_widths: n_s (paper: 1, 2, 3, 5).
        share_part_encoders: One CNN for former and latter parts (the paper's Figure 1 has one each; the authors'
            code shares one by default).
        margin: M of the coupled margin loss (paper: 0.1).
        tfidf_neighbours: ``None``: partners uniform over the corpus (CTPE); k: §4.7's TF-IDF sampling
            from each document's k nearest TF-IDF neighbours half of the time (CTPE_T, k = 100).
        optimizer: Optimizer factory; ``None`` is the paper's Adam with lr 0.001.
        scheduler: Optional learning-rate scheduler factory.
        token_cache_dir: Folder of the cache of each document's fields as token ids, built once per corpus and
            vocabulary and read by the collators on every pass (``None``: the ``datasets`` cache folder).
        document_vector: ``"coupled"``: the pair (v_f, v_b) of the two CNNs (CTPE); ``"average"``: Table 4's avg
            column (§4.5: "uses average embedding instead of coupled text pair representation"), the mean of the
            token (or word, sentence) vectors of both parts (each cut at ``max_length``), no CNN, given as the pair
            (mean, mean) so that eq. 2 ranks by its cosine. It trains nothing: ``fit`` refuses it, ``evaluate`` scores it.
    """

    default_learning_rate = 1e-3
    vector_outputs = ("former", "latter")  # the two parts' embeddings (CTPE has no whole-document one)

    def __init__(
        self,
        embeddings: WordEmbeddings | TransformerTokens | ElmoTokens | SkipThoughtSentences | None = None,
        pos: float | str = "title",
        max_length: int = 200,
        n_filters: int = 1024,
        kernel_widths: list[int] | None = None,
        share_part_encoders: bool = False,
        margin: float = 0.1,
        tfidf_neighbours: int | None = None,
        optimizer: OptimizerCallable | None = None,
        scheduler: LRSchedulerCallable | None = None,
        token_cache_dir: str | None = None,
        document_vector: Literal["coupled", "average"] = "coupled",
    ) -> None:
        super().__init__(optimizer or functools.partial(torch.optim.Adam, lr=self.default_learning_rate), scheduler)
        self.save_method_hyperparameters(ignore=["optimizer", "scheduler"])
        require(tfidf_neighbours is None or tfidf_neighbours >= 1, "tfidf_neighbours", ">= 1 or null",
                tfidf_neighbours)
        require(max_length >= 1, "max_length", ">= 1", max_length)
        require(document_vector in ("coupled", "average"), "document_vector", "'coupled' or 'average'",
                document_vector)
        self.embeddings = embeddings or WordEmbeddings()
        self.pos = check_pos(pos)
        self.kernel_widths = kernel_widths or [1, 2, 3, 5]
        self.loss = CoupledMarginLoss(margin)
        self.tokenizer = None
        self.field_rows: FieldRows | None = None
        self.field_corpus = None  # the DataModule's corpus, whose field cache the first collator opens
        self.encoder: CoupledPairEncoder | None = None
        self.samplers: dict[str, PartnerSampler] = {}
        if isinstance(self.embeddings, TransformerTokens | ElmoTokens | SkipThoughtSentences):  # no corpus vocabulary
            self._install(*self.embeddings.build())

    def _install(self, tokenizer, token_vectors) -> None:
        max_positions = getattr(token_vectors, "max_positions", None)
        together = getattr(token_vectors, "pair_strategy", "separately") == "together"  # one sequence per pair
        if max_positions is not None and self.hparams.max_length * (1 + together) > max_positions:
            raise BadArgument("max_length", f"{self.hparams.max_length}{' x 2 (pair_strategy together)' * together} "
                                            f"exceeds the {max_positions} positions of the encoder: lower it")
        self.tokenizer = tokenizer
        self.field_rows = None  # opened by setup over the DataModule's corpus, with this tokenizer
        self.encoder = CoupledPairEncoder(token_vectors, self.hparams.n_filters, self.kernel_widths,
                                          self.hparams.share_part_encoders).to(self.device)

    def prepare(self, train_documents: Sequence[Document], val_documents: Sequence[Document] = ()) -> None:
        """Builds what training needs from the training documents: the vocabulary and word vectors (once),
        the TF-IDF neighbours (with ``tfidf_neighbours``) and the partner samplers of fit and validation."""
        train = _documents(train_documents)
        texts = [" ".join(text for _, text in document_fields(d)) for d in train]
        if self.encoder is None:
            self._install(*self.embeddings.build(texts))
        k = self.hparams.tfidf_neighbours
        neighbours = tfidf_neighbours(texts, k) if k is not None else None
        self.samplers = {"fit": PartnerSampler(train_documents, [d.id for d in train], neighbours),
                         "validate": _sampler(val_documents)}

    def setup(self, stage: str) -> None:
        super().setup(stage)
        if stage == "predict":
            return
        datamodule = self.trainer.datamodule
        if not isinstance(datamodule, DocumentSplits) or datamodule.train_set is None:
            raise RuntimeError("CTPE builds its vocabulary and partners from a lit_docemb DataModule's "
                               "train_set: run it with --data")
        if stage == "fit":
            if self.hparams.document_vector == "average":
                raise ConfigError("model.init_args.document_vector 'average' is Table 4's avg column, which trains "
                                  "nothing: score it with python -m lit_docemb evaluate (no --ckpt_path), or fit "
                                  "with document_vector: coupled")
            self.prepare(datamodule.train_set, datamodule.val_set or ())
        else:  # validate / test: the vocabulary comes from the checkpoint, partners from the held-out split
            self.samplers["validate"] = _sampler(datamodule.val_set)
        # every pass reads the fields' ids, tokenised once per corpus and vocabulary: opened by the first collator,
        # after a checkpoint's vocabulary is restored (validate/test restore it after setup)
        self.field_corpus, self.field_rows = datamodule.documents, None

    def collator(self, stage: str):
        if self.tokenizer is None:
            raise RuntimeError("CTPE has no vocabulary yet: fit it first, or load a checkpoint (--ckpt_path)")
        if stage == "predict":  # documents of any corpus: from their text
            return CoupledDocumentCollator(PairSplitter(self.tokenizer, self.pos, self.hparams.max_length),
                                           self.tokenizer.pad_id)
        if self.field_rows is None and self.field_corpus is not None:
            cache = FieldTokenCache(FieldIds(self.tokenizer), self.hparams.token_cache_dir)
            self.field_rows = FieldRows(cache.open(self.field_corpus))
        splitter = PairSplitter(self.tokenizer, self.pos, self.hparams.max_length, self.field_rows)
        sampler = self.samplers.get("fit" if stage == "fit" else "validate")
        if sampler is None:
            raise RuntimeError("CTPE has no partner documents: call prepare(train_documents) or fit with --data")
        return CoupledPairCollator(splitter, sampler, self.tokenizer.pad_id, deterministic=stage != "fit")

    def losses(self, batch: CoupledPairBatch) -> dict[str, Tensor]:
        # the coupled pair and the uncoupled one, each a pair (row i of negative_former goes with row i of
        # negative_latter): encoded together when the deep LM's pair_strategy says so
        v_f, v_b = self.encoder(batch.former.input_ids, batch.former.attention_mask, batch.latter.input_ids,
                                batch.latter.attention_mask)  # (B, D) each
        n_f, n_b = self.encoder(batch.negative_former.input_ids, batch.negative_former.attention_mask,
                                batch.negative_latter.input_ids, batch.negative_latter.attention_mask)  # (B, D) each
        terms = self.loss(v_f, v_b, n_f, n_b)
        terms["skipped_documents"] = torch.full((), float(batch.skipped), device=v_f.device)
        return terms

    def embed(self, batch: CoupledDocumentBatch) -> Tensor:
        """The pairs (B, 2, D): ``[:, 0]`` is v_f, ``[:, 1]`` is v_b. Score them with :meth:`similarity`. With
        ``document_vector: average`` both are the mean token vector of the two parts, (B, 2, E)."""
        if self.hparams.document_vector == "average":
            total, count = 0.0, 0.0
            parts = self.encoder.pair_vectors(batch.former.input_ids, batch.former.attention_mask,
                                              batch.latter.input_ids, batch.latter.attention_mask)
            for vectors, mask in parts:  # (B, U, E), (B, U)
                weights = mask.unsqueeze(-1).float()  # (B, U, 1)
                total = total + (vectors.float() * weights).sum(1)
                count = count + weights.sum(1)
            mean = total / count.clamp(min=1.0)  # (B, E)
            return torch.stack([mean, mean], dim=1)
        v_f, v_b = self.encoder(batch.former.input_ids, batch.former.attention_mask, batch.latter.input_ids,
                                batch.latter.attention_mask)
        return torch.stack([v_f, v_b], dim=1)  # (B, 2, D)

    def similarity(self, queries: Tensor, candidates: Tensor) -> Tensor:
        """Eq. 2 between (Q, 2, D) and (N, 2, D) pairs → (Q, N)."""
        return coupled_pair_similarity(queries[:, 0], queries[:, 1], candidates[:, 0], candidates[:, 1])

    def predict_step(self, batch: CoupledDocumentBatch, batch_idx: int) -> dict:
        pairs = self.embed(batch).float().cpu()
        return {"ids": batch.ids, "former": pairs[:, 0], "latter": pairs[:, 1], "skipped": batch.skipped}

    def on_save_checkpoint(self, checkpoint: dict) -> None:
        if isinstance(self.tokenizer, WordTokenizer):
            checkpoint["ctpe_vocabulary"] = self.tokenizer.words[2:]

    def on_load_checkpoint(self, checkpoint: dict) -> None:
        words = checkpoint.get("ctpe_vocabulary")
        if words is not None and (self.tokenizer is None or self.tokenizer.words[2:] != list(words)):
            self._install(*self.embeddings.restore(words))
