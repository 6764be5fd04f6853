"""Factorizations, solvers and the other dense linear algebra of torch.linalg on the host
(reference only: PyTorch's CPU kernel, LAPACK, over the device's bytes). No NeuronCore engine
factorizes a matrix (TensorE multiplies, the others are elementwise), so the device serves them
as the host would on Trainium: inverse, determinant, SVD, eigendecompositions, QR, Cholesky,
LU, triangular and least-squares solves, matrix exponential, cross product. Their gradients
are the CPU formulas, composed of the device's ops (matmuls run as kernels).

`nn.init.orthogonal_` (QR) and `torch.linalg.inv`/`solve` on device tensors come this way.
"""

from __future__ import annotations

from trnsim.backend.registry import cpu_overloads, reference_rest

FAMILIES = (
    "linalg_inv_ex", "_linalg_det", "_linalg_slogdet", "_linalg_svd", "_linalg_eigh",
    "linalg_eig", "_linalg_eigvals", "linalg_eigvals", "linalg_qr", "linalg_cholesky_ex",
    "cholesky", "cholesky_inverse", "_cholesky_solve_helper", "_linalg_solve_ex",
    "linalg_lu", "linalg_lu_factor_ex", "linalg_lu_solve", "lu_unpack",
    "linalg_solve_triangular", "triangular_solve", "linalg_lstsq", "linalg_ldl_factor_ex",
    "linalg_ldl_solve", "linalg_householder_product", "geqrf", "ormqr", "linalg_matrix_exp",
    "linalg_cross", "renorm",
)

reference_rest(*cpu_overloads(*FAMILIES), group="linalg")
