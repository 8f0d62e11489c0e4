"""Random bits (the ``random_bits`` primitive, src/arrays/random.py) as a Triton kernel.

The stream of a key is Philox4x32-10 (Salmon et al., "Parallel random numbers: as easy as 1, 2,
3", SC'11) over the counters ``(block mod 2**32, block >> 32, tag, 0)``, four 32-bit words per
block, words read little-endian as the requested unsigned dtype: the same definition as the
NumPy reference and the native CPU kernel, so a key gives the same bits on the GPU as on the CPU
(the tests check the interpreter's words against the NumPy reference bit for bit).

One lane computes one block of one key: ten rounds of two 32 x 32 -> 64-bit products
(``tl.umulhi`` for the high halves, wrapping uint32 products for the low ones) and the Weyl key
increments, then stores its four words. The host trims the words to the draw's size and views
them as its dtype (``Kernel.finish``), as the CPU paths do.
"""
from __future__ import annotations

import math

import numpy as np

from ....arrays.random import _n_words, _words_to
from ....core.avals import ShapedArray
from ....core.ir import Equation, Program, Var
from .codegen import Kernel, NotFusible, module

# Philox4x32 multipliers and Weyl increments (Salmon et al. 2011, section 5)
_M0, _M1, _W0, _W1 = 0xD2511F53, 0xCD9E8D57, 0x9E3779B9, 0xBB67AE85


def _rounds():
    lines = [f"    m0 = tl.full([BLOCK], {_M0}, tl.uint32)",
             f"    m1 = tl.full([BLOCK], {_M1}, tl.uint32)"]
    for _ in range(10):   # unrolled: ten rounds of the Philox S-box and key schedule
        lines += ["    hi0 = tl.umulhi(c0, m0)", "    lo0 = c0 * m0",
                  "    hi1 = tl.umulhi(c2, m1)", "    lo1 = c2 * m1",
                  "    c0, c1, c2, c3 = hi1 ^ c1 ^ k0, lo1, hi0 ^ c3 ^ k1, lo0",
                  f"    k0 = k0 + {_W0}", f"    k1 = k1 + {_W1}"]
    return lines


def render(eqn, name):
    """(Kernel, sub-Program) of a ``random_bits`` equation, or raise NotFusible."""
    key = eqn.invars[0].aval
    shape, dtype, tag = eqn.params["shape"], np.dtype(eqn.params["dtype"]), eqn.params["tag"]
    if not all(isinstance(d, int) for d in tuple(key.shape) + tuple(shape)):
        raise NotFusible("symbolic random_bits shape")
    kb = tuple(key.shape[:-1])
    nk = math.prod(kb)
    size = math.prod(shape)
    n_words = _n_words(size, dtype)
    nb = -(-n_words // 4)
    body = ["    pos = tl.program_id(0).to(tl.int64) * BLOCK + tl.arange(0, BLOCK)",
            "    mask = pos < n",
            f"    b = pos % {max(nb, 1)}",
            f"    rest = pos // {max(nb, 1)}",
            "    ko = pos * 0"]
    for d in range(len(kb) - 1, -1, -1):   # the key's position from its flat index
        body += [f"    ko = ko + (rest % {kb[d]}) * s0_{d}", f"    rest = rest // {kb[d]}"]
    last = len(kb)
    body += ["    k0 = tl.load(in0 + ko, mask=mask, other=0).to(tl.uint32)",
             f"    k1 = tl.load(in0 + ko + s0_{last}, mask=mask, other=0).to(tl.uint32)",
             "    c0 = (b & 0xFFFFFFFF).to(tl.uint32)",
             "    c1 = (b >> 32).to(tl.uint32)",
             f"    c2 = tl.full([BLOCK], {int(tag)}, tl.uint32)",
             "    c3 = tl.full([BLOCK], 0, tl.uint32)"] + _rounds()
    body += [f"    tl.store(out0 + pos * 4 + {j}, c{j}, mask=mask)" for j in range(4)]
    params = [f"s0_{d}" for d in range(len(key.shape))]
    src = module(name, 1, 1, params, [], body)
    words = ShapedArray((nk, 4 * nb), np.dtype(np.uint32))
    out_shape = kb + tuple(shape)

    def finish(outs):
        return [_words_to(outs[0][:, :n_words], size, dtype, out_shape)]
    kernel = Kernel(src, name, (nk, nb), [key], [words], stride_shapes=[None], finish=finish)
    ins = [Var(key)]
    sub = Program([], [], ins, [Equation(eqn.primitive, ins, eqn.outvars, eqn.params)],
                  eqn.outvars)
    return kernel, sub
