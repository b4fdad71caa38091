"""The shared base of every method: optimizer/scheduler wiring, loss summation, logging, predict.

A method subclasses :class:`EmbeddingMethod` and implements three things: ``collator(stage)`` (documents →
its typed batch, run in dataloader workers), ``losses(batch)`` (batch → ``{"name_loss": tensor, ...}``)
and ``embed(tokens)`` (tokens → document embeddings). The total loss is the weighted sum of the terms whose
names end in ``_loss``; every term is logged as ``train/<name>`` or ``val/<name>`` (in training the total every
step, the other terms at logging steps: :func:`~lit_docemb.methods.callbacks.logging_step`).

GradCache is a training mode of this base: with ``grad_cache_token_budget`` set, a training batch is encoded
in sub-batches of at most that many padded tokens and its contrastive loss is still computed over the whole
batch (and across devices), so the batch size is no longer bounded by activation memory. A method opts in by
implementing ``cacheable(batch)`` (see :class:`~lit_docemb.methods.grad_cache.CacheableBatch`).
"""

from __future__ import annotations

import inspect
from abc import ABC, abstractmethod
from collections.abc import Callable, Iterator

import lightning as L
import torch
from lightning.pytorch.cli import LRSchedulerCallable, OptimizerCallable
from lightning.pytorch.core.mixins.hparams_mixin import _given_hyperparameters
from lightning.pytorch.strategies import DeepSpeedStrategy
from lightning.pytorch.utilities import rank_zero_info, rank_zero_warn
from torch import Tensor
from torch.nn.parallel import DistributedDataParallel

from lit_docemb.config_block import ConfigBlock
from lit_docemb.data.core.batches import DocumentBatch
from lit_docemb.data.caches.token_cache import TokenCache
from lit_docemb.data.core.contract import MethodBatches
from lit_docemb.data.core.tokens import split_rows_by_token_budget
from lit_docemb.errors import ConfigError, require
from lit_docemb.methods import schedulers
from lit_docemb.methods.callbacks import RandomStateCheckpoint, logging_step
from lit_docemb.methods.checkpoints import class_at
from lit_docemb.methods.grad_cache import (
    CacheableBatch,
    GradCacheOutput,
    grad_cache_step,
)
from lit_docemb.methods.frozen_heap import FrozenHeap
from lit_docemb.methods.guards import FailFast, NonFiniteGuard
from lit_docemb.methods.progress import shows_step_loss
from lit_docemb.methods.retention import (
    EmbeddingAnchor,
    Retention,
    drop_backbone_gradients,
    encoder_of,
    freeze,
    parameter_groups,
    scale_learning_rates,
)


class EmbeddingMethod(L.LightningModule, ABC):
    """Base LightningModule of the document-embedding methods.

    Args:
        optimizer: Optimizer factory (``class_path`` + ``init_args`` in YAML), called with the parameters;
            ``None`` uses AdamW at the method's paper learning rate (:attr:`default_learning_rate`).
        scheduler: Optional learning-rate scheduler factory, stepped every optimizer step.
        grad_cache_token_budget: Train with GradCache (Gao et al. 2021): encode each training batch in
            sub-batches of at most this many padded tokens (rows x longest row) and backpropagate the
            whole-batch loss through cached embedding gradients. Loss and gradients are those of the whole
            batch (dropout masks replayed); memory is that of one sub-batch. ``None``: plain training. Unlike
            gradient accumulation, it keeps every row of the batch as a negative of every other.
        retention: Options that keep what the pretrained encoder knew (:class:`~lit_docemb.methods.retention.
            Retention`: an anchoring term, layer-wise learning-rate decay, frozen layers); ``None``: anchoring at
            the method's :attr:`default_anchor_weight` alone (none where it is 0).
    """

    #: Learning rate of the AdamW used when no optimizer is configured (the method's paper value).
    default_learning_rate: float = 1e-4

    #: Weight of the anchoring term when no ``retention`` is configured (``Retention(anchor_weight=...)``); 0: none.
    default_anchor_weight: float = 0.0

    #: The keys of :meth:`predict_step`'s output holding one vector per returned id, of a width the model fixes:
    #: what ``embed`` writes. Outputs relative to a batch (CoLDE's similarity matrices, attention maps) are not.
    vector_outputs: tuple[str, ...] = ("embeddings",)

    #: The logged measure a run's best checkpoint is chosen by, and whether lower or higher is better:
    #: ``(metric, "min" | "max")``, read by :class:`~lit_docemb.methods.callbacks.RunCheckpoint` when its own
    #: ``monitor`` is unset. ``None``: no measure; the latest checkpoint is kept.
    checkpoint_monitor: tuple[str, str] | None = None

    #: Multipliers of the ``*_loss`` terms in the total; a method sets these from its own arguments.
    loss_weights: dict[str, float]

    #: Set by a method that reads each document as token ids cached on disk (Graph-RoBERTa's passages, DocSplit's
    #: sentences, CoLDE's sections): the DataModule then hands its collators that cache's rows (see :meth:`setup`).
    token_cache: TokenCache | None = None

    def __init__(self, optimizer: OptimizerCallable | None = None,
                 scheduler: LRSchedulerCallable | None = None, grad_cache_token_budget: int | None = None,
                 retention: Retention | None = None) -> None:
        super().__init__()
        require(grad_cache_token_budget is None or grad_cache_token_budget >= 1, "grad_cache_token_budget",
                ">= 1 (tokens per sub-batch) or null", grad_cache_token_budget)
        self.optimizer_factory = optimizer
        self.scheduler_factory = scheduler
        self.grad_cache_token_budget = grad_cache_token_budget
        self.loss_weights = {}
        if retention is None and self.default_anchor_weight > 0:
            retention = Retention(anchor_weight=self.default_anchor_weight)
        if retention is not None:
            retention.check()
        self.retention = retention
        #: Whether ``retention.head_warmup_steps`` is the method's own default rather than a configured value: a
        #: default as long as the run is cut to half of it when training starts, a configured one is kept (warned).
        self.head_warmup_follows_run = False
        self.anchor: EmbeddingAnchor | None = None  # the frozen starting encoder, taken in setup("fit")
        self.last_train_loss: Tensor | None = None  # the last training step's total loss, for the progress bar

    def save_method_hyperparameters(self, ignore: list[str]) -> None:
        """``save_hyperparameters`` from the calling ``__init__``'s own arguments.

        LightningCLI hands every module it builds under ``--model`` the hyperparameters of that top-level
        module; a method built inside another (a classifier's ``backbone``) would record the outer module's
        arguments instead of its own, so those given hyperparameters are set aside when their class is not ours.
        A config block given as an object (a method built in Python: an :class:`~lit_docemb.models.EncoderSpec`, a
        :class:`~lit_docemb.data.PassageSpec`, any :class:`~lit_docemb.config_block.ConfigBlock`) is saved as the
        plain data LightningCLI would have saved (its ``class_path`` / ``init_args``): checkpoints hold no objects.
        """
        given = _given_hyperparameters.get()
        token = _given_hyperparameters.set(None) if given and class_at(given.get("_class_path")) is not type(
            self) else None
        try:
            self.save_hyperparameters(ignore=ignore, frame=inspect.currentframe().f_back)
        finally:
            if token is not None:
                _given_hyperparameters.reset(token)
        for name, value in self.hparams.items():
            if isinstance(value, ConfigBlock):
                self.hparams[name] = value.hyperparameters()

    # --- what a method implements -------------------------------------------------------------------
    @abstractmethod
    def collator(self, stage: str) -> Callable:
        """The function turning a list of documents into this method's batch for ``stage``
        ("fit", "validate" or "predict"). It must be picklable: it runs in dataloader workers."""

    @abstractmethod
    def losses(self, batch) -> dict[str, Tensor]:
        """Named loss terms (and extra metrics) of one batch."""

    @abstractmethod
    def embed(self, batch: DocumentBatch) -> Tensor:
        """Document embeddings (B, D) of a batch of whole documents."""

    def document_collator(self, stage: str) -> Callable:
        """The collator of whole documents (the batches :meth:`embed` reads) for ``stage``: what a wrapper that
        fine-tunes this method's encoder on whole documents (classification, dense retrieval) batches with.
        Default: the ``"predict"`` collator in every stage; a method whose documents are cut differently in
        training (Graph-RoBERTa's ``max_passages``) returns its training reading for ``"fit"``."""
        return self.collator("predict")

    def cacheable(self, batch) -> CacheableBatch:
        """The training batch as rows that GradCache encodes in sub-batches; methods that support
        ``grad_cache_token_budget`` implement it."""
        raise TypeError(f"{type(self).__name__} does not support GradCache: unset model.init_args."
                        f"grad_cache_token_budget")

    def similarity(self, queries: Tensor, candidates: Tensor) -> Tensor:
        """Ranking scores (Q, N) between ``embed`` outputs of queries and candidates: cosine, unless a method's
        representation has its own similarity (CTPE's pairs)."""
        queries = torch.nn.functional.normalize(queries.float(), dim=-1)
        return queries @ torch.nn.functional.normalize(candidates.float(), dim=-1).T

    # --- the shared step skeleton ------------------------------------------------------------------
    def total_loss(self, terms: dict[str, Tensor]) -> Tensor:
        names = [k for k in terms if k.endswith("_loss")]
        if not names:
            raise ValueError(f"{type(self).__name__}.losses returned no '*_loss' term: {sorted(terms)}")
        weights = self.loss_weights | ({"anchor_loss": self.retention.anchor_weight} if self.retention else {})
        return sum(weights.get(k, 1.0) * terms[k] for k in names)

    def _shared_step(self, batch, stage: str) -> Tensor:
        if self.anchor is not None and stage == "train":
            with self.anchor.capture():
                terms = self.losses(batch)
            terms |= self.anchor.terms()
        else:
            terms = self.losses(batch)
        loss = self.total_loss(terms)
        self._log_terms(stage, loss, terms, len(batch))
        return loss

    def _log_terms(self, stage: str, loss: Tensor, terms: dict[str, Tensor], batch_size: int) -> None:
        """Logs the total loss (in the progress bar) and every term. In training, each value is the step's, logged
        only at logging steps, where the loggers read them: a ``self.log`` call costs about 0.3 ms of host time,
        more than the rest of the step's hooks together (docs/performance.md). Between them the progress bar shows
        ``last_train_loss``, the step's loss kept detached on its device (:class:`~lit_docemb.methods.progress.
        RateProgressBar`); with another progress bar the total loss is logged every step."""
        on_step = stage == "train"
        if on_step:
            self.last_train_loss = loss.detach()
            if not logging_step(self._trainer):
                if not shows_step_loss(self._trainer):
                    self.log(f"{stage}/loss", self.last_train_loss, prog_bar=True, on_step=True, on_epoch=False,
                             batch_size=batch_size)
                return
        self.log(f"{stage}/loss", loss.detach(), prog_bar=True, on_step=on_step, on_epoch=not on_step,
                 batch_size=batch_size, sync_dist=not on_step)
        for name, value in terms.items():
            self.log(f"{stage}/{name}", value.detach().float(), on_step=on_step, on_epoch=not on_step,
                     batch_size=batch_size, sync_dist=not on_step)

    def training_step(self, batch, batch_idx: int) -> Tensor:
        if self.grad_cache_token_budget is None:
            return self._shared_step(batch, "train")
        out = self.grad_cache_forward(batch)
        self._log_terms("train", out.loss, out.terms, len(batch))
        if logging_step(self._trainer):
            self.log("train/grad_cache_sub_batches", torch.full((), float(out.sub_batches), device=self.device),
                     on_step=True)
        return out.backward_loss  # its backward gives the whole batch's gradient; its value is not the loss

    def grad_cache_forward(self, batch) -> GradCacheOutput:
        """A training batch through GradCache: the whole-batch loss and terms, and the scalar whose single
        ``backward()`` puts the whole batch's gradient into every parameter."""
        cacheable = self.cacheable(batch)
        rows = split_rows_by_token_budget(cacheable.costs, self.grad_cache_token_budget, sort_by_length=True)
        trainer = self._trainer
        ddp = trainer is not None and isinstance(trainer.strategy.model, DistributedDataParallel)
        return grad_cache_step([cacheable.take(index) for index in rows], cacheable.encode, cacheable.loss,
                               [p for p in self.parameters() if p.requires_grad], rows=rows, total=self.total_loss,
                               accumulate_in_place=not ddp)

    def validation_step(self, batch, batch_idx: int) -> Tensor:
        return self._shared_step(batch, "val")

    def test_step(self, batch, batch_idx: int) -> Tensor:
        return self._shared_step(batch, "test")

    def predict_step(self, batch: DocumentBatch, batch_idx: int) -> dict:
        return {"ids": batch.ids, "embeddings": self.embed(batch).float().cpu()}

    def configure_callbacks(self):
        """The guards of :mod:`lit_docemb.methods.guards`, the random-state checkpointing that makes a resume exact
        (:class:`~lit_docemb.methods.callbacks.RandomStateCheckpoint`) and the frozen heap of training
        (:class:`~lit_docemb.methods.frozen_heap.FrozenHeap`), with their defaults, unless the trainer's callbacks
        already configure one of the type."""
        return [callback() for callback in (NonFiniteGuard, FailFast, RandomStateCheckpoint, FrozenHeap)
                if not any(isinstance(c, callback) for c in self.trainer.callbacks)]

    def setup(self, stage: str) -> None:
        """Checks the configuration against the trainer and the corpus, and connects the trainer's DataModule
        (:meth:`~lit_docemb.data.core.datamodule.DocumentDataModule.connect`: this method's collators and token
        cache). A subclass that overrides it calls it."""
        if stage == "fit" and self.grad_cache_token_budget is not None:
            self._check_grad_cache()
        if stage == "fit" and self.retention is not None:
            self._apply_retention()
        datamodule = getattr(self.trainer, "datamodule", None) if self._trainer is not None else None
        if stage == "fit" and datamodule is not None:
            self.check_corpus(datamodule)
        if isinstance(datamodule, MethodBatches):  # a lit_docemb DataModule; another one brings its own collate_fn
            datamodule.connect(self.collator, self.token_cache)

    def check_corpus(self, datamodule) -> None:
        """Refuses, before training starts (the DataModule is set up), a corpus this method's configuration cannot
        use, with a :class:`~lit_docemb.errors.ConfigError` naming the key; a method with such a requirement
        overrides it, a wrapper hands it to its backbone."""

    def _apply_retention(self) -> None:
        """Freezes the configured layers and takes the anchoring term's frozen copy of the encoder: in ``setup``,
        before DDP wraps the model and before a resumed run's weights are restored (so the copy is the starting
        encoder's)."""
        retention, key = self.retention, "model.init_args.retention"
        encoder_of(self, key)  # a method without a pretrained encoder stops here
        if retention.anchor_weight > 0 and self.grad_cache_token_budget is not None:
            raise ConfigError(f"{key}.init_args.anchor_weight with grad_cache_token_budget: the anchoring term is "
                              f"not computed through GradCache's sub-batches; unset one of them")
        deepspeed = self._trainer is not None and isinstance(self.trainer.strategy, DeepSpeedStrategy)
        if retention.head_warmup_steps and deepspeed:
            raise ConfigError(f"{key}.init_args.head_warmup_steps is not supported with DeepSpeed: ZeRO holds the "
                              f"gradients partitioned, where the backbone's cannot be dropped (masked-LM training "
                              f"sets it by default on a checkpoint without a masked-LM head); use strategy: ddp or "
                              f"set it to 0")
        freeze(self, retention)
        if retention.anchor_weight > 0 and self.anchor is None:
            self.anchor = EmbeddingAnchor(encoder_of(self), retention.anchor_distance)

    def _check_grad_cache(self) -> None:
        """Refuses, before training starts, the combinations in which GradCache would be wrong."""
        key = "model.init_args.grad_cache_token_budget"
        if type(self).cacheable is EmbeddingMethod.cacheable:
            raise ConfigError(f"{key} is set but {type(self).__name__} does not support GradCache: unset it")
        if not self.automatic_optimization:
            raise ConfigError(f"{key} needs automatic optimisation (the returned loss is backpropagated once)")
        if isinstance(self.trainer.strategy, DeepSpeedStrategy):
            raise ConfigError(f"{key} is not supported with DeepSpeed: ZeRO partitions parameters "
                             f"and gradients, which GradCache's gradient buffer assumes whole. Use "
                             f"strategy: ddp (GradCache already removes the activation memory limit), or unset "
                             f"{key} and keep DeepSpeed.")
        if str(self.trainer.precision) in ("16-mixed", "16"):
            raise ConfigError(f"{key} with precision {self.trainer.precision!r}: fp16 loss scaling does not reach "
                             f"the sub-batches' backward passes, whose fp16 gradients may underflow. Use precision: "
                             f"bf16-mixed or 32-true.")

    # --- optimisation -------------------------------------------------------------------------------
    def configure_optimizers(self):
        parameters = self.optimizer_parameters()
        if self.optimizer_factory is None:  # fused on CUDA: NonFiniteGuard then skips without waiting for the GPU
            fused = {"fused": True} if self.device.type == "cuda" else {}
            optimizer = torch.optim.AdamW(parameters, lr=self.default_learning_rate, **fused)
        else:
            optimizer = self.optimizer_factory(parameters)
        scale_learning_rates(optimizer)  # retention's layer-wise rates; before a scheduler reads them
        if self.scheduler_factory is None:
            return optimizer
        scheduler = self.scheduler_factory(optimizer)
        return {"optimizer": optimizer, "lr_scheduler": {"scheduler": scheduler, "interval": "step"}}

    def optimizer_parameters(self) -> Iterator[Tensor] | list[dict]:
        """What the optimizer trains: the parameters, or groups of them each with an ``lr_scale`` (the optimizer's
        rate times it; retention's layer-wise rates, a classifier's head rate)."""
        changes = self.retention is not None and self.retention.changes_optimisation
        return parameter_groups(self, self.retention) if changes else self.parameters()

    def on_before_optimizer_step(self, optimizer) -> None:
        """Retention's ``head_warmup_steps``: the backbone's gradients are dropped before the first steps (after
        the guards read them, before gradient clipping), so only the weights beside it move."""
        if self.retention is not None and self.trainer.global_step < self.retention.head_warmup_steps:
            drop_backbone_gradients(encoder_of(self))

    def on_train_start(self) -> None:
        """Gives a :class:`~lit_docemb.methods.schedulers.LinearWarmupDecay` without ``total_steps`` the run
        length, and cuts a default head warm-up as long as the run to half of it (a configured one is warned of).
        Not in ``configure_optimizers``: asking for ``estimated_stepping_batches`` there builds the train loader before
        a resumed run's loop state is restored, and Lightning then never gives the loader its saved position
        (the resumed epoch would restart from its first batch)."""
        for config in self.trainer.lr_scheduler_configs:
            if isinstance(config.scheduler, schedulers.LinearWarmupDecay) and config.scheduler.total_steps is None:
                config.scheduler.set_total_steps(int(self.trainer.estimated_stepping_batches))
        warmup = self.retention.head_warmup_steps if self.retention is not None else 0
        steps = self.trainer.estimated_stepping_batches if warmup else 0
        if not warmup or warmup < steps:  # no head warm-up, or the backbone trains after it
            return
        if self.head_warmup_follows_run:
            self.retention.head_warmup_steps = int(steps) // 2
            rank_zero_info(f"{type(self).__name__}'s default head warm-up ({warmup} steps) is cut to half of this "
                           f"run's {steps:g} optimizer steps ({self.retention.head_warmup_steps}), so that the "
                           f"encoder's backbone trains too; set model.init_args.retention to choose")
        else:
            rank_zero_warn(f"model.init_args.retention.init_args.head_warmup_steps {warmup} covers the whole run "
                           f"({steps:g} optimizer steps): the encoder's backbone will not train; lower it or train "
                           f"longer")
