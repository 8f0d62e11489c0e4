"""Elastic data-parallel training of the digits MLP: the job loses a process and carries on.

    python -m starling.launch -n 4 --fault-tolerant -m starling.examples.elastic_digits \\
        --kill-rank 2 --kill-step 17 --checkpoint-dir /tmp/digits-ckpt

Every process holds the whole model (parameters and Adam state are replicated). Step ``s`` uses a
global batch of ``--batch-size`` training images, fixed by the seed (a fresh permutation per
epoch); process ``r`` of ``n`` takes the ``r``-th of ``n`` contiguous chunks of it, computes the
gradient of the *sum* of its examples' losses divided by the global batch size, and one
``all_reduce`` adds the chunks' gradients, so the update is the global batch's mean gradient
whatever the number of processes. The same all-reduce carries a histogram of the global indices
of the examples each process used: every process learns exactly which examples the step
applied, and keeps the count per example and a per-step log in its replicated state.

``--kill-rank R --kill-step K``: process R sends itself SIGKILL at step K, after computing its
gradient and before the all-reduce (mid-step; a test may also kill it from outside). The
survivors' all-reduce raises ``RankFailure``; they ``reconfigure()`` the world (ULFM revoke +
shrink), agree on the last step every survivor completed (a survivor whose all-reduce finished
while another's failed is one step ahead and rolls back to the copy of the state it kept from
before that step), and go on from there with the smaller world, re-splitting the batch:

* ``--recover memory`` (default): from the in-memory replicas, broadcast from the new rank 0 so
  every survivor holds the same bits;
* ``--recover checkpoint``: from the newest checkpoint in ``--checkpoint-dir`` (written every
  ``--checkpoint-every`` steps by ``starling.distributed.checkpoint.CheckpointManager``).

After recovering, the survivors checkpoint the state they resume from (with
``--checkpoint-dir``), so a clean run can start from the same step: ``--resume DIR`` (a step
directory) restores it, on any number of processes. ``--out FILE`` (process 0) writes a JSON
report: steps, the world size and the sorted global example indices of every applied step, the
count of applications per example, the recoveries, final loss / test accuracy, and the final
parameters (nested lists of float32). The test (tests/test_elastic_digits.py) checks that no
step's data was lost or applied twice and that the result equals a clean run of the survivors
resumed from the same step.
"""
from __future__ import annotations

import argparse
import json
import os
import signal

import numpy as np

import starling as st
import starling.distributed as dist
import starling.numpy as snp
import starling.random as sr
from starling import nn, optim
from starling.distributed import checkpoint
from starling.core.placements import chunk_bounds

from .digits import accuracy, init_params, load_digits, logits_fn


def schedule(step, n_train, batch_size, seed):
    """The global indices (into the training set) of the examples of step ``step``: epoch
    ``e = step // steps_per_epoch`` visits a permutation seeded by ``(seed, e)``."""
    per_epoch = n_train // batch_size
    epoch, j = divmod(step, per_epoch)
    order = np.random.default_rng([seed, epoch]).permutation(n_train)
    return order[j * batch_size:(j + 1) * batch_size]


def chunk_grad_fn(batch_size):
    """``(params, x, y) -> (loss sum / batch_size, its gradient)`` for one process's chunk."""
    def loss(params, x, y):
        return nn.functional.cross_entropy(logits_fn(params, x), y, reduction="sum") / batch_size
    return st.compile(st.value_and_grad(loss))


class State:
    """The replicated training state: ``params``, ``opt`` (Adam), ``step`` (steps applied),
    ``counts`` (applications per training example) and ``log`` (per step: sorted global indices
    applied, and the world size that applied it)."""

    def __init__(self, params, opt, step, counts, log, sizes):
        self.params, self.opt, self.step = params, opt, step
        self.counts, self.log, self.sizes = counts, log, sizes

    def tree(self):
        flat = np.concatenate(self.log) if self.log else np.zeros(0, np.int64)
        return {"params": self.params, "opt": self.opt, "step": self.step,
                "counts": self.counts, "log_idx": flat,
                "log_len": np.array([len(v) for v in self.log], np.int64),
                "sizes": np.array(self.sizes, np.int64)}

    @classmethod
    def from_tree(cls, t):
        lens = np.asarray(t["log_len"])
        log = np.split(np.asarray(t["log_idx"]), np.cumsum(lens)[:-1]) if lens.size else []
        return cls(t["params"], t["opt"], int(t["step"]), np.asarray(t["counts"]),
                   [np.asarray(v) for v in log], [int(s) for s in np.asarray(t["sizes"])])


def _flatten(tree):
    leaves, treedef = st.tree.flatten(tree)
    return np.concatenate([np.asarray(v, np.float32).reshape(-1) for v in leaves]), \
        (treedef, [np.shape(v) for v in leaves])


def _unflatten(vec, spec):
    treedef, shapes = spec
    out, i = [], 0
    for s in shapes:
        n = int(np.prod(s, dtype=np.int64))
        out.append(snp.asarray(vec[i:i + n].reshape(s)))
        i += n
    return st.tree.unflatten(treedef, out)


def train_step(state, data, opt, args, grad_fns, kill):
    """One data-parallel step; returns the new State. Raises RankFailure if a peer is gone."""
    x_tr, y_tr = data
    n, r = dist.get_world_size(), dist.get_rank()
    batch = schedule(state.step, len(x_tr), args.batch_size, args.seed)
    lo, hi = chunk_bounds(len(batch), n, r)
    mine = batch[lo:hi]
    fn = grad_fns.setdefault(args.batch_size, chunk_grad_fn(args.batch_size))
    loss, grads = fn(state.params, snp.asarray(x_tr[mine]), snp.asarray(y_tr[mine]))
    if kill:
        os.kill(os.getpid(), signal.SIGKILL)
    gvec, spec = _flatten(grads)
    hist = np.bincount(mine, minlength=len(x_tr)).astype(np.float32)
    total = np.asarray(dist.all_reduce(snp.asarray(np.concatenate([gvec, [float(loss)], hist]))))
    grads = _unflatten(total[:gvec.size], spec)
    applied = np.rint(total[gvec.size + 1:]).astype(np.int64)
    updates, new_opt = opt.update(grads, state.opt, state.params)
    params = optim.apply_updates(state.params, updates)
    return State(params, new_opt, state.step + 1, state.counts + applied,
                 state.log + [np.repeat(np.arange(len(x_tr)), applied)],
                 state.sizes + [n]), float(total[gvec.size])


def _broadcast_state(state):
    """Every process takes process 0's state (bit-identical replicas after a recovery; the
    survivors agreed on the step, so every leaf has the same shape everywhere)."""
    leaves, treedef = st.tree.flatten(state.tree())
    t = st.tree.unflatten(treedef, [np.asarray(dist.broadcast(snp.asarray(v), src=0))
                                    for v in leaves])
    t["params"] = st.tree.map(snp.asarray, t["params"])
    t["opt"] = st.tree.map(snp.asarray, t["opt"])
    return State.from_tree(t)


def recover(state, prev, args, manager, error):
    """After ``error`` (a RankFailure): reconfigure, agree on the step to resume from, restore
    it; returns (state, record of the recovery)."""
    removed = dist.world_group().reconfigure()
    steps = np.asarray(dist.all_gather(snp.asarray(state.step)))
    resume = int(steps.min())
    if int(steps.max()) - resume > 1:
        raise RuntimeError(f"elastic_digits: survivors are {steps.max() - resume} steps apart; "
                           "a data-parallel step cannot complete on one process only")
    if args.recover == "checkpoint":
        step = manager.latest_step()
        if step is None:
            raise RuntimeError("elastic_digits: --recover checkpoint found no checkpoint")
        state = State.from_tree(manager.restore(step))
    else:
        if state.step > resume:
            state = prev
        state = _broadcast_state(state)
    record = {"removed": [int(r) for r in removed], "world_size": dist.get_world_size(),
              "failed_at": resume, "resumed_from": state.step, "error": str(error)[:200]}
    if manager is not None:
        manager.save(state.step, state.tree(), metadata={"recovery": record})
    return state, record


def run(args):
    """Trains on the processes of ``starling.distributed`` (initialized here), recovering from
    lost processes as the module docstring describes; process 0 prints the result and writes the
    JSON report of ``args.out``.

    Args:
        args: the parsed command line (see ``main``).
    Returns:
        The final ``State`` (replicated on every surviving process).
    """
    dist.initialize()
    start_rank = dist.get_rank()
    x_tr, y_tr, x_te, y_te = load_digits(args.seed)
    steps = args.epochs * (len(x_tr) // args.batch_size)
    opt = optim.adam(lr=args.lr)
    manager = checkpoint.CheckpointManager(args.checkpoint_dir, keep=args.keep) \
        if args.checkpoint_dir else None
    if args.resume:
        state = State.from_tree(checkpoint.restore(args.resume))
    else:
        params = init_params(sr.key(args.seed))
        state = State(params, opt.init(params), 0, np.zeros(len(x_tr), np.int64), [], [])
    prev, recoveries, grad_fns, losses = state, [], {}, []
    while state.step < steps:
        kill = start_rank == args.kill_rank and state.step == args.kill_step
        try:
            new, loss = train_step(state, (x_tr, y_tr), opt, args, grad_fns, kill)
            prev, state = state, new
            losses.append(loss)
            if manager is not None and state.step % args.checkpoint_every == 0:
                manager.save(state.step, state.tree())   # a failure here is recovered too
        except dist.RankFailure as e:
            while True:
                try:
                    state, record = recover(state, prev, args, manager, e)
                    break
                except dist.RankFailure as again:   # another process failed while recovering
                    e = again
            recoveries.append(record)
            prev = state
            if dist.get_rank() == 0:
                print(f"recovered: lost world ranks {record['removed']}, {record['world_size']} "
                      f"processes resume from step {state.step}", flush=True)
    acc = accuracy(state.params, x_te, y_te)
    if dist.get_rank() == 0:
        print(f"{steps} steps, final loss {losses[-1] if losses else float('nan'):.4f}, test "
              f"accuracy {acc * 100:.2f}%, {len(recoveries)} recoveries", flush=True)
        if args.out:
            report = {"steps": steps, "resumed_from_checkpoint": args.resume,
                      "log": [v.tolist() for v in state.log], "sizes": state.sizes,
                      "counts": np.asarray(state.counts).tolist(), "recoveries": recoveries,
                      "final_loss": losses[-1] if losses else None, "accuracy": acc,
                      "params": [[np.asarray(a).tolist() for a in layer]
                                 for layer in state.params],
                      "world_size": dist.get_world_size()}
            with open(args.out, "w") as f:
                json.dump(report, f)
    return state


def main(argv=None):
    """Command line of this example (see the module docstring): checks the options and calls
    ``run``.

    Args:
        argv: the arguments (list of str); None reads ``sys.argv``.
    """
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--epochs", type=int, default=3)
    p.add_argument("--batch-size", type=int, default=60, help="global batch size")
    p.add_argument("--lr", type=float, default=3e-3)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--kill-rank", type=int, default=None)
    p.add_argument("--kill-step", type=int, default=None)
    p.add_argument("--recover", choices=("memory", "checkpoint"), default="memory")
    p.add_argument("--checkpoint-dir", default=None)
    p.add_argument("--checkpoint-every", type=int, default=10)
    p.add_argument("--keep", type=int, default=3, help="checkpoints to keep")
    p.add_argument("--resume", default=None, help="a checkpoint (step directory) to start from")
    p.add_argument("--out", default=None, help="JSON report written by process 0")
    args = p.parse_args(argv)
    if args.epochs < 1 or args.batch_size < 1 or args.checkpoint_every < 1 or args.keep < 1:
        p.error("--epochs, --batch-size, --checkpoint-every and --keep must be positive")
    if (args.kill_rank is None) != (args.kill_step is None):
        p.error("--kill-rank and --kill-step go together")
    if args.recover == "checkpoint" and not args.checkpoint_dir:
        p.error("--recover checkpoint needs --checkpoint-dir")
    run(args)


if __name__ == "__main__":
    main()
