"""``pip install ./clients/python`` works offline: the in-tree build backend needs nothing from a
package index (``--no-index`` below proves it), and what it installs is the whole typed package."""

import importlib.util
import json
import subprocess
import sys
import tempfile
import unittest
import zipfile
from pathlib import Path

from tests.support import PYTHON_ROOT

sys.path.insert(0, str(PYTHON_ROOT / "_build_backend"))
import recovery_ledger_build  # noqa: E402


class PackagingTest(unittest.TestCase):
    def test_the_wheel_holds_every_module_py_typed_and_the_metadata(self) -> None:
        with tempfile.TemporaryDirectory() as directory:
            name = recovery_ledger_build.build_wheel(directory)
            self.assertEqual(name, "recovery_ledger-0.1.0-py3-none-any.whl")
            with zipfile.ZipFile(Path(directory) / name) as wheel:
                names = set(wheel.namelist())
                metadata = wheel.read("recovery_ledger-0.1.0.dist-info/METADATA").decode()
                record = wheel.read("recovery_ledger-0.1.0.dist-info/RECORD").decode()
        sources = {path.relative_to(PYTHON_ROOT).as_posix() for path in (PYTHON_ROOT / "recovery_ledger").rglob("*.py")}
        self.assertTrue(sources <= names, sources - names)
        self.assertIn("recovery_ledger/py.typed", names)
        self.assertFalse(any("__pycache__" in entry or entry.startswith("tests/") for entry in names))
        self.assertIn("Requires-Python: >=3.10", metadata)
        self.assertEqual(len(record.strip().splitlines()), len(names))

    def test_pip_installs_it_into_a_fresh_venv_without_an_index(self) -> None:
        if importlib.util.find_spec("ensurepip") is None:
            self.skipTest("this Python has no ensurepip (Debian: apt-get install python3-venv), so no venv with pip")
        with tempfile.TemporaryDirectory() as directory:
            venv = Path(directory) / "venv"
            subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True, capture_output=True)
            python = venv / "bin" / "python"
            installed = subprocess.run(
                [str(python), "-m", "pip", "install", "--no-index", "--disable-pip-version-check", str(PYTHON_ROOT)],
                capture_output=True, text=True, cwd=directory,
            )
            self.assertEqual(installed.returncode, 0, installed.stdout + installed.stderr)
            probe = (
                "import json, pathlib, recovery_ledger as r;"
                "print(json.dumps([r.__file__, r.input_hash({'b': 1, 'a': [1.0]}),"
                " (pathlib.Path(r.__file__).parent / 'py.typed').exists()]))"
            )
            ran = subprocess.run([str(python), "-c", probe], capture_output=True, text=True, cwd=directory, check=True)
            location, digest, typed = json.loads(ran.stdout)
            self.assertIn(str(venv), location)  # the installed copy, not the source tree
            from recovery_ledger import input_hash

            self.assertEqual(digest, input_hash({"a": [1], "b": 1}))
            self.assertTrue(typed)
