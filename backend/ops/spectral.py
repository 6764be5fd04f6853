"""The discrete Fourier transforms of torch.fft (and torch.stft/istft, which call them) on
the host (reference only: PyTorch's CPU kernel, pocketfft, over the device's bytes; complex
results are complex device tensors). No NeuronCore engine has an FFT; a model that needs one
on Trainium runs it as matmuls against a DFT matrix, which a kernel author can write in NKI.
"""

from __future__ import annotations

from trnsim.backend.registry import cpu_overloads, reference_rest

reference_rest(*cpu_overloads("_fft_r2c", "_fft_c2r", "_fft_c2c"), group="spectral")
