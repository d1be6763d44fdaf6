"""What set-up fetches or builds once per machine (infra/fetch_jars.sh, infra/fetch_seaweedfs.sh,
infra/fetch_wheels.sh): another checkout's folders are links to the kept ones, made without
Maven or Go, and hold the same files as this checkout's; the wheels of the source-only Python
dependencies are built once, and install without the index."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from pipelines.machine_cache import machine_cache_dir
from tests.support.processes import run_in_own_session

pytestmark = pytest.mark.integration

ROOT = Path(__file__).resolve().parents[3]
INFRA = ROOT / "infra"
SHARED = machine_cache_dir()


def _run(
    script: str, env: dict[str, str], *args: str, timeout: float = 120
) -> subprocess.CompletedProcess[str]:
    """Run a set-up script; on a timeout its whole session goes (a Maven or Go run with it)."""
    return run_in_own_session(
        [str(INFRA / script), *args],
        timeout=timeout,
        env={**os.environ, **env},
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )


def _names(folder: Path) -> set[str]:
    return {p.name for p in folder.iterdir()}


def test_a_second_checkouts_jars_are_links_to_the_kept_folders(tmp_path: Path) -> None:
    ours = INFRA / ".cache" / "jars"
    theirs = tmp_path / "jars"
    done = _run("fetch_jars.sh", {"PROTOLAKE_JAR_CACHE": str(theirs)})
    assert done.returncode == 0, done.stderr
    assert "fetching" not in done.stdout + done.stderr  # no Maven run: every folder was kept
    assert _names(theirs) <= _names(ours)  # ours may keep what an older set-up fetched
    assert {"spark", "kafka", "s3", "postgres"} <= _names(theirs)
    for folder in theirs.iterdir():
        assert folder.is_symlink(), folder
        kept = folder.resolve()
        assert kept.parent == (SHARED / "jars").resolve(), kept
        assert (kept / ".complete").is_file()
        assert any(kept.rglob("*.jar")), kept
        assert _names(kept) == _names(ours / folder.name)
    # again: nothing to do, the same links
    links = {f.name: f.resolve() for f in theirs.iterdir()}
    again = _run("fetch_jars.sh", {"PROTOLAKE_JAR_CACHE": str(theirs)})
    assert again.returncode == 0 and not again.stdout, again.stdout + again.stderr
    assert {f.name: f.resolve() for f in theirs.iterdir()} == links


def test_a_second_checkouts_seaweedfs_is_a_link_to_the_kept_binary(tmp_path: Path) -> None:
    ours = INFRA / ".cache" / "bin" / "weed"
    assert ours.is_file(), "set-up builds SeaweedFS (infra/setup.sh) before the suite runs"
    theirs = tmp_path / "bin"
    done = _run("fetch_seaweedfs.sh", {"PROTOLAKE_BIN_CACHE": str(theirs)})
    assert done.returncode == 0, done.stderr
    assert "building" not in done.stdout + done.stderr
    version = (theirs / "weed.version").read_text().strip()
    assert version == (INFRA / ".cache" / "bin" / "weed.version").read_text().strip()
    weed = theirs / "weed"
    assert weed.is_symlink()
    assert weed.resolve() == (SHARED / "bin" / f"weed-{version}").resolve()
    answer = subprocess.run(
        [str(weed), "version"], capture_output=True, text=True, timeout=60, check=True
    )
    assert "version" in answer.stdout.lower(), answer.stdout


@pytest.mark.timeout(1200)
def test_the_source_only_dependencies_install_from_the_kept_wheels(tmp_path: Path) -> None:
    # set-up built them before an install (a virtualenv made before it may not have: then here)
    first = _run("fetch_wheels.sh", {}, sys.executable, timeout=900)
    assert first.returncode == 0, first.stderr
    done = _run("fetch_wheels.sh", {}, sys.executable)
    assert done.returncode == 0, done.stderr
    assert "building" not in done.stderr  # kept, not built again
    wheels = Path(done.stdout.strip())
    assert wheels == SHARED / "wheels"
    pyproject = (ROOT / "pyproject.toml").read_text()
    pins = [
        f"{name}=={version}"
        for name, version in re.findall(
            r'"(pyspark|pyspark-client|pyhive)(?:\[[^\]"]*\])?==([^"]+)"', pyproject
        )
    ]
    assert len(pins) == 3, pins
    # into an empty virtualenv, without the index, from that folder alone: the wheels are whole
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True)
    target = str(venv / "bin" / "python")
    uv = Path(sys.executable).parent / "uv"  # set-up's installer; pip when it had none
    installer = (
        [str(uv), "pip"] if uv.is_file() else [sys.executable, "-m", "pip", "--python", target]
    )
    cmd = [*installer, "install", "--no-deps", "--no-index", "--find-links", str(wheels)]
    cmd += ["--python", target] if uv.is_file() else []
    installed = subprocess.run([*cmd, *pins], capture_output=True, text=True, timeout=600)
    assert installed.returncode == 0, installed.stderr
    names = [pin.split("==")[0] for pin in pins]
    read = "import sys; from importlib.metadata import version as v; "
    read += "print(*(f'{n}=={v(n)}' for n in sys.argv[1:]))"
    found = subprocess.run([target, "-c", read, *names], capture_output=True, text=True, check=True)
    assert found.stdout.split() == pins
