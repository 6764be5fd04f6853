"""Run AWS's nki-samples (tutorials, contributed kernels, unit tests) on trnsim, and count.

    python tools/run_nki_samples.py /path/to/nki-samples [--unit] [--timeout S]

The checkout is used as it is (fetch aws-neuron/nki-samples, check out the commit to test;
the unit tests need a commit that still has `src/nki_samples/reference`, e.g. 8370e11). Each
piece runs in its own process, as a user runs it:

* the tutorials' PyTorch scripts (`src/nki_samples/tutorials/*/*_torch.py`, and the MX
  tutorial's `mx_toplevel.py`) with `trnsim run`. They are written for torch-xla; the folder
  `nki_samples_shim/` next to this script provides a `torch_xla` whose device is trnsim's `trn`
  device (`xla_device()`, `torch_xla.device()`, a no-op `mark_step()`): the scripts then run
  their NKI kernels on device tensors and check them against torch on the same device. A
  script passes when it exits 0 and prints no "differ"/"False" verdict.
* the attention tutorial's kernels (`attention_fwd_performance/attention_kernels.py`,
  attn_fwd_v1 ... v11) on float32 inputs against its own numpy reference (`numpy_attention`
  of its test file, atol 1e-2 as there), each in a fresh process (v9/v10 share a module-level
  SBUF address counter, so running them in one process would depend on their order).
* the contributed kernels' own `__main__` checks (`contributed/*.py`).
* with `--unit`: `pytest test/unit --simulation-only --trnsim` (the suite AWS's CI runs in
  simulation).

Prints one line per piece and the counts.
"""

from __future__ import annotations

import argparse
import os
import pathlib
import re
import subprocess
import sys
import time

TOOLS = pathlib.Path(__file__).resolve().parent
SHIM = TOOLS / "nki_samples_shim"

ATTENTION_DRIVER = """
import sys, numpy as np
sys.path.insert(0, ".")
import trnsim; trnsim.install_nki_aliases()
import attention_kernels as ak
from test_attention import numpy_attention
name = sys.argv[1]
seqlen = 128 if name in ("attn_fwd_v1", "attn_fwd_v2") else 4096
rng = np.random.default_rng(0)
q, k, v = [((rng.random((128, seqlen)) - 0.5) * 2).astype(np.float32) for _ in range(3)]
out = np.asarray(getattr(ak, name)(q, k, v), dtype=np.float32)
ok = np.allclose(out, numpy_attention(q, k, v), atol=1e-2)
print("VERDICT", "pass" if ok else "fail", float(np.nanmax(np.abs(out - numpy_attention(q, k, v)))))
sys.exit(0 if ok else 1)
"""


def run(cmd: list[str], cwd: pathlib.Path, timeout: float, env: dict) -> tuple[bool, str, float]:
    t0 = time.time()
    try:
        p = subprocess.run(cmd, cwd=cwd, env=env, capture_output=True, text=True,
                           timeout=timeout)
    except subprocess.TimeoutExpired:
        return False, f"timeout after {timeout:.0f} s", time.time() - t0
    text = p.stdout + p.stderr
    bad = p.returncode != 0 or re.search(r"\bdiffer\b|allclose pass\? False|Is close\?\s*False",
                                         text)
    last = [ln for ln in text.strip().splitlines() if ln.strip()][-1:] or [""]
    return not bad, last[0][:160], time.time() - t0


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("checkout", type=pathlib.Path)
    ap.add_argument("--unit", action="store_true", help="also run test/unit --simulation-only")
    ap.add_argument("--timeout", type=float, default=900)
    args = ap.parse_args()
    root = args.checkout.resolve()
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(SHIM), env.get("PYTHONPATH", "")) if p)
    trnsim_run = [sys.executable, "-m", "trnsim", "run"]
    results = []
    tut = root / "src" / "nki_samples" / "tutorials"
    scripts = sorted(tut.glob("*/*_torch.py")) + sorted(tut.glob("mxfp-matmul/mx_toplevel.py"))
    for s in scripts:
        results.append((f"tutorial {s.parent.name}/{s.name}",
                        *run([*trnsim_run, s.name], s.parent, args.timeout, env)))
    attn = tut / "attention_fwd_performance"
    if attn.is_dir():
        names = re.findall(r"^def (attn_fwd_v\w+)\(", (attn / "attention_kernels.py").read_text(),
                           re.M)
        for n in names:
            results.append((f"attention {n}", *run([sys.executable, "-c", ATTENTION_DRIVER, n],
                                                   attn, args.timeout, env)))
    for s in sorted((root / "contributed").glob("*.py")):
        if "__main__" in s.read_text():
            results.append((f"contributed {s.name}",
                            *run([*trnsim_run, s.name], s.parent, args.timeout, env)))
    for name, ok, last, secs in results:
        print(f"{'PASS' if ok else 'FAIL'}  {name:55s} {secs:6.1f} s  {'' if ok else last}")
    passed = sum(ok for _, ok, _, _ in results)
    print(f"\n{passed} of {len(results)} passed")
    if args.unit:
        env_u = dict(env)
        env_u["PYTHONPATH"] = os.pathsep.join(p for p in ("src", env_u["PYTHONPATH"]) if p)
        cmd = [sys.executable, "-m", "pytest", "--trnsim", "test/unit", "--simulation-only",
               "-q", "-p", "no:cacheprovider", "--tb=line"]
        print("\n$", " ".join(cmd))
        sys.stdout.flush()
        return subprocess.call(cmd, cwd=root, env=env_u) or (passed != len(results))
    return int(passed != len(results))


if __name__ == "__main__":
    sys.exit(main())
