"""The digits training step, PyTorch style vs pure functions: is the nn shim as fast?

One step of ``python -m starling.examples.digits`` (MLP 64-128-10, batch 64, Adam lr 3e-3,
cross-entropy, float32; the loss read back with ``float`` as the example does), written as:

- ``starling function``: ``compile(value_and_grad(loss) + adam.update + apply_updates)`` (the
  example's default, the baseline of the ratios);
- ``starling module nn.compile``: ``nn.Sequential`` + ``nn.value_and_grad`` + ``optim.Adam.step``
  in a step compiled by ``nn.compile`` (the example's ``--style module``);
- ``starling module eager``: the same step without ``nn.compile`` (op by op);
- ``starling function W(out,in)``: the function style with PyTorch's weight layout
  (``x @ W.T``, as ``nn.Linear``): it separates what the layout costs in BLAS from what the shim
  costs;
- ``torch eager``: ``torch.nn.Sequential``, ``loss.backward()``, ``torch.optim.Adam.step()``;
- ``torch.compile``: the same with ``torch.compile(model)`` and a compiled ``opt.step``.

Each contender runs in its own process (so one library's thread pools and allocator never sit
in another's measurements) and is warmed up (compiled) before timing; the driver then runs
``--rounds`` rounds, asking one process at a time for a batch of steps sized to ~0.25 s, so
background load on a busy machine hits all of them alike. Reported: the median time per step
over the rounds (and the best), and each contender's ratio to the function style (target for
the module style: <= 1.3x). PyTorch is skipped when not installed, torch.compile when it fails.

``--example`` also times the example end to end (``--style function`` / ``module``: the 550
training steps including the first step's compilation as the example prints them, and the
whole process), interleaved the same way.

``--blas-threads N`` sets OPENBLAS_NUM_THREADS / OMP_NUM_THREADS / MKL_NUM_THREADS (and
``torch.set_num_threads``) in every process; by default the libraries choose.

Run: ``python benchmarks/nn_step.py [--rounds 7] [--example] [--blas-threads N] [--quick]``.
"""
from __future__ import annotations

import argparse
import os
import re
import statistics
import subprocess
import sys
import time

import numpy as np

HIDDEN, CLASSES, BATCH, LR, SEED = 128, 10, 64, 3e-3, 0
N_BATCHES = 22   # one epoch of the example (1438 // 64), cycled

CONTENDERS = ("starling function", "starling function W(out,in)", "starling module nn.compile",
              "starling module eager", "torch eager", "torch.compile")


def _data():
    """The example's first epoch of batches: [(x (64, 64) float32, y (64,) int64)]."""
    from starling.examples.digits import batches, load_digits
    x_tr, y_tr, _, _ = load_digits(SEED)
    rng = np.random.default_rng(SEED)
    return [(x_tr[i], y_tr[i]) for i in batches(rng, len(x_tr), BATCH)][:N_BATCHES]


# ---- the contenders: each returns step(i) -> loss as a Python float ------------------------------

def _starling_function(out_in=False):
    import starling as st
    import starling.numpy as snp
    import starling.random as sr
    from starling import nn, optim
    from starling.examples import digits as D
    data = [(snp.asarray(x), snp.asarray(y)) for x, y in _data()]
    params = D.init_params(sr.key(SEED))
    if out_in:   # weights stored (out, in) and used as x @ W.T, like nn.Linear
        params = [(snp.asarray(np.ascontiguousarray(np.asarray(w).T)), b) for w, b in params]
    state = {"params": params}
    opt = optim.adam(lr=LR)
    state["opt"] = opt.init(state["params"])

    def loss_fn(params, x, y):
        h = x
        for i, (w, b) in enumerate(params):
            h = (h @ w.T if out_in else h @ w) + b
            if i < len(params) - 1:
                h = nn.functional.relu(h)
        return nn.functional.cross_entropy(h, y)

    @st.compile
    def train_step(params, opt_state, x, y):
        loss, grads = st.value_and_grad(loss_fn)(params, x, y)
        updates, opt_state = opt.update(grads, opt_state, params)
        return optim.apply_updates(params, updates), opt_state, loss

    def step(i):
        x, y = data[i % len(data)]
        state["params"], state["opt"], loss = train_step(state["params"], state["opt"], x, y)
        return float(loss)
    return step


def _starling_module(compiled):
    import starling.numpy as snp
    import starling.random as sr
    from starling import nn, optim
    from starling.examples import digits as D
    data = [(snp.asarray(x), snp.asarray(y)) for x, y in _data()]
    model = D.make_model(sr.key(SEED))
    opt = optim.Adam(model, lr=LR)
    loss_and_grad = nn.value_and_grad(lambda m, x, y: nn.functional.cross_entropy(m(x), y))

    def train_step(model, opt, x, y):
        loss, grads = loss_and_grad(model, x, y)
        opt.step(grads)
        return loss
    if compiled:
        train_step = nn.compile(train_step)

    def step(i):
        x, y = data[i % len(data)]
        return float(train_step(model, opt, x, y))
    return step


def _torch(compiled):
    import torch
    torch.manual_seed(SEED)
    data = [(torch.from_numpy(x), torch.from_numpy(y)) for x, y in _data()]
    model = torch.nn.Sequential(torch.nn.Linear(64, HIDDEN), torch.nn.ReLU(),
                                torch.nn.Linear(HIDDEN, CLASSES))
    opt = torch.optim.Adam(model.parameters(), lr=LR)
    forward, opt_step = model, opt.step
    if compiled:
        forward = torch.compile(model)
        opt_step = torch.compile(opt.step)   # the compiled-optimizer recipe of the torch docs

    def step(i):
        x, y = data[i % len(data)]
        loss = torch.nn.functional.cross_entropy(forward(x), y)
        loss.backward()
        opt_step()
        opt.zero_grad(set_to_none=True)
        return loss.item()
    return step


def _make(name):
    return {"starling function": _starling_function,
            "starling function W(out,in)": lambda: _starling_function(out_in=True),
            "starling module nn.compile": lambda: _starling_module(True),
            "starling module eager": lambda: _starling_module(False),
            "torch eager": lambda: _torch(False),
            "torch.compile": lambda: _torch(True)}[name]()


def worker(name):
    """Builds ``name``'s step, warms it up, then answers ``run K`` with seconds for K steps."""
    if os.environ.get("NN_STEP_THREADS"):
        try:
            import torch
            torch.set_num_threads(int(os.environ["NN_STEP_THREADS"]))
        except ImportError:
            pass
    try:
        step = _make(name)
        first = step(0)
        for i in range(1, 10):
            last = step(i)
    except ImportError as e:
        print(f"skip not installed ({e.name})", flush=True)
        return
    except Exception as e:  # noqa: BLE001  (torch.compile without a toolchain: skip the peer)
        print(f"skip {type(e).__name__}: {str(e).splitlines()[0][:120]}", flush=True)
        return
    print(f"ready {first:.6f} {last:.6f}", flush=True)
    i = 10
    for line in sys.stdin:
        if line.strip() == "quit":
            break
        k = int(line.split()[1])
        t0 = time.perf_counter()
        for _ in range(k):
            step(i)
            i += 1
        print(f"{time.perf_counter() - t0:.9f}", flush=True)


# ---- the driver ----------------------------------------------------------------------------------

class Worker:
    def __init__(self, name, env):
        self.name = name
        self.proc = subprocess.Popen([sys.executable, os.path.abspath(__file__), "--worker",
                                      name], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                     text=True, env=env)
        self.status = self.proc.stdout.readline().strip() or "skip: the worker died"

    def run(self, k):
        self.proc.stdin.write(f"run {k}\n")
        self.proc.stdin.flush()
        return float(self.proc.stdout.readline())

    def close(self):
        if self.proc.poll() is None:
            try:
                self.proc.stdin.write("quit\n")
                self.proc.stdin.flush()
            except BrokenPipeError:
                pass
            self.proc.wait(timeout=60)


def interleaved_steps(env, rounds, names, round_s=0.25):
    """{name: [seconds per step, one per round]} and the names skipped (with why)."""
    workers, skipped = [], {}
    for name in names:
        w = Worker(name, env)
        if w.status.startswith("ready"):
            workers.append(w)
            print(f"  {name:30s} warmed up: loss {w.status.split()[1]} -> "
                  f"{w.status.split()[2]}", flush=True)
        else:
            skipped[name] = w.status.removeprefix("skip ")
            w.close()
    try:
        steps = {}
        for w in workers:   # calibrate: a batch of steps takes about round_s
            per = w.run(5) / 5
            steps[w.name] = max(1, int(round_s / max(per, 1e-7)))
        times = {w.name: [] for w in workers}
        for _ in range(rounds):
            for w in workers:
                times[w.name].append(w.run(steps[w.name]) / steps[w.name])
    finally:
        for w in workers:
            w.close()
    return times, skipped


def time_example(env, rounds):
    """{style: [seconds of the example's 550 training steps as it prints them (0.1 s
    resolution)]} and {style: [seconds of the whole process]} (interleaved runs)."""
    train, wall = {"function": [], "module": []}, {"function": [], "module": []}
    for _ in range(rounds):
        for style in train:
            t0 = time.perf_counter()
            r = subprocess.run([sys.executable, "-m", "starling.examples.digits", "--style",
                                style, "--no-progress"], env=env, capture_output=True,
                               text=True, timeout=600)
            wall[style].append(time.perf_counter() - t0)
            m = re.search(r"\((\d+) steps in ([0-9.]+) s\)", r.stdout)
            if r.returncode != 0 or m is None:
                raise RuntimeError(r.stderr[-2000:])
            train[style].append(float(m.group(2)))
    return train, wall


def report(title, times, unit, scale, baseline):
    print(f"\n{title}")
    base = statistics.median(times[baseline]) if baseline in times else None
    for name, ts in times.items():
        med = statistics.median(ts)
        ratio = ""
        if base is not None and name != baseline:
            ratio = f"   {med / base:5.2f}x the {baseline} time"
        print(f"  {name:30s} median {med * scale:9.3f} {unit}  best {min(ts) * scale:9.3f} "
              f"{unit}{ratio}")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--worker", help=argparse.SUPPRESS)
    ap.add_argument("--rounds", type=int, default=7)
    ap.add_argument("--example", action="store_true", help="also time the example end to end")
    ap.add_argument("--blas-threads", type=int, default=None)
    ap.add_argument("--quick", action="store_true", help="3 rounds, no torch.compile")
    args = ap.parse_args()
    if args.worker:
        worker(args.worker)
        return
    env = dict(os.environ)
    if args.blas_threads is not None:
        n = str(args.blas_threads)
        env.update(OPENBLAS_NUM_THREADS=n, OMP_NUM_THREADS=n, MKL_NUM_THREADS=n,
                   NN_STEP_THREADS=n)
    rounds = 3 if args.quick else args.rounds
    names = [n for n in CONTENDERS if not (args.quick and n == "torch.compile")]
    try:
        import torch
        torch_version = torch.__version__
    except ImportError:
        torch_version = "not installed"
    print(f"nn training step benchmark (cpu count {os.cpu_count()}, load average "
          f"{os.getloadavg()[0]:.1f}; numpy {np.__version__}; torch {torch_version}; "
          f"BLAS threads {args.blas_threads or 'library default'}); {rounds} interleaved rounds")
    times, skipped = interleaved_steps(env, rounds, names)
    report("one training step (MLP 64-128-10, batch 64, Adam, float(loss) each step)", times,
           "ms", 1e3, "starling function")
    for name, why in skipped.items():
        print(f"  {name:30s} skipped: {why}")
    if args.example:
        train, wall = time_example(env, rounds)
        report("python -m starling.examples.digits: 550 training steps incl. compilation, as "
               "printed", train, "s", 1, "function")
        report("python -m starling.examples.digits: the whole process (imports, data, training, "
               "vmap(grad), DP-SGD)", wall, "s", 1, "function")


if __name__ == "__main__":
    main()
