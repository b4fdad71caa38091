"""Skip-thoughts (Kiros et al., 2015) sentence vectors in plain torch, read from the files the authors released
(github.com/ryankiros/skip-thoughts, "Getting started"): the generic models ``uni_skip.npz`` + ``uni_skip.npz.pkl`` and
``bi_skip.npz`` + ``bi_skip.npz.pkl``, the word tables ``utable.npy`` and ``btable.npy`` and ``dictionary.txt``. CTPE's
Table 4 Skip-thoughts row uses them frozen.

Release layout:

- ``*.npz.pkl``: a pickled dict of the model's options; read here: ``dim_word`` (620) and ``dim`` (2400 uni, 1200
  bi), ``encoder`` (``gru``);
- ``uni_skip.npz``: the GRU encoder ``encoder_W`` (dim_word, 2 dim), ``encoder_b`` (2 dim,), ``encoder_U`` (dim,
  2 dim), ``encoder_Wx`` (dim_word, dim), ``encoder_bx`` (dim,), ``encoder_Ux`` (dim, dim); ``bi_skip.npz`` the same
  plus the right-to-left encoder ``encoder_r_*``; other entries (``Wemb``, the decoders, a training history) are not
  read;
- ``utable.npy`` / ``btable.npy``: a NumPy object array (pickled by Python 2) of one dim_word vector per word, in the
  order of the lines of ``dictionary.txt`` (UTF-8, one word a line), which holds ``UNK`` and ``<eos>``.

One GRU step (Theano ``gru_layer``, gates r then u): ``[r, u] = sigmoid(x W + b + h U)``, ``h~ = tanh(x Wx + bx + r *
(h Ux))``, ``h = u * h_prev + (1 - u) * h~``, from h = 0. A sentence of words w_1..w_n is their table vectors (``UNK``'s
for a word the dictionary lacks) then ``<eos>``'s (the paper: "The EOS token is used"); uni-skip's vector is the last
state of its GRU (2,400), bi-skip's the last states of ``encoder`` over the sentence and ``encoder_r`` over it reversed
(1,200 + 1,200); each is L2-normalised, as the released ``encode`` does by default, and the sentence vector is [uni;
bi] (4,800: "first 2400 from the uni-skip model, and the last 2400 from the bi-skip model").

Pickles are data here, never code: only NumPy's array reconstruction is resolved (:class:`ArrayUnpickler`).
"""

from __future__ import annotations

import pickle
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import torch
import torch.nn.functional as F
from torch import Tensor, nn

from lit_docemb.errors import BadArgument
from lit_docemb.models.elmo import group_units, reverse_within_length, unit_mask

RELEASE_FILES = ("uni_skip.npz", "uni_skip.npz.pkl", "bi_skip.npz", "bi_skip.npz.pkl", "utable.npy", "btable.npy",
                 "dictionary.txt")


class ArrayUnpickler(pickle.Unpickler):
    """Unpickles plain values and NumPy arrays only: any other global (a class, a function) is refused."""

    allowed = frozenset({("numpy", "ndarray"), ("numpy", "dtype"), ("numpy.core.multiarray", "_reconstruct"),
                         ("numpy._core.multiarray", "_reconstruct"), ("numpy.core.multiarray", "scalar"),
                         ("numpy._core.multiarray", "scalar")})

    def find_class(self, module: str, name: str):
        if (module, name) not in self.allowed:
            raise pickle.UnpicklingError(f"refused global {module}.{name}")
        core = getattr(np, "_core", None) or np.core
        return {"ndarray": np.ndarray, "dtype": np.dtype}.get(name) or getattr(core.multiarray, name)


def _unpickle(handle, path: Path):
    try:
        return ArrayUnpickler(handle, encoding="latin1").load()
    except (pickle.UnpicklingError, EOFError, ValueError, TypeError, AttributeError) as err:
        raise BadArgument("folder", f"{str(path)!r} cannot be read as Skip-thoughts' release ({err})") from err


def read_options(path: Path) -> dict:
    """The options dict of a ``*.npz.pkl`` file."""
    with open(path, "rb") as handle:
        options = _unpickle(handle, path)
    if not isinstance(options, dict) or not {"dim_word", "dim"} <= set(options):
        raise BadArgument("folder", f"{str(path)!r} is not a Skip-thoughts options pickle (a dict with dim_word, dim)")
    if options.get("encoder", "gru") != "gru":
        raise BadArgument("folder", f"{str(path)!r}: encoder {options['encoder']!r}, only the released gru is read")
    return options


def read_table(path: Path, dim_word: int) -> np.ndarray:
    """(V, dim_word) float32 of ``utable.npy`` / ``btable.npy`` (an object array of vectors or a float matrix)."""
    with open(path, "rb") as handle:
        try:
            version = np.lib.format.read_magic(handle)
            read_header = np.lib.format.read_array_header_1_0 if version == (1, 0) else \
                np.lib.format.read_array_header_2_0
            _, _, dtype = read_header(handle)
        except ValueError as err:
            raise BadArgument("folder", f"{str(path)!r} is not a .npy file ({err})") from err
        if dtype.hasobject:
            array = _unpickle(handle, path)
        else:
            handle.seek(0)
            array = np.lib.format.read_array(handle, allow_pickle=False)
    rows = [np.asarray(row, dtype=np.float32).reshape(-1) for row in array] if array.dtype.hasobject else \
        list(np.asarray(array, dtype=np.float32).reshape(len(array), -1))
    if not rows or any(len(row) != dim_word for row in rows):
        raise BadArgument("folder", f"{str(path)!r} does not match the options: its vectors are not {dim_word}-d "
                                    "(dim_word of the .npz.pkl)")
    return np.stack(rows)


def read_dictionary(path: Path) -> list[str]:
    """The words of ``dictionary.txt``, one a line (stripped), in table order."""
    text = path.read_bytes().decode("utf-8", "replace")
    lines = text.split("\n")
    return [line.strip() for line in (lines[:-1] if text.endswith("\n") else lines)]


class SkipThoughtGRU(nn.Module):
    """One released GRU encoder (module docstring) with its parameters under their release names."""

    names = ("W", "b", "U", "Wx", "bx", "Ux")

    def __init__(self, dim_word: int, dim: int) -> None:
        super().__init__()
        shapes = {"W": (dim_word, 2 * dim), "b": (2 * dim,), "U": (dim, 2 * dim), "Wx": (dim_word, dim),
                  "bx": (dim,), "Ux": (dim, dim)}
        for name, shape in shapes.items():
            self.register_parameter(name, nn.Parameter(torch.zeros(shape), requires_grad=False))
        self.dim = dim

    def load(self, params, prefix: str, path: Path) -> None:
        """Copies ``<prefix>_<name>`` of an opened npz; a missing entry or another shape stops naming the file."""
        with torch.no_grad():
            for name in self.names:
                key = f"{prefix}_{name}"
                if key not in params.files:
                    raise BadArgument("folder", f"{str(path)!r} has no {key} (not a Skip-thoughts encoder)")
                value = params[key]
                target = getattr(self, name)
                if tuple(value.shape) != tuple(target.shape):
                    raise BadArgument("folder", f"{str(path)!r} does not match its .pkl options: {key} is "
                                                f"{value.shape}, the options give {tuple(target.shape)}")
                target.copy_(torch.from_numpy(np.asarray(value, dtype=np.float32)))

    def forward(self, inputs: Tensor, mask: Tensor) -> Tensor:
        """(N, S, dim_word) and mask (N, S) (1 = step) → the state after each row's last step (N, dim)."""
        gates_in = inputs @ self.W + self.b  # (N, S, 2 dim)
        candidate_in = inputs @ self.Wx + self.bx  # (N, S, dim)
        state = inputs.new_zeros(inputs.shape[0], self.dim)
        for t in range(inputs.shape[1]):
            reset, update = torch.sigmoid(gates_in[:, t] + state @ self.U).chunk(2, dim=-1)
            candidate = torch.tanh(candidate_in[:, t] + reset * (state @ self.Ux))
            new = update * state + (1 - update) * candidate
            keep = mask[:, t].to(inputs.dtype).unsqueeze(-1)
            state = keep * new + (1 - keep) * state
        return state


def dictionary_rows(dictionary: Sequence[str]) -> dict[str, int]:
    """Each word's row in ``dictionary.txt`` (the tables' rows): its first line where a word is listed twice."""
    return {word: row for row, word in reversed(list(enumerate(dictionary)))}


class SkipThoughtsEncoder(nn.Module):
    """Combine-skip sentence vectors (4,800) of sentences given as rows of the released word tables.

    Args:
        dim_word: Word vector size (620).
        uni_dim: uni-skip GRU size (2,400).
        bi_dim: bi-skip GRU size per direction (1,200).
        vocabulary_size: Rows of the word tables (the lines of ``dictionary.txt``).
        eos_row: The row of ``<eos>``.
    """

    def __init__(self, dim_word: int = 620, uni_dim: int = 2400, bi_dim: int = 1200, vocabulary_size: int = 2,
                 eos_row: int = 1) -> None:
        super().__init__()
        self.uni = SkipThoughtGRU(dim_word, uni_dim)
        self.bi_forward = SkipThoughtGRU(dim_word, bi_dim)
        self.bi_backward = SkipThoughtGRU(dim_word, bi_dim)
        # read from the release files, never from a checkpoint (930,911 x 620 each for the generic model)
        self.register_buffer("uni_table", torch.zeros(vocabulary_size, dim_word), persistent=False)
        self.register_buffer("bi_table", torch.zeros(vocabulary_size, dim_word), persistent=False)
        self.eos_row, self.dim = eos_row, uni_dim + 2 * bi_dim

    @classmethod
    def from_folder(cls, folder: str) -> tuple[SkipThoughtsEncoder, list[str]]:
        """The released encoders and tables of ``folder``, and the words of ``dictionary.txt`` (the tables' rows)."""
        root = Path(folder)
        missing = [name for name in RELEASE_FILES if not (root / name).is_file()]
        if missing:
            raise BadArgument("folder", f"{folder!r} lacks {', '.join(missing)}: download the generic models and "
                                        "tables of github.com/ryankiros/skip-thoughts (Getting started) into it")
        uni_options, bi_options = read_options(root / "uni_skip.npz.pkl"), read_options(root / "bi_skip.npz.pkl")
        if uni_options["dim_word"] != bi_options["dim_word"]:
            raise BadArgument("folder", f"uni_skip.npz.pkl and bi_skip.npz.pkl in {folder!r} disagree on dim_word")
        dim_word = int(uni_options["dim_word"])
        dictionary = read_dictionary(root / "dictionary.txt")
        for special in ("UNK", "<eos>"):
            if special not in dictionary:
                raise BadArgument("folder", f"{str(root / 'dictionary.txt')!r} has no {special} line")
        model = cls(dim_word, int(uni_options["dim"]), int(bi_options["dim"]), len(dictionary),
                    dictionary.index("<eos>"))
        for name, table in (("utable.npy", model.uni_table), ("btable.npy", model.bi_table)):
            full = read_table(root / name, dim_word)
            if len(full) != len(dictionary):
                raise BadArgument("folder", f"{str(root / name)!r} has {len(full)} rows, dictionary.txt "
                                            f"{len(dictionary)} words")
            table.copy_(torch.from_numpy(full))
        with np.load(root / "uni_skip.npz", allow_pickle=False) as params:
            model.uni.load(params, "encoder", root / "uni_skip.npz")
        with np.load(root / "bi_skip.npz", allow_pickle=False) as params:
            model.bi_forward.load(params, "encoder", root / "bi_skip.npz")
            model.bi_backward.load(params, "encoder_r", root / "bi_skip.npz")
        return model.requires_grad_(False), dictionary

    def forward(self, word_rows: Tensor, lengths: Tensor) -> Tensor:
        """Table rows (N, L) of N sentences' words (``lengths`` each, padding after) → (N, 4,800); ``<eos>`` is
        appended here."""
        steps = torch.arange(word_rows.shape[1] + 1, device=word_rows.device).unsqueeze(0)  # (1, L + 1)
        rows = torch.cat([word_rows, word_rows.new_zeros(len(word_rows), 1)], dim=1)
        rows = torch.where(steps == lengths.unsqueeze(1), torch.full_like(rows, self.eos_row), rows)
        mask = steps <= lengths.unsqueeze(1)  # (N, L + 1): the words and <eos>
        uni = self.uni(self.uni_table[rows], mask)
        bi_inputs = self.bi_table[rows]
        forward = self.bi_forward(bi_inputs, mask)
        backward = self.bi_backward(reverse_within_length(bi_inputs, lengths + 1), mask)
        bi = torch.cat([forward, backward], dim=-1)
        return torch.cat([F.normalize(uni, dim=-1), F.normalize(bi, dim=-1)], dim=-1)  # (N, 4800)


class FrozenSkipThoughtStates(nn.Module):
    """Skip-thoughts vectors of the sentences in a part, frozen, so that CTPE's parts are sequences of sentence
    vectors: ids (B, T) of words (``first_word_id`` + their table row) each sentence closed by ``sentence_end_id``
    → (B, S, 4,800) and the sentence mask (B, S) (:meth:`units`; a last sentence without its end id counts too). It
    stays in eval mode when its parent trains.

    Args:
        encoder: The loaded :class:`SkipThoughtsEncoder`.
        sentence_end_id: The id that closes a sentence.
        first_word_id: The id of table row 0.
    """

    def __init__(self, encoder: SkipThoughtsEncoder, sentence_end_id: int = 1, first_word_id: int = 2) -> None:
        super().__init__()
        self.encoder = encoder.requires_grad_(False).eval()
        self.sentence_end_id, self.first_word_id, self.dim = sentence_end_id, first_word_id, encoder.dim

    def train(self, mode: bool = True) -> FrozenSkipThoughtStates:
        super().train(mode)
        self.encoder.eval()
        return self

    def units(self, input_ids: Tensor, attention_mask: Tensor) -> tuple[Tensor, Tensor]:
        """Word and end ids (B, T) with their mask → sentence vectors (B, S, 4,800) and sentence mask (B, S)."""
        with torch.no_grad():
            members, lengths, count = group_units(input_ids, attention_mask, self.sentence_end_id)
            rows = torch.where(members > 0, members - self.first_word_id, torch.zeros_like(members))  # (N, L)
            vectors = self.encoder(rows, lengths)  # (N, 4800)
            mask = unit_mask(count)  # (B, S)
            out = vectors.new_zeros(*mask.shape, self.dim)
            out[mask.bool()] = vectors
            return out, mask
