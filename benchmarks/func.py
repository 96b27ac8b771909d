"""``funcdiff.func.vmap`` compositions against torch.func eager (one thread, float64).

``python -m benchmarks.func [--quick] [--clock cpu] [--json PATH]``

Rows (every answer is checked against a NumPy closed form before it is timed):

* A1 per-sample gradients of an MLP loss, B=256, 10-64-3, tanh, squared error, all four
  parameter arrays: ``vmap(grad(loss), in_dims=(None, 0, 0))``; also funcdiff's gradient
  of the summed loss (one batched forward and backward), the floor to compare with;
* A2 batched input Jacobians (256, 3, 10) of the same MLP: ``vmap(jacrev(mlp))``;
* A3 per-sample Hessians of logistic losses, B=512, d=20: ``vmap(hessian(loss))``;
* A4 Jacobians (1000, 3, 3) of the Robertson kinetics residual: ``vmap(jacfwd(rhs))``.

Times are medians over interleaved rounds; the table shows ratios measured in the same
round: funcdiff over torch.func (below 1: funcdiff is faster), and for A1 funcdiff over
its own gradient of the summed loss. torch is optional: without it, its cells are skipped.
"""

from __future__ import annotations

import argparse
import datetime as _dt
import json
import statistics
import sys
from pathlib import Path
from typing import Any

if __package__ in (None, ""):
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks import _env  # noqa: E402  (imports nothing heavy)

HERE = Path(__file__).resolve().parent


def _torch() -> Any:
    try:
        import torch
    except ImportError:
        return None
    torch.set_num_threads(1)
    try:
        torch.set_num_interop_threads(1)
    except RuntimeError:  # already set in this process
        pass
    torch.set_default_dtype(torch.float64)
    return torch


def _mlp_rows(np: Any, torch: Any) -> list[dict]:
    from funcdiff.func import grad, jacrev, vmap

    rng = np.random.default_rng(0)
    b, d, h, o = 256, 10, 64, 3
    params = [
        rng.normal(size=(d, h)) / np.sqrt(d),
        rng.normal(size=h) * 0.1,
        rng.normal(size=(h, o)) / np.sqrt(h),
        rng.normal(size=o) * 0.1,
    ]
    x, y = rng.normal(size=(b, d)), rng.normal(size=(b, o))

    def loss(p: list, x: Any, y: Any) -> Any:
        w1, b1, w2, b2 = p
        return np.sum((np.tanh(x @ w1 + b1) @ w2 + b2 - y) ** 2)

    def total(p: list) -> Any:
        w1, b1, w2, b2 = p
        return np.sum((np.tanh(x @ w1 + b1) @ w2 + b2 - y) ** 2)

    def mlp(v: Any) -> Any:
        w1, b1, w2, b2 = params
        return np.tanh(v @ w1 + b1) @ w2 + b2

    def closed_grads() -> list:
        w1, b1, w2, b2 = params
        t = np.tanh(x @ w1 + b1)
        r = 2.0 * (t @ w2 + b2 - y)  # (b, o)
        dt = (r @ w2.T) * (1.0 - t**2)  # (b, h)
        return [x[:, :, None] * dt[:, None, :], dt, t[:, :, None] * r[:, None, :], r]

    def closed_jac() -> Any:
        w1, b1, w2, _ = params
        s = 1.0 - np.tanh(x @ w1 + b1) ** 2  # (b, h)
        return np.einsum("ho,bh,dh->bod", w2, s, w1)

    per_sample = vmap(grad(loss), in_dims=(None, 0, 0))
    summed = grad(total)
    jac = vmap(jacrev(mlp))
    a1 = dict(
        id="A1",
        what="per-sample MLP gradients, B=256 10-64-3",
        numpy=closed_grads,
        funcdiff=lambda: per_sample(params, x, y),
        reference=closed_grads,
        extra={"funcdiff summed gradient": lambda: summed(params)},
    )
    a2 = dict(
        id="A2",
        what="vmap(jacrev): input Jacobians (256, 3, 10)",
        numpy=closed_jac,
        funcdiff=lambda: jac(x),
        reference=closed_jac,
        extra={},
    )
    if torch is not None:
        from torch.func import grad as tgrad
        from torch.func import jacrev as tjacrev
        from torch.func import vmap as tvmap

        tp = [torch.from_numpy(p.copy()) for p in params]
        tx, ty = torch.from_numpy(x.copy()), torch.from_numpy(y.copy())

        def tloss(p: list, x: Any, y: Any) -> Any:
            return torch.sum((torch.tanh(x @ p[0] + p[1]) @ p[2] + p[3] - y) ** 2)

        tper = tvmap(tgrad(tloss), in_dims=(None, 0, 0))
        tjac = tvmap(tjacrev(lambda v: torch.tanh(v @ tp[0] + tp[1]) @ tp[2] + tp[3]))
        a1["torch.func"] = lambda: tper(tp, tx, ty)
        a2["torch.func"] = lambda: tjac(tx)
    return [a1, a2]


def _hessian_row(np: Any, torch: Any) -> dict:
    from funcdiff.func import hessian, vmap

    rng = np.random.default_rng(1)
    b, d = 512, 20
    w = rng.normal(size=d) / np.sqrt(d)
    x = rng.normal(size=(b, d))
    y = (rng.uniform(size=b) > 0.5).astype(float)

    def loss(w: Any, x: Any, y: Any) -> Any:
        z = x @ w
        return np.logaddexp(0.0, z) - y * z

    def closed() -> Any:
        s = 1.0 / (1.0 + np.exp(-(x @ w)))
        return (s * (1.0 - s))[:, None, None] * x[:, :, None] * x[:, None, :]

    hess = vmap(hessian(loss), in_dims=(None, 0, 0))
    row = dict(
        id="A3",
        what="vmap(hessian): logistic losses B=512 d=20",
        numpy=closed,
        funcdiff=lambda: hess(w, x, y),
        reference=closed,
        extra={},
    )
    if torch is not None:
        from torch.func import hessian as thessian
        from torch.func import vmap as tvmap

        def tloss(w: Any, x: Any, y: Any) -> Any:
            z = x @ w
            return torch.logaddexp(torch.zeros((), dtype=z.dtype), z) - y * z

        th = tvmap(thessian(tloss), in_dims=(None, 0, 0))
        tw, tx, ty = (torch.from_numpy(a.copy()) for a in (w, x, y))
        row["torch.func"] = lambda: th(tw, tx, ty)
    return row


def _robertson_row(np: Any, torch: Any) -> dict:
    from funcdiff.func import jacfwd, vmap

    rng = np.random.default_rng(2)
    ys = rng.uniform(0.1, 1.0, size=(1000, 3)) * np.array([1.0, 1e-4, 1.0])

    def rhs(y: Any) -> Any:
        a, b, c = y[0], y[1], y[2]
        return np.stack(
            [-0.04 * a + 1e4 * b * c, 0.04 * a - 1e4 * b * c - 3e7 * b * b, 3e7 * b * b]
        )

    def closed() -> Any:
        a, b, c = ys[:, 0], ys[:, 1], ys[:, 2]
        z, one = np.zeros_like(a), np.ones_like(a)
        return np.stack(
            [
                np.stack([-0.04 * one, 1e4 * c, 1e4 * b], -1),
                np.stack([0.04 * one, -1e4 * c - 6e7 * b, -1e4 * b], -1),
                np.stack([z, 6e7 * b, z], -1),
            ],
            1,
        )

    jac = vmap(jacfwd(rhs))
    row = dict(
        id="A4",
        what="vmap(jacfwd): Robertson Jacobians (1000, 3, 3)",
        numpy=closed,
        funcdiff=lambda: jac(ys),
        reference=closed,
        extra={},
    )
    if torch is not None:
        from torch.func import jacfwd as tjacfwd
        from torch.func import vmap as tvmap

        def trhs(y: Any) -> Any:
            a, b, c = y[0], y[1], y[2]
            return torch.stack(
                [-0.04 * a + 1e4 * b * c, 0.04 * a - 1e4 * b * c - 3e7 * b * b, 3e7 * b * b]
            )

        tj = tvmap(tjacfwd(trhs))
        ty = torch.from_numpy(ys.copy())
        row["torch.func"] = lambda: tj(ty)
    return row


def _arrays(np: Any, value: Any) -> list:
    if isinstance(value, (tuple, list)):
        return [a for v in value for a in _arrays(np, v)]
    if hasattr(value, "detach"):
        value = value.detach().numpy()
    return [np.asarray(value, dtype=float)]


def _close(np: Any, got: Any, want: Any) -> bool:
    g, w = _arrays(np, got), _arrays(np, want)
    return len(g) == len(w) and all(
        a.shape == b.shape and np.allclose(a, b, rtol=1e-9, atol=1e-12 * max(1.0, np.abs(b).max()))
        for a, b in zip(g, w)
    )


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m benchmarks.func", description=__doc__)
    p.add_argument("--quick", action="store_true", help="short budgets (under a minute)")
    p.add_argument("--rounds", type=int, default=None)
    p.add_argument("--clock", choices=("wall", "cpu"), default="wall")
    p.add_argument("--json", default=None, help="where to write results")
    args = p.parse_args(argv)
    report = _env.prepare()
    import dataclasses

    import numpy as np

    from benchmarks import _machine
    from benchmarks._timing import FULL, QUICK, measure, per_round

    torch = _torch()
    budget = dataclasses.replace(QUICK if args.quick else FULL, clock=args.clock)
    rounds = args.rounds or (1 if args.quick else 3)
    if torch is None:
        print("torch is not installed: the torch.func cells are skipped")
    rows = [*_mlp_rows(np, torch), _hessian_row(np, torch), _robertson_row(np, torch)]
    results = []
    for row in rows:
        cells = {"numpy": row["numpy"], "funcdiff": row["funcdiff"], **row["extra"]}
        if "torch.func" in row:
            cells["torch.func"] = row["torch.func"]
        want = row["reference"]()
        checked = {
            name: _close(np, fn(), want) for name, fn in cells.items() if name not in row["extra"]
        }
        per: dict[str, list[float]] = {k: [] for k in cells}
        for _ in range(rounds):
            for name, fn in cells.items():
                per[name].append(measure(fn, per_round(budget, rounds)).median)

        def ratio(a: str, b: str, per: dict = per) -> float:
            return statistics.median(x / y for x, y in zip(per[a], per[b]))

        entry: dict[str, Any] = {
            "id": row["id"],
            "what": row["what"],
            "checked": checked,
            "seconds": {k: statistics.median(v) for k, v in per.items()},
            "funcdiff_over_numpy": ratio("funcdiff", "numpy"),
        }
        line = f"{row['id']:3} {row['what']:46} {'ok' if all(checked.values()) else 'WRONG':5}"
        if "torch.func" in per:
            entry["funcdiff_over_torch_func"] = ratio("funcdiff", "torch.func")
            line += f"  funcdiff/torch.func {entry['funcdiff_over_torch_func']:5.2f}"
        if "funcdiff summed gradient" in per:
            entry["funcdiff_over_summed_gradient"] = ratio("funcdiff", "funcdiff summed gradient")
            line += f"  funcdiff/summed gradient {entry['funcdiff_over_summed_gradient']:5.2f}"
        line += f"  funcdiff/numpy {entry['funcdiff_over_numpy']:6.1f}"
        print(line, flush=True)
        results.append(entry)
    payload = {
        "machine": _machine.machine(report),
        "torch": None if torch is None else torch.__version__,
        "rounds": rounds,
        "clock": args.clock,
        "rows": results,
    }
    out = Path(args.json) if args.json else HERE / "results" / f"func-{_dt.date.today()}.json"
    if not args.quick or args.json:
        out.write_text(json.dumps(payload, indent=1))
        print(f"wrote {out}")
    return 0 if all(all(r["checked"].values()) for r in results) else 1


if __name__ == "__main__":
    raise SystemExit(main())
