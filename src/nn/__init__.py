"""``starling.nn``: a PyTorch-style module shim on top of Starling's functional core.

Modules are pytrees (their arrays are leaves, their configuration static), so they pass
through ``grad`` / ``vmap`` / ``compile`` unchanged; see ``starling.nn.module`` for the
mutation rules (in-place rebinding outside transformations only) and how running statistics
are threaded. ``nn.compile`` compiles a PyTorch-style training step that updates the modules
and optimizers it is given in place (``starling.nn.stateful_compile``). ``nn.functional``
holds the pure functions with PyTorch's names and keywords, ``nn.init`` the initialisers; JAX's
``jax.nn`` names (``nn.softmax(x, axis=-1, where=None)``, ``nn.gelu``, ``nn.one_hot``,
``nn.dot_product_attention``, ...) live on ``starling.nn`` itself, sharing one implementation
with their PyTorch twins, and ``nn.initializers`` has JAX's initializer factories; optimizers live in ``starling.optim``;
weights are saved with ``starling.save`` / ``starling.load`` (safetensors; a truncated or
corrupted file is a ``SerializationError``).
"""
from __future__ import annotations

from . import functional, init, initializers  # noqa: F401
from .jax_functions import *  # noqa: F401,F403
from .jax_functions import __all__ as _jax_names
from .attention import MultiheadAttention  # noqa: F401
from .flex_attention import FlexAttention  # noqa: F401
from .containers import ModuleDict, ModuleList, Sequential  # noqa: F401
from .conv import AvgPool1d, AvgPool2d, Conv1d, Conv2d, MaxPool1d, MaxPool2d  # noqa: F401
from .ctc_loss import CTCLoss  # noqa: F401
from .distances import CDist, PDist  # noqa: F401
from .layers import (  # noqa: F401
    CELU, ELU, GELU, GLU, SELU, Bilinear, Dropout, Embedding, Flatten, Hardsigmoid, Hardswish,
    Hardtanh, Identity, LeakyReLU, Linear, LogSigmoid, LogSoftmax, Mish, ReLU, ReLU6, Sigmoid,
    SiLU, Softmax, Softmin, Softplus, Softsign, Tanh, Unflatten,
)
from .linear_cross_entropy import LinearCrossEntropyLoss  # noqa: F401
from .module import IncompatibleKeys, Module, ModuleMutationError, StateDictError  # noqa: F401
from .serialization import SerializationError  # noqa: F401
from .norm import BatchNorm1d, BatchNorm2d, GroupNorm, LayerNorm, RMSNorm  # noqa: F401
from .stateless import (  # noqa: F401
    functional_call, grad, replace, stateful_call, trainable_parameters, value_and_grad,
)
from .stateful_compile import StatefulCompiled, compile, jit  # noqa: F401,A004

__all__ = [
    "Module", "ModuleMutationError", "StateDictError", "IncompatibleKeys", "SerializationError",
    "functional", "init", "initializers", "functional_call", "stateful_call", "replace",
    "trainable_parameters", "value_and_grad", "grad", "compile", "jit", "StatefulCompiled",
    "Identity", "Linear", "Bilinear", "Embedding", "Flatten", "Unflatten", "Dropout",
    "Conv1d", "Conv2d", "MaxPool1d", "MaxPool2d", "AvgPool1d", "AvgPool2d",
    "LayerNorm", "RMSNorm", "GroupNorm", "BatchNorm1d", "BatchNorm2d",
    "Sequential", "ModuleList", "ModuleDict", "MultiheadAttention", "FlexAttention",
    "ReLU", "ReLU6", "LeakyReLU", "ELU", "SELU", "CELU", "GELU", "SiLU", "Mish", "Softplus",
    "Sigmoid", "LogSigmoid", "Tanh", "Softmax", "LogSoftmax", "Softmin", "GLU", "Hardtanh",
    "Hardsigmoid", "Hardswish", "Softsign",
    "CTCLoss", "CDist", "PDist", "LinearCrossEntropyLoss",
] + list(_jax_names)
