"""The digits MLP trained on a 2x2 mesh: data parallel x tensor parallel.

    python -m starling.examples.sharded_mlp                # 4 in-process CPU devices
    python -m starling.examples.sharded_mlp --epochs 5 --no-compare
    python -m starling.launch -n 4 -m starling.examples.sharded_mlp   # 4 MPI processes

The batch is split over the mesh axis ``data``; the two weight matrices are split over ``model``
as in Megatron-LM (Shoeybi et al. 2019): the first by columns (each device computes some hidden
units), the second by rows (each device's partial logits are summed). The training step is the
same pure function as in ``starling.examples.digits``; ``compile`` partitions it from the
arguments' layouts (src/collectives/partition.py), inserting the collectives itself, and
``out_shardings`` keeps parameters and optimizer state in their layouts from step to step. The
run also trains the same model on one device with the same batches and reports the largest
per-step loss difference (float32 rounding only: sums happen in a different order).

Under ``python -m starling.launch -n 4`` (MPI) the same code runs on 4 processes, one device
each: ``starling.distributed.initialize()`` makes the mesh span them, and rank 0 prints. With
``STARLING_NUM_CPU_DEVICES=2 python -m starling.launch -n 2 ...`` it runs on 2 processes of 2
devices each (a hybrid mesh: 'model' inside each process, 'data' across them).
"""
from __future__ import annotations

import argparse
import os
import time

import numpy as np

import starling as st
import starling.numpy as snp
import starling.random as sr
from starling import optim
from starling.sharding import NamedSharding, P, distribute, visualize_sharding

from .digits import accuracy, batches, init_params, load_digits, loss_fn

# Megatron-style layouts: ((W1, b1), (W2, b2)); W1 (64, 128) split by columns, W2 (128, 10) by rows
PARAM_SPECS = [(P(None, "model"), P("model")), (P("model", None), P())]


def launched_by_mpi() -> bool:
    """True under mpirun / srun / starling.launch (the launcher's environment)."""
    return any(v in os.environ for v in ("OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "PMIX_RANK"))


def ensure_devices(n: int) -> None:
    """``n`` devices: those of the processes of an MPI job (``STARLING_NUM_CPU_DEVICES`` each,
    default 1), else ``n`` in-process CPU devices.

    Raises:
        SystemExit: the job or the process has a different number of devices.
    """
    if launched_by_mpi():
        import starling.distributed as dist
        dist.initialize()
    else:
        try:
            st.config.update("num_cpu_devices", n)
        except RuntimeError:
            pass
    if len(st.devices()) != n:
        raise SystemExit(f"sharded_mlp needs {n} devices, have {len(st.devices())}: run it in one "
                         f"process (STARLING_NUM_CPU_DEVICES={n}) or on {n} MPI processes")


def whole(x):
    """The whole value of a sharded array (collective when it spans processes)."""
    if launched_by_mpi():
        import starling.distributed as dist
        return dist.process_allgather(x)
    return x.full_array()


def param_shardings(mesh):
    """NamedShardings of the parameters, same structure as ``init_params``'s result."""
    return [tuple(NamedSharding(mesh, s) for s in layer) for layer in PARAM_SPECS]


def make_step(opt, param_sh=None, state_sh=None, batch_sh=None):
    """The compiled training step ``(params, opt_state, x, y) -> (params, opt_state, loss)``;
    with shardings, layouts are pinned for inputs and outputs (no re-layout between steps)."""
    def train_step(params, opt_state, x, y):
        loss, grads = st.value_and_grad(loss_fn)(params, x, y)
        updates, opt_state = opt.update(grads, opt_state, params)
        return optim.apply_updates(params, updates), opt_state, loss

    if param_sh is None:
        return st.compile(train_step)
    return st.compile(train_step, in_shardings=(param_sh, state_sh, batch_sh[0], batch_sh[1]),
                      out_shardings=(param_sh, state_sh, None))


def state_shardings(state, param_sh, mesh):
    """Adam's moments are laid out like the parameters; the step count is replicated."""
    rep = NamedSharding(mesh, P())
    return type(state)(*[param_sh if isinstance(f, list) else
                         (None if f is None else rep) for f in state])


def train(data, epochs, seed, batch_size, lr, mesh=None, progress=True):
    """Trains the MLP (on ``mesh`` when given); returns (params, per-step losses, seconds)."""
    x_tr, y_tr, _, _ = data
    params = init_params(sr.key(seed))
    opt = optim.adam(lr=lr)
    state = opt.init(params)
    if mesh is not None:
        psh = param_shardings(mesh)
        ssh = state_shardings(state, psh, mesh)
        bsh = (NamedSharding(mesh, P("data", None)), NamedSharding(mesh, P("data")))
        params = st.device_put(params, psh)
        state = st.device_put(state, ssh)
        step = make_step(opt, psh, ssh, bsh)
    else:
        step = make_step(opt)
    rng = np.random.default_rng(seed)
    losses = []
    bar = None
    if progress:
        from tqdm import tqdm
        bar = tqdm(total=epochs * (len(x_tr) // batch_size), unit="step",
                   desc="train (2x2 mesh)" if mesh is not None else "train (1 device)")
    t0 = time.perf_counter()
    try:
        for _ in range(epochs):
            for idx in batches(rng, len(x_tr), batch_size):
                params, state, loss = step(params, state, snp.asarray(x_tr[idx]),
                                           snp.asarray(y_tr[idx]))
                losses.append(float(loss))
                if bar is not None:
                    bar.set_postfix(loss=f"{np.mean(losses[-20:]):.4f}")
                    bar.update(1)
    finally:
        if bar is not None:
            bar.close()
    return params, losses, time.perf_counter() - t0


def main(argv=None):
    """Command line of this example (see the module docstring): trains on the 2x2 mesh, prints
    the test accuracy and the weights' layouts, and (unless ``--no-compare``) the difference to a
    single-device run.

    Args:
        argv: the arguments (list of str); None reads ``sys.argv``.
    Returns:
        The test accuracy (float in ``[0, 1]``).
    """
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--epochs", type=int, default=25)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--batch-size", type=int, default=64)
    parser.add_argument("--lr", type=float, default=3e-3)
    parser.add_argument("--no-progress", action="store_true")
    parser.add_argument("--no-compare", action="store_true",
                        help="skip the single-device reference run")
    args = parser.parse_args(argv)
    if args.epochs < 1 or args.batch_size < 2 or args.batch_size % 2:
        parser.error("--epochs must be positive and --batch-size even (split over 'data' = 2)")
    ensure_devices(4)
    lead = st.process_index() == 0
    say = print if lead else (lambda *a, **k: None)
    mesh = st.sharding.make_mesh((2, 2), ("data", "model"))
    data = load_digits(args.seed)
    x_tr, _, x_te, y_te = data
    if launched_by_mpi():
        import starling.distributed as dist
        n_proc = dist.get_world_size()
        where = f"{n_proc} processes" if n_proc == len(st.devices()) else \
            f"{len(st.devices())} devices of {n_proc} processes"
    else:
        where = "one process"
    say(f"digits: {len(x_tr)} train / {len(x_te)} test images on mesh {dict(mesh.shape)} in "
        f"{where} (batch split over 'data', weights over 'model')")
    params, losses, secs = train(data, args.epochs, args.seed, args.batch_size, args.lr, mesh,
                                 lead and not args.no_progress)
    say(f"final train loss {losses[-1]:.4f}  ({len(losses)} steps in {secs:.1f} s)")
    acc = accuracy([(whole(w), whole(b)) for w, b in params], x_te, y_te)
    say(f"test accuracy {acc * 100:.2f}%")
    if lead:
        print("layout of the first weight matrix W1 (64 x 128):")
        visualize_sharding(params[0][0])
        print("layout of the second weight matrix W2 (128 x 10):")
        visualize_sharding(params[1][0])
    if not args.no_compare:
        ref_params, ref_losses, ref_secs = train(data, args.epochs, args.seed, args.batch_size,
                                                 args.lr, None, False)
        diff = max(abs(a - b) / max(abs(b), 1e-12) for a, b in zip(losses, ref_losses))
        ref_acc = accuracy(ref_params, x_te, y_te)
        say(f"single device: final loss {ref_losses[-1]:.4f}, test accuracy "
            f"{ref_acc * 100:.2f}% ({ref_secs:.1f} s); largest relative per-step loss "
            f"difference {diff:.1e}")
    return acc


if __name__ == "__main__":
    main()
