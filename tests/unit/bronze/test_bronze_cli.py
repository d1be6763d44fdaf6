"""The protolake command line and the spark-submit command builder (no Spark started)."""

from __future__ import annotations

import argparse
import os
import stat
import subprocess
import sys
import types
import zipfile
from pathlib import Path
from typing import Any

import pytest

from pipelines import cli
from pipelines.jobs import RUN_SCRIPT, build_py_files, submit_command

ROOT = Path(__file__).resolve().parents[3]


def test_help_lists_every_command_without_importing_them() -> None:
    before = set(sys.modules)
    parser = cli.build_parser(None)
    text = parser.format_help()
    for name, (module, help_text) in cli.COMMANDS.items():
        assert name in text
        assert help_text in text
        if module not in before:
            assert module not in sys.modules, f"{module} imported just to list it"


def test_help_runs_as_a_console_script() -> None:
    out = subprocess.run(
        [sys.executable, "-m", "pipelines.cli", "--help"],
        capture_output=True,
        text=True,
        check=True,
        cwd=ROOT,
    )
    assert "bronze" in out.stdout and "maintain" in out.stdout


def test_missing_module_is_a_clear_error(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setitem(cli.COMMANDS, "ghost", ("pipelines.no_such_module_xyz", "a ghost"))
    code = cli.main(["ghost", "--config", "x.toml"])
    assert code == 2
    err = capsys.readouterr().err
    assert "ghost" in err and "pipelines.no_such_module_xyz is missing" in err


def test_a_missing_dependency_inside_a_module_is_not_hidden(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setitem(cli.COMMANDS, "broken", ("pipelines._broken_cmd", "broken"))

    def fake_import(name: str) -> types.ModuleType:
        raise ModuleNotFoundError("No module named 'some_dependency'", name="some_dependency")

    monkeypatch.setattr(cli.importlib, "import_module", fake_import)
    with pytest.raises(ModuleNotFoundError, match="some_dependency"):
        cli.build_parser("broken")


def register_fake(monkeypatch: pytest.MonkeyPatch, add_parser: object) -> None:
    module = types.ModuleType("pipelines._fake_cmd")
    module.add_parser = add_parser  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "pipelines._fake_cmd", module)
    monkeypatch.setitem(cli.COMMANDS, "fake", ("pipelines._fake_cmd", "a fake command"))


def test_common_options_are_added_and_func_called(monkeypatch: pytest.MonkeyPatch) -> None:
    seen: list[argparse.Namespace] = []

    def add_parser(subparsers: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
        p = subparsers.add_parser("fake")
        p.add_argument("--limit", type=int, default=1)
        p.set_defaults(func=lambda args: seen.append(args) or 7)

    register_fake(monkeypatch, add_parser)
    monkeypatch.setattr(cli, "STREAM_COMMANDS", frozenset({"fake"}))
    code = cli.main(["fake", "--config", "c.toml", "--trigger", "processing-time", "--json"])
    assert code == 7
    (args,) = seen
    assert (args.config, args.trigger, args.json, args.verbose, args.limit) == (
        "c.toml",
        "processing-time",
        True,
        False,
        1,
    )


def test_config_is_required_and_trigger_checked(monkeypatch: pytest.MonkeyPatch) -> None:
    def add_parser(subparsers: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
        subparsers.add_parser("fake").set_defaults(func=lambda args: 0)

    register_fake(monkeypatch, add_parser)
    monkeypatch.setattr(cli, "STREAM_COMMANDS", frozenset({"fake"}))
    with pytest.raises(SystemExit) as exc:
        cli.main(["fake"])
    assert exc.value.code == 2
    with pytest.raises(SystemExit):
        cli.main(["fake", "--config", "c.toml", "--trigger", "once"])


def test_a_command_that_runs_no_stream_takes_no_trigger(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    def add_parser(subparsers: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
        subparsers.add_parser("fake").set_defaults(func=lambda args: 0)

    register_fake(monkeypatch, add_parser)
    assert cli.main(["fake", "--config", "c.toml"]) == 0
    with pytest.raises(SystemExit) as exc:
        cli.main(["fake", "--config", "c.toml", "--trigger", "available-now"])
    assert exc.value.code == 2
    assert "unrecognized arguments: --trigger" in capsys.readouterr().err


def test_a_module_that_registers_nothing_is_reported(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    register_fake(monkeypatch, lambda subparsers: None)
    assert cli.main(["fake", "--config", "c.toml"]) == 2
    assert "did not register 'fake'" in capsys.readouterr().err


def test_bronze_config_error_is_one_line_exit_2(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    bad = tmp_path / "bad.toml"
    bad.write_text('[kafka]\nbootstrap_servers = "h:1"\ntopics = ["t"]\nsecret_typo = 1\n')
    assert cli.main(["bronze", "--config", str(bad)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err == [err[0]] and "kafka.secret_typo: unknown key" in err[0]


def fake_spark_home(tmp_path: Path) -> Path:
    home = tmp_path / "spark-home"
    (home / "bin").mkdir(parents=True)
    script = home / "bin" / "spark-submit"
    script.write_text("#!/bin/sh\n")
    script.chmod(script.stat().st_mode | stat.S_IEXEC)
    return home


def test_submit_command_local(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("SPARK_HOME", raising=False)
    monkeypatch.setenv("PROTOLAKE_CACHE_DIR", str(tmp_path / "cache"))
    cmd = submit_command("bronze", "conf.toml", "local[2]", args=["--json"])
    assert cmd[0].endswith(os.path.join("pyspark", "bin", "spark-submit"))
    assert Path(cmd[0]).is_file()
    assert cmd[1:3] == ["--master", "local[2]"]
    jars = cmd[cmd.index("--jars") + 1].split(",")
    assert any("spark-sql-kafka" in j for j in jars) and any("delta-spark" in j for j in jars)
    assert all(Path(j).is_file() for j in jars)
    py_files = cmd[cmd.index("--py-files") + 1]
    assert Path(py_files).parent == tmp_path / "cache" / "py-files"
    confs = [cmd[i + 1] for i, a in enumerate(cmd) if a == "--conf"]
    assert f"spark.pyspark.python={sys.executable}" in confs
    assert "spark.ui.enabled=false" in confs
    assert cmd[-5:] == [str(RUN_SCRIPT), "bronze", "--config", "conf.toml", "--json"]


def test_submit_command_cluster_uses_spark_home(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    home = fake_spark_home(tmp_path)
    monkeypatch.setenv("SPARK_HOME", str(home))
    monkeypatch.setenv("PROTOLAKE_CACHE_DIR", str(tmp_path / "cache"))
    cmd = submit_command("silver", "/etc/protolake.toml", "spark://master:7077")
    assert cmd[0] == str(home / "bin" / "spark-submit")
    confs = [cmd[i + 1] for i, a in enumerate(cmd) if a == "--conf"]
    # a cluster keeps its own Python and settings unless asked
    assert confs == []
    assert cmd[-3:] == ["silver", "--config", "/etc/protolake.toml"]


def test_py_files_zip_holds_the_packages_and_is_reused(tmp_path: Path) -> None:
    first = build_py_files(tmp_path)
    assert build_py_files(tmp_path) == first
    with zipfile.ZipFile(first) as zf:
        names = set(zf.namelist())
        assert "pipelines/bronze.py" in names and "pipelines/cli.py" in names
        assert "codec/__init__.py" in names and "quality/__init__.py" in names
        assert not any("__pycache__" in n or n.endswith(".pyc") for n in names)
        assert zf.read("pipelines/bronze.py") == (ROOT / "pipelines" / "bronze.py").read_bytes()


def test_a_broken_quality_rule_is_a_one_line_error_with_exit_2(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    config = tmp_path / "protolake.toml"
    config.write_text(
        '[lakehouse]\npath = "lake"\n[kafka]\nbootstrap_servers = "127.0.0.1:1"\n'
        'topics = ["t"]\n[[quality.expectations]]\nmessage_type = "a.B"\n'
        'expectation = "expect_column_values_to_match_regex"\n'
        'kwargs = { column = "c", regex = "([" }\n',
        encoding="utf-8",
    )
    assert cli.main(["bronze", "--config", str(config)]) == 2  # refused before Spark starts
    err = capsys.readouterr().err.strip()
    assert err.startswith("protolake bronze: configuration error: quality.expectations[0]"), err
    assert "\n" not in err and "Traceback" not in err


def test_a_quality_config_error_from_a_command_is_a_one_line_error_with_exit_2(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """QualityConfigError is no ConfigError (quality must not import pipelines)."""
    from quality.rules import QualityConfigError

    module = types.ModuleType("pipelines._rule_cmd")

    def add_parser(subparsers: Any) -> None:
        def run(args: argparse.Namespace) -> int:
            raise QualityConfigError("quality.expectations[2] (...): column(s) x not in the batch")

        subparsers.add_parser("rulecmd").set_defaults(func=run)

    module.add_parser = add_parser  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "pipelines._rule_cmd", module)
    monkeypatch.setitem(cli.COMMANDS, "rulecmd", ("pipelines._rule_cmd", "raises"))
    assert cli.main(["rulecmd", "--config", "x.toml"]) == 2
    err = capsys.readouterr().err.strip()
    assert err == (
        "protolake rulecmd: configuration error: "
        "quality.expectations[2] (...): column(s) x not in the batch"
    )


def test_version_and_a_negative_sample(capsys: pytest.CaptureFixture[str]) -> None:
    from importlib.metadata import version

    with pytest.raises(SystemExit) as exc:
        cli.main(["--version"])
    assert exc.value.code == 0
    assert capsys.readouterr().out.strip() == f"protolake {version('protolake')}"
    with pytest.raises(SystemExit) as exc:
        cli.main(["audit", "--config", "c.toml", "--sample", "-1"])
    assert exc.value.code == 2
    assert "argument --sample: must be >= 0, got -1" in capsys.readouterr().err


def test_the_bronze_summary_counts_its_batches_in_words() -> None:
    from pipelines.bronze import _print_summary

    lines: list[str] = []
    summary = {"records": 473, "batches": 1, "seconds": 2.5, "tables": 4, "table_mode": "per_topic"}
    _print_summary(summary, as_json=False, out=lines.append)
    _print_summary({**summary, "batches": 3}, as_json=False, out=lines.append)
    assert lines == [
        "bronze: 473 records in 1 batch (2.5 s) -> 4 [per_topic]",
        "bronze: 473 records in 3 batches (2.5 s) -> 4 [per_topic]",
    ]
