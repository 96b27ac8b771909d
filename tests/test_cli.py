"""The command line: ``python -m funcdiff [check MODULE:FUNCTION --at VALUES ...]``."""

from __future__ import annotations

import contextlib
import io
import json
import subprocess
import sys
import textwrap

import numpy as np
import pytest

from funcdiff.cli import main, parse_values

FUNCS = textwrap.dedent(
    """
    import numpy as np
    import funcdiff as fd


    def loss(x, y):
        return np.sum(np.sin(x) * y ** 2)


    def rosen(x):
        return np.sum(100.0 * (x[1:] - x[:-1] ** 2) ** 2 + (1 - x[:-1]) ** 2)


    def trace_of_square(A):
        return np.trace(A @ A)


    def kink(x):
        return np.abs(x)


    class _Wrong(fd.Function):
        @staticmethod
        def forward(ctx, x):
            ctx.x = np.array(x.data if isinstance(x, fd.Tensor) else x)
            return np.asarray(np.sum(ctx.x ** 3))

        @staticmethod
        def backward(ctx, g):
            gr = 3 * ctx.x ** 2
            gr[1] *= 1.05
            return g * fd.tensor(gr)


    def wrong(x):
        return _Wrong.apply(x)


    def needs_three(x):
        return x @ np.ones(3)


    def tensor_only(x):
        return np.sum(x.detach() * 0.0 + x ** 2)


    def returns_text(x):
        return "text"


    def loss_grad(x, y):
        return np.cos(x) * y ** 2, 2 * np.sin(x) * y


    def rosen_grad(x):
        from scipy.optimize import rosen_der

        return rosen_der(x)


    def rosen_grad_wrong(x):
        g = rosen_grad(x)
        g[2] *= 1.01
        return g


    def rosen_hess(x):
        from scipy.optimize import rosen_hess as h

        return h(x)


    def rosen_untraceable(x):
        return float(sum(100.0 * (float(b) - float(a) ** 2) ** 2 + (1 - float(a)) ** 2
                         for a, b in zip(x[:-1], x[1:])))


    def grad_wrong_shape(x):
        return np.zeros(len(x) + 1)


    def raises_in_check(x):
        if not np.array_equal(x, np.array([0.5, 1.5, 2.5])):
            raise RuntimeError("only at the check point")
        return np.sum(x ** 2)


    NOT_CALLABLE = 3
    """
)


@pytest.fixture()
def workdir(tmp_path):
    (tmp_path / "cli_funcs.py").write_text(FUNCS)
    return tmp_path


def run(*args: str, cwd) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "funcdiff", *args],
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=900,  # only ends a hung process; speed is benchmarks/import_time.py's
    )


def run_in_process(*args: str, cwd, monkeypatch: pytest.MonkeyPatch) -> subprocess.CompletedProcess:
    """``main(args)`` in this process, as ``python -m funcdiff`` would run it in ``cwd``:
    the exit status and both streams, without paying an interpreter start per case."""
    out, err = io.StringIO(), io.StringIO()
    monkeypatch.chdir(cwd)
    monkeypatch.setattr(sys, "path", list(sys.path))  # main() puts cwd first, as -m does
    monkeypatch.delitem(sys.modules, "cli_funcs", raising=False)  # each test has its own
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            code = main(list(args))
        except SystemExit as exc:  # argparse's --help
            code = exc.code if isinstance(exc.code, int) else 0
    sys.modules.pop("cli_funcs", None)
    return subprocess.CompletedProcess(args, code, out.getvalue(), err.getvalue())


# ---------------------------------------------------------------------- subprocesses
def test_success(workdir) -> None:
    proc = run("check", "cli_funcs:loss", "--at", "0.1,0.2,0.3", "--at", "[1, 2, 3]", cwd=workdir)
    assert proc.returncode == 0, proc.stderr
    assert "Derivative check of loss: PASS" in proc.stdout
    assert "df/dx" in proc.stdout and "df/dy" in proc.stdout
    assert proc.stderr == ""


def test_failure_names_the_worst_element(workdir) -> None:
    proc = run("check", "cli_funcs:wrong", "--at", "0.5,1.5,2.5", cwd=workdir)
    assert proc.returncode == 1
    assert "FAIL" in proc.stdout and "f, x[1]" in proc.stdout
    assert proc.stderr == ""


@pytest.mark.parametrize(
    "args, message",
    [
        (["check", "cli_funcs", "--at", "1"], "expected MODULE:FUNCTION"),
        (["check", "cli_funcs:rosen", "--at", "1,abc"], "cannot parse as numbers"),
        (["check", "cli_funcs:rosen", "--at", "[1, 2"], "not valid JSON"),
        (["check", "cli_funcs:rosen", "--at", "[[1, 2], [3]]"], "ragged"),
        (["check", "cli_funcs:rosen", "--at", '["a", "b"]'], "only numbers"),
        (["check", "cli_funcs:rosen", "--at", "1,nan"], "finite"),
        (["check", "cli_funcs:rosen", "--at", "missing.npy"], "no such .npy file"),
        (["check", "cli_funcs:loss", "--at", "1,2"], "takes 2 positional argument(s) (x, y)"),
        (["check", "cli_funcs:rosen"], "--at"),
        (["check", "cli_funcs:rosen", "--at", "1,2", "--order", "3"], "invalid choice"),
        (["check", "cli_funcs:rosen", "--at", "1,2", "--method", "five"], "invalid choice"),
        (["check", "cli_funcs:rosen", "--at", "1,2", "--plot", "no/dir/x.png"], "does not exist"),
        (["frobnicate"], "invalid choice"),
        (
            ["check", "cli_funcs:rosen", "--at", "1,2", "--hess", "cli_funcs:rosen_hess"],
            "add --order 2",
        ),
        (
            [
                "check",
                "cli_funcs:rosen",
                "--at",
                "1,2",
                "--order",
                "2",
                "--jac",
                "cli_funcs:rosen_grad",
            ],
            "needs --hess",
        ),
    ],
)
def test_bad_arguments_exit_2_with_one_line(workdir, args, message, monkeypatch) -> None:
    proc = run_in_process(*args, cwd=workdir, monkeypatch=monkeypatch)
    assert proc.returncode == 2
    lines = proc.stderr.splitlines()
    assert len(lines) == 1, proc.stderr
    assert lines[0].startswith("funcdiff: error: ") and message in lines[0]
    assert proc.stdout == ""


@pytest.mark.parametrize(
    "args, message",
    [
        (
            ["check", "no_such_module_xyz:f", "--at", "1"],
            "cannot import module 'no_such_module_xyz'",
        ),
        (["check", "cli_funcs:nope", "--at", "1"], "has no attribute 'nope'"),
        (["check", "cli_funcs:NOT_CALLABLE", "--at", "1"], "is not callable (it is a int)"),
        (["check", "missing_file.py:f", "--at", "1"], "no such file"),
        (["check", "cli_funcs:needs_three", "--at", "1,2"], "raised ValueError"),
        (["check", "cli_funcs:returns_text", "--at", "1"], "returned str"),
        (["check", "cli_funcs:raises_in_check", "--at", "0.5,1.5,2.5"], "only at the check point"),
        (["check", "cli_funcs:rosen", "--at", "1,2", "--jac", "cli_funcs:nope"], "no attribute"),
        (
            ["check", "cli_funcs:rosen", "--at", "1,2", "--jac", "cli_funcs:grad_wrong_shape"],
            "jac returned an array of shape (3,) for df/dx at the check point; expected (2,)",
        ),
    ],
)
def test_function_errors_exit_3_with_one_line(workdir, args, message, monkeypatch) -> None:
    proc = run_in_process(*args, cwd=workdir, monkeypatch=monkeypatch)
    assert proc.returncode == 3, proc.stderr
    lines = proc.stderr.splitlines()
    assert len(lines) == 1, proc.stderr
    assert lines[0].startswith("funcdiff: error: ") and message in lines[0]
    assert proc.stdout == ""


def test_help_lists_the_exit_codes(workdir) -> None:
    proc = run("check", "--help", cwd=workdir)
    assert proc.returncode == 0
    text = " ".join(proc.stdout.split())
    assert "exit status:" in text
    for code, meaning in [
        (0, "every derivative agrees"),
        (1, "a derivative disagrees"),
        (2, "bad command-line arguments"),
        (3, "the function (or --jac/--hess) could not be loaded, raised"),
    ]:
        assert f"{code} {meaning}" in text
    assert "--jac MODULE:FUNCTION" in proc.stdout and "--hess MODULE:FUNCTION" in proc.stdout


def test_hand_written_gradient_and_hessian(workdir) -> None:
    at = ["--at", "0.5,1.5,2.5,-0.3"]
    proc = run(
        "check", "cli_funcs:rosen_untraceable", *at, "--jac", "cli_funcs:rosen_grad", cwd=workdir
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "Derivative check of rosen_untraceable (jac: rosen_grad): PASS" in proc.stdout
    proc = run(
        "check",
        "cli_funcs:rosen_untraceable",
        *at,
        "--jac",
        "cli_funcs:rosen_grad_wrong",
        cwd=workdir,
    )
    assert proc.returncode == 1 and "FAIL" in proc.stdout and "f, x[2]" in proc.stdout
    proc = run(
        "check",
        "cli_funcs:rosen_untraceable",
        *at,
        "--order",
        "2",
        "--jac",
        "cli_funcs:rosen_grad",
        "--hess",
        "cli_funcs:rosen_hess",
        cwd=workdir,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "(hess: rosen_hess): PASS" in proc.stdout and "d2f/dx dx" in proc.stdout
    proc = run(
        "check",
        "cli_funcs:loss",
        "--at",
        "0.1,0.2",
        "--at",
        "3,4",
        "--jac",
        "cli_funcs:loss_grad",
        "--fast",
        cwd=workdir,
    )
    assert proc.returncode == 0 and "df/dy" in proc.stdout


def test_default_run_is_the_demonstration(tmp_path) -> None:
    proc = run(cwd=tmp_path)
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr
    out = proc.stdout
    for title in (
        "Rosenbrock function",
        "logistic-regression log-likelihood",
        "quadratic form with a matrix inverse",
    ):
        assert f"passed: {title}" in out
    assert "caught: Rosenbrock with a hand-written gradient" in out
    assert "worst element f, x[7]" in out  # the forgotten last component
    assert "all as expected" in out


# ---------------------------------------------------------------------- in-process
def test_json_output(workdir, capsys) -> None:
    code = main(
        [
            "check",
            str(workdir / "cli_funcs.py") + ":rosen",
            "--at",
            "0.5,1.5,2.0",
            "--order",
            "2",
            "--json",
        ]
    )
    out = capsys.readouterr().out
    data = json.loads(out)
    assert code == 0 and data["ok"] is True and data["order"] == 2
    assert [p["kind"] for p in data["pairs"]] == ["jacobian", "hessian"]


def test_plot_and_npy_input(workdir, capsys) -> None:
    A = np.array([[1.0, 2.0], [3.0, 4.0]])
    np.save(workdir / "A.npy", A)
    png = workdir / "sweep.png"
    code = main(
        [
            "check",
            str(workdir / "cli_funcs.py") + ":trace_of_square",
            "--at",
            str(workdir / "A.npy"),
            "--plot",
            str(png),
        ]
    )
    out = capsys.readouterr().out
    assert code == 0, out
    assert "df/dA" in out and f"written to {png}" in out
    data = png.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n" and len(data) > 1024


@pytest.mark.parametrize("method", ["richardson", "complex-step"])
def test_methods(workdir, capsys, method) -> None:
    code = main(
        [
            "check",
            str(workdir / "cli_funcs.py") + ":loss",
            "--at",
            "0.1,0.2",
            "--at",
            "3,4",
            "--method",
            method,
        ]
    )
    assert code == 0
    assert "PASS" in capsys.readouterr().out


def test_kink_is_inconclusive_not_failure(workdir, capsys) -> None:
    code = main(["check", str(workdir / "cli_funcs.py") + ":kink", "--at", "0.0,1.0"])
    out = capsys.readouterr().out
    assert code == 0 and "INCONCLUSIVE" in out and "kink" in out


def test_fast_mode_flag(workdir, capsys) -> None:
    x = ",".join(str(v) for v in np.linspace(-1, 1, 50))
    code = main(["check", str(workdir / "cli_funcs.py") + ":wrong", "--at", x, "--fast"])
    out = capsys.readouterr().out
    assert code == 1 and "f, x[1]" in out and "fast mode flagged" in out


def test_function_using_tensor_methods(workdir, capsys) -> None:
    code = main(["check", str(workdir / "cli_funcs.py") + ":tensor_only", "--at", "1,2"])
    out = capsys.readouterr().out
    assert code == 0 and "PASS" in out and "plain ndarrays" in out


def test_negative_values(workdir, capsys) -> None:
    code = main(
        ["check", str(workdir / "cli_funcs.py") + ":loss", "--at", "-0.5,-1", "--at", "-2,3"]
    )
    assert code == 0, capsys.readouterr().err


def test_parse_values() -> None:
    assert parse_values("2.5").shape == ()
    assert parse_values(" 1, 2 ,3 ").tolist() == [1.0, 2.0, 3.0]
    assert parse_values("7,").tolist() == [7.0]
    assert parse_values("[[1, 2], [3, 4]]").shape == (2, 2)
    assert parse_values("[3]").tolist() == [3.0]
