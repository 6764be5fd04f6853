"""Run AWS's nki-library test suite in its simulation mode on trnsim, and count the results.

    python tools/run_nkilib.py /path/to/nki-library [--all] [--sample F] [-n N] [-k EXPR]

The checkout is used as it is (fetch aws-neuron/nki-library, check out the commit to test,
install its test dependencies: pandas fabric2 boto3 aws-embedded-metrics pytest-html
pytest-metadata pytest-xdist allpairspy plotext filelock). The run is

    cd CHECKOUT && PYTHONPATH=src:TOOLS pytest test/integration --test-mode simulation --trnsim
        -p nkilib_upstream_fixes --continue-on-collection-errors --junitxml=...

`--trnsim` makes `nki` resolve to trnsim; the harness's `import nki_cpu_simulator.nki...`
resolves to trnsim through its pytest plugin; nkilib_upstream_fixes (next to this script)
supplies what the public harness lacks (see its docstring). `--all` sets
NKILIB_SIMULATION_RUN_ALL=1 (the large shapes the harness otherwise skips). `--sample F` runs
a deterministic share F of the collected tests (nkilib_sample: by node-id hash), for runs
that must fit in a time budget; `--per-family N` a stratified sample (N tests per kernel
family); `--timeout S` ends a test past S seconds; a worker that the memory guard
(`--max-rss-gb`) ends or that crashes logs why, with the test, to RESULTS.crashes.log.
NEURON_PYTHONHASHSEED defaults to 0 so that the harness's random parametrizations are the
same on every run and worker. The
summary gives per family passed / failed / skipped / errors, the share passed of the tests
run, and the most common failure messages.
"""

from __future__ import annotations

import argparse
import collections
import os
import pathlib
import subprocess
import sys
import time
import xml.etree.ElementTree as ET

TOOLS = pathlib.Path(__file__).resolve().parent
sys.path.insert(0, str(TOOLS))
from nkilib_sample import family  # noqa: E402


def pytest_cmd(args: argparse.Namespace, extra: list[str]) -> list[str]:
    cmd = [sys.executable, "-m", "pytest", "--test-mode", "simulation", "--trnsim",
           "-p", "nkilib_upstream_fixes", "-p", "nkilib_sample", "-p", "no:cacheprovider",
           "--continue-on-collection-errors", "-v", "-p", "no:randomly"]
    if args.k:
        cmd += ["-k", args.k]
    return cmd + extra


def environment(args: argparse.Namespace) -> dict[str, str]:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(
        p for p in ("src", str(TOOLS), env.get("PYTHONPATH", "")) if p)
    env.setdefault("NEURON_PYTHONHASHSEED", "0")  # the harness seeds random parametrizations
    env.setdefault("NKILIB_MAX_RSS_GB", str(args.max_rss_gb))
    env.setdefault("NKILIB_CRASH_LOG", str(crash_log(args)))
    if args.all:
        env["NKILIB_SIMULATION_RUN_ALL"] = "1"
    if args.sample is not None:
        env["NKILIB_SAMPLE_SHARE"] = str(args.sample)
        env["NKILIB_SAMPLE_FROM"] = str(args.sample_from)
    if args.per_family is not None:
        env["NKILIB_SAMPLE_PER_FAMILY"] = str(args.per_family)
    if args.timeout is not None:
        env["NKILIB_TEST_TIMEOUT_S"] = str(args.timeout)
    return env


def crash_log(args: argparse.Namespace) -> pathlib.Path:
    """Where workers log memory-guard ends and segfault tracebacks (next to the junit file)."""
    xml = (args.junitxml or args.checkout / "nkilib-trnsim.xml").resolve()
    return xml.with_suffix(".crashes.log")


def summarize(xml_path: pathlib.Path) -> str:
    counts: dict[str, collections.Counter] = collections.defaultdict(collections.Counter)
    messages: collections.Counter = collections.Counter()
    for case in ET.parse(xml_path).getroot().iter("testcase"):
        fam = family(case.get("classname", "").replace(".", "/") + "/")
        outcome = "passed"
        for child in case:
            if child.tag in ("failure", "error"):
                outcome = "failed" if child.tag == "failure" else "errors"
                text = (child.get("message") or child.text or "").strip().splitlines()
                messages[(text[0] if text else child.tag)[:160]] += 1
            elif child.tag == "skipped":
                outcome = "skipped"
        counts[fam][outcome] += 1
    lines = [f"{'family':<28}{'passed':>8}{'failed':>8}{'errors':>8}{'skipped':>9}{'pass%':>8}"]
    total: collections.Counter = collections.Counter()
    for fam in sorted(counts):
        c = counts[fam]
        total.update(c)
        lines.append(_row(fam, c))
    lines += [_row("all", total), "", "most common failure messages:"]
    lines += [f"  {n:5d}  {m}" for m, n in messages.most_common(25)]
    return "\n".join(lines)


def _row(name: str, c: collections.Counter) -> str:
    ran = c["passed"] + c["failed"] + c["errors"]
    pct = f"{100.0 * c['passed'] / ran:7.1f}%" if ran else "      -"
    return f"{name:<28}{c['passed']:>8}{c['failed']:>8}{c['errors']:>8}{c['skipped']:>9}{pct}"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("checkout", type=pathlib.Path, help="an nki-library checkout")
    ap.add_argument("--all", action="store_true", help="NKILIB_SIMULATION_RUN_ALL=1")
    ap.add_argument("--sample", type=float, default=None, help="share of each family to run")
    ap.add_argument("--sample-from", type=float, default=0.0,
                    help="start of the --sample window in the hash range (0.03 with --sample "
                         "0.03: the 3 %% after the first 3 %%)")
    ap.add_argument("--per-family", type=int, default=None,
                    help="also run the N tests of smallest node-id hash in each kernel family")
    ap.add_argument("--timeout", type=float, default=None,
                    help="end a test past this many seconds (reported as failed: timeout)")
    ap.add_argument("-n", default="auto", help="pytest-xdist workers (0: none)")
    ap.add_argument("-k", default=None, help="pytest -k expression")
    ap.add_argument("--junitxml", type=pathlib.Path, default=None)
    ap.add_argument("--max-rss-gb", type=float, default=6.0,
                    help="end a test process past this resident memory (default 6)")
    ap.add_argument("targets", nargs="*", default=["test/integration"],
                    help="test paths or node ids inside the checkout")
    args = ap.parse_intermixed_args(argv)  # targets may follow the options
    args.checkout = args.checkout.resolve()
    xml = (args.junitxml or args.checkout / "nkilib-trnsim.xml").resolve()
    targets = args.targets
    extra = [f"--junitxml={xml}"] + (["-n", str(args.n)] if str(args.n) != "0" else [])
    crash_log(args).unlink(missing_ok=True)
    start = time.monotonic()
    subprocess.run(pytest_cmd(args, extra + targets), cwd=args.checkout,
                   env=environment(args), check=False)
    print(f"\nwall time {time.monotonic() - start:.0f} s; results in {xml}\n")
    if crash_log(args).exists():
        print(f"worker crashes (memory guard, segfaults): {crash_log(args)}\n")
    print(summarize(xml))
    return 0


if __name__ == "__main__":
    sys.exit(main())
