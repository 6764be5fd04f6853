"""Multi-rank tests of nki-library's harness in simulation mode, on trnsim (loaded by
nkilib_upstream_fixes at session start; changes no file of the checkout).

At aws-neuron/nki-library d2ad3a5, a test asks for a multi-rank (collectives) run with
`InferenceArgs(collective_ranks=N)` (test/utils/common_dataclasses.py:377), N > 1, giving each
rank its keyword inputs through a `PerRankLazyInputGenerator` (`for_rank(r)`,
common_dataclasses.py:197-215) or one input dict for every rank (test_collectives.py:330).
On hardware the orchestrator runs all N ranks, each rank's outputs land in
`output_worker_{r}/` of the inference artifacts, and validation reads them per rank
(test/utils/test_orchestrator.py:516-524; output_validator.py:89-110: every rank against
`PerRankLazyGoldenGenerator.for_rank(r)`, rank 0 only for a single golden). The simulation
path launches one rank: `Orchestrator._run_inference` hands simulation to
`_run_simulator_inference` (test_orchestrator.py:331-332, 456-468), whose
`simulation_setup.simulate_kernel` calls `kernel_input.items()` (simulation_setup.py:91:
AttributeError on a PerRankLazyInputGenerator) and runs `cpu_simulate(kernel)[lnc]` once with
no rank count (:92), so a dict-input collective (all_reduce over a 2-rank group) reaches its
collective on a single rank.

This module wraps `Orchestrator._run_simulator_inference`. With collective_ranks <= 1, or when
`nki` is not trnsim's, the harness's own method runs, unchanged. With N > 1 every rank runs in
one process through trnsim.nki.run_ranks, the way the hardware path runs them:
* rank r's keyword inputs are `kernel_input.for_rank(r)` (or the dict), with the
  `.must_alias_input` suffixes stripped as simulation_setup.py:91 strips them; numpy arrays
  are copied per rank, as each rank's device loads its own input files on hardware: the
  generators hand out views of the arrays their goldens later read (test_attention_block_tkg.py
  :249 and :266-267 slice base_input's K_cache/V_cache per rank; the golden copies
  `base_input`, :1225), which a rank writing its aliased cache in place would otherwise change;
* the chip and LNC are chosen as the single-rank path chooses them: NKI_NC_VERSION from
  `platform_target.get_nc_gen()` (simulation_setup.py:109), `logical_nc_config` (:113);
  the topology is trnsim's default for that chip;
* each rank's returned outputs are named and typed as simulation_setup.py:119-133 does, against
  that rank's golden (`normalize_golden_output(golden, rank_id=r)`, common_dataclasses.py:244),
  and written with the orchestrator's own `__dump_tensors__` (test_orchestrator.py:621) to
  `<artifacts>/infer_result/output_worker_{r}/`; the return value is the inference directory,
  so the harness's `_run_validation` and `OutputValidator` validate the ranks as on hardware.
The run is timed under the harness's SIMULATION_TIME metric and an error becomes its
InferenceException, as in the method it wraps (test_orchestrator.py:460-468).
"""

from __future__ import annotations

import functools
import os
import sys
from typing import Any

ORCH = "test.utils.test_orchestrator"
DATA = "test.utils.common_dataclasses"
ALIAS_SUFFIX = ".must_alias_input"
_MARK = "_trnsim_multirank"


def install() -> bool:
    """Wrap Orchestrator._run_simulator_inference (once); False if the harness is not loaded."""
    orch = sys.modules.get(ORCH)
    cls = getattr(orch, "Orchestrator", None)
    original = getattr(cls, "_run_simulator_inference", None)
    if original is None:
        return False
    if getattr(original, _MARK, False):
        return True

    @functools.wraps(original)
    def _run_simulator_inference(self: Any, kernel_under_test: Any) -> Any:
        if kernel_under_test.inference_args.collective_ranks <= 1 or not _nki_is_trnsim():
            return original(self, kernel_under_test)
        collector = self.emitter.get_collector()
        try:
            with collector.timer(orch.MetricName.SIMULATION_TIME):
                outputs = run_all_ranks(kernel_under_test)
            return dump_rank_outputs(self, outputs)
        except Exception as e:
            raise orch.InferenceException(str(e)) from e

    setattr(_run_simulator_inference, _MARK, True)
    cls._run_simulator_inference = _run_simulator_inference
    return True


def _nki_is_trnsim() -> bool:
    import trnsim.nki

    return sys.modules.get("nki") is trnsim.nki


def rank_inputs(kernel_input: Any, rank: int) -> dict[str, Any]:
    """Rank `rank`'s keyword inputs: for_rank(rank) or the shared dict, suffixes stripped,
    numpy arrays copied (each rank's own device memory)."""
    import numpy as np

    raw = kernel_input.for_rank(rank) if hasattr(kernel_input, "for_rank") else kernel_input
    return {k.removesuffix(ALIAS_SUFFIX): (v.copy() if isinstance(v, np.ndarray) else v)
            for k, v in (raw or {}).items()}


def _as_list(result: Any) -> list[Any]:
    if result is None:
        return []
    return list(result) if isinstance(result, (list, tuple)) else [result]


def run_all_ranks(kernel_under_test: Any) -> list[dict[str, Any]]:
    """Run every rank with trnsim.nki.run_ranks; per rank, {output name: numpy array}."""
    import numpy as np

    from trnsim.nki.ranks import run_ranks

    normalize_golden_output = sys.modules[DATA].normalize_golden_output
    ranks = kernel_under_test.inference_args.collective_ranks
    compiler = kernel_under_test.compiler_input
    os.environ["NKI_NC_VERSION"] = compiler.platform_target.get_nc_gen()
    inputs = [rank_inputs(kernel_under_test.kernel_input, r) for r in range(ranks)]
    run = run_ranks(kernel_under_test.kernel_func, lambda r: (), lambda r: inputs[r],
                    ranks=ranks, lnc=compiler.logical_nc_config)
    if kernel_under_test.validation_args is None:
        raise ValueError("Simulation mode requires validation_args to verify outputs")
    golden = kernel_under_test.validation_args.golden_output
    named = []
    for r in range(ranks):
        outs = _as_list(run.outputs[r])
        want = normalize_golden_output(golden, rank_id=r)
        if len(outs) != len(want):
            raise RuntimeError(f"rank {r}: kernel returned {len(outs)} outputs but expected "
                               f"{len(want)} (golden names {list(want)})")
        named.append({name: np.asarray(out, dtype=g.dtype)
                      for (name, g), out in zip(want.items(), outs, strict=True)})
    return named


def dump_rank_outputs(orchestrator: Any, per_rank: list[dict[str, Any]]) -> str:
    """Write rank r's outputs to <artifacts>/infer_result/output_worker_{r}/ (the layout of a
    hardware multi-rank run); returns the inference directory."""
    infer_dir = os.path.join(orchestrator.fs_config.artifacts_output_directory_path,
                             sys.modules[DATA].INF_ARTIFACT_DIR_NAME)
    for r, tensors in enumerate(per_rank):
        orchestrator.__dump_tensors__(os.path.join(infer_dir, f"output_worker_{r}"), tensors,
                                      lambda name: name)
    return infer_dir
