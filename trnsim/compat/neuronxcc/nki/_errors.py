"""Beta-1 error codes (the `nki.errors` catalogue, nki-api.md §11.1) and their trnsim errors.

Every Beta-1 diagnostic is a trnsim KernelError subclass (ConstraintError, OutOfBoundsError,
KernelError) whose message ends with the B1 code, e.g. `[err_tensor_access_out_of_bound]`,
and whose `.code` attribute holds it, so tests and users can match either.
"""

from __future__ import annotations

from trnsim.errors import KernelError
from trnsim.program import SourceLocation, capture_location

# code -> when it is raised (the catalogue of nki-api.md §11.1 that trnsim reproduces)
CODES: dict[str, str] = {
    "err_num_partition_exceed_arch_limit": "a tile has more than 128 partitions",
    "err_size_of_dimension_exceed_arch_limit": "a dimension exceeds an instruction's limit",
    "err_exceed_max_supported_dimension": "an operand has too many dimensions",
    "err_num_partition_mismatch": "operands have different partition counts",
    "err_unsupported_memory": "an operand is in the wrong memory (hbm / sbuf / psum)",
    "err_tensor_access_out_of_bound": "an index range leaves the tensor at trace time",
    "err_unexpected_output_dependencies": "two affine_range iterations write one location",
    "err_loop_carried_dependency": "an affine_range iteration reads a value written by an "
    "earlier iteration (trnsim's name; use sequential_range)",
    "err_local_variable_used_out_of_scope": "a tensor is used outside its loop/if scope",
    "err_1d_arange_not_supported": "a tensor is indexed with a 1-D nl.arange",
    "err_unsupported_mixing_basic_advanced_tensor_indexing": "slices mixed with index expressions",
    "err_failed_to_infer_tile_from_local_tensor": "axis 0 of an operand is not the partition "
    "dimension",
    "err_store_dst_shape_smaller_than_other_shape": "an assignment destination is smaller than "
    "the value",
    "err_cannot_update_immutable_parameter": "a kernel parameter without nt.mutable_tensor is "
    "written",
    "err_mutable_parameter_not_returned": "an nt.mutable_tensor parameter is not returned",
    "err_tensor_output_not_written_to": "a returned output is never written",
    "err_hbm_tensor_with_init_value_not_supported": "an HBM tensor is created with a value",
    "err_tensor_creation_on_scratchpad_with_init_value_not_supported": "an allocated kernel "
    "creates an initialized "
    "on-chip tensor",
    "err_shared_hbm_must_in_kernel_level": "a shared_hbm tensor is created inside a loop",
    "err_activation_scale_invalid_type": "activation scale is not an fp32 scalar or vector",
    "err_activation_scale_scalar_or_vector": "activation scale is not a scalar or (P, 1)",
    "err_activation_bias_invalid_type": "activation bias is not an fp32/fp16/bf16 (P, 1)",
    "err_unsupported_expression_in_mask": "a mask is not affine",
    "err_mask_not_equal_not_supported": "a mask uses !=",
    "err_logic_or_not_supported": "a mask uses | or `or`",
    "err_control_flow_condition_depending_on_arange": "Python control flow on nl.arange",
    "err_dynamic_control_flow_not_supported": "Python control flow on tensor values",
    "err_while_loop_requires_unconditional_entry": "a while loop on a tensor condition",
    "err_ambiguous_tensor_truth_value": "the truth value of a tensor or mask is asked for",
    "err_annotation_shape_mismatch": "a value does not match its nt.tensor[...] annotation",
    "err_cannot_assign_to_index": "an index expression is assigned to",
    "err_indirect_indices_free_dim": "indirect indexing on a free dimension",
    "err_indirect_indices_sbuf": "indirect indices not in SBUF",
    "err_indirect_indices_are_not_supported_with_nki_api": "indirect indexing on an API that "
    "does not take it",
    "err_copy_dynamic_indirect_indices_not_natively_supported": "copy of an indirect access",
    "err_atomic_rmw_add_only": "atomic_rmw with an op other than add",
    "err_atomic_rmw_dynamic_index": "atomic_rmw without an indirect index",
    "err_nested_kernel_with_spmd_grid": "a gridded kernel called inside a kernel",
    "err_nki_api_outside_of_nki_kernel": "an NKI API called outside a kernel",
    "err_program_id_axis_out_of_bounds": "nl.program_id(axis) outside the launch grid",
    "err_transpose_on_tensor_engine_not_allowed_in_allocated_kernel": "TensorE transpose in a "
    "directly allocated "
    "kernel",
    "err_bias_tensor_must_be_specified_in_allocation": "activation without bias in an "
    "allocated kernel",
    "err_tile_index_add_non_integer_scalar": "an index expression combined with a non-integer",
    "err_param_shape_incompatible_with_numpy": "operand shapes do not broadcast",
    "err_param_shape_incompatible_with_matmul": "matmul operand shapes do not contract",
    "err_unsupported_dtype_value": "dtype= is not an NKI dtype",
}


def b1_error(
    cls: type[KernelError], code: str, message: str, loc: SourceLocation | None = None
) -> KernelError:
    """A trnsim error carrying the Beta-1 code (message ends with `[code]`), located at `loc`
    or else at the innermost user frame on the stack."""
    if code not in CODES:
        raise KeyError(code)  # a trnsim bug: every code used must be catalogued
    err = cls(f"{message} [{code}]", loc if loc is not None else capture_location())
    err.code = code  # type: ignore[attr-defined]
    return err
