"""Block-sparse attention masks for :func:`starling.nn.functional.flex_attention`: ``BlockMask``,
``create_block_mask`` and the mask combinators (PyTorch's ``torch.nn.attention.flex_attention``
names and layout).

The ``(Q_LEN, KV_LEN)`` score matrix is cut into tiles of ``Q_BLOCK x KV_BLOCK``. Per query block,
a ``BlockMask`` lists the key / value blocks to visit, in two kinds:

* *partial* blocks (``kv_num_blocks`` / ``kv_indices``): some of their pairs are masked, so
  ``mask_mod`` is still applied inside them;
* *full* blocks (``full_kv_num_blocks`` / ``full_kv_indices``): every pair attends, ``mask_mod``
  is not evaluated there.

Blocks in neither list are skipped: their cost is never paid (sliding windows, causal and
document masks are mostly empty blocks). Pairs past ``KV_LEN`` in the last block are always
masked.
"""
from __future__ import annotations

import numpy as np

from .. import Array
from .. import numpy as snp
from .. import tree

__all__ = ["BlockMask", "create_block_mask", "create_mask", "and_masks", "or_masks", "noop_mask"]

# Elements of the (chunk of the) dense mask create_block_mask evaluates at once: bounds the
# memory of the index arithmetic a mask_mod does (int32 temporaries of this many elements).
_CHUNK_ELEMENTS = 1 << 23


def noop_mask(b, h, q_idx, kv_idx):
    """The mask_mod that masks nothing (every pair attends)."""
    shape = snp.broadcast_shapes(snp.asarray(q_idx).shape, snp.asarray(kv_idx).shape)
    return snp.ones(shape, dtype=snp.bool_)


def and_masks(*mask_mods):
    """The mask_mod true where all of ``mask_mods`` are (no argument: :func:`noop_mask`)."""
    def mask(b, h, q_idx, kv_idx):
        out = noop_mask(b, h, q_idx, kv_idx)
        for m in mask_mods:
            out = snp.logical_and(out, m(b, h, q_idx, kv_idx))
        return out
    return mask


def or_masks(*mask_mods):
    """The mask_mod true where any of ``mask_mods`` is (no argument: masks everything)."""
    def mask(b, h, q_idx, kv_idx):
        out = snp.logical_not(noop_mask(b, h, q_idx, kv_idx))
        for m in mask_mods:
            out = snp.logical_or(out, m(b, h, q_idx, kv_idx))
        return out
    return mask


def _block_sizes(op, block_size):
    if isinstance(block_size, int):
        block_size = (block_size, block_size)
    if (not isinstance(block_size, tuple) or len(block_size) != 2
            or not all(isinstance(s, int) and s > 0 for s in block_size)):
        raise ValueError(f"{op}: BLOCK_SIZE must be a positive int or a pair of them "
                         f"(Q_BLOCK, KV_BLOCK), got {block_size!r}")
    return block_size


def _bh(op, name, n):
    if n is None:
        return 1
    if not isinstance(n, int) or n < 1:
        raise ValueError(f"{op}: {name} must be None (broadcast) or a positive int, got {n!r}")
    return n


def _mask_values(mask_mod, b, h, q_idx, kv_idx, shape, op, lengths):
    # Indices of the block-padded grid past the sequences are clamped to the last position, so
    # mask_mod only ever sees real positions (it may index arrays of length Q_LEN / KV_LEN);
    # callers mask the padded positions out.
    q_len, kv_len = lengths
    out = snp.asarray(mask_mod(b, h, snp.minimum(q_idx, q_len - 1),
                               snp.minimum(kv_idx, kv_len - 1)))
    if out.dtype != snp.bool_:
        raise TypeError(f"{op}: mask_mod must return booleans, got {out.dtype}")
    return snp.broadcast_to(out, shape)


class BlockMask:
    """Which ``(Q_BLOCK, KV_BLOCK)`` tiles of the score matrix attention visits.

    Attributes (``NQB = ceil(Q_LEN / Q_BLOCK)``, ``NKB = ceil(KV_LEN / KV_BLOCK)``; ``Bm`` / ``Hm``
    are 1 for a mask broadcast over batch / heads):
        kv_num_blocks: ``(Bm, Hm, NQB)`` int32: partial blocks of each query block.
        kv_indices: ``(Bm, Hm, NQB, P)`` int32: their key / value block indices, first
            ``kv_num_blocks`` entries used (``P <= NKB``; a mask made eagerly keeps only as
            many columns as the busiest row needs).
        full_kv_num_blocks, full_kv_indices: the same for full blocks ``(Bm, Hm, NQB, F)``, or
            None (then every visited block is partial).
        partial_mask: ``(Bm, Hm, NQB, P, Q_BLOCK, KV_BLOCK)`` bool: ``mask_mod`` evaluated on the
            partial blocks (kept so that each call does not evaluate it again), or None.
        seq_lengths: ``(Q_LEN, KV_LEN)``; BLOCK_SIZE: ``(Q_BLOCK, KV_BLOCK)``; mask_mod: the
            function applied inside partial blocks.

    A BlockMask is a pytree (the arrays are its leaves), so it can be passed to compiled and
    transformed functions. Build one with :func:`create_block_mask` or
    :meth:`BlockMask.from_kv_blocks`.
    """

    def __init__(self, kv_num_blocks, kv_indices, full_kv_num_blocks, full_kv_indices,
                 partial_mask, seq_lengths, BLOCK_SIZE, mask_mod):  # noqa: N803 (PyTorch's name)
        self.kv_num_blocks = kv_num_blocks
        self.kv_indices = kv_indices
        self.full_kv_num_blocks = full_kv_num_blocks
        self.full_kv_indices = full_kv_indices
        self.partial_mask = partial_mask
        self.seq_lengths = tuple(seq_lengths)
        self.BLOCK_SIZE = tuple(BLOCK_SIZE)
        self.mask_mod = noop_mask if mask_mod is None else mask_mod

    @classmethod
    def from_kv_blocks(cls, kv_num_blocks, kv_indices, full_kv_num_blocks=None,
                       full_kv_indices=None, BLOCK_SIZE=128, mask_mod=None,  # noqa: N803
                       seq_lengths=None):
        """A BlockMask from its block lists (layout of the class docstring).

        ``seq_lengths`` defaults to ``(NQB * Q_BLOCK, NKB * KV_BLOCK)`` with ``NKB`` the last
        dim of ``kv_indices``. Raises ValueError for inconsistent shapes.
        """
        op = "BlockMask.from_kv_blocks"
        qb, kb = _block_sizes(op, BLOCK_SIZE)
        kv_num_blocks, kv_indices = snp.asarray(kv_num_blocks), snp.asarray(kv_indices)
        if kv_num_blocks.ndim != 3 or kv_indices.ndim != 4 or \
                kv_indices.shape[:3] != kv_num_blocks.shape:
            raise ValueError(f"{op}: kv_num_blocks must be (B, H, NQB) and kv_indices "
                             f"(B, H, NQB, NKB), got {kv_num_blocks.shape} and "
                             f"{kv_indices.shape}")
        if (full_kv_num_blocks is None) != (full_kv_indices is None):
            raise ValueError(f"{op}: pass both full_kv_num_blocks and full_kv_indices, or "
                             "neither")
        if full_kv_num_blocks is not None:
            full_kv_num_blocks = snp.asarray(full_kv_num_blocks)
            full_kv_indices = snp.asarray(full_kv_indices)
            if full_kv_num_blocks.shape != kv_num_blocks.shape or \
                    full_kv_indices.shape[:3] != kv_num_blocks.shape:
                raise ValueError(f"{op}: full_kv_num_blocks {full_kv_num_blocks.shape} / "
                                 f"full_kv_indices {full_kv_indices.shape} do not match "
                                 f"kv_num_blocks {kv_num_blocks.shape}")
        if seq_lengths is None:
            seq_lengths = (kv_num_blocks.shape[2] * qb, kv_indices.shape[3] * kb)
        i32 = snp.int32
        full = None if full_kv_num_blocks is None else full_kv_num_blocks.astype(i32)
        fidx = None if full_kv_indices is None else full_kv_indices.astype(i32)
        return cls(kv_num_blocks.astype(i32), kv_indices.astype(i32), full, fidx, None,
                   seq_lengths, (qb, kb), mask_mod)

    @property
    def shape(self):
        """``(Bm, Hm, Q_LEN, KV_LEN)``."""
        return tuple(self.kv_num_blocks.shape[:2]) + self.seq_lengths

    def num_blocks(self):
        """``(NQB, NKB)``: query and key / value blocks."""
        (L, S), (qb, kb) = self.seq_lengths, self.BLOCK_SIZE
        return -(-L // qb), -(-S // kb)

    def to_dense(self):
        """``(Bm, Hm, NQB, NKB)`` bool: the blocks visited (partial or full)."""
        nkb = self.num_blocks()[1]
        out = _block_map(self.kv_num_blocks, self.kv_indices, nkb)
        if self.full_kv_num_blocks is not None:
            out = out | _block_map(self.full_kv_num_blocks, self.full_kv_indices, nkb)
        return out

    def sparsity(self):
        """Percentage of blocks skipped (a Python float; needs concrete arrays)."""
        dense = np.asarray(self.to_dense())
        return 100.0 * (1.0 - dense.mean()) if dense.size else 0.0

    def with_partial_mask(self):
        """This mask with ``partial_mask`` evaluated (a no-op when it already is)."""
        if self.partial_mask is not None:
            return self
        pm = _partial_tiles(self)
        return BlockMask(self.kv_num_blocks, self.kv_indices, self.full_kv_num_blocks,
                         self.full_kv_indices, pm, self.seq_lengths, self.BLOCK_SIZE,
                         self.mask_mod)

    def __repr__(self):
        B, H, L, S = self.shape
        return (f"BlockMask(shape=({B}, {H}, {L}, {S}), BLOCK_SIZE={self.BLOCK_SIZE}, "
                f"partial={self.kv_indices.shape[-1]}, "
                f"full={None if self.full_kv_indices is None else self.full_kv_indices.shape[-1]}"
                f", mask_mod={getattr(self.mask_mod, '__name__', self.mask_mod)})")


def _bm_flatten(m):
    return ((m.kv_num_blocks, m.kv_indices, m.full_kv_num_blocks, m.full_kv_indices,
             m.partial_mask), (m.seq_lengths, m.BLOCK_SIZE, m.mask_mod))


def _bm_unflatten(aux, children):
    return BlockMask(*children, *aux)


tree.register_node(BlockMask, _bm_flatten, _bm_unflatten)


def _block_map(num, idx, nkb):
    """``(B, H, NQB, NKB)`` bool: block ``j`` is among the first ``num`` entries of ``idx``."""
    used = snp.arange(idx.shape[-1], dtype=snp.int32) < num[..., None]
    hit = (idx[..., :, None] == snp.arange(nkb, dtype=snp.int32)) & used[..., None]
    return snp.any(hit, axis=-2)


def block_indices(op, q_len, kv_len, block_size):
    """Index arrays of the padded grid: ``q_idx (NQB, Q_BLOCK)``, ``kv_idx (NKB, KV_BLOCK)``."""
    qb, kb = block_size
    nqb, nkb = -(-q_len // qb), -(-kv_len // kb)
    q = snp.reshape(snp.arange(nqb * qb, dtype=snp.int32), (nqb, qb))
    kv = snp.reshape(snp.arange(nkb * kb, dtype=snp.int32), (nkb, kb))
    return q, kv


def _partial_tiles(m):
    """``mask_mod`` on the partial blocks of ``m``: ``(Bm, Hm, NQB, P, Q_BLOCK, KV_BLOCK)``
    bool, pairs past ``KV_LEN`` False."""
    Bm, Hm, nqb, P = m.kv_indices.shape
    qb, kb = m.BLOCK_SIZE
    L, S = m.seq_lengths
    b = snp.reshape(snp.arange(Bm, dtype=snp.int32), (Bm, 1, 1, 1, 1, 1))
    h = snp.reshape(snp.arange(Hm, dtype=snp.int32), (1, Hm, 1, 1, 1, 1))
    q, _ = block_indices("flex_attention", L, S, m.BLOCK_SIZE)
    q = snp.reshape(q, (1, 1, nqb, 1, qb, 1))
    kv = (snp.reshape(m.kv_indices, (Bm, Hm, nqb, P, 1, 1)) * kb
          + snp.reshape(snp.arange(kb, dtype=snp.int32), (1, 1, 1, 1, 1, kb)))
    shape = (Bm, Hm, nqb, P, qb, kb)
    return _mask_values(m.mask_mod, b, h, q, kv, shape, "flex_attention", (L, S)) & (kv < S)


def create_mask(mask_mod, B, H, Q_LEN, KV_LEN):  # noqa: N803 (PyTorch's names)
    """The dense mask ``(B, H, Q_LEN, KV_LEN)`` bool of ``mask_mod`` (B / H None: 1)."""
    B, H = _bh("create_mask", "B", B), _bh("create_mask", "H", H)
    b = snp.reshape(snp.arange(B, dtype=snp.int32), (B, 1, 1, 1))
    h = snp.reshape(snp.arange(H, dtype=snp.int32), (1, H, 1, 1))
    q = snp.reshape(snp.arange(Q_LEN, dtype=snp.int32), (1, 1, Q_LEN, 1))
    kv = snp.reshape(snp.arange(KV_LEN, dtype=snp.int32), (1, 1, 1, KV_LEN))
    return _mask_values(mask_mod, b, h, q, kv, (B, H, Q_LEN, KV_LEN), "create_mask",
                        (Q_LEN, KV_LEN))


def _sorted_lists(sel):
    """Counts ``(B, H, NQB)`` and indices ``(B, H, NQB, NKB)`` (selected blocks first, in
    ascending order) of the True entries of ``sel``."""
    num = snp.sum(sel, axis=-1, dtype=snp.int32)
    idx = snp.argsort(snp.logical_not(sel), axis=-1, stable=True).astype(snp.int32)
    return num, idx


def _compact(num, idx):
    """Drops the index columns no row uses (only for concrete arrays: a traced mask keeps all
    ``NKB`` columns, as the width must be known when tracing)."""
    if not isinstance(num, Array):
        return idx
    width = int(np.max(np.asarray(num), initial=0))
    return idx[..., :width]


def create_block_mask(mask_mod, B, H, Q_LEN, KV_LEN, device=None,  # noqa: N803 (PyTorch's)
                      BLOCK_SIZE=128, _compile=False):
    """The :class:`BlockMask` of ``mask_mod``.

    Args:
        mask_mod: ``mask_mod(b, h, q_idx, kv_idx) -> bool`` written with ``starling.numpy``
            operations; called with broadcastable int32 index arrays (so it must act
            elementwise: comparisons, arithmetic, ``where``, indexing captured arrays with the
            indices), True where query ``q_idx`` may attend to key ``kv_idx``. It only ever
            sees indices below ``Q_LEN`` / ``KV_LEN`` (the block-padded grid's extra positions
            are clamped, and their values ignored).
        B, H: batch and heads of the mask, or None for a mask broadcast over them.
        Q_LEN, KV_LEN: query / key sequence lengths.
        device: accepted for PyTorch compatibility (ignored).
        BLOCK_SIZE: ``int`` or ``(Q_BLOCK, KV_BLOCK)``; default 128.
    Returns:
        A BlockMask whose blocks where ``mask_mod`` is True everywhere are *full*, where it is
        True somewhere *partial*, the rest skipped. ``mask_mod`` is evaluated on the whole
        ``(B, H, Q_LEN, KV_LEN)`` grid (in chunks of query blocks, bounding memory), so its
        cost is paid once here; the partial blocks' values are kept in ``partial_mask``.
    Raises:
        ValueError: non-positive lengths or block sizes, B / H not None or positive.
        TypeError: ``mask_mod`` not returning booleans.
    """
    op = "create_block_mask"
    B, H = _bh(op, "B", B), _bh(op, "H", H)
    for name, n in (("Q_LEN", Q_LEN), ("KV_LEN", KV_LEN)):
        if not isinstance(n, int) or n < 1:
            raise ValueError(f"{op}: {name} must be a positive int, got {n!r}")
    qb, kb = _block_sizes(op, BLOCK_SIZE)
    q_all, kv = block_indices(op, Q_LEN, KV_LEN, (qb, kb))
    nqb, nkb = q_all.shape[0], kv.shape[0]
    b = snp.reshape(snp.arange(B, dtype=snp.int32), (B, 1, 1, 1, 1, 1))
    h = snp.reshape(snp.arange(H, dtype=snp.int32), (1, H, 1, 1, 1, 1))
    kv6 = snp.reshape(kv, (1, 1, 1, 1, nkb, kb))
    in_kv = kv6 < KV_LEN
    step = max(1, _CHUNK_ELEMENTS // (B * H * qb * nkb * kb))
    anys, alls = [], []
    for c0 in range(0, nqb, step):
        q = snp.reshape(q_all[c0:c0 + step], (1, 1, -1, qb, 1, 1))
        shape = (B, H, q.shape[2], qb, nkb, kb)
        m = _mask_values(mask_mod, b, h, q, kv6, shape, op, (Q_LEN, KV_LEN))
        real = in_kv & (q < Q_LEN)   # padded positions count as neither visible nor hidden
        anys.append(snp.any(m & real, axis=(3, 5)))
        alls.append(snp.all(m | ~real, axis=(3, 5)))
    any_ = snp.concatenate(anys, axis=2)
    full = snp.concatenate(alls, axis=2)
    partial = any_ & ~full
    num, idx = _sorted_lists(partial)
    fnum, fidx = _sorted_lists(full)
    mask = BlockMask(num, _compact(num, idx), fnum, _compact(fnum, fidx), None,
                     (Q_LEN, KV_LEN), (qb, kb), mask_mod)
    return mask.with_partial_mask()


def dense_block_mask(q_len, kv_len, block_size):
    """The BlockMask visiting every block as full (no mask)."""
    qb, kb = block_size
    nqb, nkb = -(-q_len // qb), -(-kv_len // kb)
    num = snp.zeros((1, 1, nqb), dtype=snp.int32)
    idx = snp.zeros((1, 1, nqb, 0), dtype=snp.int32)
    fnum = snp.full((1, 1, nqb), nkb, dtype=snp.int32)
    fidx = snp.broadcast_to(snp.arange(nkb, dtype=snp.int32), (1, 1, nqb, nkb))
    pm = snp.zeros((1, 1, nqb, 0, qb, kb), dtype=snp.bool_)
    return BlockMask(num, idx, fnum, fidx, pm, (q_len, kv_len), (qb, kb), None)

