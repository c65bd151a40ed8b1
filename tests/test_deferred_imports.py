"""sympy deferred until first used (ortcore/_deferred.py): a session that does
no symbolic-dimension arithmetic never imports it, and everything that uses
sympy (onnx-ir's arithmetic, a program's own ``import sympy``) sees the real
module. Each case runs in a fresh interpreter: the deferral happens once per
process, at ``import ortcore``."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

pytest.importorskip("sympy")

_SESSION = (
    "import sys, numpy as np, onnx.helper as h, ortcore\n"
    "from ortcore._deferred import is_deferred\n"
    "g = h.make_graph([h.make_node('Relu', ['x'], ['y'])], 'g',\n"
    "    [h.make_tensor_value_info('x', 1, ['N'])], [h.make_tensor_value_info('y', 1, ['N'])])\n"
    "m = h.make_model(g, opset_imports=[h.make_opsetid('', 17)])\n"
    "s = ortcore.InferenceSession(m.SerializeToString(), providers=['CPUExecutionProvider'])\n"
    "assert s.run(None, {'x': np.ones(3, np.float32)})[0].tolist() == [1, 1, 1]\n"
)


def _run(code: str, **env: str) -> str:
    full_env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path), **env}
    done = subprocess.run(
        [sys.executable, "-c", code], env=full_env, capture_output=True, text=True, timeout=300
    )
    assert done.returncode == 0, done.stderr
    return done.stdout.strip()


def test_a_session_does_not_import_sympy() -> None:
    out = _run(_SESSION + "print(is_deferred(sys.modules['sympy']))")
    assert out == "True"


def test_symbolic_arithmetic_loads_the_real_sympy() -> None:
    code = _SESSION + (
        "import onnx_ir\n"
        "d = onnx_ir.SymbolicDim('N') + 1\n"
        "print(d, is_deferred(sys.modules['sympy']), type(sys.modules['sympy']).__name__)\n"
    )
    assert _run(code) == "N + 1 False module"


def test_a_program_using_sympy_sees_the_real_module() -> None:
    code = _SESSION + (
        "import importlib.util\n"
        "spec = importlib.util.find_spec('sympy')\n"  # how programs ask if it is installed
        "assert spec is not None and spec.name == 'sympy'\n"
        "import sympy\n"
        "from sympy import Symbol\n"
        "import sympy.core.numbers\n"
        "x = Symbol('x')\n"
        "assert isinstance(x + 1, sympy.Expr)\n"
        "assert sympy.__version__ == sys.modules['sympy'].__version__\n"
        "print(sympy.simplify(x + x))\n"
    )
    assert _run(code) == "2*x"


def test_threads_touching_sympy_at_once_all_get_it() -> None:
    code = _SESSION + (
        "import threading\n"
        "import onnx_ir._core as core\n"  # the module that holds the stand-in
        "got = []\n"
        "def touch():\n"
        "    got.append(core.sympy.Expr)\n"
        "ts = [threading.Thread(target=touch) for _ in range(8)]\n"
        "[t.start() for t in ts]; [t.join() for t in ts]\n"
        "print(len(got), len(set(got)), got[0] is sys.modules['sympy'].Expr)\n"
    )
    assert _run(code) == "8 1 True"


def test_turned_off_by_the_environment() -> None:
    code = "import sys, ortcore, onnx_ir\nprint(type(sys.modules['sympy']).__name__)"
    assert _run(code, ORTCORE_DEFER_IMPORTS="0") == "module"


def test_nothing_deferred_once_onnx_ir_is_imported() -> None:
    code = "import sys, onnx_ir, ortcore\nprint(type(sys.modules['sympy']).__name__)"
    assert _run(code) == "module"
