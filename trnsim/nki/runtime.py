"""nki.runtime: AWS's runtime for loading compiled kernels (NEFFs) on a Neuron device.

trnsim has no device or NEFF to load: the path imports (public code imports it), and every
name looked up raises UnsupportedError naming what does run a kernel.
"""

from trnsim.nki.compiler import unsupported_getattr

__trnsim_unsupported__ = True

__getattr__ = unsupported_getattr("nki.runtime")
