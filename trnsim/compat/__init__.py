"""Front ends for older NKI generations (Beta 1: neuronxcc.nki)."""
