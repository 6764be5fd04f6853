"""PyTorch device backend (trn / neuron): aten ops run as NKI kernels on the simulated chip."""
