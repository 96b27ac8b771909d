"""funcdiff composes with Dask: derivatives per chunk under ``dask.array.map_blocks``,
prepared and replayed derivatives over many points under ``dask.delayed``, in threads and
in the worker processes of a ``distributed.LocalCluster``; each against an eager loop
and a closed form.

One cluster (two single-threaded worker processes) serves the whole module. The
functions the tasks call live in ``support.picklable``, which the workers import.
"""

from __future__ import annotations

import os
import re
from pathlib import Path
from typing import Any

import numpy as np
import pytest

dask = pytest.importorskip("dask")
da = pytest.importorskip("dask.array")
distributed = pytest.importorskip("distributed")

from support import picklable as pk  # noqa: E402

import funcdiff as fd  # noqa: E402
import funcdiff.functional as F  # noqa: E402
import funcdiff.replay as replay  # noqa: E402
import funcdiff.sparse as fs  # noqa: E402

RNG = np.random.default_rng(7)
N_SAMPLES, N_FEATURES, CHUNK = 48, 3, 12
X = RNG.standard_normal((N_SAMPLES, N_FEATURES))
Y = (RNG.random(N_SAMPLES) < 0.5).astype(float)
W_PARAM = np.array([0.4, -1.2, 0.7])
POINTS = [np.linspace(-0.5, 1.2, 6) + 0.05 * k for k in range(12)]
PAGE = Path(__file__).resolve().parent.parent / "docs" / "gpus_and_clusters.md"


def per_sample_gradients(X_block: np.ndarray, y_block: np.ndarray, w: np.ndarray) -> np.ndarray:
    """The gradients of one chunk's per-sample losses: the rows of one Jacobian
    (``y_block`` is a column, chunked along the rows as ``X_block`` is)."""
    return F.jacobian(lambda v: pk.logistic_losses(v, X_block, y_block[:, 0]), w)


def eager_gradients(w: np.ndarray) -> np.ndarray:
    """One sample at a time, by backward."""
    rows = []
    for x, y in zip(X, Y):
        wt = fd.tensor(w, requires_grad=True)
        loss = pk.logistic_losses(wt, x[None, :], np.array([y]))[0]
        loss.backward()
        rows.append(wt.grad.data)
    return np.array(rows)


def chunked_gradients() -> Any:
    Xd = da.from_array(X, chunks=(CHUNK, N_FEATURES))
    yd = da.from_array(Y, chunks=CHUNK)
    return da.map_blocks(
        per_sample_gradients, Xd, yd[:, None], W_PARAM, dtype=float, chunks=Xd.chunks
    )


def _with_pid(fn: Any, x: np.ndarray) -> tuple[int, Any]:
    return os.getpid(), fn(x)


def _sweep(fn: Any, xs: list) -> tuple[int, list, dict]:
    return os.getpid(), [fn(x) for x in xs], fn.cache_info()


@pytest.fixture(scope="module")
def client() -> Any:
    cluster = distributed.LocalCluster(
        processes=True,
        n_workers=2,
        threads_per_worker=1,
        dashboard_address=":0",
        silence_logs=50,
    )
    c = distributed.Client(cluster)
    try:
        yield c
    finally:
        c.close()
        cluster.close()


def test_per_sample_gradients_under_map_blocks_match_an_eager_loop() -> None:
    expected = eager_gradients(W_PARAM)
    np.testing.assert_allclose(expected, pk.logistic_gradients(W_PARAM, X, Y), rtol=1e-12)
    got = chunked_gradients()
    assert got.numblocks == (N_SAMPLES // CHUNK, 1)
    for scheduler in ("threads", "sync"):
        np.testing.assert_allclose(got.compute(scheduler=scheduler), expected, rtol=1e-13)


def test_prepared_and_replayed_derivatives_under_delayed_threads() -> None:
    J = fs.prepare_jacobian(pk.residual, POINTS[0], replay=True)
    vg = replay.value_and_grad(pk.rosen)
    eager_J = [J(x).toarray() for x in POINTS]
    eager_vg = [vg(x) for x in POINTS]
    tasks = [dask.delayed(J)(x) for x in POINTS], [dask.delayed(vg)(x) for x in POINTS]
    jacs, grads = dask.compute(*tasks, scheduler="threads", num_workers=2)
    for x, jac, e_jac, (value, g), (e_value, e_g) in zip(POINTS, jacs, eager_J, grads, eager_vg):
        np.testing.assert_array_equal(jac.toarray(), e_jac)
        np.testing.assert_allclose(jac.toarray(), pk.residual_jac(x), rtol=1e-14)
        assert value == e_value
        np.testing.assert_array_equal(g, e_g)
        np.testing.assert_allclose(g, pk.rosen_grad(x), rtol=1e-12)


def test_a_prepared_jacobian_with_two_paths_under_threads() -> None:
    # Points on both branches of the function, in any order: each gets its own path's
    # pattern (recorded and replayed per path), as in a loop.
    J = fs.prepare_jacobian(pk.branchy, POINTS[0], replay=True)
    points = [x if k % 2 else -x for k, x in enumerate(POINTS * 4)]
    tasks = [dask.delayed(J)(x) for x in points]
    for jac, x in zip(dask.compute(*tasks, scheduler="threads", num_workers=4), points):
        np.testing.assert_allclose(jac.toarray(), pk.branchy_jac(x), rtol=1e-14)


def test_worker_processes_give_the_eager_results(client: Any) -> None:
    pids = set(client.run(os.getpid).values())
    assert len(pids) == 2 and os.getpid() not in pids
    # Per-sample gradients: each chunk in a worker process.
    got = chunked_gradients().compute(scheduler=client)
    np.testing.assert_allclose(got, pk.logistic_gradients(W_PARAM, X, Y), rtol=1e-12)
    # Prepared (replayed and not) and replayed derivatives, used here before they travel
    # (their recorded programs stay here), over many points.
    objects = {
        "sparse.jacobian.replay": fs.prepare_jacobian(pk.residual, POINTS[0], replay=True),
        "sparse.hessian": fs.prepare_hessian(pk.rosen, POINTS[0]),
        "replay.grad": replay.grad(pk.rosen),
        "replay.decorated": pk.replayed_rosen,
        "lambda.grad": replay.grad(lambda x: np.sum(np.sin(x) * x)),
    }
    eager = {name: [obj(x) for x in POINTS] for name, obj in objects.items()}
    tasks = {
        name: [dask.delayed(_with_pid)(obj, x) for x in POINTS] for name, obj in objects.items()
    }
    (results,) = dask.compute(tasks, scheduler=client)
    seen = set()
    for name, expected in eager.items():
        for (pid, result), e in zip(results[name], expected):
            seen.add(pid)
            if name.startswith("sparse"):
                result, e = result.toarray(), e.toarray()
            if isinstance(e, tuple):
                assert result[0] == e[0]
                result, e = result[1], e[1]
            np.testing.assert_array_equal(result, e, err_msg=name)  # bit for bit
    assert seen <= pids and os.getpid() not in seen
    x = POINTS[-1]
    np.testing.assert_allclose(results["sparse.hessian"][-1][1].toarray(), pk.rosen_hess(x))
    np.testing.assert_allclose(results["lambda.grad"][-1][1], np.sin(x) + x * np.cos(x))


def test_a_scattered_replayed_gradient_records_once_per_worker(client: Any) -> None:
    [grad_remote] = client.scatter([replay.grad(pk.rosen)], broadcast=True)
    batches = [POINTS[k : k + 3] for k in range(0, len(POINTS), 3)]
    for _ in range(2):  # each worker keeps its copy from one compute to the next
        tasks = [dask.delayed(_sweep)(grad_remote, b) for b in batches]
        for (pid, grads, info), batch in zip(dask.compute(*tasks, scheduler=client), batches):
            assert pid != os.getpid() and info["trace_count"] == 1
            for g, x in zip(grads, batch):
                np.testing.assert_allclose(g, pk.rosen_grad(x), rtol=1e-12)
    assert info["replays"] >= 3  # the last task replayed every point of its batch


def _section_examples() -> list[str]:
    """The Python examples of the page's Dask section (``{code-block} python``: the
    docs tests do not run them, since they need Dask and a cluster)."""
    text = PAGE.read_text(encoding="utf-8")
    section = text[text.index("## Clusters with Dask") :]
    end = section.find("\n## ", 1)
    section = section if end < 0 else section[:end]
    return re.findall(r"^```\{code-block\} python\n(.*?)^```$", section, re.M | re.S)


def test_the_docs_examples_run_on_the_cluster(client: Any) -> None:
    blocks = _section_examples()
    assert len(blocks) >= 5
    # A script's namespace; the module's cluster stands in for the one the page starts
    # (and closes, and restarts with another worker environment).
    ns: dict = {"__name__": "__main__"}
    ran = 0
    for code in blocks:
        if "LocalCluster(" in code or ".close()" in code:
            continue
        if "client" in code:
            ns["client"] = client
        exec(compile(code, str(PAGE), "exec"), ns)  # noqa: S102
        ran += 1
    assert ran >= 3 and "grads_remote" in ns and "remote" in ns
