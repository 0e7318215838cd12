"""A PEP 517 / PEP 660 build backend for this one pure-Python package, on the standard library.

Why not setuptools: ``pip install ./clients/python`` must work offline on a fresh machine. With build
isolation pip downloads the backend first; without it, setuptools older than 70.1 (Python 3.11's
bundled 65.5) cannot build a wheel unless the separate ``wheel`` package is installed, and Python
3.12+ venvs have no setuptools at all. This backend needs nothing (``requires = []``), so pip has
nothing to fetch. It builds exactly: the ``recovery_ledger`` package (its ``.py`` files and
``py.typed``), its metadata from ``pyproject.toml``'s ``[project]`` table, and nothing else.
"""

from __future__ import annotations

import base64
import hashlib
import io
import os
import re
import tarfile
import time
import zipfile
from pathlib import Path
from typing import Any, Dict, List, Optional, Tuple

ROOT = Path(__file__).resolve().parent.parent
PACKAGE = "recovery_ledger"
TAG = "py3-none-any"


def _project() -> Dict[str, Any]:
    text = (ROOT / "pyproject.toml").read_text(encoding="utf-8")
    try:
        import tomllib  # Python 3.11+

        return tomllib.loads(text)["project"]
    except ImportError:
        # Python 3.10: the [project] table's plain `key = "value"` lines are all this package uses.
        table = re.search(r"^\[project\]\s*$(.*?)(?=^\[|\Z)", text, re.M | re.S)
        pairs = re.findall(r'^([A-Za-z-]+)\s*=\s*"([^"]*)"\s*$', table.group(1) if table else "", re.M)
        return dict(pairs)


def _names() -> Tuple[str, str, str]:
    project = _project()
    name, version = project["name"], project["version"]
    return name, version, re.sub(r"[-_.]+", "_", name).lower()


def _metadata() -> str:
    project = _project()
    lines = [
        "Metadata-Version: 2.1",
        f"Name: {project['name']}",
        f"Version: {project['version']}",
    ]
    if project.get("description"):
        lines.append(f"Summary: {project['description']}")
    if project.get("requires-python"):
        lines.append(f"Requires-Python: {project['requires-python']}")
    license_value = project.get("license")
    if isinstance(license_value, dict) and license_value.get("text"):
        lines.append(f"License: {license_value['text']}")
    for classifier in project.get("classifiers", []) if isinstance(project.get("classifiers"), list) else []:
        lines.append(f"Classifier: {classifier}")
    readme = ROOT / "README.md"
    body = ""
    if readme.exists():
        lines.append("Description-Content-Type: text/markdown")
        body = "\n" + readme.read_text(encoding="utf-8")
    return "\n".join(lines) + "\n" + body


def _package_files() -> List[Path]:
    files = [path for path in (ROOT / PACKAGE).rglob("*") if path.is_file()]
    keep = [path for path in files if path.suffix == ".py" or path.name == "py.typed"]
    return sorted(path for path in keep if "__pycache__" not in path.parts)


def _digest(data: bytes) -> str:
    return "sha256=" + base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode("ascii")


def _write_wheel(directory: str, entries: List[Tuple[str, bytes]]) -> str:
    name, version, dist = _names()
    dist_info = f"{dist}-{version}.dist-info"
    wheel_file = (
        "Wheel-Version: 1.0\nGenerator: recovery_ledger_build\nRoot-Is-Purelib: true\n" f"Tag: {TAG}\n"
    )
    entries = entries + [
        (f"{dist_info}/METADATA", _metadata().encode("utf-8")),
        (f"{dist_info}/WHEEL", wheel_file.encode("utf-8")),
    ]
    record = "".join(f"{path},{_digest(data)},{len(data)}\n" for path, data in entries) + f"{dist_info}/RECORD,,\n"
    filename = f"{dist}-{version}-{TAG}.whl"
    # Fixed timestamps: the same sources give the same wheel.
    stamp = (1980, 1, 1, 0, 0, 0)
    with zipfile.ZipFile(os.path.join(directory, filename), "w", zipfile.ZIP_DEFLATED) as archive:
        for path, data in entries + [(f"{dist_info}/RECORD", record.encode("utf-8"))]:
            info = zipfile.ZipInfo(path, stamp)
            info.external_attr = 0o644 << 16
            info.compress_type = zipfile.ZIP_DEFLATED
            archive.writestr(info, data)
    return filename


# ---- PEP 517 ------------------------------------------------------------------------------------------


def get_requires_for_build_wheel(config_settings: Optional[Dict[str, Any]] = None) -> List[str]:
    return []


def get_requires_for_build_sdist(config_settings: Optional[Dict[str, Any]] = None) -> List[str]:
    return []


def get_requires_for_build_editable(config_settings: Optional[Dict[str, Any]] = None) -> List[str]:
    return []


def build_wheel(wheel_directory: str, config_settings: Optional[Dict[str, Any]] = None, metadata_directory: Optional[str] = None) -> str:
    entries = [(path.relative_to(ROOT).as_posix(), path.read_bytes()) for path in _package_files()]
    return _write_wheel(wheel_directory, entries)


def build_editable(wheel_directory: str, config_settings: Optional[Dict[str, Any]] = None, metadata_directory: Optional[str] = None) -> str:
    # PEP 660: a .pth file that puts this directory on sys.path, so edits take effect at once.
    _, _, dist = _names()
    return _write_wheel(wheel_directory, [(f"__editable__.{dist}.pth", (str(ROOT) + "\n").encode("utf-8"))])


def build_sdist(sdist_directory: str, config_settings: Optional[Dict[str, Any]] = None) -> str:
    name, version, dist = _names()
    base = f"{dist}-{version}"
    sources = [ROOT / "pyproject.toml", Path(__file__).resolve(), *_package_files()]
    if (ROOT / "README.md").exists():
        sources.append(ROOT / "README.md")
    filename = f"{base}.tar.gz"
    with tarfile.open(os.path.join(sdist_directory, filename), "w:gz", format=tarfile.PAX_FORMAT) as archive:
        pkg_info = _metadata().encode("utf-8")
        info = tarfile.TarInfo(f"{base}/PKG-INFO")
        info.size, info.mtime, info.mode = len(pkg_info), int(time.time()), 0o644
        archive.addfile(info, io.BytesIO(pkg_info))
        for path in sources:
            archive.add(path, arcname=f"{base}/{path.relative_to(ROOT).as_posix()}", recursive=False)
    return filename
