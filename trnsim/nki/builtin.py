"""nki.builtin: the kernel language's namespaces under one name.

AWS's CPU simulator ships an `nki.builtin` module that nki-library's harness installs as the
Python builtin `builtin` (`builtins.builtin = ...`); no nki-library kernel reads it. trnsim's
holds the language modules by their short names, so `builtin.isa.nc_matmul`,
`builtin.language.ndarray`, ... are the ordinary nki.isa / nki.language functions.
"""

from trnsim.nki import collectives, isa, language, typing

__all__ = ["collectives", "isa", "language", "typing"]
