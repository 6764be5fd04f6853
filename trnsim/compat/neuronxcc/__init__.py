"""trnsim's stand-in for the `neuronxcc` package: only `neuronxcc.nki` (NKI Beta 1) exists.

`import neuronxcc.nki as nki` resolves here under `trnsim run`, after
trnsim.install_nki_aliases(), or with `pytest --trnsim`; a real neuronxcc installation is left
alone unless the aliases are forced.
"""
