"""nn.Module: the pytree structure, naming, state dicts, modes, freezing, mutation rules,
containers, functional_call / stateful_call / value_and_grad, modules under grad / vmap /
compile, and training determinism."""
from __future__ import annotations

import collections

import numpy as np
import pytest

import starling
import starling.numpy as snp
from starling import nn, random, tree
from starling.nn import functional as F


def A(x):
    return np.asarray(x)


class Block(nn.Module):
    def __init__(self, d, *, key):
        super().__init__()
        k1, k2 = random.split(key)
        self.fc = nn.Linear(d, d, key=k1)
        self.norm = nn.LayerNorm(d)
        self.scale = snp.ones((d,))
        self.register_buffer("steps", snp.zeros((), dtype=snp.int32))
        self.act = F.gelu
        self.name = "block"

    def forward(self, x):
        return self.norm(self.act(self.fc(x))) * self.scale + x


class Net(nn.Module):
    def __init__(self, key=0):
        super().__init__()
        ks = random.split(random.key(key), 3)
        self.inp = nn.Linear(4, 8, key=ks[0])
        self.blocks = nn.ModuleList([Block(8, key=ks[1]), Block(8, key=ks[2])])
        self.head = nn.Sequential(collections.OrderedDict(drop=nn.Dropout(0.0),
                                                          out=nn.Linear(8, 3, key=ks[0])))

    def forward(self, x):
        x = self.inp(x)
        for b in self.blocks:
            x = b(x)
        return self.head(x)


NAMES = ["inp.weight", "inp.bias",
         "blocks.0.scale", "blocks.0.steps", "blocks.0.fc.weight", "blocks.0.fc.bias",
         "blocks.0.norm.weight", "blocks.0.norm.bias",
         "blocks.1.scale", "blocks.1.steps", "blocks.1.fc.weight", "blocks.1.fc.bias",
         "blocks.1.norm.weight", "blocks.1.norm.bias", "head.out.weight", "head.out.bias"]


def test_names_state_dict_and_pytree_leaves():
    net = Net()
    assert list(net.state_dict()) == NAMES
    params = [n for n, _ in net.named_parameters()]
    assert params == [n for n in NAMES if not n.endswith("steps")]
    assert [n for n, _ in net.named_buffers()] == ["blocks.0.steps", "blocks.1.steps"]
    with_path, _ = tree.flatten_with_path(net)
    assert [".".join(map(str, p)) for p, _ in with_path] == NAMES
    assert all(a is b for (_, a), b in zip(with_path, net.state_dict().values()))
    assert len(list(net.parameters())) == 14
    assert [n for n, _ in net.named_modules()][:4] == ["", "inp", "blocks", "blocks.0"]
    assert net.get_submodule("blocks.1.fc") is net.blocks[1].fc
    # unflatten gives a new, equal-structured module; static config is aux data
    new = tree.map(lambda x: x * 2, net)
    assert type(new) is Net and new is not net and new.blocks[0].name == "block"
    assert new.blocks[0].act is F.gelu
    np.testing.assert_array_equal(A(new.inp.weight), 2 * A(net.inp.weight))
    assert tree.structure(new) == tree.structure(net)
    assert tree.structure(net.eval()) != tree.structure(Net())  # training flag is static
    # module printing
    r = repr(Net())
    assert "(blocks): ModuleList(" in r and "(fc): Linear(in_features=8, out_features=8" in r
    assert "(drop): Dropout(p=0.0)" in r


def test_load_state_dict_round_trip_and_errors():
    a, b = Net(0), Net(1)
    assert not np.array_equal(A(a.inp.weight), A(b.inp.weight))
    res = b.load_state_dict(a.state_dict())
    assert res.missing_keys == [] and res.unexpected_keys == []
    for k, v in a.state_dict().items():
        np.testing.assert_array_equal(A(b.state_dict()[k]), A(v))
    sd = dict(a.state_dict())
    sd["inp.weight"] = np.zeros((3, 3), np.float32)
    del sd["head.out.bias"]
    sd["extra.weight"] = np.zeros(2)
    with pytest.raises(nn.StateDictError) as e:
        b.load_state_dict(sd)
    msg = str(e.value)
    assert "size mismatch for inp.weight: expected shape (8, 4), got (3, 3)" in msg
    assert "missing key(s): 'head.out.bias'" in msg and "unexpected key(s): 'extra.weight'" in msg
    del sd["inp.weight"]
    res = b.load_state_dict(sd, strict=False)
    assert res.missing_keys == ["inp.weight", "head.out.bias"]
    assert res.unexpected_keys == ["extra.weight"]
    # values convert to the current dtype (float64 numpy -> float32 parameter)
    b.load_state_dict({"inp.bias": np.arange(8.0)}, strict=False)
    assert b.inp.bias.dtype == snp.float32


def test_train_eval_requires_grad_and_trainable_parameters():
    net = Net()
    assert net.train() is net and all(m.training for m in net.modules())
    assert net.eval() is net and not any(m.training for m in net.modules())
    assert set(nn.trainable_parameters(net)) == set(n for n, _ in net.named_parameters())
    net.blocks[0].requires_grad_(False)
    tp = nn.trainable_parameters(net)
    assert not any(k.startswith("blocks.0.") for k in tp) and "blocks.1.fc.weight" in tp
    tp = nn.trainable_parameters(net, frozen=("inp", "head.out.bias"))
    assert "inp.weight" not in tp and "head.out.weight" in tp and "head.out.bias" not in tp
    net.requires_grad_(True)
    assert "blocks.0.fc.bias" in nn.trainable_parameters(net)


def test_value_and_grad_with_freezing_matches_plain_grad(rng):
    net = Net()
    x = snp.asarray(rng.standard_normal((5, 4)).astype(np.float32))
    y = snp.asarray(rng.integers(0, 3, 5))

    def loss_fn(m, x, y):
        return F.cross_entropy(m(x), y)

    loss, grads = nn.value_and_grad(loss_fn)(net, x, y)
    g_tree = starling.grad(loss_fn, allow_int=True)(net, x, y)  # module-shaped gradient
    assert type(g_tree) is Net
    for k, g in grads.items():
        np.testing.assert_allclose(A(g), A(g_tree.state_dict()[k]), rtol=1e-6, atol=1e-8)
    assert float(loss) == pytest.approx(float(loss_fn(net, x, y)))
    net.inp.requires_grad_(False)
    (loss2, aux), grads2 = nn.value_and_grad(lambda m: (loss_fn(m, x, y), {"n": 3, "x": x}),
                                             has_aux=True, frozen=["blocks.1"])(net)
    assert aux["n"] == 3 and aux["x"] is not None
    assert "inp.weight" not in grads2 and "blocks.1.fc.weight" not in grads2
    np.testing.assert_allclose(A(grads2["blocks.0.fc.weight"]), A(grads["blocks.0.fc.weight"]),
                               rtol=1e-6)
    g_only = nn.grad(loss_fn)(net, x, y)
    assert set(g_only) == set(grads2) | {"blocks.1.fc.weight", "blocks.1.fc.bias",
                                         "blocks.1.norm.weight", "blocks.1.norm.bias",
                                         "blocks.1.scale"}


def test_functional_call_replace_and_stateful_call(rng):
    lin = nn.Linear(3, 2, key=0)
    x = snp.asarray(rng.standard_normal((4, 3)).astype(np.float32))
    w = snp.zeros((2, 3))
    out = nn.functional_call(lin, {"weight": w}, x)
    np.testing.assert_allclose(A(out), np.broadcast_to(A(lin.bias), (4, 2)))
    assert not np.all(A(lin.weight) == 0)  # the module is unchanged
    new = nn.replace(lin, {"bias": snp.ones(2)})
    assert new is not lin and np.all(A(new.bias) == 1) and not np.all(A(lin.bias) == 1)
    with pytest.raises(KeyError, match="no parameter or buffer named 'bais'"):
        nn.replace(lin, {"bais": snp.ones(2)})
    # pure function of the parameters: differentiable and vmappable over parameter sets
    params = nn.trainable_parameters(lin)
    g = starling.grad(lambda p: snp.sum(nn.functional_call(lin, p, x)))(params)
    np.testing.assert_allclose(A(g["weight"]), np.tile(A(x).sum(0), (2, 1)), rtol=1e-6)
    stacked = {k: snp.stack([v, v * 2]) for k, v in params.items()}
    outs = starling.vmap(lambda p: nn.functional_call(lin, p, x))(stacked)
    np.testing.assert_allclose(A(outs[1]), 2 * A(lin(x)), rtol=1e-6)
    seq = nn.Sequential(nn.Linear(3, 3, key=1), nn.BatchNorm1d(3))
    out, seq2 = nn.stateful_call(seq, x)
    assert int(seq[1].num_batches_tracked) == 0 and int(seq2[1].num_batches_tracked) == 1
    nn.functional_call(seq, {}, x)  # updates are discarded: pure
    assert int(seq[1].num_batches_tracked) == 0


def test_mutation_rules():
    net = Net()
    net.inp.bias = snp.zeros(8)  # rebinding outside transformations is allowed
    assert net.inp.bias.shape == (8,)
    net.inp.bias = np.ones(8, np.float32)  # NumPy arrays become Arrays
    assert isinstance(net.inp.bias, starling.Array)
    x = snp.ones((2, 4))

    def mutate(m):
        m.inp.bias = m.inp.bias + 1
        return snp.sum(m(x))

    for transform in (lambda f: starling.grad(f, allow_int=True), starling.compile,
                      lambda f: starling.vmap(f, in_axes=None, axis_size=2)):
        with pytest.raises(nn.ModuleMutationError, match="nn.replace"):
            transform(mutate)(net)
    with pytest.raises(nn.ModuleMutationError):
        starling.compile(lambda m: snp.sum(m.eval()(x)))(net)
    with pytest.raises(nn.ModuleMutationError):
        starling.compile(lambda m, sd: m.load_state_dict(sd))(net, net.state_dict())
    with pytest.raises(nn.ModuleMutationError, match="traced value"):
        starling.grad(lambda w: (setattr(Net(), "w", w), snp.sum(w))[1])(snp.ones(2))
    # modules constructed inside a transformation are fine (construction is not mutation)
    out = starling.compile(lambda k: nn.Linear(2, 2, key=k).weight)(random.key(0))
    assert out.shape == (2, 2)
    with pytest.raises(TypeError, match="ModuleList"):
        net.extra = [nn.Linear(2, 2, key=0)]


def test_containers():
    ks = random.split(random.key(0), 3)
    ml = nn.ModuleList([nn.Linear(2, 2, key=ks[0])])
    ml.append(nn.ReLU())
    ml.insert(0, nn.Linear(2, 2, key=ks[1]))
    assert len(ml) == 3 and isinstance(ml[2], nn.ReLU) and isinstance(ml[-1], nn.ReLU)
    assert list(ml.state_dict()) == ["0.weight", "0.bias", "1.weight", "1.bias"]
    assert len(ml[1:]) == 2 and isinstance(ml[1:], nn.ModuleList)
    del ml[0]
    assert list(ml.state_dict()) == ["0.weight", "0.bias"]
    with pytest.raises(IndexError):
        ml[5]
    md = nn.ModuleDict({"enc": nn.Linear(2, 3, key=ks[2]), "act": nn.Tanh()})
    assert list(md.keys()) == ["enc", "act"] and "enc" in md and len(md) == 2
    assert list(md.state_dict()) == ["enc.weight", "enc.bias"]
    with pytest.raises(KeyError):
        md["train"] = nn.ReLU()
    seq = nn.Sequential(nn.Linear(2, 4, key=0), nn.Dropout(0.5), nn.ReLU(), nn.Dropout(0.5))
    x = snp.ones((3, 2))
    a = seq(x, key=random.key(7))
    np.testing.assert_array_equal(A(a), A(seq(x, key=random.key(7))))
    with pytest.raises(TypeError, match="PRNG key"):
        seq(x)
    assert np.allclose(A(seq.eval()(x)), A(seq[2](seq[0](x))))
    assert isinstance(seq[:2], nn.Sequential) and len(seq[:2]) == 2
    with pytest.raises(nn.ModuleMutationError):
        starling.compile(lambda s: (s.append(nn.ReLU()), snp.zeros(()))[1])(seq)


def test_modules_under_vmap_and_compile(rng):
    # an ensemble: vmap over stacked copies of a module
    ms = [nn.Linear(3, 2, key=i) for i in range(4)]
    stacked = tree.map(lambda *xs: snp.stack(xs), *ms)
    x = snp.asarray(rng.standard_normal((5, 3)).astype(np.float32))
    outs = starling.vmap(lambda m: m(x))(stacked)
    for i, m in enumerate(ms):
        np.testing.assert_allclose(A(outs[i]), A(m(x)), rtol=1e-6)
    # per-example gradients of a module
    net = Net().eval()
    xs = snp.asarray(rng.standard_normal((6, 4)).astype(np.float32))
    ys = snp.asarray(rng.integers(0, 3, 6))
    per_ex = starling.vmap(nn.grad(lambda m, x, y: F.cross_entropy(m(x), y)),
                           in_axes=(None, 0, 0))(net, xs, ys)
    mean = nn.grad(lambda m: F.cross_entropy(m(xs), ys))(net)
    for k in mean:
        np.testing.assert_allclose(A(per_ex[k]).mean(0), A(mean[k]), rtol=1e-4, atol=1e-6)
    # compile: module in, module out; retraces only when the static configuration changes
    step = starling.compile(lambda m, x: (m(x), tree.map(lambda p: p * 0.5, m)))
    out, half = step(net, xs)
    np.testing.assert_allclose(A(out), A(net(xs)), rtol=1e-5, atol=1e-6)
    assert type(half) is Net and half.blocks[1].name == "block"
    np.testing.assert_allclose(A(half.inp.weight), 0.5 * A(net.inp.weight))
    step(net, xs)
    assert step.num_compiles == 1
    step(net.train(), xs)
    assert step.num_compiles == 2


def _train_once(seed):
    from starling import optim
    rng = np.random.default_rng(0)
    x = snp.asarray(rng.standard_normal((32, 4)).astype(np.float32))
    y = snp.asarray(rng.integers(0, 3, 32))
    net = nn.Sequential(nn.Linear(4, 16, key=seed), nn.GELU(), nn.Dropout(0.2),
                        nn.Linear(16, 3, key=seed + 1))
    opt = optim.Adam(net, lr=1e-2)
    vg = nn.value_and_grad(lambda m, k: F.cross_entropy(m(x, key=k), y))
    key = random.key(seed)
    for i in range(5):
        loss, g = vg(net, random.fold_in(key, i))
        opt.step(g)
    return A(loss), A(net[0].weight)


def test_training_determinism():
    l1, w1 = _train_once(3)
    l2, w2 = _train_once(3)
    assert l1.tobytes() == l2.tobytes() and w1.tobytes() == w2.tobytes()
    l3, _ = _train_once(4)
    assert l3.tobytes() != l1.tobytes()


def test_sequential_keeps_child_names_on_append_and_slice():
    import collections
    from starling import nn as _nn
    import starling.random as _sr
    s = _nn.Sequential(collections.OrderedDict(fc=_nn.Linear(2, 2, key=_sr.key(0)),
                                               act=_nn.ReLU()))
    s.append(_nn.Linear(2, 1, key=_sr.key(1)))
    assert list(s.state_dict()) == ["fc.weight", "fc.bias", "2.weight", "2.bias"]
    assert list(s[1:].state_dict()) == ["2.weight", "2.bias"]
    with pytest.raises(KeyError, match="training"):
        _nn.Sequential(collections.OrderedDict(training=_nn.ReLU()))


def test_documented_limits_raise_clearly():
    from starling import nn as _nn
    supported = r"return_indices=True is not supported; only return_indices=False"
    with pytest.raises(NotImplementedError, match="MaxPool2d: " + supported):
        _nn.MaxPool2d(2, return_indices=True)
    with pytest.raises(NotImplementedError, match="MaxPool1d: " + supported):
        _nn.MaxPool1d(2, return_indices=True)
    with pytest.raises(NotImplementedError, match="max_pool2d: " + supported):
        _nn.functional.max_pool2d(snp.ones((1, 1, 4, 4)), 2, return_indices=True)
    with pytest.raises(NotImplementedError, match="max_pool1d: " + supported):
        _nn.functional.max_pool1d(snp.ones((1, 1, 4)), 2, return_indices=True)
    m = _nn.Module()
    with pytest.raises(NotImplementedError,
                       match=r"register_buffer: persistent=False \(buffer 'b'\) is not "
                             r"supported.*use persistent=True"):
        m.register_buffer("b", snp.ones(2), persistent=False)
    with pytest.raises(NotImplementedError,
                       match=r"Module does not define forward\(\); subclasses .* override"):
        m(snp.ones(2))
