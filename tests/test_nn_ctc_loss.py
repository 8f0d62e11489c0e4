"""nn.functional.ctc_loss / nn.CTCLoss against a brute-force sum over every alignment (tiny T
and C), its derivative against the brute-force posterior occupancy and finite differences,
vmap against a loop, compile against eager, and torch when installed."""
from __future__ import annotations

import itertools
import math

import numpy as np
import pytest

import starling
import starling.numpy as snp
from starling import nn
from starling.nn import functional as F
from starling.test_util import check_grads


def log_softmax(x):
    x = np.asarray(x, np.float64)
    m = x.max(-1, keepdims=True)
    return x - m - np.log(np.exp(x - m).sum(-1, keepdims=True))


def collapse(path, blank):
    out, prev = [], None
    for k in path:
        if k != prev and k != blank:
            out.append(k)
        prev = k
    return tuple(out)


def brute(lp, target, T, blank):
    """(-log p(target), d(-log p)/d lp) for one sequence's (T_max, C) log-probabilities, by
    enumerating all C**T alignments of its first T frames."""
    C = lp.shape[1]
    target = tuple(int(k) for k in target)
    scores, paths = [], []
    for path in itertools.product(range(C), repeat=T):
        if collapse(path, blank) == target:
            scores.append(sum(lp[t, k] for t, k in enumerate(path)))
            paths.append(path)
    grad = np.zeros_like(lp)
    if not scores:
        return math.inf, grad
    scores = np.array(scores)
    top = scores.max()
    logp = top + np.log(np.exp(scores - top).sum())
    for s, path in zip(scores, paths):
        for t, k in enumerate(path):
            grad[t, k] -= np.exp(s - logp)
    return -logp, grad


def brute_batch(lp, targets, il, tl, blank=0):
    """Per-sequence losses (N,) and the gradient of their sum, padded targets."""
    losses, grad = [], np.zeros_like(lp)
    for n in range(lp.shape[1]):
        loss, g = brute(lp[:, n], targets[n][:tl[n]], il[n], blank)
        losses.append(loss)
        grad[:, n] = g
    return np.array(losses), grad


def case(seed=0, T=5, C=3, blank=0):
    """A batch covering the hard cases: repeated labels needing a blank between them, an
    empty target, an infeasible target (input too short), input length 0 with an empty and a
    non-empty target, a full-length input, a size-1 target."""
    rng = np.random.default_rng(seed)
    labels = [k for k in range(C) if k != blank]
    a, b = labels[0], labels[-1]
    targets = np.array([[a, a, b], [b, a, a], [a, b, a], [a, a, a], [b, 0, 0], [a, b, 0],
                        [a, 0, 0]])
    tl = np.array([2, 3, 0, 3, 1, 0, 1])
    il = np.array([3, T, 4, 4, 2, 0, 0])      # [a, a, a] needs 5 frames: infeasible in 4
    lp = log_softmax(rng.standard_normal((T, len(tl), C)) * 1.5)
    return lp, targets, il, tl


@pytest.mark.parametrize("blank", [0, 2])
def test_values_and_gradient_vs_brute_force(blank):
    lp, tg, il, tl = case(blank=blank)
    ref, gref = brute_batch(lp, tg, il, tl, blank)
    assert np.isinf(ref[3]) and ref[5] == 0 and np.isinf(ref[6])
    got = F.ctc_loss(lp, tg, il, tl, blank=blank, reduction="none")
    np.testing.assert_allclose(np.asarray(got), ref, rtol=1e-12, atol=1e-12)
    g = starling.grad(lambda x: snp.sum(F.ctc_loss(x, tg, il, tl, blank, "none",
                                                   zero_infinity=True)))(snp.asarray(lp))
    np.testing.assert_allclose(np.asarray(g), gref, atol=1e-12)


def test_reductions_and_zero_infinity():
    lp, tg, il, tl = case(1)
    ref, _ = brute_batch(lp, tg, il, tl)
    zeroed = np.where(np.isinf(ref), 0, ref)
    for zi, r in ((False, ref), (True, zeroed)):
        np.testing.assert_allclose(float(F.ctc_loss(lp, tg, il, tl, reduction="sum",
                                                    zero_infinity=zi)), r.sum(), rtol=1e-12)
        np.testing.assert_allclose(float(F.ctc_loss(lp, tg, il, tl, zero_infinity=zi)),
                                   np.mean(r / np.maximum(tl, 1)), rtol=1e-12)
    assert float(F.ctc_loss(lp, tg, il, tl)) == math.inf


def test_infeasible_gradient_is_finite():
    lp, tg, il, tl = case(2)
    for zi in (False, True):
        for red in ("mean", "sum"):
            g = starling.grad(lambda x: F.ctc_loss(x, tg, il, tl, reduction=red,
                                                   zero_infinity=zi))(snp.asarray(lp))
            assert np.isfinite(np.asarray(g)).all()
        # the infeasible and zero-length sequences get no gradient at all
        g = np.asarray(starling.grad(lambda x: F.ctc_loss(x, tg, il, tl, reduction="sum",
                                                          zero_infinity=zi))(snp.asarray(lp)))
        assert not g[:, [3, 5, 6]].any()


def test_concatenated_and_unbatched_targets():
    lp, tg, il, tl = case(3)
    padded = np.asarray(F.ctc_loss(lp, tg, il, tl, reduction="none"))
    flat = np.concatenate([tg[n, :tl[n]] for n in range(len(tl))])
    np.testing.assert_array_equal(
        np.asarray(F.ctc_loss(lp, flat, tuple(il), list(tl), reduction="none")), padded)
    # traced lengths: the padded width falls back to the total label count
    f = starling.vmap(lambda il_, tl_: F.ctc_loss(lp, flat, il_, tl_, reduction="none"))
    np.testing.assert_array_equal(np.asarray(f(np.stack([il, il]), np.stack([tl, tl])))[1],
                                  padded)
    for n in range(len(tl)):
        one = F.ctc_loss(lp[:, n], tg[n, :tl[n]], il[n], tl[n], reduction="none")
        assert one.shape == ()
        np.testing.assert_array_equal(np.asarray(one), padded[n])
    # padding labels are ignored, whatever they hold
    junk = np.where(np.arange(tg.shape[1]) < tl[:, None], tg, 7)
    np.testing.assert_array_equal(np.asarray(F.ctc_loss(lp, junk, il, tl, reduction="none")),
                                  padded)


def test_empty_target_dim_and_size_one_dims():
    rng = np.random.default_rng(4)
    lp = log_softmax(rng.standard_normal((3, 2, 1)))           # C = 1: blank only
    got = F.ctc_loss(lp, np.zeros((2, 0), np.int64), [3, 1], [0, 0], reduction="none")
    np.testing.assert_allclose(np.asarray(got), [0.0, 0.0], atol=1e-15)
    lp = log_softmax(rng.standard_normal((1, 1, 2)))           # T = N = S = 1
    ref, _ = brute_batch(lp, np.array([[1]]), [1], [1])
    np.testing.assert_allclose(np.asarray(F.ctc_loss(lp, [[1]], [1], [1], reduction="none")),
                               ref, rtol=1e-14)
    got = F.ctc_loss(np.zeros((0, 2, 3)), np.zeros((2, 0), np.int64), [0, 0], [0, 0],
                     reduction="none")
    np.testing.assert_array_equal(np.asarray(got), [0.0, 0.0])


def test_nan_and_zero_probabilities():
    lp, tg, il, tl = case(5)
    # frames past a sequence's input length are never read: NaN there changes nothing
    bad = lp.copy()
    for n in range(len(il)):
        bad[il[n]:, n] = np.nan
    ref = np.asarray(F.ctc_loss(lp, tg, il, tl, reduction="none"))
    np.testing.assert_array_equal(np.asarray(F.ctc_loss(bad, tg, il, tl, reduction="none")),
                                  ref)
    g = starling.grad(lambda x: F.ctc_loss(x, tg, il, tl, zero_infinity=True))(bad)
    assert np.isfinite(np.asarray(g)[np.isfinite(bad)]).all()
    # a NaN inside a sequence's frames gives a NaN loss for that sequence only
    bad = lp.copy()
    bad[0, 0, 0] = np.nan
    out = np.asarray(F.ctc_loss(bad, tg, il, tl, reduction="none"))
    assert np.isnan(out[0]) and np.array_equal(out[1:], ref[1:])
    # zero-probability (-inf) classes: paths through them vanish, values stay exact
    zero = lp.copy()
    zero[1, :, 1] = -np.inf
    want, gwant = brute_batch(zero, tg, il, tl)
    got = F.ctc_loss(zero, tg, il, tl, reduction="none")
    np.testing.assert_allclose(np.asarray(got), want, rtol=1e-12)
    g = starling.grad(lambda x: snp.sum(F.ctc_loss(x, tg, il, tl, reduction="none",
                                                   zero_infinity=True)))(zero)
    np.testing.assert_allclose(np.asarray(g), gwant, atol=1e-12)


def test_check_grads_order_2():
    lp, tg, il, tl = case(6, T=4)
    keep = [0, 1, 2, 4]                              # the feasible ones (finite everywhere)
    lp, tg, il, tl = lp[:, keep], tg[keep], il[keep], tl[keep]
    check_grads(lambda x: F.ctc_loss(x, tg, il, tl, reduction="none"), (lp,), order=2,
                atol=1e-6, rtol=1e-6)
    # through a log_softmax, as models use it
    logits = np.random.default_rng(7).standard_normal(lp.shape)
    check_grads(lambda z: F.ctc_loss(F.log_softmax(z, -1), tg, il, tl), (logits,), order=2,
                atol=1e-6, rtol=1e-6)


def test_vmap_matches_loop():
    lp, tg, il, tl = case(8)
    stack = np.stack([lp, case(9)[0], case(10)[0]])
    ils = np.stack([il, np.minimum(il + 1, 5), np.maximum(il - 1, 0)])
    f = starling.vmap(lambda x, i: F.ctc_loss(x, tg, i, tl, reduction="none",
                                              zero_infinity=True))
    got = np.asarray(f(stack, ils))
    for b in range(3):
        np.testing.assert_array_equal(got[b], np.asarray(
            F.ctc_loss(stack[b], tg, ils[b], tl, reduction="none", zero_infinity=True)))
    gv = starling.vmap(starling.grad(lambda x, i: F.ctc_loss(x, tg, i, tl, zero_infinity=True)))
    got = np.asarray(gv(stack, ils))
    for b in range(3):
        want = starling.grad(lambda x: F.ctc_loss(x, tg, ils[b], tl, zero_infinity=True))(
            stack[b])
        np.testing.assert_allclose(got[b], np.asarray(want), rtol=1e-13, atol=1e-15)


def test_compile_and_checkpoint_match_eager():
    lp, tg, il, tl = case(11)
    lp32 = lp.astype(np.float32)

    def loss(x, i, t):
        return F.ctc_loss(x, tg, i, t, zero_infinity=True)

    for x in (lp, lp32):
        eager = loss(x, il, tl)
        assert eager.dtype == x.dtype
        for backend in (None, "numpy_ref"):      # default (cpp) / the unfused interpreter
            np.testing.assert_allclose(
                np.asarray(starling.compile(loss, backend=backend)(x, il, tl)),
                np.asarray(eager), rtol=1e-6 if x is lp32 else 1e-13)
        ge = np.asarray(starling.grad(loss)(x, il, tl))
        gc = np.asarray(starling.compile(starling.grad(loss))(x, il, tl))
        gk = np.asarray(starling.grad(starling.checkpoint(loss))(x, il, tl))
        np.testing.assert_allclose(gc, ge, rtol=1e-5, atol=1e-6 if x is lp32 else 1e-13)
        np.testing.assert_allclose(gk, ge, rtol=1e-13, atol=1e-15)


def test_module():
    lp, tg, il, tl = case(12)
    m = nn.CTCLoss(blank=0, reduction="sum", zero_infinity=True)
    assert "zero_infinity=True" in repr(m)
    np.testing.assert_array_equal(np.asarray(m(lp, tg, il, tl)), np.asarray(
        F.ctc_loss(lp, tg, il, tl, 0, "sum", True)))
    assert not list(m.parameters())
    with pytest.raises(ValueError, match="CTCLoss: reduction"):
        nn.CTCLoss(reduction="avg")


def test_errors():
    lp, tg, il, tl = case(13)
    with pytest.raises(ValueError, match="ctc_loss: reduction"):
        F.ctc_loss(lp, tg, il, tl, reduction="batchmean")
    with pytest.raises(TypeError, match="ctc_loss: log_probs must be real floating"):
        F.ctc_loss(np.zeros((5, 7, 3), np.int32), tg, il, tl)
    with pytest.raises(TypeError, match="targets must be integers"):
        F.ctc_loss(lp, tg.astype(np.float32), il, tl)
    with pytest.raises(ValueError, match=r"\(T, N, C\)"):
        F.ctc_loss(lp[None], tg, il, tl)
    with pytest.raises(ValueError, match="blank must be in"):
        F.ctc_loss(lp, tg, il, tl, blank=3)
    with pytest.raises(TypeError, match="blank must be an integer"):
        F.ctc_loss(lp, tg, il, tl, "none")
    with pytest.raises(ValueError, match=r"input_lengths must have shape \(7,\)"):
        F.ctc_loss(lp, tg, il[:3], tl)
    with pytest.raises(ValueError, match=r"input_lengths must lie in \[0, 5\]"):
        F.ctc_loss(lp, tg, il + 3, tl)
    with pytest.raises(ValueError, match=r"target_lengths must lie in \[0, 3\]"):
        F.ctc_loss(lp, tg, il, tl + 1)
    with pytest.raises(ValueError, match="padded targets must be"):
        F.ctc_loss(lp, tg[:4], il, tl)
    with pytest.raises(ValueError, match="must not contain the blank"):
        F.ctc_loss(lp, np.where(tg == 1, 0, tg), il, np.full(7, 3))
    with pytest.raises(ValueError, match="target label 3 is out of range for 3 classes"):
        F.ctc_loss(lp, tg + 1, il, tl)
    with pytest.raises(ValueError, match="sum to"):
        F.ctc_loss(lp, np.ones(4, np.int64), il, tl)
    with pytest.raises(ValueError, match="unbatched"):
        F.ctc_loss(lp[:, 0], tg, il, tl)


def test_vs_torch():
    torch = pytest.importorskip("torch")
    lp, tg, il, tl = case(14)
    logits = np.random.default_rng(15).standard_normal(lp.shape)
    z = torch.tensor(logits, requires_grad=True)
    want = torch.nn.functional.ctc_loss(z.log_softmax(-1), torch.tensor(tg), torch.tensor(il),
                                        torch.tensor(tl), zero_infinity=True)
    want.backward()

    def loss(x):
        return F.ctc_loss(F.log_softmax(x, -1), tg, il, tl, zero_infinity=True)

    np.testing.assert_allclose(float(loss(logits)), want.item(), rtol=1e-12)
    # torch's gradient w.r.t. log_probs is only right after log_softmax: compare logits
    np.testing.assert_allclose(np.asarray(starling.grad(loss)(logits)), z.grad.numpy(),
                               atol=1e-12)
