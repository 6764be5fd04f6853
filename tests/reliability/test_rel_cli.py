"""The CLI checks before it simulates (issue 13.3): a bad script path, output path, chip or
option is refused in one line naming the argument and what is allowed, and the script never
runs; `trnsim view`/`diff` read the trace itself (the sidecar is a checked cache) and refuse
a missing, truncated or foreign file in one line."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
import zipfile

import pytest

from trnsim import trace_files
from trnsim.cli import main

SCRIPT = textwrap.dedent("""\
    import pathlib
    import numpy as np
    import nki
    import nki.isa as nisa
    import nki.language as nl

    pathlib.Path(__file__).with_suffix(".ran").write_text("ran")


    def copy(a):
        out = nl.ndarray(a.shape, a.dtype, buffer=nl.shared_hbm)
        t = nl.ndarray(a.shape, a.dtype, buffer=nl.sbuf)
        nisa.dma_copy(dst=t, src=a)
        nisa.dma_copy(dst=out, src=t)
        return out


    nki.simulate(copy)(np.ones((128, 64), np.float32))
""")


@pytest.fixture
def script(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(sys, "path", list(sys.path))  # run_script prepends the script's dir
    monkeypatch.setattr(sys, "argv", list(sys.argv))
    # `trnsim profile --chip` sets this variable for the script: restored after each test
    monkeypatch.setenv("NEURON_PLATFORM_TARGET_OVERRIDE", "")
    monkeypatch.delenv("NEURON_PLATFORM_TARGET_OVERRIDE")
    path = tmp_path / "k.py"
    path.write_text(SCRIPT)
    return path


def refused(capsys, argv, *words):
    """main(argv) exits 1 with one stderr line holding every word."""
    assert main(argv) == 1
    err = capsys.readouterr().err
    lines = err.strip().splitlines()
    assert len(lines) == 1, err
    for w in words:
        assert w in lines[0], lines[0]
    return lines[0]


def _binary(tmp_path):
    p = tmp_path / "blob.py"
    p.write_bytes(bytes(range(256)))
    return str(p)


def _latin1(tmp_path):
    p = tmp_path / "latin.py"
    p.write_bytes(b"x = '\xe9'\n")
    return str(p)


def _zip_without_main(tmp_path):
    p = tmp_path / "app.zip"
    with zipfile.ZipFile(p, "w") as z:
        z.writestr("other.py", "pass\n")
    return str(p)


SCRIPT_CASES = {
    "missing": (lambda t: str(t / "nope.py"), ("script", "nope.py", "no such file")),
    "directory": (lambda t: str(t), ("is a directory without a __main__.py",)),
    "binary": (_binary, ("blob.py", "not a Python script (binary content)")),
    "not utf-8": (_latin1, ("latin.py", "not readable Python source")),
    "zip without main": (_zip_without_main, ("zip archive without a __main__.py",)),
}


@pytest.mark.parametrize("command", ["run", "profile"])
@pytest.mark.parametrize("case", list(SCRIPT_CASES))
def test_bad_script_is_refused(capsys, script, tmp_path, command, case):
    make, words = SCRIPT_CASES[case]
    line = refused(capsys, [command, make(tmp_path)], f"trnsim {command}: UsageError:", *words)
    assert "Traceback" not in line


def test_folder_or_zip_with_main_runs(capsys, script, tmp_path):
    folder = tmp_path / "app"
    folder.mkdir()
    (folder / "__main__.py").write_text(SCRIPT.replace("__file__", "'" + str(tmp_path / "d.x")
                                                       + "'"))
    assert main(["run", str(folder)]) == 0
    assert (tmp_path / "d.ran").exists()
    archive = tmp_path / "app.zip"
    with zipfile.ZipFile(archive, "w") as z:
        z.writestr("__main__.py", SCRIPT.replace("__file__", "'" + str(tmp_path / "z.x") + "'"))
    assert main(["run", str(archive)]) == 0
    assert (tmp_path / "z.ran").exists()


def test_coding_line_is_honoured(script, tmp_path):
    p = tmp_path / "latin.py"
    p.write_bytes(b"# -*- coding: latin-1 -*-\nx = '\xe9'\n")
    assert main(["run", str(p)]) == 0


PROFILE_CASES = {
    "-o unknown extension": (["-o", "k.txt"], ("-o 'k.txt'", "unknown extension '.txt'",
                                                ".pftrace", ".json")),
    "-o missing folder": (["-o", "nodir/k.pftrace"], ("-o 'nodir/k.pftrace'",
                                                       "folder 'nodir' does not exist")),
    "-o directory": (["-o", "adir.json"], ("-o 'adir.json' is a directory",)),
    "-o empty": (["-o", ""], ("-o ''", "give a file name")),
    "--png missing folder": (["--png", "nodir/k.png"], ("--png 'nodir/k.png'",
                                                         "folder 'nodir' does not exist")),
    "--png not png": (["--png", "k.svg"], ("--png 'k.svg'", "allowed: .png")),
    "--dma-rows": (["--dma-rows", "lanes"], ("--dma-rows 'lanes'", "queue or engine")),
    "--chip empty": (["--chip", ""], ("--chip ''", "is not a chip", "trn1", "trn3")),
    "--chip unknown": (["--chip", "trn9"], ("--chip 'trn9'", "is not a chip")),
}


@pytest.mark.parametrize("where", ["after", "before"])
@pytest.mark.parametrize("case", list(PROFILE_CASES))
def test_bad_profile_option_is_refused_before_simulating(capsys, script, tmp_path, case, where):
    (tmp_path / "adir.json").mkdir()
    opts, words = PROFILE_CASES[case]
    argv = ["profile", str(script), *opts] if where == "after" else ["profile", *opts, str(script)]
    refused(capsys, argv, "trnsim profile: UsageError:", *words)
    assert not script.with_suffix(".ran").exists()  # the script never ran


def test_good_options_profile(capsys, script, tmp_path):
    assert main(["profile", str(script), "-o", "k.json", "--png", "k.png", "--chip", " TRN2 ",
                 "--dma-rows", "engine"]) == 0
    out = capsys.readouterr().out
    assert "on trn2" in out and "wrote k.json" in out and "wrote k.png" in out


@pytest.mark.parametrize(("argv", "words"), [
    (["demo", "--size", "100"], ("--size 100", "multiple of 512")),
    (["demo", "--chip", "trn0"], ("--chip 'trn0'", "is not a chip")),
    (["demo", "--out", "k.py"], ("--out 'k.py' is a file",)),
])
def test_bad_demo_option_is_refused(capsys, script, argv, words):
    refused(capsys, argv, "trnsim demo: UsageError:", *words)


# ---------------------------------------------------------------- view and diff


@pytest.fixture(scope="module")
def traces(tmp_path_factory):
    """A .pftrace and a .json trace of one kernel, each with its sidecar."""
    import nki.isa as nisa
    import nki.language as nl
    import numpy as np

    import trnsim

    def kernel(a):
        out = nl.ndarray(a.shape, a.dtype, buffer=nl.shared_hbm)
        t = nl.ndarray(a.shape, a.dtype, buffer=nl.sbuf)
        nisa.dma_copy(dst=t, src=a)
        nisa.activation(dst=t, op=nl.exp, data=t)
        nisa.dma_copy(dst=out, src=t)
        return out

    d = tmp_path_factory.mktemp("traces")
    prof = trnsim.profile(kernel, np.ones((128, 512), np.float32), chip="trn2")
    for ext in ("pftrace", "json"):
        prof.save(str(d / f"k.{ext}"))
    return d


def view_json(capsys, path):
    assert main(["view", "--json", str(path)]) == 0
    got = capsys.readouterr()
    return json.loads(got.out), got.err


@pytest.mark.parametrize("ext", ["pftrace", "json"])
def test_view_reads_the_summary_from_the_trace_when_the_sidecar_is_gone(capsys, traces, ext,
                                                                      tmp_path):
    src = traces / f"k.{ext}"
    with_cache, err = view_json(capsys, src)
    assert err == ""
    lone = tmp_path / f"lone.{ext}"
    lone.write_bytes(src.read_bytes())
    from_trace, err = view_json(capsys, lone)
    assert err == ""
    assert from_trace == with_cache  # exact: the trace carries the same summary


def test_sidecar_is_a_cache_checked_against_the_trace(capsys, traces, tmp_path):
    trace = tmp_path / "k.pftrace"
    trace.write_bytes((traces / "k.pftrace").read_bytes())
    side = tmp_path / "k.pftrace.summary.json"
    doc = json.loads((traces / "k.pftrace.summary.json").read_text())
    doc["launches"][0]["kernel"] = "from_the_cache"
    side.write_text(json.dumps(doc))
    got, _ = view_json(capsys, trace)
    assert got["kernel"] == "from_the_cache"  # it matches the trace's SHA-256: used
    doc["trace_sha256"] = "0" * 64  # a sidecar of another trace
    side.write_text(json.dumps(doc))
    got, err = view_json(capsys, trace)
    assert got["kernel"] == "kernel"
    assert "does not belong to this trace" in err and "read from the trace itself" in err


def test_trace_without_summary_and_legacy_sidecar(capsys, traces, tmp_path):
    """A trace written without its summary (before this change) is refused unless an old
    sidecar (no SHA-256) is beside it, which is then used with a note."""
    from trnsim.trace import Trace

    bare = tmp_path / "old.pftrace"
    Trace([("Vector(nc0)", "nc0")], [], [], {"chip": "trn2"}).save(str(bare))
    refused(capsys, ["view", str(bare)], "carries no trnsim summary")
    legacy = json.loads((traces / "k.pftrace.summary.json").read_text())
    del legacy["trace_sha256"]
    (tmp_path / "old.pftrace.summary.json").write_text(json.dumps(legacy))
    assert main(["view", str(bare)]) == 0
    assert "could not be checked against the trace" in capsys.readouterr().err


def _truncate(traces, tmp_path, ext, keep):
    data = (traces / f"k.{ext}").read_bytes()
    p = tmp_path / f"cut.{ext}"
    p.write_bytes(data[: int(len(data) * keep)])
    return p


BAD_TRACES = {
    "missing": (lambda d, t: t / "none.pftrace", ("trace", "none.pftrace", "no such file")),
    "directory": (lambda d, t: t, ("is a directory, not a file",)),
    "extension": (lambda d, t: _write(t / "k.txt", b"hello"), ("unknown trace format '.txt'",)),
    "pftrace cut in half": (lambda d, t: _truncate(d, t, "pftrace", 0.5),
                            ("cut.pftrace", "truncated or not a Perfetto trace")),
    "pftrace cut at the end": (lambda d, t: _truncate(d, t, "pftrace", 0.999),
                               ("cut.pftrace", "truncated")),
    "pftrace cut between packets": (lambda d, t: _drop_last_packet(d, t),
                                    ("cut.pftrace", "carries no trnsim summary", "cut short")),
    "json cut": (lambda d, t: _truncate(d, t, "json", 0.5),
                 ("cut.json", "truncated or not JSON")),
    "foreign json": (lambda d, t: _write(t / "x.json", b'{"rows": []}'),
                     ("x.json", "not a Chrome trace")),
    "foreign chrome trace": (lambda d, t: _write(t / "c.json", b'{"traceEvents": []}'),
                             ("c.json", "carries no trnsim summary")),
    "foreign binary": (lambda d, t: _write(t / "p.pftrace", bytes(range(256)) * 4),
                       ("p.pftrace", "not a Perfetto trace")),
    "empty": (lambda d, t: _write(t / "e.pftrace", b""), ("e.pftrace", "not a Perfetto trace")),
    "png": (lambda d, t: _write(t / "k.png", b"\x89PNG\r\n"),
            ("k.png", "unknown trace format '.png'")),
}


def _drop_last_packet(traces, tmp_path):
    from trnsim.trace import read_perfetto

    msg = read_perfetto(str(traces / "k.pftrace"))
    del msg.packet[-1]
    return _write(tmp_path / "cut.pftrace", msg.SerializeToString())


def _write(p, data):
    p.write_bytes(data)
    return p


@pytest.mark.parametrize("command", ["view", "diff"])
@pytest.mark.parametrize("case", list(BAD_TRACES))
def test_bad_trace_file_gives_one_line(capsys, traces, tmp_path, command, case):
    make, words = BAD_TRACES[case]
    bad = str(make(traces, tmp_path))
    argv = ["view", bad] if command == "view" else ["diff", str(traces / "k.pftrace"), bad]
    refused(capsys, argv, f"trnsim {command}: UsageError:", *words)


def test_view_png_from_a_json_trace(capsys, traces, tmp_path):
    png = tmp_path / "k.png"
    assert main(["view", str(traces / "k.json"), "--png", str(png)]) == 0
    assert png.read_bytes()[:4] == b"\x89PNG"
    refused(capsys, ["view", str(traces / "k.json"), "--png", str(tmp_path / "no" / "k.png")],
            "--png", "does not exist")


def test_diff_of_two_traces(capsys, traces):
    assert main(["diff", str(traces / "k.pftrace"), str(traces / "k.json")]) == 0
    assert "speedup 1.00x" in capsys.readouterr().out


def test_summary_file_named_directly(capsys, traces, tmp_path):
    got, _ = view_json(capsys, traces / "k.json.summary.json")
    assert got["chip"] == "trn2"
    bad = tmp_path / "x.summary.json"
    bad.write_text('{"total": 1}')
    refused(capsys, ["view", str(bad)], "is not a trnsim summary")


def test_console_script_refuses_in_one_line(tmp_path):
    """The installed entry point, end to end (the in-process cases above use main())."""
    proc = subprocess.run([sys.executable, "-m", "trnsim", "profile", str(tmp_path / "x.py")],
                          capture_output=True, text=True, timeout=120,
                          env={**os.environ, "PYTHONWARNINGS": "error"})
    assert proc.returncode == 1
    assert proc.stderr.strip() == f"trnsim profile: UsageError: script '{tmp_path / 'x.py'}': " \
                                  "no such file"


def test_sidecar_sha_names_the_trace(traces):
    doc = json.loads((traces / "k.pftrace.summary.json").read_text())
    assert doc["trace_sha256"] == trace_files.digest((traces / "k.pftrace").read_bytes())
