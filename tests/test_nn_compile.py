"""nn.compile: a PyTorch-style training step (nn.value_and_grad + optimizer.step, in place) staged
once per signature. Every test runs the same step eagerly on an identically built model and
optimizer and compares: losses, parameters, buffers and optimizer state after N steps must agree
within float32 rounding (the compiled program fuses and reorders float32 arithmetic)."""
from __future__ import annotations

import numpy as np
import pytest

import starling
import starling.numpy as snp
from starling import nn, optim, random
from starling.nn import functional as F

RTOL, ATOL = 2e-5, 1e-6


def A(x):
    return np.asarray(x)


class Net(nn.Module):
    """Linear -> ReLU -> BatchNorm (running statistics) -> Dropout (explicit key) -> Linear.
    (No BatchNorm right after a biased Linear: that bias's gradient is rounding noise, which
    Adam's normalisation would turn into steps of size lr in either direction.)"""

    def __init__(self, key=0, d_in=5, hidden=16, classes=3):
        super().__init__()
        k1, k2 = random.split(random.key(key))
        self.fc1 = nn.Linear(d_in, hidden, key=k1)
        self.bn = nn.BatchNorm1d(hidden)
        self.drop = nn.Dropout(0.25)
        self.fc2 = nn.Linear(hidden, classes, key=k2)

    def forward(self, x, *, key=None):
        return self.fc2(self.drop(self.bn(F.relu(self.fc1(x))), key=key))


def loss_fn(model, x, y, key):
    return F.cross_entropy(model(x, key=key), y)


LOSS_AND_GRAD = nn.value_and_grad(loss_fn)


def train_step(model, opt, x, y, key):
    loss, grads = LOSS_AND_GRAD(model, x, y, key)
    opt.step(grads)
    return loss


def batches(n, batch=8, d_in=5, classes=3, seed=0):
    rng = np.random.default_rng(seed)
    keys = random.split(random.key(seed + 100), n)
    return [(snp.asarray(rng.standard_normal((batch, d_in)).astype(np.float32)),
             snp.asarray(rng.integers(0, classes, batch)), keys[i]) for i in range(n)]


def assert_same_state(a, b, exact_ints=True):
    sa, sb = a.state_dict(), b.state_dict()
    assert list(sa) == list(sb)
    for k in sa:
        assert sa[k].dtype == sb[k].dtype, k
        if exact_ints and not np.issubdtype(A(sa[k]).dtype, np.floating):
            np.testing.assert_array_equal(A(sa[k]), A(sb[k]), err_msg=k)
        else:
            np.testing.assert_allclose(A(sa[k]), A(sb[k]), rtol=RTOL, atol=ATOL, err_msg=k)


def assert_same_tree(a, b):
    la, ta = starling.tree.flatten(a)
    lb, tb = starling.tree.flatten(b)
    assert ta == tb
    for x, y in zip(la, lb):
        assert x.dtype == y.dtype
        np.testing.assert_allclose(A(x), A(y), rtol=RTOL, atol=ATOL)


def assert_as_accurate(ref, eager, comp, factor=4.0, nudged=None):
    """Tensor by tensor, ``comp`` (compiled, float32) is as close to ``ref`` (the same steps
    in float64) as ``eager`` float32 is: compiling only reorders float32 rounding. (Optimizers
    that divide by running gradient statistics amplify rounding, so a fixed tolerance between
    compiled and eager float32 would be arbitrary.)

    One run's rounding error is one sample of that noise, and a lucky one can be small where an
    optimizer amplifies it (centered RMSprop divides a near-cancelling gradient entry by the
    root of an almost zero variance). ``nudged``, when given, is a second eager float32 run from
    parameters one ulp away: the envelope is the larger of the two runs' errors."""
    refs, tr = starling.tree.flatten(ref)
    eagers, te = starling.tree.flatten(eager)
    comps, tc = starling.tree.flatten(comp)
    assert tr == te == tc
    others = starling.tree.flatten(nudged)[0] if nudged is not None else [None] * len(refs)
    for r, e, c, n in zip(refs, eagers, comps, others):
        assert e.dtype == c.dtype
        R, E, C = (np.asarray(v).astype(np.float64) for v in (r, e, c))
        if not np.issubdtype(np.asarray(e).dtype, np.floating):
            np.testing.assert_array_equal(C, E)
            np.testing.assert_array_equal(C, R)
            continue
        err_c, err_e = np.linalg.norm(C - R), np.linalg.norm(E - R)
        if n is not None:
            err_e = max(err_e, np.linalg.norm(np.asarray(n).astype(np.float64) - R))
        assert err_c <= factor * err_e + 1e-6 * np.linalg.norm(R) + 1e-12, (err_c, err_e)


def nudge_params(model, seed=1):
    """Moves every float parameter of ``model`` one ulp up or down (at random), in place."""
    rng = np.random.default_rng(seed)
    state = {}
    for k, v in model.state_dict().items():
        a = np.asarray(v)
        if a.dtype.kind == "f":
            a = np.nextafter(a, np.where(rng.random(a.shape) < 0.5, np.inf, -np.inf).astype(
                a.dtype))
        state[k] = snp.asarray(a)
    model.load_state_dict(state)
    return model


def run_both(make_opt, steps=6, step=train_step, data=None, model_fn=Net, reference=False):
    """(eager model, eager opt, compiled model, compiled opt, compiled fn[, float64 model,
    float64 opt, nudged model, nudged opt]) after ``steps`` steps of ``step`` run eagerly and
    through nn.compile (and with ``reference`` eagerly in float64, and eagerly in float32 from
    parameters one ulp away)."""
    data = data or batches(steps)
    m_e, m_c = model_fn(), model_fn()
    o_e, o_c = make_opt(m_e), make_opt(m_c)
    fast = nn.compile(step)
    for x, y, k in data:
        l_e = step(m_e, o_e, x, y, k)
        l_c = fast(m_c, o_c, x, y, k)
        np.testing.assert_allclose(float(l_c), float(l_e), rtol=RTOL, atol=ATOL)
    if not reference:
        return m_e, o_e, m_c, o_c, fast
    m_r = model_fn().to(snp.float64)
    o_r = make_opt(m_r)
    m_n = nudge_params(model_fn())
    o_n = make_opt(m_n)
    for x, y, k in data:
        step(m_r, o_r, snp.astype(x, snp.float64), y, k)
        step(m_n, o_n, x, y, k)
    return m_e, o_e, m_c, o_c, fast, m_r, o_r, m_n, o_n


@pytest.mark.parametrize("make_opt", [
    lambda m: optim.Adam(m, lr=0.01),
    lambda m: optim.AdamW(m, lr=0.01, amsgrad=True),
    lambda m: optim.SGD(m, lr=0.1, momentum=0.9, nesterov=True, weight_decay=1e-3),
    lambda m: optim.RMSprop(m, lr=0.01, momentum=0.5, centered=True),
    lambda m: optim.Adagrad(m, lr=0.1),
    lambda m: optim.Adam(m, lr=0.01, compiled=False),
], ids=["adam", "adamw-amsgrad", "sgd-nesterov", "rmsprop-centered", "adagrad", "adam-eager"])
def test_compiled_step_matches_eager(make_opt):
    m_e, o_e, m_c, o_c, fast, m_r, o_r, m_n, o_n = run_both(make_opt, reference=True)
    # parameters and BatchNorm running statistics, optimizer state
    assert_as_accurate(dict(m_r.state_dict()), dict(m_e.state_dict()), dict(m_c.state_dict()),
                       nudged=dict(m_n.state_dict()))
    assert_as_accurate(o_r.state, o_e.state, o_c.state, nudged=o_n.state)
    assert int(m_c.bn.num_batches_tracked) == 6
    assert fast.num_compiles == 1        # one signature: staged once, reused five times
    assert not any(isinstance(v, starling.core.trace.Tracer) for v in m_c.state_dict().values())


def test_schedule_and_clipping_follow_the_step_counter():
    tx = optim.chain(optim.clip_by_global_norm(0.1),
                     optim.adam(optim.warmup_cosine_decay(0.0, 0.05, 3, 10)))
    m_e, o_e, m_c, o_c, fast = run_both(lambda m: optim.Optimizer(m, tx), steps=8)
    assert_same_state(m_e, m_c)
    assert_same_tree(o_e.state, o_c.state)
    assert fast.num_compiles == 1


def test_dropout_keys_are_arguments_not_constants():
    net, ref = Net(), Net()
    opt, ref_opt = optim.Adam(net, lr=0.01), optim.Adam(ref, lr=0.01)
    fast = nn.compile(train_step)
    (x, y, k1), (_, _, k2) = batches(2)
    losses = []
    for k in (k1, k2, k1):   # a key baked into the program would repeat k1's mask
        losses.append(float(fast(net, opt, x, y, k)))
        np.testing.assert_allclose(losses[-1], float(train_step(ref, ref_opt, x, y, k)),
                                   rtol=RTOL, atol=ATOL)
    assert losses[0] != losses[1]
    assert_same_state(ref, net)
    assert fast.num_compiles == 1


def test_frozen_parameters_are_not_trained():
    def model_fn():
        m = Net()
        m.fc1.requires_grad_(False)
        return m
    frozen = A(model_fn().fc1.weight)
    m_e, o_e, m_c, o_c, fast = run_both(lambda m: optim.Adam(m, lr=0.05), model_fn=model_fn)
    np.testing.assert_array_equal(A(m_c.fc1.weight), frozen)
    np.testing.assert_array_equal(A(m_c.fc1.bias), A(model_fn().fc1.bias))
    assert_same_state(m_e, m_c)


def test_eval_mode_batchnorm_and_recompilation():
    net = Net()
    opt = optim.Adam(net, lr=0.01)
    fast = nn.compile(train_step)
    data = batches(4)
    for x, y, k in data[:2]:
        fast(net, opt, x, y, k)
    assert fast.num_compiles == 1
    rm = A(net.bn.running_mean)
    net.eval()   # training is static configuration: a new program, without statistic updates
    fast(net, opt, *data[2])
    assert fast.num_compiles == 2
    np.testing.assert_array_equal(A(net.bn.running_mean), rm)
    assert int(net.bn.num_batches_tracked) == 2
    net.train()
    fast(net, opt, *data[3])
    assert fast.num_compiles == 2   # back to the first signature
    assert int(net.bn.num_batches_tracked) == 3


def test_new_shape_dtype_or_structure_stages_again():
    net = Net()
    opt = optim.SGD(net, lr=0.01)
    fast = nn.compile(train_step)
    x, y, k = batches(1)[0]
    fast(net, opt, x, y, k)
    fast(net, opt, x, y, k)
    assert fast.num_compiles == 1
    fast(net, opt, x[:4], y[:4], k)                     # another batch size
    assert fast.num_compiles == 2
    fast(net, opt, snp.astype(x, snp.float64), y, k)   # another input dtype
    assert fast.num_compiles == 3
    # a parameter of another dtype (load_state_dict(assign=True)): a new signature, and the
    # optimizer's update compiles for it too
    sd = {k: (snp.astype(v, snp.float64) if k == "fc2.bias" else v)
          for k, v in net.state_dict().items()}
    net.load_state_dict(sd, assign=True)
    fast(net, opt, x, y, k)
    assert fast.num_compiles == 4
    assert net.fc2.bias.dtype == snp.float64
    # another optimizer object (its hyperparameters are constants of the program) stages again
    opt2 = optim.SGD(net, lr=0.5)
    fast(net, opt2, x, y, k)
    assert fast.num_compiles == 5


def test_another_module_of_the_same_structure_reuses_the_program():
    fast_vg = nn.compile(LOSS_AND_GRAD)
    (x, y, k), = batches(1)
    for seed in (0, 1, 2):
        net, ref = Net(seed), Net(seed)
        loss, grads = fast_vg(net, x, y, k)
        ref_loss, ref_grads = LOSS_AND_GRAD(ref, x, y, k)
        np.testing.assert_allclose(float(loss), float(ref_loss), rtol=RTOL)
        assert_same_tree(grads, ref_grads)
        assert_same_state(ref, net)      # running statistics written back, as eagerly
    assert fast_vg.num_compiles == 1


def test_an_optimizer_of_another_model_is_not_confused_with_the_argument():
    # trace with (a, opt_a); then call with (b, opt_a): opt_a must still update a, not b
    def step(model, opt, x, y, key):
        loss, grads = LOSS_AND_GRAD(model, x, y, key)
        opt.step(grads)
        return loss
    a, b = Net(0), Net(1)
    opt_a = optim.SGD(a, lr=0.1)
    fast = nn.compile(step)
    x, y, k = batches(1)[0]
    fast(a, opt_a, x, y, k)
    b_before, a_before = A(b.fc1.weight), A(a.fc1.weight)
    ref_a, ref_b = Net(0), Net(1)
    ref_opt = optim.SGD(ref_a, lr=0.1)
    step(ref_a, ref_opt, x, y, k)
    step(ref_b, ref_opt, x, y, k)    # eager: gradients of b, applied to a
    fast(b, opt_a, x, y, k)
    assert fast.num_compiles == 2
    np.testing.assert_allclose(A(a.fc1.weight), A(ref_a.fc1.weight), rtol=RTOL, atol=ATOL)
    assert not np.allclose(A(a.fc1.weight), a_before)
    np.testing.assert_allclose(A(b.bn.running_mean), A(ref_b.bn.running_mean), rtol=RTOL,
                               atol=ATOL)
    np.testing.assert_array_equal(A(b.fc1.weight), b_before)


def test_model_from_a_closure_through_its_optimizer():
    net = Net()
    opt = optim.Adam(net, lr=0.01)

    @nn.compile
    def step(opt, x, y, key):              # the model is lifted as the optimizer's module
        loss, grads = LOSS_AND_GRAD(net, x, y, key)
        opt.step(grads)
        return loss
    ref = Net()
    ref_opt = optim.Adam(ref, lr=0.01)
    for x, y, k in batches(3):
        step(opt, x, y, k)
        train_step(ref, ref_opt, x, y, k)
    assert_same_state(ref, net)


def test_state_is_read_afresh_each_call_and_state_dicts_round_trip(tmp_path):
    data = batches(6)
    net = Net()
    opt = optim.Adam(net, lr=0.01)
    fast = nn.compile(train_step)
    init = {k: A(v).copy() for k, v in net.state_dict().items()}
    for x, y, k in data[:3]:
        fast(net, opt, x, y, k)
    # checkpoint model and optimizer (safetensors + the optimizer state pytree)
    starling.save(tmp_path / "net.safetensors", net.state_dict())
    saved_opt = opt.state_dict()
    for x, y, k in data[3:]:
        fast(net, opt, x, y, k)
    # resume from the checkpoint, eagerly: the same end point
    ref = Net(key=7)
    ref.load_state_dict(starling.load(tmp_path / "net.safetensors"))
    ref_opt = optim.Adam(ref, lr=0.01)
    ref_opt.load_state_dict(saved_opt)
    for x, y, k in data[3:]:
        train_step(ref, ref_opt, x, y, k)
    assert_same_state(ref, net)
    assert_same_tree(ref_opt.state, opt.state)
    # load_state_dict between compiled calls takes effect (values are not baked in)
    net.load_state_dict(init)
    fresh = Net()
    opt2, fresh_opt = optim.SGD(net, lr=0.1), optim.SGD(fresh, lr=0.1)
    fast(net, opt2, *data[0])
    train_step(fresh, fresh_opt, *data[0])
    assert_same_state(fresh, net)


def test_lbfgs_with_a_compiled_closure_matches_eager():
    rng = np.random.default_rng(1)
    x = snp.asarray(rng.standard_normal((20, 3)).astype(np.float32))
    y = snp.asarray((rng.standard_normal(20) > 0).astype(np.int64))

    def loss(m, x, y):
        return F.cross_entropy(m(x), y)

    vg = nn.value_and_grad(loss)
    fast_vg = nn.compile(vg)

    def make():
        return nn.Sequential(nn.Linear(3, 4, key=0), nn.Tanh(), nn.Linear(4, 2, key=1))

    def lbfgs(m):
        return optim.LBFGS(m, lr=1.0, max_iter=10, line_search_fn="strong_wolfe")
    a, b, r = make(), make(), make().to(snp.float64)
    oa, ob, orf = lbfgs(a), lbfgs(b), lbfgs(r)
    x64 = snp.astype(x, snp.float64)
    for _ in range(2):
        la = oa.step(lambda: vg(a, x, y))
        lb = ob.step(lambda: fast_vg(b, x, y))
        lr = orf.step(lambda: vg(r, x64, y))
        assert abs(lb - lr) <= 4 * abs(la - lr) + 1e-6
    assert_as_accurate(dict(r.state_dict()), dict(a.state_dict()), dict(b.state_dict()))
    assert fast_vg.num_compiles == 1
    with pytest.raises(TypeError, match="LBFGS cannot be staged"):
        nn.compile(lambda opt: opt.step(lambda: vg(a, x, y)))(oa)


def test_pytree_parameters_optimizer():
    w = snp.asarray(np.array([1.0, -2.0, 3.0], np.float32))
    target = snp.asarray(np.array([0.5, 0.5, 0.5], np.float32))
    loss = lambda p, t: snp.sum((p["w"] - t) ** 2)   # noqa: E731

    def step(opt, t):
        value, g = starling.value_and_grad(loss)(opt.params, t)
        opt.step(g)
        return value
    eager, comp = optim.Adam({"w": w}, lr=0.1), optim.Adam({"w": w}, lr=0.1)
    fast = nn.compile(step)
    for _ in range(5):
        np.testing.assert_allclose(float(fast(comp, target)), float(step(eager, target)),
                                   rtol=RTOL)
    assert_same_tree(eager.params, comp.params)
    assert_same_tree(eager.state, comp.state)


def test_tied_submodule_and_module_outputs():
    class Tied(nn.Module):
        def __init__(self):
            super().__init__()
            self.shared = nn.Linear(4, 4, key=0)
            self.a = self.shared            # one object reachable three times
            self.b = self.shared

        def forward(self, x):
            return self.b(F.tanh(self.a(x)))

    def step(model, opt, x):
        loss, g = nn.value_and_grad(lambda m, x: snp.mean(m(x) ** 2))(model, x)
        opt.step(g)
        return loss, model               # a module in the output: a new module value

    x = snp.asarray(np.random.default_rng(0).standard_normal((6, 4)).astype(np.float32))
    e, c = Tied(), Tied()
    oe, oc = optim.SGD(e, lr=0.1), optim.SGD(c, lr=0.1)
    fast = nn.compile(step)
    for _ in range(3):
        le, me = step(e, oe, x)
        lc, mc = fast(c, oc, x)
        np.testing.assert_allclose(float(lc), float(le), rtol=RTOL)
    assert c.a is c.shared and c.b is c.shared
    assert_same_state(e, c)
    assert type(mc) is Tied and mc is not c
    np.testing.assert_allclose(A(mc.shared.weight), A(c.shared.weight), rtol=RTOL)


def test_static_arguments():
    def step(model, opt, x, y, key, scale):
        loss, grads = LOSS_AND_GRAD(model, x, y, key)
        if scale == "double":              # Python control flow on a static argument
            loss = loss * 2
        opt.step(grads)
        return loss
    net = Net()
    opt = optim.SGD(net, lr=0.0)
    fast = nn.compile(step, static_argnames="scale")
    x, y, k = batches(1)[0]
    net.eval()
    one = float(fast(net, opt, x, y, k, scale="single"))
    two = float(fast(net, opt, x, y, k, scale="double"))
    assert two == pytest.approx(2 * one, rel=1e-6) and fast.num_compiles == 2
    fast(net, opt, x, y, k, scale="single")
    assert fast.num_compiles == 2
    with pytest.raises(TypeError, match="hashable"):
        fast(net, opt, x, y, k, scale=["list"])
    pos = nn.compile(step, static_argnums=5)
    assert float(pos(net, opt, x, y, k, "double")) == pytest.approx(two, rel=1e-6)
    with pytest.raises(ValueError, match="out of range"):
        nn.compile(step, static_argnums=9)(net, opt, x, y, k, "single")


def test_structure_changes_inside_raise_and_leave_the_objects_intact():
    net = Net()
    opt = optim.Adam(net, lr=0.01)
    before = {k: A(v).copy() for k, v in net.state_dict().items()}
    x, y, k = batches(1)[0]

    def switches_mode(model, opt, x, y, key):
        loss = train_step(model, opt, x, y, key)
        model.eval()
        return loss

    def adds_attribute(model, opt, x, y, key):
        loss = train_step(model, opt, x, y, key)
        model.extra = snp.ones(3)
        return loss

    def fails(model, opt, x, y, key):
        train_step(model, opt, x, y, key)
        raise RuntimeError("boom")

    with pytest.raises(nn.ModuleMutationError, match=r"training: True -> False"):
        nn.compile(switches_mode)(net, opt, x, y, k)
    with pytest.raises(nn.ModuleMutationError, match="array attributes"):
        nn.compile(adds_attribute)(net, opt, x, y, k)
    with pytest.raises(RuntimeError, match="boom"):
        nn.compile(fails)(net, opt, x, y, k)

    class CountingSGD(optim.SGD):      # keeps per-step state outside ``state``: not lifted
        def step(self, grads):
            self.steps_taken = getattr(self, "steps_taken", 0) + 1
            return super().step(grads)
    counting = CountingSGD(net, lr=0.1)
    with pytest.raises(nn.ModuleMutationError, match=r"\['steps_taken'\]"):
        nn.compile(train_step)(net, counting, x, y, k)
    assert not hasattr(counting, "steps_taken")
    assert net.training and "extra" not in net.__dict__
    for name, v in net.state_dict().items():
        assert type(v) is starling.Array, name
        np.testing.assert_array_equal(A(v), before[name])
    assert int(opt.state.count) == 0
    train_step(net, opt, x, y, k)            # still usable eagerly
    assert int(opt.state.count) == 1


def test_mutating_what_was_not_lifted_raises():
    net, other = Net(), Net(1).eval()   # eval: its forward pass updates no statistics
    opt = optim.Adam(net, lr=0.01)
    other_opt = optim.SGD(other, lr=0.1)
    x, y, k = batches(1)[0]

    def steps_another_optimizer(model, opt, x, y, key):
        loss, grads = LOSS_AND_GRAD(other, x, y, key)
        other_opt.step(grads)
        return loss

    with pytest.raises(nn.ModuleMutationError, match="stateful optimizers"):
        nn.compile(steps_another_optimizer)(net, opt, x, y, k)
    with pytest.raises(nn.ModuleMutationError):
        nn.compile(lambda m, x: other.fc1.__setattr__("bias", m.fc1(x)[0]))(net, x)
    # inside a plain starling.compile the stateful step still raises (pure functions only)
    with pytest.raises(nn.ModuleMutationError):
        starling.compile(lambda x, y, key: train_step(net, opt, x, y, key))(x, y, k)
    # a tracer of a nested transformation may not be stored in a lifted module
    def leaks(model, x):
        starling.grad(lambda s: model.fc1.__setattr__("bias", s * model.fc1.bias)
                      or snp.sum(s))(snp.ones(()))
        return x
    with pytest.raises(nn.ModuleMutationError, match="traced value"):
        nn.compile(leaks)(net, x)


def test_nested_calls_trace_through():
    net = Net()
    opt = optim.SGD(net, lr=0.1)
    inner = nn.compile(train_step)

    @nn.compile
    def two_steps(model, opt, data):
        return [inner(model, opt, *b) for b in data]
    data = batches(2)
    ref = Net()
    ref_opt = optim.SGD(ref, lr=0.1)
    losses = two_steps(net, opt, data)
    for (x, y, k), l in zip(data, losses):
        np.testing.assert_allclose(float(l), float(train_step(ref, ref_opt, x, y, k)), rtol=RTOL)
    assert_same_state(ref, net)
    assert inner.num_compiles == 0 and two_steps.num_compiles == 1


def test_lower_shows_one_program():
    net = Net()
    opt = optim.Adam(net, lr=0.01)
    x, y, k = batches(1)[0]
    low = nn.compile(train_step).lower(net, opt, x, y, k)
    n_state = len(net.state_dict()) + len(starling.tree.leaves(opt.state))
    assert len(low.ir.invars) == n_state + 3
    assert repr(nn.compile(train_step)) == "nn.compile(train_step)"
    double = nn.compile(lambda t: {"y": t["x"] * 2})   # no modules: a plain compiled function
    np.testing.assert_array_equal(A(double({"x": snp.ones(3)})["y"]), [2.0, 2.0, 2.0])
    with pytest.raises(ValueError):
        nn.compile(train_step, backend="no-such-backend")


def test_eager_optimizer_step_compiles_once_per_parameter_signature():
    net = Net().eval()
    opt, plain = optim.Adam(net, lr=0.01), optim.Adam(Net().eval(), lr=0.01, compiled=False)
    (x, y, k), = batches(1)
    for _ in range(3):
        opt.step(LOSS_AND_GRAD(net, x, y, k)[1])
    assert opt.num_compiles == 1 and plain.num_compiles == 0
    net.load_state_dict({"fc2.bias": snp.zeros(3, dtype=snp.float64)}, strict=False,
                        assign=True)
    opt.step(LOSS_AND_GRAD(net, x, y, k)[1])
    assert opt.num_compiles == 2
