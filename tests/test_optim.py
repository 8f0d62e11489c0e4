"""Optimizers: first steps against hand-computed values, several steps against torch.optim
(when installed), schedules, clipping, L-BFGS, the stateful wrappers and compile."""
from __future__ import annotations

import math

import numpy as np
import pytest

import starling
import starling.numpy as snp
from starling import nn, optim
from starling.nn import functional as F


def A(x):
    return np.asarray(x)


P0 = [1.0, -2.0, 0.5]
G0 = [0.5, 0.25, -4.0]


def _one_step(tx, p=P0, g=G0):
    params = {"w": snp.asarray(np.array(p))}
    grads = {"w": snp.asarray(np.array(g))}
    state = tx.init(params)
    upd, state = tx.update(grads, state, params)
    return A(optim.apply_updates(params, upd)["w"]), state


def test_first_steps_hand_computed():
    p, g = np.array(P0), np.array(G0)
    # SGD with momentum and L2 decay: the buffer starts as the (decayed) gradient
    new, st = _one_step(optim.sgd(0.1, momentum=0.9, weight_decay=0.01))
    np.testing.assert_allclose(new, p - 0.1 * (g + 0.01 * p), rtol=1e-15)
    np.testing.assert_allclose(A(st.momentum_buffer["w"]), g + 0.01 * p, rtol=1e-15)
    new, _ = _one_step(optim.sgd(0.1, momentum=0.9, nesterov=True))
    np.testing.assert_allclose(new, p - 0.1 * (g + 0.9 * g), rtol=1e-15)
    new, _ = _one_step(optim.sgd(0.1, momentum=0.9, dampening=0.5))
    np.testing.assert_allclose(new, p - 0.1 * g, rtol=1e-15)  # no dampening on step 1
    new, _ = _one_step(optim.sgd(0.1, maximize=True))
    np.testing.assert_allclose(new, p + 0.1 * g, rtol=1e-15)
    # Adam: the bias-corrected first step is lr * g / (|g| + eps)
    new, st = _one_step(optim.adam(0.01))
    np.testing.assert_allclose(new, p - 0.01 * g / (np.abs(g) + 1e-8), rtol=1e-13)
    assert int(st.count) == 1
    new, _ = _one_step(optim.adamw(0.01, weight_decay=0.1))
    np.testing.assert_allclose(new, p - 0.01 * 0.1 * p - 0.01 * g / (np.abs(g) + 1e-8),
                               rtol=1e-13)
    new, _ = _one_step(optim.adam(0.01, weight_decay=0.1))  # L2: decay enters the moments
    gd = g + 0.1 * p
    np.testing.assert_allclose(new, p - 0.01 * gd / (np.abs(gd) + 1e-8), rtol=1e-13)
    # RMSprop: s = 0.01 g^2, update = -lr g / (0.1 |g| + eps)
    new, _ = _one_step(optim.rmsprop(0.001))
    np.testing.assert_allclose(new, p - 0.001 * g / (0.1 * np.abs(g) + 1e-8), rtol=1e-13)
    new, _ = _one_step(optim.rmsprop(0.001, centered=True))
    avg = np.sqrt(0.01 * g * g - (0.01 * g) ** 2) + 1e-8
    np.testing.assert_allclose(new, p - 0.001 * g / avg, rtol=1e-13)
    # Adagrad: S = init + g^2
    new, _ = _one_step(optim.adagrad(0.1, initial_accumulator_value=1.0))
    np.testing.assert_allclose(new, p - 0.1 * g / (np.sqrt(1 + g * g) + 1e-10), rtol=1e-13)
    # L-BFGS: the first step is -lr * min(1, 1 / |g|_1) * g (|g|_1 = 4.75 here)
    new, _ = _one_step(optim.lbfgs(0.5))
    np.testing.assert_allclose(new, p - 0.5 / 4.75 * g, rtol=1e-15)


def test_lbfgs_second_step_is_newton_on_a_1d_quadratic():
    # f = 3/2 x^2: after one step, s = x1 - x0 and y = 3 s give H0 = s.y / y.y = 1/3, so the
    # second step -H0 g = -x1 lands exactly on the minimum.
    tx = optim.lbfgs(1.0, history_size=2)
    params = {"x": snp.asarray(np.array([2.0]))}
    state = tx.init(params)
    for _ in range(2):
        u, state = tx.update({"x": params["x"] * 3.0}, state, params)
        params = optim.apply_updates(params, u)
    np.testing.assert_allclose(A(params["x"]), [0.0], atol=1e-15)


def test_second_steps_hand_computed():
    p, g1, g2 = np.array(P0), np.array(G0), np.array([-1.0, 2.0, 0.5])
    params = {"w": snp.asarray(p)}
    tx = optim.adam(0.1, betas=(0.8, 0.9))
    st = tx.init(params)
    u, st = tx.update({"w": snp.asarray(g1)}, st, params)
    params = optim.apply_updates(params, u)
    u, st = tx.update({"w": snp.asarray(g2)}, st, params)
    m = 0.8 * 0.2 * g1 + 0.2 * g2
    v = 0.9 * 0.1 * g1 ** 2 + 0.1 * g2 ** 2
    want = -0.1 / (1 - 0.8 ** 2) * m / (np.sqrt(v) / np.sqrt(1 - 0.9 ** 2) + 1e-8)
    np.testing.assert_allclose(A(u["w"]), want, rtol=1e-12)
    tx = optim.sgd(0.5, momentum=0.5, dampening=0.25)
    st = tx.init(params)
    _, st = tx.update({"w": snp.asarray(g1)}, st)
    u, st = tx.update({"w": snp.asarray(g2)}, st)
    np.testing.assert_allclose(A(u["w"]), -0.5 * (0.5 * g1 + 0.75 * g2), rtol=1e-15)
    tx = optim.adagrad(1.0, lr_decay=0.5)
    st = tx.init(params)
    _, st = tx.update({"w": snp.asarray(g1)}, st)
    u, _ = tx.update({"w": snp.asarray(g2)}, st)
    np.testing.assert_allclose(A(u["w"]), -1 / 1.5 * g2 / (np.sqrt(g1 ** 2 + g2 ** 2) + 1e-10),
                               rtol=1e-13)


def _quad_grad(p, Q, b):
    return Q @ p - b


@pytest.mark.parametrize("name,ours,theirs", [
    ("sgd", lambda: optim.sgd(0.05, momentum=0.9, dampening=0.1, weight_decay=0.01),
     lambda t, ps: t.optim.SGD(ps, 0.05, momentum=0.9, dampening=0.1, weight_decay=0.01)),
    ("nesterov", lambda: optim.sgd(0.05, momentum=0.8, nesterov=True, maximize=True),
     lambda t, ps: t.optim.SGD(ps, 0.05, momentum=0.8, nesterov=True, maximize=True)),
    ("adam", lambda: optim.adam(0.05, betas=(0.8, 0.95), weight_decay=0.1, amsgrad=True),
     lambda t, ps: t.optim.Adam(ps, 0.05, betas=(0.8, 0.95), weight_decay=0.1, amsgrad=True)),
    ("adamw", lambda: optim.adamw(0.05, weight_decay=0.2),
     lambda t, ps: t.optim.AdamW(ps, 0.05, weight_decay=0.2)),
    ("rmsprop", lambda: optim.rmsprop(0.01, alpha=0.9, momentum=0.5, centered=True,
                                      weight_decay=0.1),
     lambda t, ps: t.optim.RMSprop(ps, 0.01, alpha=0.9, momentum=0.5, centered=True,
                                   weight_decay=0.1)),
    ("adagrad", lambda: optim.adagrad(0.1, lr_decay=0.1, initial_accumulator_value=0.5),
     lambda t, ps: t.optim.Adagrad(ps, 0.1, lr_decay=0.1, initial_accumulator_value=0.5)),
])
def test_optimizers_match_torch(name, ours, theirs):
    torch = pytest.importorskip("torch")
    rng = np.random.default_rng(1)
    M = rng.standard_normal((4, 4))
    Q, b = M @ M.T + np.eye(4), rng.standard_normal(4)
    p0 = rng.standard_normal(4)
    tp = torch.tensor(p0.copy(), requires_grad=True)
    topt = theirs(torch, [tp])
    tx = ours()
    params = {"p": snp.asarray(p0)}
    state = tx.init(params)
    for _ in range(6):
        g = _quad_grad(A(params["p"]), Q, b)
        upd, state = tx.update({"p": snp.asarray(g)}, state, params)
        params = optim.apply_updates(params, upd)
        tp.grad = torch.tensor(_quad_grad(tp.detach().numpy(), Q, b))
        topt.step()
    np.testing.assert_allclose(A(params["p"]), tp.detach().numpy(), rtol=1e-10, atol=1e-12)


def test_lbfgs_matches_torch_without_line_search():
    torch = pytest.importorskip("torch")
    rng = np.random.default_rng(2)
    M = rng.standard_normal((5, 5))
    Q, b = M @ M.T + 0.5 * np.eye(5), rng.standard_normal(5)
    p0 = rng.standard_normal(5)
    params = {"p": snp.asarray(p0)}

    opt = optim.LBFGS(params, lr=0.5, max_iter=7, history_size=3)

    def closure():
        p = A(opt.params["p"])  # the optimizer holds the current parameters
        return 0.5 * p @ Q @ p - b @ p, {"p": snp.asarray(Q @ p - b)}

    tp = torch.tensor(p0.copy(), requires_grad=True)
    topt = torch.optim.LBFGS([tp], lr=0.5, max_iter=7, history_size=3)

    def tclosure():
        topt.zero_grad()
        loss = 0.5 * tp @ torch.tensor(Q) @ tp - torch.tensor(b) @ tp
        loss.backward()
        return loss

    for _ in range(2):
        opt.step(closure)
        topt.step(tclosure)
    np.testing.assert_allclose(A(opt.params["p"]), tp.detach().numpy(), rtol=1e-9, atol=1e-12)


def _rosen(p):
    x, y = p
    f = (1 - x) ** 2 + 100 * (y - x * x) ** 2
    g = np.array([-2 * (1 - x) - 400 * x * (y - x * x), 200 * (y - x * x)])
    return f, g


def test_lbfgs_strong_wolfe_and_maximize_on_rosenbrock():
    for maximize in (False, True):
        params = [snp.asarray(np.array([-1.2, 1.0]))]
        sign = -1.0 if maximize else 1.0
        opt = optim.LBFGS(params, lr=1, max_iter=100, line_search_fn="strong_wolfe",
                          maximize=maximize)

        def closure():
            f, g = _rosen(A(opt.params[0]))
            return sign * f, [snp.asarray(sign * g)]

        first = opt.step(closure)
        assert first == pytest.approx(sign * _rosen(np.array([-1.2, 1.0]))[0])
        # stops on tolerance_change (1e-9 on the loss) near the minimum (1, 1)
        np.testing.assert_allclose(A(opt.params[0]), [1.0, 1.0], atol=1e-4)
        assert opt.state["func_evals"] < 150
    with pytest.raises(ValueError, match="line_search_fn"):
        optim.LBFGS(params, line_search_fn="backtracking")


def test_lbfgs_strong_wolfe_matches_torch():
    torch = pytest.importorskip("torch")
    tp = torch.tensor([-1.2, 1.0], dtype=torch.float64, requires_grad=True)
    topt = torch.optim.LBFGS([tp], lr=1, max_iter=30, line_search_fn="strong_wolfe")

    def tclosure():
        topt.zero_grad()
        f = (1 - tp[0]) ** 2 + 100 * (tp[1] - tp[0] ** 2) ** 2
        f.backward()
        return f

    opt = optim.LBFGS([snp.asarray(np.array([-1.2, 1.0]))], lr=1, max_iter=30,
                      line_search_fn="strong_wolfe")

    def closure():
        f, g = _rosen(A(opt.params[0]))
        return f, [snp.asarray(g)]

    for _ in range(2):
        topt.step(tclosure)
        opt.step(closure)
    np.testing.assert_allclose(A(opt.params[0]), tp.detach().numpy(), rtol=1e-9)
    assert opt.state["func_evals"] == topt.state[tp]["func_evals"]


def test_strong_wolfe_conditions_hold():
    from starling.nn.lbfgs import strong_wolfe_np
    x = np.array([-1.2, 1.0])
    f, g = _rosen(x)
    d = -g
    f_new, g_new, t, _ = strong_wolfe_np(lambda x, t, d: _rosen(x + t * d), x, 1.0, d, f, g,
                                         g @ d)
    assert f_new <= f + 1e-4 * t * (g @ d)
    assert abs(g_new @ d) <= 0.9 * abs(g @ d)


def test_pure_lbfgs_equals_one_iteration_steps_and_compiles():
    rng = np.random.default_rng(3)
    M = rng.standard_normal((4, 4))
    Q, b = M @ M.T + np.eye(4), rng.standard_normal(4)
    p0 = rng.standard_normal(4)
    tx = optim.lbfgs(lr=0.8, history_size=3)
    params = {"p": snp.asarray(p0)}
    state = tx.init(params)
    step = starling.compile(lambda g, s, p: tx.update(g, s, p))
    ref = optim.LBFGS({"p": snp.asarray(p0)}, lr=0.8, max_iter=1, history_size=3)

    def closure():
        p = A(ref.params["p"])
        return 0.5 * p @ Q @ p - b @ p, {"p": snp.asarray(Q @ p - b)}

    for _ in range(6):
        g = {"p": snp.asarray(_quad_grad(A(params["p"]), Q, b))}
        upd, state = step(g, state, params)
        params = optim.apply_updates(params, upd)
        ref.step(closure)
        np.testing.assert_allclose(A(params["p"]), A(ref.params["p"]), rtol=1e-9, atol=1e-12)
    assert step.num_compiles == 1


def test_schedules():
    c = np.arange(0, 120, 7)
    cos = optim.cosine_decay(0.1, 100, alpha=0.1)
    want = 0.1 * (0.9 * 0.5 * (1 + np.cos(np.pi * np.minimum(c, 100) / 100)) + 0.1)
    np.testing.assert_allclose(A(cos(snp.asarray(c))), want, rtol=1e-6)
    wu = optim.linear_warmup(1.0, 10, init_value=0.1)
    np.testing.assert_allclose([float(wu(i)) for i in (0, 5, 10, 50)], [0.1, 0.55, 1.0, 1.0],
                               rtol=1e-6)
    wc = optim.warmup_cosine_decay(0.0, 1.0, 10, 110, end_value=0.01)
    vals = [float(wc(i)) for i in (0, 5, 10, 60, 110, 200)]
    np.testing.assert_allclose(vals, [0.0, 0.5, 1.0, 0.01 + 0.99 * 0.5, 0.01, 0.01], rtol=1e-5,
                               atol=1e-7)
    sd = optim.step_decay(1.0, 30, gamma=0.5)
    np.testing.assert_allclose([float(sd(i)) for i in (0, 29, 30, 95)], [1, 1, 0.5, 0.125])
    ed = optim.exponential_decay(2.0, 0.5, 10, staircase=True)
    np.testing.assert_allclose([float(ed(i)) for i in (0, 9, 10, 25)], [2, 2, 1, 0.5])
    assert float(optim.constant(0.3)(100)) == pytest.approx(0.3)
    with pytest.raises(ValueError):
        optim.cosine_decay(0.1, 0)
    # a schedule drives any optimizer through the step counter in its state
    tx = optim.sgd(optim.step_decay(1.0, 1, gamma=0.5))
    params = {"w": snp.zeros(2)}
    st = tx.init(params)
    lrs = []
    for _ in range(3):
        u, st = tx.update({"w": snp.ones(2)}, st)
        lrs.append(-float(A(u["w"])[0]))
    assert lrs == [1.0, 0.5, 0.25]


def test_clipping_and_chain():
    g = {"a": snp.asarray([3.0, 0.0]), "b": snp.asarray([[4.0]])}
    clipped, norm = optim.clip_grad_norm(g, 1.0)
    assert float(norm) == pytest.approx(5.0)
    np.testing.assert_allclose(A(clipped["a"]), [3 / (5 + 1e-6), 0], rtol=1e-6)
    same, _ = optim.clip_grad_norm(g, 10.0)
    np.testing.assert_array_equal(A(same["b"]), A(g["b"]))
    tx = optim.chain(optim.clip_by_global_norm(1.0), optim.sgd(1.0))
    st = tx.init(g)
    u, st = tx.update(g, st)
    np.testing.assert_allclose(A(u["b"]), [[-4 / (5 + 1e-6)]], rtol=1e-6)
    assert float(optim.global_norm([snp.ones(4), snp.ones((2, 2))])) == pytest.approx(8 ** .5)


def test_stateful_wrappers_with_a_module(rng):
    net = nn.Sequential(nn.Linear(3, 4, key=0), nn.Tanh(), nn.Linear(4, 2, key=1))
    net[0].requires_grad_(False)
    x = snp.asarray(rng.standard_normal((8, 3)).astype(np.float32))
    y = snp.asarray(rng.integers(0, 2, 8))
    vg = nn.value_and_grad(lambda m: F.cross_entropy(m(x), y))
    frozen_w = A(net[0].weight).copy()
    opt = optim.Adam(net, lr=0.05)
    losses = []
    for _ in range(10):
        loss, grads = vg(net)
        losses.append(float(loss))
        assert opt.step(grads) is net  # rebinds in place and returns the model
    assert losses[-1] < losses[0]
    np.testing.assert_array_equal(A(net[0].weight), frozen_w)  # frozen: not optimized
    assert int(opt.state.count) == 10
    with pytest.raises(ValueError, match="missing"):
        opt.step({"2.weight": grads["2.weight"]})
    # module-shaped gradients (starling.grad over the module) are accepted too
    g_tree = starling.grad(lambda m: F.cross_entropy(m(x), y))(net)
    opt.step(g_tree)
    with pytest.raises(nn.ModuleMutationError, match="pure pair"):
        starling.compile(lambda g: (opt.step(g), snp.zeros(()))[1])(grads)
    # plain pytrees: step returns the new parameters
    params = [snp.ones(2)]
    sgd = optim.SGD(params, lr=0.5, compiled=False)
    new = sgd.step([snp.ones(2)])
    np.testing.assert_allclose(A(new[0]), [0.5, 0.5])
    assert sgd.params is new


def test_pure_optimizer_under_compile_matches_eager(rng):
    net = nn.Linear(3, 2, key=0)
    x = snp.asarray(rng.standard_normal((6, 3)).astype(np.float32))
    tx = optim.chain(optim.clip_by_global_norm(0.5),
                     optim.adamw(optim.warmup_cosine_decay(0.0, 0.1, 2, 10)))

    def step(params, state):
        loss, g = starling.value_and_grad(
            lambda p: snp.mean(nn.functional_call(net, p, x) ** 2))(params)
        u, state = tx.update(g, state, params)
        return optim.apply_updates(params, u), state, loss

    fast = starling.compile(step)
    p1 = p2 = nn.trainable_parameters(net)
    s1 = s2 = tx.init(p1)
    for _ in range(4):
        p1, s1, l1 = step(p1, s1)
        p2, s2, l2 = fast(p2, s2)
    for k in p1:
        np.testing.assert_allclose(A(p1[k]), A(p2[k]), rtol=1e-5, atol=1e-7)
    assert fast.num_compiles == 1
    # apply_updates on a module with a dict of updates gives a new module
    new = optim.apply_updates(net, {"bias": snp.ones(2)})
    np.testing.assert_allclose(A(new.bias), A(net.bias) + 1)


def test_invalid_hyperparameters():
    with pytest.raises(ValueError):
        optim.sgd(-1.0)
    with pytest.raises(ValueError, match="nesterov"):
        optim.sgd(0.1, nesterov=True)
    with pytest.raises(ValueError):
        optim.adam(betas=(1.0, 0.9))
    with pytest.raises(ValueError, match="weight_decay needs params"):
        optim.sgd(0.1, weight_decay=0.1).update({"w": snp.ones(1)},
                                                optim.sgd(0.1).init({"w": snp.ones(1)}))
    assert math.isfinite(float(optim.global_norm({})))
