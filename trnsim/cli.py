"""The `trnsim` command: chips, run, coverage, profile, view, diff, demo."""

from __future__ import annotations

import argparse
import os
import runpy
import sys
from collections.abc import Callable

from trnsim import __version__

COMMANDS: dict[str, tuple[str, Callable[[argparse.ArgumentParser], None],
                          Callable[[argparse.Namespace], int]]] = {}


def command(name: str, help_text: str, configure: Callable[[argparse.ArgumentParser], None]):
    def deco(fn: Callable[[argparse.Namespace], int]) -> Callable[[argparse.Namespace], int]:
        COMMANDS[name] = (help_text, configure, fn)
        return fn

    return deco


@command("chips", "print the built-in chips", lambda p: None)
def _chips(args: argparse.Namespace) -> int:
    from trnsim.chip import format_chips_table

    print(format_chips_table())
    return 0


def _configure_run(p: argparse.ArgumentParser) -> None:
    p.add_argument("script", help="Python script that imports nki / neuronxcc.nki")
    p.add_argument("script_args", nargs=argparse.REMAINDER)


def run_script(script: str, script_args: list[str]) -> None:
    """Run a script as __main__ with `nki`, `neuronxcc.nki` (and, where torch-neuronx is not
    installed, `torch_neuronx`) resolving to trnsim."""
    from trnsim.aliases import install_nki_aliases, install_torch_aliases

    install_nki_aliases()
    install_torch_aliases()
    sys.argv = [script, *script_args]
    sys.path.insert(0, os.path.dirname(os.path.abspath(script)))
    runpy.run_path(script, run_name="__main__")


@command("run", "run a script with nki (and neuronxcc.nki) resolving to trnsim", _configure_run)
def _run(args: argparse.Namespace) -> int:
    from trnsim.cli_checks import check_script

    check_script(args.script)
    run_script(args.script, args.script_args)
    return 0


def _configure_coverage(p: argparse.ArgumentParser) -> None:
    p.add_argument("--generation", default="ga", choices=["ga", "beta1", "beta2"])


@command("coverage", "which NKI API names trnsim implements", _configure_coverage)
def _coverage(args: argparse.Namespace) -> int:
    from trnsim.coverage import format_coverage

    print(format_coverage(args.generation))
    return 0


def _configure_ops(p: argparse.ArgumentParser) -> None:
    p.add_argument("--markdown", action="store_true",
                   help="the table as markdown (docs/torch-ops.md), missing ops included")
    p.add_argument("--kernels-only", action="store_true", help="only ops with NKI kernels")


@command("ops", "which PyTorch ops the trn device runs as NKI kernels", _configure_ops)
def _ops(args: argparse.Namespace) -> int:
    try:
        from trnsim.backend import coverage
    except ImportError as e:
        print(f"trnsim ops: needs torch ({e}); pip install torch==2.13.0", file=sys.stderr)
        return 1
    if args.markdown:
        print(coverage.markdown())
    elif args.kernels_only:
        print("\n".join(line for line in coverage.text().splitlines() if "  kernel  " in line))
    else:
        print(coverage.text())
    return 0


def _load_extra_commands() -> None:
    """Commands defined by later layers (profile, view, diff, demo) register on import."""
    for mod in ("trnsim.cli_profile",):
        try:
            __import__(mod)
        except ImportError as e:
            if e.name != mod:
                raise


def main(argv: list[str] | None = None) -> int:
    _load_extra_commands()
    parser = argparse.ArgumentParser(prog="trnsim", description=__doc__)
    parser.add_argument("--version", action="version", version=f"trnsim {__version__}")
    sub = parser.add_subparsers(dest="command")
    for name, (help_text, configure, _) in COMMANDS.items():
        configure(sub.add_parser(name, help=help_text))
    args = parser.parse_args(argv)
    if args.command is None:
        parser.print_help()
        return 0
    from trnsim.errors import TrnsimError

    try:
        return COMMANDS[args.command][2](args)
    except BrokenPipeError:  # `trnsim ... | head`: the reader left; not an error of ours
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 0
    except TrnsimError as e:
        print(f"trnsim {args.command}: {type(e).__name__}: {e}", file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())
