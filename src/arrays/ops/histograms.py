"""Counting and binning: bincount, digitize, histogram_bin_edges, histogram, histogram2d,
histogramdd.

Method: bin indices come from ``searchsorted`` into the edges (``side="right"``, minus one;
values equal to the last edge go into the last bin, NaN and values outside the edges into
none), and counts from one scatter-add (``.at[].add(mode="drop")``): linear in the weights, so
histograms differentiate in ``weights`` (and the edges / density in the data through the
range). Every shape here is static except bincount's length and the string bin estimators,
which need concrete (eager) input or, for bincount, the static ``length=`` (JAX).
"""
from __future__ import annotations

import builtins
import math
import operator

import numpy as np

from ...core import dtypes
from ...core.trace import ConcretizationError
from ..convert import operand
from .differences import static_int
from .reductions import _ns
from .set_ops import concrete_buffer

__all__ = ["bincount", "digitize", "histogram_bin_edges", "histogram", "histogram2d",
           "histogramdd"]

_I64 = dtypes.int64


def bincount(x, /, weights=None, minlength=0, *, length=None):
    """Number of occurrences (or summed weights) of each value of a non-negative int array
    (NumPy ``bincount``; ``length=`` from JAX).

    Args:
        x: 1-D ``(n,)`` array of non-negative integers (bool allowed).
        weights: optional ``(n,)`` array; bin ``i`` holds the sum of the weights of the
            entries equal to ``i`` (any numeric dtype; complex allowed; differentiable).
        minlength: static int >= 0: the least number of bins.
        length: static number of bins (required under compile / vmap / grad): values
            ``>= length`` are dropped. Default ``max(max(x) + 1, minlength)``.
    Returns:
        Array ``(length,)``: int64 counts, or sums of the weights' dtype (bool weights:
        int64; NumPy always gives float64 for weights).
    Raises:
        ValueError: ``x`` not 1-D, negative values (eager only: traced negative values are
            dropped), ``weights`` of another shape, negative ``minlength`` / ``length``.
        TypeError: ``x`` not of an integer / bool dtype.
        ConcretizationError: traced ``x`` without ``length``.
    """
    snp = _ns()
    x = operand(x, "bincount")
    if x.ndim != 1:
        raise ValueError(f"bincount: x must be 1-D, got shape {tuple(x.shape)}")
    if not (dtypes.is_integer(x.dtype) or x.dtype == dtypes.bool_):
        raise TypeError(f"bincount: x must hold non-negative integers, got dtype {x.dtype}")
    minlength = static_int("bincount", "minlength", minlength)
    if minlength < 0:
        raise ValueError(f"bincount: minlength must be non-negative, got {minlength}")
    if length is None:
        buf = concrete_buffer(x)
        if buf is None:
            raise ConcretizationError(
                "bincount: the number of bins depends on the values of x, which is traced here "
                f"({x.aval.str_short()}, inside compile / vmap / grad); pass the static "
                "length= argument")
        if buf.size and buf.min() < 0:
            raise ValueError(f"bincount: x must be non-negative, got the value {buf.min()}")
        length = max(minlength, int(buf.max()) + 1 if buf.size else 0)
    else:
        length = static_int("bincount", "length", length)
        if length < 0:
            raise ValueError(f"bincount: length must be non-negative, got {length}")
    if weights is None:
        w, dt = snp.ones(x.shape, dtype=_I64), _I64
    else:
        w = operand(weights, "bincount")
        if tuple(w.shape) != tuple(x.shape):
            raise ValueError(f"bincount: weights must have x's shape {tuple(x.shape)}, got "
                             f"{tuple(w.shape)}")
        dt = _I64 if w.dtype == dtypes.bool_ else w.dtype
        w = w.astype(dt)
    idx = x.astype(_I64)
    if dtypes.is_signed_int(x.dtype):
        idx = snp.where(idx < 0, length, idx)
    return snp.zeros((length,), dtype=dt).at[idx].add(w, mode="drop")


def digitize(x, bins, right=False):
    """Indices of the bins each value of ``x`` falls in (NumPy ``digitize``).

    For increasing ``bins``: ``bins[i - 1] <= x < bins[i]`` gives ``i`` (``right=True``:
    ``bins[i - 1] < x <= bins[i]``); for decreasing bins the mirror image. Values below / above
    all bins give 0 / ``len(bins)``; NaN gives ``len(bins)`` for increasing bins.

    Args:
        x: array of any shape ``(*dims)``, real.
        bins: 1-D ``(m,)``, monotonic (increasing or decreasing; the direction is read from
            ``bins[0]`` and ``bins[-1]``, also when traced).
        right: which side of a bin is closed.
    Returns:
        int64 Array ``(*dims)``.
    Raises:
        ValueError: ``bins`` not 1-D, or (eager) not monotonic. TypeError: complex input.
    """
    snp = _ns()
    x, bins = operand(x, "digitize"), operand(bins, "digitize")
    for name, v in (("x", x), ("bins", bins)):
        if dtypes.is_complex(v.dtype):
            raise TypeError(f"digitize: {name} must be real, got {v.dtype}")
    if bins.ndim != 1:
        raise ValueError(f"digitize: bins must be 1-D, got shape {tuple(bins.shape)}")
    m = bins.shape[0]
    if m == 0:
        return snp.zeros(x.shape, dtype=_I64)
    buf = concrete_buffer(bins)
    if buf is not None and m > 1:
        d = np.diff(buf.astype(np.float64) if buf.dtype.kind == "V" else buf)
        if not ((d >= 0).all() or (d <= 0).all()):
            raise ValueError("digitize: bins must be monotonically increasing or decreasing")
    side = "left" if right else "right"
    up = snp.searchsorted(bins, x, side=side)
    down = m - snp.searchsorted(snp.flip(bins), x, side=side)
    return snp.where(bins[m - 1] >= bins[0], up, down)


# ---- bin edges ----------------------------------------------------------------------------------

def _real_data(op, a):
    a = operand(a, op)
    if dtypes.is_complex(a.dtype):
        raise TypeError(f"{op}: complex data cannot be binned, got {a.dtype}")
    return a


def _edge_dtype(a):
    return a.dtype if dtypes.is_floating(a.dtype) else dtypes.DEFAULT_FLOAT


def _outer_edges(op, a, rng):
    """(first, last) edges: ``range`` or the data's min / max (0, 1 when empty), widened by
    0.5 each way when equal (NumPy). Checks what is concrete."""
    snp = _ns()
    dt = _edge_dtype(a)
    if rng is not None:
        try:
            first, last = rng
        except (TypeError, ValueError):
            raise ValueError(f"{op}: range must be a pair (min, max), got {rng!r}") from None
        bf, bl = concrete_buffer(operand(first, op)), concrete_buffer(operand(last, op))
        if bf is not None and bl is not None:
            if bf > bl:
                raise ValueError(f"{op}: max must be larger than min in range, got {rng!r}")
            if not (np.isfinite(bf) and np.isfinite(bl)):
                raise ValueError(f"{op}: the supplied range [{bf}, {bl}] is not finite")
        first, last = snp.asarray(first).astype(dt), snp.asarray(last).astype(dt)
    elif a.size == 0:
        first, last = snp.asarray(0, dtype=dt), snp.asarray(1, dtype=dt)
    else:
        first, last = snp.min(a).astype(dt), snp.max(a).astype(dt)
        bf, bl = concrete_buffer(first), concrete_buffer(last)
        if bf is not None and not (np.isfinite(bf) and np.isfinite(bl)):
            raise ValueError(f"{op}: the range [{bf}, {bl}] found in the data is not finite; "
                             "pass range= or remove NaN / inf values")
    same = first == last
    return snp.where(same, first - 0.5, first), snp.where(same, last + 0.5, last)


def _uniform_edges(first, last, n):
    """``n + 1`` equally spaced edges from ``first`` to ``last`` (both exact), computed as
    ``first + i * step`` like NumPy's ``linspace``."""
    snp = _ns()
    step = (last - first) / n
    inner = first + snp.arange(n, dtype=first.dtype) * step
    return snp.concatenate([inner, snp.reshape(last, (1,))])


def _estimated_bins(op, a, method, rng):
    """Number of equal bins by a named rule, on concrete data (NumPy's estimators: Sturges
    1926, Scott 1979, Freedman & Diaconis 1981, Doane 1976, Rice, square root, Stone 1984
    cross-validation; "auto" is min(Sturges, max(FD, sqrt / 2)))."""
    buf = concrete_buffer(a)
    if buf is None:
        raise ConcretizationError(
            f"{op}: bins={method!r} chooses the number of bins from the values of the data, "
            "which is traced here (inside compile / vmap / grad); pass an int or the edges")
    x = buf.reshape(-1)
    x = x.astype(np.float64) if x.dtype.kind not in "iu" else x
    if rng is not None:
        first, last = rng
        x = x[(x >= first) & (x <= last)]
    elif x.size:
        first, last = x.min(), x.max()
    if x.size == 0:
        return 1
    n = x.size
    ptp = float(x.max()) - float(x.min())
    xf = x.astype(np.float64)

    def sqrt_():
        return ptp / math.sqrt(n)

    def sturges():
        return ptp / (math.log2(n) + 1.0)

    def fd():
        q75, q25 = np.percentile(xf, [75, 25])
        return 2.0 * (q75 - q25) * n ** (-1.0 / 3.0)

    def stone():
        if n <= 1 or ptp == 0:
            return 0.0
        upper = max(100, int(math.sqrt(n)))
        lo = float(first) if rng is not None else float(x.min())
        span = (float(last) if rng is not None else float(x.max())) - lo

        def risk(k):
            idx = np.minimum(np.floor((xf - lo) / span * k), k - 1).astype(np.int64)
            p = np.bincount(idx, minlength=k) / n
            return (2 - (n + 1) * p.dot(p)) / (ptp / k)
        return ptp / min(range(1, upper + 1), key=risk)

    def doane():
        if n > 2:
            sg1 = math.sqrt(6.0 * (n - 2) / ((n + 1.0) * (n + 3)))
            sigma = xf.std()
            if sigma > 0.0:
                g1 = np.mean(((xf - xf.mean()) / sigma) ** 3)
                return ptp / (1.0 + math.log2(n) + math.log2(1.0 + abs(g1) / sg1))
        return 0.0

    rules = {
        "sqrt": sqrt_, "sturges": sturges, "fd": fd, "stone": stone, "doane": doane,
        "rice": lambda: ptp / (2.0 * n ** (1.0 / 3)),
        "scott": lambda: (24.0 * math.pi ** 0.5 / n) ** (1.0 / 3.0) * xf.std(),
        "auto": lambda: min(max(fd(), sqrt_() / 2), sturges()),
    }
    if method not in rules:
        raise ValueError(f"{op}: {method!r} is not a bin estimator; valid: {sorted(rules)}")
    width = rules[method]()
    if not width:
        return 1
    if x.dtype.kind in "iu" and width < 1:
        width = 1
    if first == last:
        first, last = first - 0.5, last + 0.5
    return int(math.ceil((float(last) - float(first)) / width))


def _bin_edges(op, a, bins, rng, weights):
    """The edges ``(n + 1,)`` for ``bins`` (int, name or edges) over the data ``a``."""
    if isinstance(bins, str):
        if weights is not None:
            raise TypeError(f"{op}: estimating the number of bins is not supported for "
                            "weighted data")
        bins = _estimated_bins(op, a, bins, rng)
    if isinstance(bins, (int, np.integer)) and not isinstance(bins, bool):
        n = operator.index(bins)
        if n < 1:
            raise ValueError(f"{op}: bins must be positive when an integer, got {n}")
        first, last = _outer_edges(op, a, rng)
        return _uniform_edges(first, last, n)
    edges = operand(bins, op)
    if edges.ndim != 1:
        raise ValueError(f"{op}: bins must be an int, a string or a 1-D array of edges, got "
                         f"shape {tuple(edges.shape)}")
    if edges.shape[0] < 1:
        raise ValueError(f"{op}: bins must hold at least one edge")
    buf = concrete_buffer(edges)
    if buf is not None and buf.size > 1:
        b = buf.astype(np.float64) if buf.dtype.kind == "V" else buf
        if (b[:-1] > b[1:]).any():
            raise ValueError(f"{op}: bins must increase monotonically when an array, got {b}")
    return edges if dtypes.is_inexact(edges.dtype) else edges.astype(_edge_dtype(a))


def histogram_bin_edges(a, bins=10, range=None, weights=None):  # noqa: A002
    """The bin edges ``histogram`` uses (NumPy ``histogram_bin_edges``).

    Args:
        a: data, any shape (flattened), real.
        bins: an int (equal-width bins over ``range``), a 1-D increasing array of edges, or the
            name of an estimator of the number of bins: "auto", "fd", "doane", "scott",
            "stone", "rice", "sturges", "sqrt" (eager only: the count depends on the data).
        range: ``(min, max)``; default the data's min and max (``(0, 1)`` for empty data);
            equal ends are widened by 0.5 each way. Data outside it is ignored by the
            estimators.
        weights: only checked (estimators reject weighted data, as NumPy).
    Returns:
        1-D array ``(n + 1,)``: ``a``'s float dtype (the default float for integer data; NumPy
        gives float64), or the given edges.
    Raises:
        ValueError: non-positive int bins, unknown estimator, edges not 1-D or decreasing
            (eager), a decreasing or non-finite range (eager), non-finite data without range.
        TypeError: complex data; an estimator with weights.
        ConcretizationError: an estimator on traced data.
    """
    a = _ns().reshape(_real_data("histogram_bin_edges", a), (-1,))
    return _bin_edges("histogram_bin_edges", a, bins, range, weights)


def _bin_index(values, edges):
    """Bin of each value, ``n`` (dropped) outside ``[edges[0], edges[-1]]`` and for NaN."""
    snp = _ns()
    n = edges.shape[0] - 1
    i = snp.searchsorted(edges, values.astype(edges.dtype), side="right") - 1
    i = snp.where(values == edges[n], n - 1, i)
    return snp.where((i < 0) | (i >= n), n, i), n


def _weights_for(op, weights, shape, default_dt):
    snp = _ns()
    if weights is None:
        return snp.ones(shape, dtype=default_dt)
    w = operand(weights, op)
    if tuple(w.shape) != tuple(shape):
        raise ValueError(f"{op}: weights must have the data's shape {tuple(shape)}, got "
                         f"{tuple(w.shape)}")
    return w.astype(_I64) if w.dtype == dtypes.bool_ else w


def histogram(a, bins=10, range=None, weights=None, density=None):  # noqa: A002
    """Histogram of the data (NumPy ``histogram``).

    Bins are half-open ``[e_i, e_{i+1})`` except the last, which includes its right edge;
    values outside the edges and NaNs are not counted.

    Args:
        a: data, any shape (flattened), real.
        bins, range: as in ``histogram_bin_edges``.
        weights: optional array of ``a``'s shape: each value counts its weight
            (differentiable).
        density: return the probability density (counts / total / bin width) instead.
    Returns:
        ``(hist, bin_edges)``: ``hist`` ``(n,)`` int64 counts, the weights' dtype with
        weights, the edges' float dtype with density; ``bin_edges`` ``(n + 1,)``.
    Raises:
        As ``histogram_bin_edges``; ValueError: weights of another shape.
    """
    snp = _ns()
    a = _real_data("histogram", a)
    w = _weights_for("histogram", weights, a.shape, _I64)
    a, w = snp.reshape(a, (-1,)), snp.reshape(w, (-1,))
    edges = _bin_edges("histogram", a, bins, range, weights)
    idx, n = _bin_index(a, edges)
    hist = snp.zeros((n,), dtype=w.dtype).at[idx].add(w, mode="drop")
    if density:
        dt = dtypes.result_type((hist.dtype, False), (edges.dtype, False))[0]
        dt = dt if dtypes.is_inexact(dt) else dtypes.DEFAULT_FLOAT
        hist = hist.astype(dt)
        hist = hist / snp.diff(edges).astype(dt) / snp.sum(hist)
    return hist, edges


def _sample_dims(op, sample):
    """``(N, D)`` data from an ``(N, D)`` array, a 1-D ``(N,)`` array or D arrays ``(N,)``."""
    snp = _ns()
    if isinstance(sample, (list, tuple)):
        cols = [_real_data(op, c) for c in sample]
        if any(c.ndim != 1 or c.shape != cols[0].shape for c in cols):
            raise ValueError(f"{op}: the coordinate arrays must be 1-D of one length, got "
                             f"shapes {[tuple(c.shape) for c in cols]}")
        return snp.stack(cols, axis=1)
    s = _real_data(op, sample)
    if s.ndim == 1:
        return snp.reshape(s, (-1, 1))
    if s.ndim != 2:
        raise ValueError(f"{op}: sample must be (N, D), got shape {tuple(s.shape)}")
    return s


def histogramdd(sample, bins=10, range=None, weights=None, density=None):  # noqa: A002
    """Multidimensional histogram (NumPy ``histogramdd``).

    Args:
        sample: ``(N, D)`` array (N points in D dims) or a sequence of D arrays ``(N,)``.
        bins: an int for every dim, or a sequence of D entries, each an int or a 1-D array of
            increasing edges.
        range: None or a sequence of D entries, each None or ``(min, max)``.
        weights: optional ``(N,)`` weights (differentiable).
        density: return the density (counts / total / cell volume).
    Returns:
        ``(hist, edges)``: ``hist`` ``(n_1, ..., n_D)``, float (the weights' inexact dtype,
        else the default float; NumPy gives float64); ``edges`` a list of D arrays.
    Raises:
        ValueError: bins / range of the wrong length; as ``histogram_bin_edges`` per dim.
    """
    snp = _ns()
    op = "histogramdd"
    s = _sample_dims(op, sample)
    N, D = s.shape
    if isinstance(bins, (int, np.integer)):
        bins = [bins] * D
    if len(bins) != D:
        raise ValueError(f"{op}: bins must have one entry per dimension ({D}), got {len(bins)}")
    rng = [None] * D if range is None else list(range)
    if len(rng) != D:
        raise ValueError(f"{op}: range must have one entry per dimension ({D}), got {len(rng)}")
    w = _weights_for(op, weights, (N,), dtypes.DEFAULT_FLOAT)
    if not dtypes.is_inexact(w.dtype):
        w = w.astype(dtypes.DEFAULT_FLOAT)
    edges, flat, valid, sizes = [], 0, None, []
    for d in builtins.range(D):
        col = s[:, d]
        e = _bin_edges(op, col, bins[d], rng[d], None)
        idx, n = _bin_index(col, e)
        edges.append(e)
        sizes.append(n)
        ok = idx < n
        valid = ok if valid is None else valid & ok
        flat = flat * n + snp.where(ok, idx, 0)
    total = math.prod(sizes)
    target = snp.where(valid, flat, total)
    hist = snp.zeros((total,), dtype=w.dtype).at[target].add(w, mode="drop")
    hist = snp.reshape(hist, tuple(sizes))
    if density:
        tot = snp.sum(hist)
        for d, e in enumerate(edges):
            shape = [1] * D
            shape[d] = sizes[d]
            hist = hist / snp.reshape(snp.diff(e).astype(hist.dtype), tuple(shape))
        hist = hist / tot
    return hist, edges


def histogram2d(x, y, bins=10, range=None, weights=None, density=None):  # noqa: A002
    """Two-dimensional histogram of the points ``(x[i], y[i])`` (NumPy ``histogram2d``).

    Args:
        x, y: 1-D ``(N,)`` coordinates, real.
        bins: an int (both dims), ``[nx, ny]``, a 1-D array of edges (both dims; one not of
            length 2) or ``[x_edges, y_edges]``.
        range: None or ``[[xmin, xmax], [ymin, ymax]]`` (entries may be None).
        weights, density: as in ``histogramdd``.
    Returns:
        ``(hist, x_edges, y_edges)``, ``hist`` ``(nx, ny)`` (x along the first axis).
    Raises:
        ValueError: ``x`` / ``y`` not 1-D of one length; as ``histogramdd``.
    """
    x, y = _real_data("histogram2d", x), _real_data("histogram2d", y)
    if x.ndim != 1 or y.ndim != 1 or x.shape != y.shape:
        raise ValueError(f"histogram2d: x and y must be 1-D of one length, got shapes "
                         f"{tuple(x.shape)} and {tuple(y.shape)}")
    if not isinstance(bins, (int, np.integer, str)):
        n = len(bins)
        if n != 2:
            bins = [bins, bins]
    hist, (ex, ey) = histogramdd([x, y], bins, range, weights, density)
    return hist, ex, ey
