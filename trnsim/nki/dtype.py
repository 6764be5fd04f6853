"""nki.dtype: the device dtypes by name (the objects of nki.language.dtypes).

`import nki.dtype as nt; nt.float8_e4m3` is how nki-library's tests spell them, and kernels
annotate dtype parameters with it (`dtype: nki.dtype`); each name is a trnsim.dtypes.DType.
"""

from trnsim.nki.language.dtypes import *  # noqa: F403
from trnsim.nki.language.dtypes import __all__  # noqa: F401
