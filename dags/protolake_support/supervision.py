"""The continuous bronze and silver streams of the ``protolake_streaming`` DAG, as processes.

A stream is ``spark-submit pipelines/jobs/run.py <job> --trigger processing-time``, started
detached in its own session (:func:`start_stream`) and stopped as a process group
(:func:`stop_stream`: its Python driver first). Its state lives on the worker that started it, in
:func:`stream_state_dir`: ``<job>.pid`` (the live process), ``<job>.log`` (its output,
appended) and ``<job>.starts`` (one JSON line per start). :func:`ensure_stream` is the DAG's
check: judge the stream (:mod:`.progress`), start it when dead, restart it when stale, and
fail (:class:`StreamDiedError`) when a stream it started died. Log tails shown in a task's
error have every secret of the configuration replaced by ``***`` (:func:`secret_values`).

Importing this module loads only the standard library (the streaming DAG imports
:data:`STREAM_JOBS` at parse time).
"""

from __future__ import annotations

import json
import logging
import os
import re
import signal
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from protolake_support.environment import (
    SPARK_CONN_ID,
    ProtolakeSetupError,
    config_path,
    load_job_config,
    registry_env,
)
from protolake_support.progress import judge_stream, stream_parts

log = logging.getLogger(__name__)

STREAM_STATE_ENV = "PROTOLAKE_STREAM_STATE_DIR"
STREAM_JOBS = ("bronze", "silver")
START_WATCH_SECONDS = 15.0  # a bad configuration or a missing jar fails within seconds
LOG_TAIL_CHARS = 3000


class StreamDiedError(RuntimeError):
    """A stream this DAG started died since the previous check (it was started again)."""


def stream_state_dir(environ: Mapping[str, str] | None = None) -> Path:
    """Where the streams' pid files and logs live (on the worker that starts them):
    ``$PROTOLAKE_STREAM_STATE_DIR``, else ``$AIRFLOW_HOME/protolake/streams``."""
    env = os.environ if environ is None else environ
    raw = env.get(STREAM_STATE_ENV)
    if raw:
        return Path(raw)
    home = env.get("AIRFLOW_HOME") or str(Path.home() / "airflow")
    return Path(home) / "protolake" / "streams"


def stream_pid(job: str, state_dir: Path | None = None) -> int | None:
    """The pid of the live ``job`` stream started by the streaming DAG (None: not running).

    A pid counts only if the process exists and its command line is still a protolake
    spark-submit of that job (a recycled pid is not mistaken for the stream).
    """
    pid_file = (state_dir or stream_state_dir()) / f"{job}.pid"
    try:
        pid = int(pid_file.read_text().split()[0])
    except (FileNotFoundError, ValueError, IndexError):
        return None
    try:
        cmdline = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
    except OSError:
        return None
    args = [a.decode(errors="replace") for a in cmdline]
    if any(a.endswith("run.py") for a in args) and job in args:
        return pid
    return None


def running_streams(state_dir: Path | None = None) -> list[str]:
    """The continuous jobs that are running now."""
    return [job for job in STREAM_JOBS if stream_pid(job, state_dir) is not None]


def secret_values(config: str) -> list[str]:
    """The secrets the jobs see (longest first): every value ``ProtolakeConfig.redacted()``
    hides (with the password of a ``user:pass`` and of a JAAS config on its own), and the
    ``protolake_registry`` connection's credentials."""
    import dataclasses

    from pipelines.settings.clients import kafka_client_conf

    cfg = load_job_config(config)
    found: set[str] = set()

    def walk(plain: Any, shown: Any) -> None:
        if isinstance(plain, Mapping):
            for key, value in plain.items():
                walk(value, shown.get(key) if isinstance(shown, Mapping) else None)
        elif isinstance(plain, list | tuple):
            shown_list = shown if isinstance(shown, list | tuple) else []
            for i, value in enumerate(plain):
                walk(value, shown_list[i] if i < len(shown_list) else None)
        elif isinstance(plain, str) and plain and plain != shown:
            if shown == "***":
                found.add(plain)
            else:  # a URL's user:password@
                found.update(m for m in re.findall(r"://([^/@]+)@", plain))

    walk(dataclasses.asdict(cfg), cfg.redacted())
    found.update(v for k, v in registry_env().items() if k != "PROTOLAKE_REGISTRY_URL" and v)
    found.update(str(v) for k, v in kafka_client_conf(cfg).items() if "password" in k and v)
    found.update(s.split(":", 1)[1] for s in list(found) if ":" in s)
    return sorted((s for s in found if s), key=len, reverse=True)


def stream_log_tail(log_path: Path, config: str, chars: int = LOG_TAIL_CHARS) -> str:
    """The end of a stream's log, every value of :func:`secret_values` replaced by ``***``."""
    try:
        with log_path.open("rb") as f:
            f.seek(max(0, log_path.stat().st_size - 65536))
            text = f.read().decode(errors="replace")
    except OSError:
        return f"(no log at {log_path})"
    for secret in secret_values(config):
        text = text.replace(secret, "***")
    # from a whole line on (a secret cut at the 64 KiB window's start stays out of the tail)
    return text[-chars:].split("\n", 1)[-1] if len(text) > chars else text


def stream_starts(state_dir: Path, job: str, since: float = 0.0) -> list[dict[str, Any]]:
    """The start history of ``job`` (``<state dir>/<job>.starts``, JSON lines), from ``since``."""
    try:
        lines = (state_dir / f"{job}.starts").read_text().splitlines()
    except FileNotFoundError:
        return []
    starts = [json.loads(x) for x in lines if x.strip()]
    return [x for x in starts if float(x.get("time", 0)) >= since]


def stop_stream(job: str, pid: int, grace_seconds: float = 60.0) -> None:
    """Stop the stream whose process group is ``pid``: SIGTERM to the job's Python driver,
    which stops its queries and releases its writer lease, then ends; spark-submit's JVM ends
    with it. SIGKILL to the group after ``grace_seconds``.

    The driver alone is signalled: the JVM (the group's leader) ends at once on SIGTERM, and the
    driver's calls into it (stopping the queries, releasing the lease on an object store) would
    fail; a lease left behind refuses the restart until it expires. Without a driver in the
    group (not started yet, or one of its own), the whole group gets the SIGTERM.
    """
    drivers = python_drivers(pid)
    try:
        if drivers:
            for driver in drivers:
                os.kill(driver, signal.SIGTERM)
        else:
            os.killpg(pid, signal.SIGTERM)
    except ProcessLookupError:
        pass
    deadline = time.monotonic() + grace_seconds
    while time.monotonic() < deadline:
        try:
            # reap it if it is our own child (else a zombie keeps the group "alive")
            if os.waitpid(pid, os.WNOHANG)[0] == pid:
                return
        except ChildProcessError:
            pass
        try:
            os.killpg(pid, 0)
        except ProcessLookupError:
            return
        time.sleep(1)
    log.warning("%s stream (pid %s) ignored SIGTERM for %s s: SIGKILL", job, pid, grace_seconds)
    try:
        os.killpg(pid, signal.SIGKILL)
    except ProcessLookupError:
        pass


def python_drivers(group: int) -> list[int]:
    """The processes of process group ``group`` that are a Python interpreter running
    ``run.py``: the job's driver (spark-submit's JVM starts it as its child; the leader itself
    when it is one). Spark's Python workers run no ``run.py``."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            # "pid (comm) state ppid pgrp ...": comm may hold spaces and parentheses
            if int((entry / "stat").read_text().rsplit(")", 1)[1].split()[2]) != group:
                continue
            args = (entry / "cmdline").read_bytes().split(b"\0")
        except (OSError, ValueError, IndexError):
            continue  # gone meanwhile, or not ours to read
        program = Path(args[0].decode(errors="replace")).name
        if program.startswith("python") and any(a.endswith(b"run.py") for a in args[1:]):
            found.append(int(entry.name))
    return sorted(found)


def start_stream(job: str, config: str, state_dir: Path | None = None) -> int:
    """Start ``job`` (processing-time trigger) detached, in its own session; return its pid.

    The command is :func:`pipelines.jobs.submit_command` (``spark-submit ... run.py <job>
    --config FILE --trigger processing-time``) against the ``spark_default`` master; output goes
    to ``<state dir>/<job>.log`` (appended), the pid to ``<state dir>/<job>.pid``, and one line
    per start to ``<state dir>/<job>.starts``. The process runs in the task's working directory
    (absolute, recorded in ``.starts``), where the configuration's relative paths
    (``lakehouse.path``, ...) resolve as they do for the health checks and for
    ``protolake_ingest``'s jobs. ``SPARK_LOCAL_IP=127.0.0.1`` only with a local master.

    Raises:
        ProtolakeSetupError: the process ended within :data:`START_WATCH_SECONDS` (the log's
            tail, secrets redacted, says why).
    """
    import subprocess

    from airflow.providers.apache.spark.hooks.spark_submit import SparkSubmitHook

    from pipelines.jobs import submit_command
    from pipelines.spark import is_local_master

    folder = state_dir or stream_state_dir()
    folder.mkdir(parents=True, exist_ok=True)
    master = str(SparkSubmitHook(conn_id=SPARK_CONN_ID)._connection["master"])
    python = os.environ.get("PYSPARK_PYTHON") or None
    cmd = submit_command(job, config, master, args=["--trigger", "processing-time"], python=python)
    env = {**os.environ, **registry_env()}
    if is_local_master(master):  # a cluster's executors must reach the driver: no loopback
        env.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    env.pop("PYSPARK_SUBMIT_ARGS", None)
    workdir = Path.cwd()
    log_path = folder / f"{job}.log"
    with log_path.open("ab") as out:
        out.write(f"\n=== {time.strftime('%Y-%m-%dT%H:%M:%SZ', time.gmtime())} start\n".encode())
        out.flush()
        proc = subprocess.Popen(
            cmd,
            stdin=subprocess.DEVNULL,
            stdout=out,
            stderr=subprocess.STDOUT,
            cwd=workdir,
            env=env,
            start_new_session=True,  # outlives the task; its own group, stopped as one
        )
    (folder / f"{job}.pid").write_text(f"{proc.pid}\n")
    started = {"time": time.time(), "pid": proc.pid, "cwd": str(workdir)}
    history = [*stream_starts(folder, job, since=time.time() - 7 * 86400), started][-200:]
    (folder / f"{job}.starts").write_text("".join(json.dumps(x) + "\n" for x in history))
    time.sleep(START_WATCH_SECONDS)
    if proc.poll() is not None:
        tail = stream_log_tail(log_path, config)
        raise ProtolakeSetupError(f"{job} stream exited with {proc.returncode}:\n{tail}")
    log.info("%s stream started: pid %s, log %s", job, proc.pid, log_path)
    return proc.pid


def ensure_stream(job: str, stale_after_seconds: float) -> dict[str, Any]:
    """Judge the ``job`` stream and start or restart it as needed; return the verdict.

    Raises:
        StreamDiedError: the stream this DAG started (its pid file is there) died since the
            previous check. It is started again first; the error makes the crash, and a crash
            loop the first :data:`START_WATCH_SECONDS` cannot see, a failed task. The message
            has the end of its log (secrets redacted) and its starts of the last 24 hours.
            (To stop a stream on purpose, pause the DAG, stop it and delete its pid file.)
    """
    config = config_path()
    folder = stream_state_dir()
    pid = stream_pid(job, folder)
    pid_file = folder / f"{job}.pid"
    running = time.time() - pid_file.stat().st_mtime if pid is not None else None
    health = judge_stream(job, pid, stream_parts(job, config), stale_after_seconds, running)
    log.info("%s stream: %s (%s)", job, health.verdict, health.reason)
    died = ""
    if health.verdict == "dead" and pid_file.is_file():
        old = pid_file.read_text().strip()
        since = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(pid_file.stat().st_mtime))
        died = (
            f"{job} stream (pid {old}, started {since}) died since the previous check; "
            f"end of {folder / f'{job}.log'}:\n{stream_log_tail(folder / f'{job}.log', config)}"
        )
    action, new_pid = "none", None
    if health.verdict == "stale" and health.pid is not None:
        stop_stream(job, health.pid)
        action = "restarted"
    elif health.verdict == "dead":
        action = "started"
    if action != "none":
        try:
            new_pid = start_stream(job, config, folder)
        except ProtolakeSetupError as exc:
            if died:
                raise StreamDiedError(f"{died}\n--- starting it again failed: {exc}") from exc
            raise
    if died:
        starts = len(stream_starts(folder, job, since=time.time() - 86400))
        raise StreamDiedError(
            f"{died}\n--- started again as pid {new_pid}; {starts} starts in the last 24 h"
        )
    return {
        "job": job,
        "verdict": health.verdict,
        "reason": health.reason,
        "lag": health.lag,
        "last_commit_age_seconds": health.last_commit_age_seconds,
        "action": action,
    }
