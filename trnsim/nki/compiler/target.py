"""nki.compiler.target: part of AWS's NKI compiler, which trnsim does not include.

Importable (public code imports the path); every name looked up raises UnsupportedError.
"""

from trnsim.nki.compiler import unsupported_getattr

__trnsim_unsupported__ = True

__getattr__ = unsupported_getattr("nki.compiler.target")
