"""Host RAM behind simulated HBM (issue 13.2): poison costs nothing until touched, freed
chunks go back to the host, resident bytes are accounted (summary), and a kernel that
writes more than the host can hold gets a HostMemoryError naming bytes needed and available
at its line instead of an OOM kill."""

from __future__ import annotations

import subprocess
import sys
import textwrap

import neuronxcc.nki as b1
import neuronxcc.nki.language as b1l
import nki
import nki.isa as nisa
import nki.language as nl
import numpy as np
import pytest
from source_paths import assert_no_internal_path

import trnsim
from trnsim import dtypes as dt
from trnsim import hostmem, report
from trnsim.allocation import HBM, HOST_CHUNK
from trnsim.core import Device
from trnsim.errors import HostMemoryError
from trnsim.nki.runner import record_launches, run_kernel, stop_recording

GiB = 1 << 30
ROWS_100G = 100 * GiB // 4 // 512  # rows of a 100 GiB [rows, 512] float32 tensor


def rss_bytes() -> int:
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * 4096


def big_scratch_ga(a):
    """Writes one tile of a 100 GiB scratch tensor, reads back one never-written tile."""
    big = nl.ndarray((ROWS_100G, 512), nl.float32, buffer=nl.shared_hbm)
    t = nl.ndarray((128, 512), nl.float32, buffer=nl.sbuf)
    nisa.dma_copy(dst=t, src=a)
    nisa.dma_copy(dst=big[0:128, :], src=t)
    far = nl.ndarray((128, 512), nl.float32, buffer=nl.sbuf)
    nisa.dma_copy(dst=far, src=big[ROWS_100G - 128:ROWS_100G, :])
    out = nl.ndarray((256, 512), nl.float32, buffer=nl.shared_hbm)
    nisa.dma_copy(dst=out[0:128, :], src=far)
    nisa.dma_copy(dst=out[128:256, :], src=big[0:128, :])
    return out


def big_scratch_b1(a):
    big = b1l.ndarray((ROWS_100G, 512), dtype=b1l.float32, buffer=b1l.shared_hbm)
    b1l.store(big[0:128, :], b1l.load(a))
    out = b1l.ndarray((256, 512), dtype=b1l.float32, buffer=b1l.shared_hbm)
    b1l.store(out[0:128, :], b1l.load(big[ROWS_100G - 128:ROWS_100G, :]))
    b1l.store(out[128:256, :], b1l.load(big[0:128, :]))
    return out


@pytest.mark.parametrize("api", ["ga", "b1"])
def test_100_gib_scratch_costs_only_what_is_touched(api):
    a = np.full((128, 512), 3.0, np.float32)
    before = rss_bytes()
    if api == "ga":
        run = run_kernel(big_scratch_ga, (a,), {}, chip="trn3")
    else:
        runs = []
        token = record_launches(runs)
        try:
            b1.jit(big_scratch_b1, platform_target="trn3")(a)
        finally:
            stop_recording(token)
        (run,) = runs
    grew = rss_bytes() - before
    out = run.outputs
    assert np.isnan(out[:128]).all()  # never written: reads as poison
    np.testing.assert_array_equal(out[128:], a)
    assert grew < 64 << 20, f"RSS grew by {grew} bytes"
    assert run.device.hbm.resident_bytes <= 8 * HOST_CHUNK
    assert 0 < run.device.host_peak_resident_bytes < 64 << 20


@pytest.mark.parametrize(("dtype", "poison"), [("float32", np.nan), ("bfloat16", np.nan),
                                               ("float8_e4m3", np.nan), ("int32", 4),
                                               ("int8", 4), ("float16", np.nan)])
def test_unwritten_part_of_an_output_reads_as_poison(dtype, poison):
    def kernel(a):
        out = nl.ndarray((128, 2 * HOST_CHUNK // 128 + 64), a.dtype, buffer=nl.shared_hbm)
        t = nl.ndarray((128, 64), a.dtype, buffer=nl.sbuf)
        nisa.dma_copy(dst=t, src=a)
        nisa.dma_copy(dst=out[:, 0:64], src=t)
        return out

    a = np.ones((128, 64), dt.resolve(dtype).storage)
    out = nki.simulate(kernel)(a)
    np.testing.assert_array_equal(out[:, :64].astype(np.float32), 1)
    rest = out[:, 64:].astype(np.float32)
    if np.isnan(poison):
        assert np.isnan(rest).all()
    else:
        assert (rest == poison).all()


@pytest.mark.parametrize("give_back", [True, False])
def test_reused_hbm_bytes_read_as_poison_not_stale_data(give_back):
    """First fit (the PyTorch device's policy): a freed block handed out again is poison to
    its new tensor; whole freed chunks go back to the host if asked, or stay resident (and
    counted) for reuse, the long-lived default."""
    chip = trnsim.load_chip("trn2")
    hbm = HBM(chip.hbm.capacity_bytes, policy="first", give_back=give_back)
    dev = Device(chip, hbm=hbm)
    f32 = dt.resolve("float32")
    n = 4 * HOST_CHUNK // 4
    v = dev.allocate_hbm((n,), f32, "first")
    v.write(np.full(n, 7.0, np.float32))
    start = v.buffer.byte_start
    assert hbm.resident_bytes == 4 * HOST_CHUNK
    before = rss_bytes()
    v.buffer.release()
    del v
    if give_back:
        assert hbm.resident_bytes == 0
        assert rss_bytes() - before < HOST_CHUNK  # given back (madvise), not kept
    else:
        assert hbm.resident_bytes == 4 * HOST_CHUNK
    w = dev.allocate_hbm((n,), f32, "second")
    assert w.buffer.byte_start == start
    assert np.isnan(w.read()).all()


def test_partially_freed_chunk_stays_resident():
    chip = trnsim.load_chip("trn2")
    hbm = HBM(chip.hbm.capacity_bytes)  # next fit: gives whole free chunks back
    dev = Device(chip, hbm=hbm)
    f32 = dt.resolve("float32")
    a = dev.allocate_hbm((1024,), f32, "a")
    b = dev.allocate_hbm((1024,), f32, "b")
    assert a.buffer.byte_start // HOST_CHUNK == b.buffer.byte_start // HOST_CHUNK
    a.write(np.ones(1024, np.float32))
    b.write(np.full(1024, 2.0, np.float32))
    a.buffer.release()
    assert hbm.resident_bytes == HOST_CHUNK  # b still lives in the chunk
    np.testing.assert_array_equal(b.read(), 2.0)
    b.buffer.release()
    assert hbm.resident_bytes == 0


def test_timing_only_run_touches_no_hbm():
    zeros = np.broadcast_to(np.float32(0), (128, 512))
    before = rss_bytes()
    run = run_kernel(big_scratch_ga, (zeros,), {}, chip="trn3", values=False)
    assert run.device.hbm.resident_bytes == 0
    assert rss_bytes() - before < 32 << 20


def test_summary_reports_peak_resident_bytes():
    def kernel(a):
        out = nl.ndarray(a.shape, a.dtype, buffer=nl.shared_hbm)
        t = nl.ndarray(a.shape, a.dtype, buffer=nl.sbuf)
        nisa.dma_copy(dst=t, src=a)
        nisa.dma_copy(dst=out, src=t)
        return out

    a = np.ones((128, 4096), np.float32)  # 2 MiB in, 2 MiB out
    prof = trnsim.profile(kernel, a, chip="trn2")
    s = report.summary(prof)
    assert s["host_peak_resident_bytes"] >= 2 * a.nbytes
    assert "host_peak_resident_bytes" in report.format_summary(s)
    assert trnsim.profile(kernel, a, chip="trn2", values=False).host_peak_resident_bytes == 0


def scratch_writer(a):
    """Writes 64 MiB of HBM scratch, one tile at a time."""
    big = nl.ndarray((32768, 512), nl.float32, buffer=nl.shared_hbm)
    t = nl.ndarray((128, 512), nl.float32, buffer=nl.sbuf)
    nisa.dma_copy(dst=t, src=a)
    for i in nl.affine_range(256):
        nisa.dma_copy(dst=big[i * 128:(i + 1) * 128, :], src=t)  # WRITE
    return t.shape


def test_host_limit_gives_an_error_naming_bytes(monkeypatch):
    monkeypatch.setenv(hostmem.ENV_LIMIT, "16M")
    with pytest.raises(HostMemoryError) as exc:
        nki.simulate(scratch_writer)(np.ones((128, 512), np.float32))
    text = str(exc.value)
    assert exc.value.loc.code.endswith("# WRITE")
    assert "needs 1048576 more bytes of host RAM, but only 0 are available" in text
    assert "TRNSIM_HOST_MEMORY_LIMIT=16777216" in text
    assert_no_internal_path(text)
    monkeypatch.setenv(hostmem.ENV_LIMIT, "100M")
    nki.simulate(scratch_writer)(np.ones((128, 512), np.float32))


def test_small_host_gives_an_error_not_an_oom(monkeypatch):
    """The host's own free memory (MemAvailable / cgroup) bounds what HBM may hold."""
    reserve = hostmem.HostBudget().reserve_bytes
    rss0 = rss_bytes()  # a host with 8 MiB free beyond the reserve, used up as pages fill
    monkeypatch.setattr(hostmem, "host_available_bytes",
                        lambda: reserve + 8 * HOST_CHUNK - max(0, rss_bytes() - rss0))
    with pytest.raises(HostMemoryError, match=r"only \d+ are available \(the host has \d+ free"):
        nki.simulate(scratch_writer)(np.ones((128, 512), np.float32))


def test_input_too_big_for_the_host_is_refused_before_the_kernel(monkeypatch):
    monkeypatch.setenv(hostmem.ENV_LIMIT, "1M")
    ran = []

    def kernel(x):
        ran.append(1)

    with pytest.raises(HostMemoryError, match="the HBM copy of kernel argument 'x' needs "
                                              "2097152 more bytes"):
        nki.simulate(kernel)(np.ones((512, 1024), np.float32))
    assert not ran


@pytest.mark.parametrize(("text", "value"), [("4096", 4096), ("4K", 4096), ("512M", 512 << 20),
                                             ("1.5GiB", 3 << 29), ("2gb", 2 << 30)])
def test_parse_bytes(text, value):
    assert hostmem.parse_bytes(text) == value


@pytest.mark.parametrize("text", ["lots", "-1G", "nan", "inf"])
def test_malformed_limit_is_refused(monkeypatch, text):
    monkeypatch.setenv(hostmem.ENV_LIMIT, text)
    with pytest.raises(HostMemoryError, match=r"TRNSIM_HOST_MEMORY_LIMIT=.* is not a number"):
        nki.simulate(scratch_writer)(np.ones((128, 512), np.float32))


def test_cli_reports_host_memory_in_one_line(tmp_path):
    script = tmp_path / "writer.py"
    script.write_text(textwrap.dedent("""\
        import numpy as np
        import nki
        import nki.isa as nisa
        import nki.language as nl


        def kernel(a):
            big = nl.ndarray((32768, 512), nl.float32, buffer=nl.shared_hbm)
            t = nl.ndarray((128, 512), nl.float32, buffer=nl.sbuf)
            nisa.dma_copy(dst=t, src=a)
            for i in nl.affine_range(256):
                nisa.dma_copy(dst=big[i * 128:(i + 1) * 128, :], src=t)


        nki.simulate(kernel)(np.ones((128, 512), np.float32))
    """))
    env = {**__import__("os").environ, hostmem.ENV_LIMIT: "8M"}
    proc = subprocess.run([sys.executable, "-m", "trnsim", "run", str(script)], env=env,
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 1
    assert "Traceback" not in proc.stderr
    assert proc.stderr.startswith(f"trnsim run: HostMemoryError: {script}:12 in kernel")
    assert "more bytes of host RAM" in proc.stderr


def test_rotating_scratch_does_not_grow_host_memory():
    """Next fit hands each iteration's scratch new addresses; what a dropped tensor held goes
    back to the host, so resident memory follows the live tensors, not the addresses used."""
    def kernel(a):
        t = nl.ndarray((128, 512), nl.float32, buffer=nl.sbuf)
        nisa.dma_copy(dst=t, src=a)
        for _ in range(24):
            scratch = nl.ndarray((8 * 128, 4096), nl.float32, buffer=nl.hbm)  # 16 MiB, private
            for r in range(8):
                nisa.dma_copy(dst=scratch[r * 128:(r + 1) * 128, 0:512], src=t)
            del scratch

    run = run_kernel(kernel, (np.ones((128, 512), np.float32),), {}, chip="trn2")
    assert run.device.hbm.peak_resident_bytes <= 40 * HOST_CHUNK
