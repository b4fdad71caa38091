"""DECA (seed paper 002): document embedding via contrastive augmentation.

§3.2: a document D_i and its augmentation (§3.3, :mod:`lit_docemb.augment`) are embedded by the same encoder,
Doc2VecC (eq. 1, trained jointly with its CBOW loss, eq. 2-3) or a Hugging Face encoder's [CLS]; a contrastive
loss, SimCLR's NT-Xent (eq. 4) or SimSiam's (eq. 5, predictor MLP 2 layers x 64 with BatchNorm), pulls the
pair together; the total is ``l_d + lambda * l_c`` (eq. 6), the contrastive loss alone for an encoder. Appendix
A.3.2: Adam, lr 1e-3, batch 4,096, tau 1.0, dimension 100 (Doc2VecC); BERT lr 3e-6, batch 2, 512 tokens, 1 epoch.

Table 5's ablations on R8 are two independent switches. ``framework: append`` ("-Contrastive", §4.5) has no
contrastive loss: each document is followed by one randomly drawn augmentation and Doc2VecC trains on that
merged document with l_d alone (a new augmentation each epoch; embeddings are of the original documents).
``dictionary_constraint: false`` (the last row, used with ``append`` in the paper) lets replacements be
thesaurus words outside the corpus; the Doc2VecC vocabulary stays the training split's, so such a word enters
the Doc2VecC document only when that vocabulary has it, as for any out-of-vocabulary word.

Reading chosen where the paper is silent: the Doc2VecC vocabulary, the replacement candidates and TF-IDF come
from the training split (built in ``setup``, stored in checkpoints); the contrastive loss sees the same corrupted
document vectors as the CBOW loss (eq. 1's mean in expectation); eq. 3 is estimated on
``targets_per_document`` sampled words per document and step (Table 2's "#Sample").
"""

from __future__ import annotations

import logging
from typing import Literal

import torch
from lightning.pytorch.cli import LRSchedulerCallable, OptimizerCallable
from torch import Tensor, nn
from transformers import AutoTokenizer

from lit_docemb.augment import (
    UNCONSTRAINABLE,
    AugmentationName,
    BackTranslator,
    DocumentAugmenter,
    Vocabulary,
)
from lit_docemb.data.batches import Doc2VecCBatch, Doc2VecCPairBatch, ViewPairBatch
from lit_docemb.data.tokens import document_text
from lit_docemb.losses import NegativeSamplingLoss, NTXentLoss, SimSiamLoss
from lit_docemb.methods.base import EmbeddingMethod
from lit_docemb.models import Doc2VecC, HFEncoder, resolve_model_path
from lit_docemb.views.common import DocumentCollator
from lit_docemb.views.deca import (
    AppendedAugmentationCollator,
    AugmentedTextCollator,
    Doc2VecCPairCollator,
    WordDocumentCollator,
    word_index,
)

log = logging.getLogger(__name__)

#: Doc2VecC arguments and their paper defaults (Appendix A.3.2, Table 2's most common values).
DOC2VECC_DEFAULTS = {"embedding_dim": 100, "window_size": 10, "negative_samples": 5, "targets_per_document": 5,
                     "corruption": 0.3}


def predictor(dim: int, hidden: int) -> nn.Sequential:
    """SimSiam's prediction MLP as in DECA A.3.2: two layers, ``hidden`` units, BatchNorm."""
    return nn.Sequential(nn.Linear(dim, hidden, bias=False), nn.BatchNorm1d(hidden), nn.ReLU(inplace=True),
                         nn.Linear(hidden, dim))


class DECA(EmbeddingMethod):
    """DECA with a Doc2VecC backbone (``encoder: null``) or a Hugging Face encoder.

    Args:
        augmentation: ``wordnet``, ``antonym``, ``uninformative``, ``ppdb`` or ``back_translation`` (§3.3).
        framework: ``simclr`` (NT-Xent, eq. 4), ``simsiam`` (eq. 5) or ``append``: no contrastive loss, the
            augmentation appended to its document and Doc2VecC's l_d alone (Table 5 "-Contrastive"; Doc2VecC only).
        contrastive_weight: lambda of eq. 6 (Doc2VecC with a contrastive framework; an encoder trains on the
            contrastive loss alone).
        temperature: tau of NT-Xent (paper 1.0).
        denominator: NT-Xent's ``paper`` (eq. 4) or ``simclr`` form, see :class:`NTXentLoss`.
        encoder: Hugging Face encoder folder or name; ``None`` uses Doc2VecC.
        pretrained: Start the encoder from its weights (encoder only; ``None``: True).
        max_length: Tokens per document for the encoder (``None``: 512).
        embedding_dim, window_size, negative_samples, targets_per_document, corruption: Doc2VecC's dimension
            (100), context words on each side (Table 2 "Win. size"), noise words per target ("#Neg."), target
            words sampled per document and step ("#Sample") and word-dropout rate (0.3); ``None``: those defaults.
            Doc2VecC only.
        min_word_count: Corpus count a word needs to be in the Doc2VecC vocabulary.
        max_vocabulary: Most frequent words kept in the Doc2VecC vocabulary.
        max_words: Words read per document.
        replacement_min_count: Corpus count a replacement (synonym, antonym, paraphrase) needs (``None``: 5;
            with the dictionary constraint only).
        dictionary_constraint: Replacements must be corpus words (§4.5); ``False`` is Table 5's last row
            (``wordnet``, ``antonym``, ``ppdb``).
        replacement_probability: See :class:`~lit_docemb.augment.DocumentAugmenter` (``None``: 1.0, or 0.3 for
            ``uninformative``).
        wordnet_dir: WordNet database folder (``None``: ``$LIT_DOCEMB_WORDNET`` or ``/usr/share/wordnet``).
        ppdb_path: PPDB lexical file (``ppdb`` only).
        back_translation_models: Folders of the forward and backward seq2seq models (``back_translation`` only).
        back_translation_cache: SQLite file caching the translations (``back_translation`` only).
        back_translation_max_length: Tokens of a sentence and of its translations (``back_translation`` only).
        predictor_hidden: Hidden units of SimSiam's predictor (paper 64).
        gather_across_devices: NT-Xent negatives from all devices.
        optimizer: Optimizer factory; ``None`` is AdamW at lr 1e-3.
        scheduler: Optional learning-rate scheduler factory.
    """

    default_learning_rate = 1e-3

    def __init__(
        self,
        augmentation: AugmentationName = "wordnet",
        framework: Literal["simclr", "simsiam", "append"] = "simclr",
        contrastive_weight: float = 1.0,
        temperature: float = 1.0,
        denominator: Literal["paper", "simclr"] = "paper",
        encoder: str | None = None,
        pretrained: bool | None = None,
        max_length: int | None = None,
        embedding_dim: int | None = None,
        window_size: int | None = None,
        negative_samples: int | None = None,
        targets_per_document: int | None = None,
        corruption: float | None = None,
        min_word_count: int = 10,
        max_vocabulary: int = 100_000,
        max_words: int = 10_000,
        replacement_min_count: int | None = None,
        dictionary_constraint: bool = True,
        replacement_probability: float | None = None,
        wordnet_dir: str | None = None,
        ppdb_path: str | None = None,
        back_translation_models: list[str] | None = None,
        back_translation_cache: str | None = None,
        back_translation_max_length: int = 128,
        predictor_hidden: int = 64,
        gather_across_devices: bool = True,
        optimizer: OptimizerCallable | None = None,
        scheduler: LRSchedulerCallable | None = None,
    ) -> None:
        super().__init__(optimizer, scheduler)
        self.save_method_hyperparameters(ignore=["optimizer", "scheduler"])
        self._check_arguments()
        hp = self.hparams
        if encoder is None:
            self.settings = {k: v if hp[k] is None else hp[k] for k, v in DOC2VECC_DEFAULTS.items()}
            self.backbone: Doc2VecC | None = None  # built once the vocabulary is known (setup / checkpoint)
            self.cbow = NegativeSamplingLoss()
            dim = self.settings["embedding_dim"]
        else:
            self.tokenizer = AutoTokenizer.from_pretrained(resolve_model_path(encoder))
            self.encoder = HFEncoder(encoder, pretrained=pretrained is not False, pooling="cls")
            self.encoder.check_length(self.max_length, "max_length")
            dim = self.encoder.hidden_size
        if framework == "simclr":
            self.contrastive = NTXentLoss(temperature, denominator, gather_across_devices)
            self.loss_weights = {"ntxent_loss": contrastive_weight}
        elif framework == "simsiam":
            self.predictor = predictor(dim, predictor_hidden)
            self.contrastive = SimSiamLoss()
            self.loss_weights = {"simsiam_loss": contrastive_weight}
        self.vocabulary: Vocabulary | None = None
        self.index: dict[str, int] | None = None
        self._augmenter: DocumentAugmenter | None = None

    @property
    def max_length(self) -> int:
        return self.hparams.max_length or 512

    def _check_arguments(self) -> None:
        hp = self.hparams
        if hp.encoder is not None:
            given = [k for k in DOC2VECC_DEFAULTS if hp[k] is not None]
            if given:
                raise ValueError(f"{given} are Doc2VecC arguments: unset them with an encoder ({hp.encoder!r})")
            if hp.contrastive_weight != 1.0:
                raise ValueError("contrastive_weight (lambda) weighs the contrastive loss against Doc2VecC's; with "
                                 "an encoder DECA trains on the contrastive loss alone: leave it at 1.0")
        elif hp.pretrained is not None or hp.max_length is not None:
            raise ValueError("pretrained and max_length are encoder arguments: set encoder or unset them")
        if hp.framework not in ("simclr", "simsiam", "append"):
            raise ValueError(f"unknown framework {hp.framework!r}: choose 'simclr', 'simsiam' or 'append'")
        if hp.framework == "append":
            if hp.encoder is not None:
                raise ValueError("framework 'append' trains Doc2VecC on documents with their augmentation appended "
                                 "(Table 5 '-Contrastive'): an encoder has no loss without a contrastive one")
            if hp.contrastive_weight != 1.0:
                raise ValueError("contrastive_weight (lambda) has no effect with framework 'append': no "
                                 "contrastive loss")
        if hp.framework != "simsiam" and hp.predictor_hidden != 64:
            raise ValueError(f"predictor_hidden is SimSiam's: it has no effect with framework {hp.framework!r}")
        if hp.framework != "simclr" and (hp.temperature != 1.0 or hp.denominator != "paper"
                                         or not hp.gather_across_devices):
            raise ValueError("temperature, denominator and gather_across_devices are NT-Xent's: they have no "
                             f"effect with framework {hp.framework!r}")
        if not hp.dictionary_constraint and hp.augmentation not in UNCONSTRAINABLE:
            raise ValueError(f"dictionary_constraint: false is for augmentations {UNCONSTRAINABLE}; "
                             f"{hp.augmentation!r} has no thesaurus candidates (Table 5: '-')")
        if not hp.dictionary_constraint and hp.replacement_min_count is not None:
            raise ValueError("replacement_min_count is the dictionary constraint's corpus count: unset it with "
                             "dictionary_constraint: false")
        bt = hp.augmentation == "back_translation"
        if bt != (hp.back_translation_models is not None) or bt != (hp.back_translation_cache is not None):
            raise ValueError("back_translation_models and back_translation_cache are needed by, and only by, "
                             "augmentation 'back_translation'")
        if not bt and hp.back_translation_max_length != 128:
            raise ValueError("back_translation_max_length is for augmentation 'back_translation' only")
        if bt and len(hp.back_translation_models) != 2:
            raise ValueError("back_translation_models: give the forward and the backward model folders")
        for name in ("min_word_count", "max_vocabulary", "max_words", "replacement_min_count", "predictor_hidden",
                     "back_translation_max_length"):
            if hp[name] is not None and hp[name] < 1:
                raise ValueError(f"{name} must be >= 1, got {hp[name]}")

    # --- vocabulary: from the training documents, or from a checkpoint ----------------------------------
    def setup(self, stage: str) -> None:
        if self.vocabulary is None and stage == "fit":
            documents = self.trainer.datamodule.train_set
            self._set_vocabulary(Vocabulary.from_texts(
                document_text(documents[i], True)[:self.hparams.max_words * 12] for i in range(len(documents))))
        if self.trainer.world_size > 1 and hasattr(self, "predictor"):
            if self.trainer.strategy.root_device.type == "cuda":  # BatchNorm statistics over the global batch
                self.predictor = nn.SyncBatchNorm.convert_sync_batchnorm(self.predictor)
            else:  # torch's SyncBatchNorm is GPU-only
                log.warning("SimSiam's predictor keeps per-device BatchNorm statistics: SyncBatchNorm needs GPUs")
        super().setup(stage)

    def _set_vocabulary(self, vocabulary: Vocabulary) -> None:
        self.vocabulary, self._augmenter = vocabulary, None
        if self.hparams.encoder is None:
            hp, s = self.hparams, self.settings
            self.index = word_index(vocabulary, hp.min_word_count, hp.max_vocabulary)
            counts = torch.tensor([vocabulary.counts[w] for w in self.index], dtype=torch.float64)
            device = next(self.parameters(), torch.empty(0)).device
            self.backbone = Doc2VecC(len(self.index), s["embedding_dim"], counts, s["negative_samples"],
                                     s["corruption"]).to(device)

    def on_save_checkpoint(self, checkpoint: dict) -> None:
        v = self.vocabulary
        checkpoint["deca_vocabulary"] = {"counts": v.counts, "document_frequency": v.document_frequency,
                                         "num_documents": v.num_documents}

    def on_load_checkpoint(self, checkpoint: dict) -> None:
        if "deca_vocabulary" not in checkpoint:
            raise ValueError("not a DECA checkpoint: it has no 'deca_vocabulary'")
        self._set_vocabulary(Vocabulary(**checkpoint["deca_vocabulary"]))

    def augmenter(self) -> DocumentAugmenter:
        hp = self.hparams
        if self.vocabulary is None:
            raise RuntimeError("DECA has no vocabulary yet: it is built in setup('fit') or read from a checkpoint")
        if self._augmenter is None:
            probability = hp.replacement_probability
            if probability is None:
                probability = 0.3 if hp.augmentation == "uninformative" else 1.0
            translator = None
            if hp.augmentation == "back_translation":
                translator = BackTranslator(*hp.back_translation_models, cache_path=hp.back_translation_cache,
                                            max_length=hp.back_translation_max_length)
            self._augmenter = DocumentAugmenter(hp.augmentation, self.vocabulary, hp.replacement_min_count,
                                                probability, hp.wordnet_dir, hp.ppdb_path, translator,
                                                dictionary_constraint=hp.dictionary_constraint)
        return self._augmenter

    # --- the method -------------------------------------------------------------------------------------
    def collator(self, stage: str):
        hp = self.hparams
        if hp.encoder is not None:
            if stage == "predict":
                return DocumentCollator(self.tokenizer, self.max_length, with_title=True)
            return AugmentedTextCollator(self.tokenizer, self.augmenter(), self.max_length, stage != "fit")
        if self.index is None:
            raise RuntimeError("DECA's Doc2VecC has no vocabulary: fit first, or load a checkpoint")
        if stage == "predict":
            return WordDocumentCollator(self.index, hp.max_words)
        s = self.settings
        collator = AppendedAugmentationCollator if hp.framework == "append" else Doc2VecCPairCollator
        return collator(self.index, self.augmenter(), s["window_size"], s["targets_per_document"],
                                    hp.max_words, deterministic=stage != "fit")

    def losses(self, batch: Doc2VecCBatch | Doc2VecCPairBatch | ViewPairBatch) -> dict[str, Tensor]:
        if isinstance(batch, Doc2VecCBatch):  # framework 'append': l_d on the merged documents alone
            h = self.backbone.corrupted(batch.words)  # (B, D)
            terms = self.cbow(self.backbone.hidden(h, batch.contexts), *self.backbone.output_vectors(batch.targets),
                              batch.targets != 0)
            return terms | {"skipped_documents": torch.tensor(float(batch.skipped), device=h.device)}
        terms = {}
        if isinstance(batch, Doc2VecCPairBatch):
            h, h_aug = self.backbone.corrupted(batch.words), self.backbone.corrupted(batch.augmented)  # (B, D)
            hidden = self.backbone.hidden(h, batch.contexts)  # (B, S, D)
            terms |= self.cbow(hidden, *self.backbone.output_vectors(batch.targets), batch.targets != 0)
        else:
            both = self.encoder(torch.cat([batch.view_a.input_ids, batch.view_b.input_ids]),
                                torch.cat([batch.view_a.attention_mask, batch.view_b.attention_mask]))  # (2B, D)
            h, h_aug = both[:len(batch)], both[len(batch):]
        if self.hparams.framework == "simclr":
            terms |= self.contrastive(h, h_aug, batch.doc_index)
        else:
            if self.training and len(batch) < 2:
                raise ValueError("SimSiam's predictor has BatchNorm, which needs >= 2 documents per training "
                                 "batch: raise data.batch_size or set data.drop_last: true")
            terms |= self.contrastive(self.predictor(h), self.predictor(h_aug), h, h_aug)
        terms["skipped_documents"] = torch.tensor(float(batch.skipped), device=h.device)
        return terms

    def embed(self, batch) -> Tensor:
        if self.hparams.encoder is None:
            return self.backbone(batch.words)
        return self.encoder(batch.tokens.input_ids, batch.tokens.attention_mask)
