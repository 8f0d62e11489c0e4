"""Basic layers: Linear, Bilinear, Embedding, Identity, Flatten, Unflatten, Dropout and the
activation modules. Initialisation follows PyTorch's defaults (see ``starling.nn.init``) and
draws from the explicit ``key`` argument (a PRNG key or an int seed)."""
from __future__ import annotations

import math

from .. import numpy as snp
from .. import random
from . import functional as F
from . import init
from .module import Module

__all__ = ["Identity", "Linear", "Bilinear", "Embedding", "Flatten", "Unflatten", "Dropout",
           "ReLU", "ReLU6", "LeakyReLU", "ELU", "SELU", "CELU", "GELU", "SiLU", "Mish",
           "Softplus", "Sigmoid", "LogSigmoid", "Tanh", "Softmax", "LogSoftmax", "Softmin",
           "GLU", "Hardtanh", "Hardsigmoid", "Hardswish", "Softsign"]


class Identity(Module):
    """Returns its input unchanged (extra constructor arguments are ignored, as PyTorch)."""

    def __init__(self, *args, **kwargs):
        super().__init__()

    def forward(self, x):
        return x


class Linear(Module):
    """``y = x W^T + b``: ``(*, in_features) -> (*, out_features)``.

    Parameters: ``weight`` ``(out_features, in_features)`` ~ U(-1/sqrt(in), 1/sqrt(in))
    (PyTorch's ``kaiming_uniform(a=sqrt(5))``); ``bias`` ``(out_features,)`` ~ the same
    uniform, or None with ``bias=False``.

    Args:
        key: PRNG key or int seed for the initial parameters (required).
        dtype: parameter dtype (float32).
    """

    def __init__(self, in_features: int, out_features: int, bias: bool = True, *, key=None,
                 dtype=snp.float32):
        super().__init__()
        k = init.as_key(key, "Linear")
        kw, kb = random.split(k)
        self.in_features = in_features
        self.out_features = out_features
        self.weight = init.kaiming_uniform(kw, (out_features, in_features), a=math.sqrt(5),
                                           dtype=dtype)
        bound = 1.0 / math.sqrt(in_features) if in_features else 0.0
        self.bias = (init.uniform(kb, (out_features,), -bound, bound, dtype)
                     if bias and bound else (init.zeros((out_features,), dtype) if bias else None))

    def forward(self, x):
        return F.linear(x, self.weight, self.bias)

    def extra_repr(self):
        return (f"in_features={self.in_features}, out_features={self.out_features}, "
                f"bias={self.bias is not None}")


class Bilinear(Module):
    """``y_o = x1^T A_o x2 + b_o``: ``(*, in1), (*, in2) -> (*, out)``.

    Parameters: ``weight`` ``(out, in1, in2)`` and ``bias`` ``(out,)`` ~ U(-1/sqrt(in1),
    1/sqrt(in1)) (PyTorch).
    """

    def __init__(self, in1_features: int, in2_features: int, out_features: int,
                 bias: bool = True, *, key=None, dtype=snp.float32):
        super().__init__()
        kw, kb = random.split(init.as_key(key, "Bilinear"))
        self.in1_features, self.in2_features = in1_features, in2_features
        self.out_features = out_features
        bound = 1.0 / math.sqrt(in1_features)
        self.weight = init.uniform(kw, (out_features, in1_features, in2_features), -bound, bound,
                                   dtype)
        self.bias = init.uniform(kb, (out_features,), -bound, bound, dtype) if bias else None

    def forward(self, x1, x2):
        return F.bilinear(x1, x2, self.weight, self.bias)

    def extra_repr(self):
        return (f"in1_features={self.in1_features}, in2_features={self.in2_features}, "
                f"out_features={self.out_features}, bias={self.bias is not None}")


class Embedding(Module):
    """Lookup table: integer indices ``(*)`` -> ``(*, embedding_dim)``.

    Parameter ``weight`` ``(num_embeddings, embedding_dim)`` ~ N(0, 1), the ``padding_idx``
    row zero; that row receives no gradient (PyTorch). ``_weight`` gives initial values.
    """

    def __init__(self, num_embeddings: int, embedding_dim: int, padding_idx=None, *, key=None,
                 dtype=snp.float32, _weight=None):
        super().__init__()
        if padding_idx is not None:
            if not -num_embeddings <= padding_idx < num_embeddings:
                raise ValueError(f"Embedding: padding_idx {padding_idx} is out of range for "
                                 f"{num_embeddings} embeddings")
            padding_idx %= num_embeddings
        self.num_embeddings, self.embedding_dim = num_embeddings, embedding_dim
        self.padding_idx = padding_idx
        if _weight is not None:
            w = snp.asarray(_weight, dtype=dtype)
            if tuple(w.shape) != (num_embeddings, embedding_dim):
                raise ValueError(f"Embedding: _weight has shape {tuple(w.shape)}, expected "
                                 f"{(num_embeddings, embedding_dim)}")
        else:
            w = init.normal(init.as_key(key, "Embedding"), (num_embeddings, embedding_dim),
                            dtype=dtype)
            if padding_idx is not None:
                w = w.at[padding_idx].set(0.0)
        self.weight = w

    @classmethod
    def from_pretrained(cls, embeddings, freeze: bool = True, padding_idx=None):
        e = snp.asarray(embeddings)
        m = cls(e.shape[0], e.shape[1], padding_idx, dtype=e.dtype, _weight=e)
        return m.requires_grad_(not freeze)

    def forward(self, indices):
        return F.embedding(indices, self.weight, self.padding_idx)

    def extra_repr(self):
        s = f"{self.num_embeddings}, {self.embedding_dim}"
        return s + (f", padding_idx={self.padding_idx}" if self.padding_idx is not None else "")


class Flatten(Module):
    """Flattens dims ``start_dim..end_dim`` into one (default: all but the batch dim)."""

    def __init__(self, start_dim: int = 1, end_dim: int = -1):
        super().__init__()
        self.start_dim, self.end_dim = start_dim, end_dim

    def forward(self, x):
        nd = x.ndim
        s, e = self.start_dim % max(nd, 1), self.end_dim % max(nd, 1)
        if nd == 0:
            return snp.reshape(x, (1,))
        shape = tuple(x.shape[:s]) + (math.prod(x.shape[s:e + 1]),) + tuple(x.shape[e + 1:])
        return snp.reshape(x, shape)

    def extra_repr(self):
        return f"start_dim={self.start_dim}, end_dim={self.end_dim}"


class Unflatten(Module):
    """Expands dim ``dim`` into ``unflattened_size``."""

    def __init__(self, dim: int, unflattened_size):
        super().__init__()
        self.dim, self.unflattened_size = dim, tuple(unflattened_size)

    def forward(self, x):
        d = self.dim % x.ndim
        return snp.reshape(x, tuple(x.shape[:d]) + self.unflattened_size + tuple(x.shape[d + 1:]))

    def extra_repr(self):
        return f"dim={self.dim}, unflattened_size={self.unflattened_size}"


class Dropout(Module):
    """Dropout with an explicit key: ``y = drop(x, key=k)`` in training mode, identity in
    eval mode or with ``p == 0``. See ``nn.functional.dropout``."""

    def __init__(self, p: float = 0.5):
        super().__init__()
        if not 0.0 <= p <= 1.0:
            raise ValueError(f"Dropout: p must be in [0, 1], got {p}")
        self.p = p

    def forward(self, x, *, key=None):
        return F.dropout(x, self.p, self.training, key=key)

    def extra_repr(self):
        return f"p={self.p}"


def _activation(name, fn, params=(), doc=""):
    """A parameter-free activation module calling ``fn(x, **config)``."""
    def __init__(self, *args, **kwargs):
        Module.__init__(self)
        if len(args) > len(params):
            raise TypeError(f"{name} takes at most {len(params)} arguments")
        config = dict(params)
        names = [p for p, _ in params]
        config.update(zip(names, args))
        for k, v in kwargs.items():
            if k not in config:
                raise TypeError(f"{name}: unexpected argument {k!r}")
            config[k] = v
        for k, v in config.items():
            setattr(self, k, v)

    def forward(self, x):
        return fn(x, **{p: getattr(self, p) for p, _ in params})

    def extra_repr(self):
        return ", ".join(f"{p}={getattr(self, p)!r}" for p, _ in params)

    return type(name, (Module,), {"__init__": __init__, "forward": forward,
                                  "extra_repr": extra_repr, "__module__": __name__,
                                  "__doc__": doc or f"Module form of ``nn.functional."
                                                    f"{fn.__name__}``."})


ReLU = _activation("ReLU", F.relu)
ReLU6 = _activation("ReLU6", F.relu6)
LeakyReLU = _activation("LeakyReLU", F.leaky_relu, (("negative_slope", 0.01),))
ELU = _activation("ELU", F.elu, (("alpha", 1.0),))
SELU = _activation("SELU", F.selu)
CELU = _activation("CELU", F.celu, (("alpha", 1.0),))
GELU = _activation("GELU", F.gelu, (("approximate", "none"),))
SiLU = _activation("SiLU", F.silu)
Mish = _activation("Mish", F.mish)
Softplus = _activation("Softplus", F.softplus, (("beta", 1.0), ("threshold", 20.0)))
Sigmoid = _activation("Sigmoid", F.sigmoid)
LogSigmoid = _activation("LogSigmoid", F.logsigmoid)
Tanh = _activation("Tanh", F.tanh)
Softmax = _activation("Softmax", F.softmax, (("dim", -1),))
LogSoftmax = _activation("LogSoftmax", F.log_softmax, (("dim", -1),))
Softmin = _activation("Softmin", F.softmin, (("dim", -1),))
GLU = _activation("GLU", F.glu, (("dim", -1),))
Hardtanh = _activation("Hardtanh", F.hardtanh, (("min_val", -1.0), ("max_val", 1.0)))
Hardsigmoid = _activation("Hardsigmoid", F.hardsigmoid)
Hardswish = _activation("Hardswish", F.hardswish)
Softsign = _activation("Softsign", F.softsign)
