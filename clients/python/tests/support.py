"""What the tests share: the repository's shared vectors, the envelope assertions, and the real
services (the built ledger and the example invoice provider) the integration tests talk to.

Under ``npm test`` the services are started by test/e2e/python-client.e2e.spec.ts and named in the
environment (``RL_TEST_LEDGER_URL``, ``RL_TEST_PROVIDER_URL``, ``RL_TEST_KEYS``). Run on its own,
the suite starts them itself from ``dist/`` (``npm run build`` first), and skips the integration
tests with the reason when it cannot.
"""

from __future__ import annotations

import atexit
import json
import os
import re
import secrets
import shutil
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.parse
import urllib.request
import unittest
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Dict, List, Optional

PYTHON_ROOT = Path(__file__).resolve().parent.parent
REPO_ROOT = PYTHON_ROOT.parent.parent
VECTORS = REPO_ROOT / "test" / "vectors"
EXAMPLES = PYTHON_ROOT / "examples"
WORKER = EXAMPLES / "invoice_worker.py"

for path in (str(PYTHON_ROOT), str(EXAMPLES)):
    if path not in sys.path:
        sys.path.insert(0, path)

from recovery_ledger import NEXT_ACTIONS, validate_envelope  # noqa: E402
from recovery_ledger.normalizers import NORMALIZED_CODE_FACTS, NormalizeContext, agent_message, user_message  # noqa: E402

NOW = datetime(2030, 3, 4, 5, 6, 7, tzinfo=timezone.utc)
REF = "run_81/step_4"

FIXED_AGENT_MESSAGES = {agent_message(code, action) for code in NORMALIZED_CODE_FACTS for action in NEXT_ACTIONS}
FIXED_USER_MESSAGES = {user_message(action) for action in NEXT_ACTIONS}


def context(side_effect: str = "write", **extra: Any) -> NormalizeContext:
    return NormalizeContext(operation_ref=REF, side_effect=side_effect, now=NOW, **extra)  # type: ignore[arg-type]


def load_vectors(name: str) -> Dict[str, Any]:
    with open(VECTORS / name, encoding="utf-8") as handle:
        return json.load(handle)


def dumps(value: Any) -> str:
    """As JSON.stringify writes it: non-ASCII raw, so a telltale cannot hide behind an escape."""
    return json.dumps(value, ensure_ascii=False)


def shape(envelope: Dict[str, Any]) -> Dict[str, Any]:
    """The four questions, in one line per case."""
    if envelope["ok"]:
        return {"ok": True}
    return {
        "ok": False,
        "code": envelope["code"],
        "category": envelope["category"],
        "commit_state": envelope["commit_state"],
        "directive": envelope["retry"]["directive"],
        "next_action": envelope["next_action"],
    }


class EnvelopeAssertions(unittest.TestCase):
    def assert_valid(self, envelope: Any, side_effect: str = "write", operation_ref: str = REF) -> None:
        checked = validate_envelope(envelope, operation_ref=operation_ref, side_effect=side_effect)  # type: ignore[arg-type]
        self.assertTrue(checked.ok, f"invalid envelope: {checked.field} {checked.reason}\n{dumps(envelope)}")

    def assert_error(self, envelope: Any) -> Dict[str, Any]:
        self.assertIs(envelope["ok"], False, f"expected a failure envelope: {dumps(envelope)}")
        return envelope

    def assert_shape(self, envelope: Any, **expected: Any) -> None:
        actual = shape(envelope)
        self.assertEqual({key: actual.get(key) for key in expected}, expected, dumps(envelope))


# ---- the real services -------------------------------------------------------------------------------

TENANTS = ("contract", "crash", "client", "cross", "worker")


class Provider:
    """The example invoice provider, over its HTTP surface (faults, invoices, request counts)."""

    def __init__(self, url: str) -> None:
        self.url = url.rstrip("/")

    def _json(self, path: str, body: Any = None) -> Any:
        data = None if body is None else json.dumps(body).encode("utf-8")
        request = urllib.request.Request(self.url + path, data=data, method="POST" if data else "GET")
        with urllib.request.urlopen(request, timeout=5) as response:
            return json.load(response)

    def inject(self, operation_ref: Optional[str], fault: Dict[str, Any], times: int = 1, on: str = "create") -> None:
        rule: Dict[str, Any] = {"fault": fault, "times": times, "on": on}
        if operation_ref is not None:
            rule["operation_ref"] = operation_ref
        self._json("/__faults", rule)

    def invoices(self, operation_ref: str) -> List[Dict[str, Any]]:
        query = urllib.parse.urlencode({"operation_ref": operation_ref})
        return self._json(f"/invoices?{query}")["items"]

    def all_invoices(self) -> List[Dict[str, Any]]:
        return self._json("/invoices")["items"]

    def create_requests(self, operation_ref: Optional[str] = None) -> int:
        counts: Dict[str, int] = self._json("/__requests")["create_requests"]
        return sum(counts.values()) if operation_ref is None else counts.get(operation_ref, 0)


class Services:
    def __init__(self, ledger_url: str, provider_url: str, keys: Dict[str, str]) -> None:
        self.ledger_url = ledger_url
        self.provider = Provider(provider_url)
        self.keys = keys


_services: Optional[Services] = None
_unavailable: Optional[str] = None


def _wait_for(url: str, deadline: float, process: subprocess.Popen) -> None:
    while time.time() < deadline:
        if process.poll() is not None:
            raise RuntimeError(f"{process.args} exited with {process.returncode}")
        try:
            with urllib.request.urlopen(url, timeout=1):
                return
        except (urllib.error.URLError, OSError):
            time.sleep(0.05)
    raise RuntimeError(f"{url} did not answer in time")


def _start_own() -> Services:
    """The same services the jest spec starts, from dist/, for a suite run on its own."""
    node = shutil.which("node")
    main = REPO_ROOT / "dist" / "src" / "main.js"
    provider_main = REPO_ROOT / "dist" / "examples" / "invoice-provider" / "main.js"
    if node is None or not main.exists() or not provider_main.exists():
        raise unittest.SkipTest("no RL_TEST_LEDGER_URL, and no node or no dist/ to start the services (npm run build)")
    keys = {name: secrets.token_hex(16) for name in TENANTS}
    keys["auditor"] = secrets.token_hex(16)
    api_keys = [f"{keys[name]}:runtime:py_{name}" for name in TENANTS] + [f"{keys['auditor']}:auditor:py_client"]
    data_dir = tempfile.mkdtemp(prefix="ledger-py-")
    import socket

    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    env = {**os.environ, "PORT": str(port), "LEDGER_DATA_DIR": data_dir, "LOG_LEVEL": "warn", "LEDGER_API_KEYS": ",".join(api_keys)}
    ledger = subprocess.Popen([node, str(main)], env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    provider = subprocess.Popen([node, str(provider_main), "--port", "0"], stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)

    def stop() -> None:
        for process in (ledger, provider):
            if process.poll() is None:
                process.terminate()
                process.wait(10)
        shutil.rmtree(data_dir, ignore_errors=True)

    atexit.register(stop)
    line = provider.stdout.readline() if provider.stdout else ""
    match = re.search(r"http://[0-9.]+:\d+", line)
    if not match:
        raise RuntimeError(f"the provider did not say where it listens: {line!r}")
    ledger_url = f"http://127.0.0.1:{port}"
    _wait_for(ledger_url + "/v1/schema/envelope", time.time() + 20, ledger)
    return Services(ledger_url, match.group(0), keys)


def services() -> Services:
    """The running services, or SkipTest with the reason."""
    global _services, _unavailable
    if _services is not None:
        return _services
    if _unavailable is not None:
        raise unittest.SkipTest(_unavailable)
    ledger_url = os.environ.get("RL_TEST_LEDGER_URL")
    provider_url = os.environ.get("RL_TEST_PROVIDER_URL")
    if ledger_url and provider_url:
        _services = Services(ledger_url, provider_url, json.loads(os.environ["RL_TEST_KEYS"]))
        return _services
    try:
        _services = _start_own()
    except unittest.SkipTest as skip:
        _unavailable = str(skip)
        raise
    return _services


def wait_until(instant: Optional[str], slack: float = 0.05) -> None:
    from recovery_ledger.envelope import parse_iso_instant

    if instant:
        time.sleep(max(0.0, parse_iso_instant(instant).timestamp() - time.time()) + slack)
