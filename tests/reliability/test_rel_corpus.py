"""The planted-error corpus (issue 13, "done when"): every file under corpus/ is a script with
one planted mistake (a documented rule or a misuse class, current API, Beta 1, host inputs,
chip files, the CLI). `trnsim run` on each (in process, through trnsim.cli.main) must exit 1
with exactly one message, of the class and text its `# expect:` line names, at the line marked
`# ERROR`, and no traceback; a few also run as a real `trnsim` process."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
from source_paths import assert_no_internal_path

from trnsim.cli import main

CORPUS = Path(__file__).parent / "corpus"
FILES = sorted(CORPUS.rglob("*.py"))
EXPECT = re.compile(r"^# expect: (\w+): (.+)$", re.M)
CLI = re.compile(r"^# cli: (.+)$", re.M)


def expectation(path: Path) -> tuple[str, str, int | None, str | None]:
    """(error class, text regex, marked line or None, CLI arguments or None)."""
    text = path.read_text()
    cls, words = EXPECT.search(text).groups()
    cli = CLI.search(text)
    lines = text.splitlines()
    marked = [k for k, ln in enumerate(lines, 1) if ln.rstrip().endswith("# ERROR")]
    assert len(marked) <= 1, f"{path.name}: more than one # ERROR line"
    return cls, words, (marked[0] if marked else None), (cli.group(1) if cli else None)


@pytest.fixture
def isolated(monkeypatch, tmp_path):
    """What a corpus script may change (environment, sys.path, sys.argv) is restored."""
    for var in ("NEURON_PLATFORM_TARGET_OVERRIDE", "TRNSIM_HOST_MEMORY_LIMIT"):
        monkeypatch.setenv(var, "")
        monkeypatch.delenv(var)
    monkeypatch.setattr(sys, "path", list(sys.path))
    monkeypatch.setattr(sys, "argv", list(sys.argv))
    monkeypatch.chdir(tmp_path)
    return tmp_path


def cli_argv(args: str, path: Path, tmp: Path) -> list[str]:
    binary = tmp / "blob.py"
    binary.write_bytes(bytes(range(256)))
    trace = tmp / "blob.pftrace"
    trace.write_bytes(bytes(range(256)) * 4)
    js = tmp / "other.json"
    js.write_text('{"rows": []}')
    subs = {"{dir}": str(tmp), "{tmp}": str(tmp), "{file}": str(path), "{binary}": str(binary),
            "{binary_trace}": str(trace), "{json}": str(js)}
    out = []
    for tok in args.split():
        for k, v in subs.items():
            tok = tok.replace(k, v)
        out.append(tok)
    return out


def test_corpus_size_and_coverage():
    kinds = {p.parent.name for p in FILES}
    assert len(FILES) >= 150, len(FILES)
    assert {"ga", "b1", "host", "cli"} <= kinds


@pytest.mark.parametrize("path", FILES, ids=[p.stem for p in FILES])
def test_corpus_file_gives_one_located_message(path, isolated, capsys):
    cls, words, line, cli = expectation(path)
    argv = cli_argv(cli, path, isolated) if cli else ["run", str(path)]
    rc = main(argv)
    err = capsys.readouterr().err
    assert rc == 1, f"exit code {rc}; stderr:\n{err}"
    assert "Traceback" not in err, err
    command = argv[0]
    assert err.count(f"trnsim {command}: ") == 1, err
    head = f"trnsim {command}: {cls}: "
    assert err.startswith(head) or f"\n{head}" in err, err
    assert re.search(words, err), f"{words!r} not in:\n{err}"
    if line is not None:
        assert f"{path}:{line} " in err, f"not located at line {line}:\n{err}"
    assert_no_internal_path(err)


SAMPLE = FILES[:: max(1, len(FILES) // 6)]


@pytest.mark.parametrize("path", SAMPLE, ids=[p.stem for p in SAMPLE])
def test_corpus_sample_as_a_real_process(path, tmp_path):
    cls, _words, line, cli = expectation(path)
    argv = cli_argv(cli, path, tmp_path) if cli else ["run", str(path)]
    env = {k: v for k, v in os.environ.items()
           if k not in ("NEURON_PLATFORM_TARGET_OVERRIDE", "TRNSIM_HOST_MEMORY_LIMIT")}
    proc = subprocess.run([sys.executable, "-m", "trnsim", *argv], capture_output=True,
                          text=True, timeout=300, cwd=tmp_path, env=env)
    assert proc.returncode == 1, proc.stderr
    assert "Traceback" not in proc.stderr, proc.stderr
    assert proc.stderr.count(f"trnsim {argv[0]}: {cls}: ") == 1, proc.stderr
    if line is not None:
        assert f"{path}:{line} " in proc.stderr, proc.stderr
