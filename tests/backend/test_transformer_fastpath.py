"""nn.MultiheadAttention and nn.TransformerEncoderLayer in eval mode without gradients take
PyTorch's native fast path on the device as on the CPU: outputs (and attention weights)
against the CPU's native kernels, with each kind of boolean mask, a fully masked row (NaN, as
the CPU's), both layer-norm placements and both activations."""

from __future__ import annotations

import copy

import pytest
import torch

B, L, E, H = 2, 5, 16, 4


def _masks():
    """Boolean masks (MultiheadAttention takes its fast path only for those)."""
    kpm = torch.tensor([[False] * L, [False] * 3 + [True] * 2])
    causal = torch.ones(L, L, dtype=torch.bool).triu(1)
    return {"none": {}, "key_padding": {"key_padding_mask": kpm}, "causal": {"attn_mask": causal},
            "both": {"attn_mask": causal, "key_padding_mask": kpm},
            "all_keys_masked": {"key_padding_mask": torch.tensor([[True] * L, [False] * L])}}


def _ran(rt, name, before):
    return rt.kernel_runs[f"aten::{name}"] > before.get(f"aten::{name}", 0)


@pytest.mark.parametrize("masks", list(_masks()))
@pytest.mark.parametrize("weights", ["none", "averaged", "per_head"])
def test_multihead_attention_fast_path(dev, kernel_mode, rt, masks, weights):
    torch.manual_seed(0)
    mha = torch.nn.MultiheadAttention(E, H, batch_first=True).eval()
    mha_d = copy.deepcopy(mha).to(dev)
    x = torch.randn(B, L, E)
    kw = dict(_masks()[masks], need_weights=weights != "none",
              average_attn_weights=weights == "averaged")
    before = dict(rt.kernel_runs)
    with torch.no_grad():
        out, w = mha(x, x, x, **kw)
        xd = x.to(dev)
        out_d, w_d = mha_d(xd, xd, xd, **{k: v.to(dev) if isinstance(v, torch.Tensor) else v
                                          for k, v in kw.items()})
    assert _ran(rt, "_native_multi_head_attention", before)
    nan = masks == "all_keys_masked"  # the CPU's rows with no key to attend to are NaN
    torch.testing.assert_close(out_d.cpu(), out, rtol=1e-5, atol=1e-6, equal_nan=nan)
    assert (w is None) == (w_d is None)
    if w is not None:
        torch.testing.assert_close(w_d.cpu(), w, rtol=1e-5, atol=1e-6, equal_nan=nan)


@pytest.mark.parametrize("norm_first", [False, True])
@pytest.mark.parametrize("activation", ["relu", "gelu"])
@pytest.mark.parametrize("masks", ["none", "causal", "both"])
def test_transformer_encoder_layer_fast_path(dev, kernel_mode, rt, norm_first, activation,
                                             masks):
    torch.manual_seed(1)
    layer = torch.nn.TransformerEncoderLayer(E, H, 32, dropout=0.0, activation=activation,
                                             batch_first=True, norm_first=norm_first).eval()
    layer_d = copy.deepcopy(layer).to(dev)
    x = torch.randn(B, L, E)
    kw = {{"attn_mask": "src_mask", "key_padding_mask": "src_key_padding_mask"}[k]: v
          for k, v in _masks()[masks].items()}
    before = dict(rt.kernel_runs)
    with torch.no_grad():
        want = layer(x, **kw)
        got = layer_d(x.to(dev), **{k: v.to(dev) for k, v in kw.items()})
    assert _ran(rt, "_transformer_encoder_layer_fwd", before)
    torch.testing.assert_close(got.cpu(), want, rtol=1e-5, atol=1e-5)


def test_fast_paths_in_reference_mode(dev, reference_mode):
    torch.manual_seed(2)
    layer = torch.nn.TransformerEncoderLayer(E, H, 32, dropout=0.0, batch_first=True).eval()
    x = torch.randn(B, L, E)
    with torch.no_grad():
        torch.testing.assert_close(copy.deepcopy(layer).to(dev)(x.to(dev)).cpu(), layer(x),
                                   rtol=1e-5, atol=1e-6)


def test_encoder_nested_tensor_path_is_refused_with_what_to_do(dev, kernel_mode):
    """nn.TransformerEncoder's default converts a padded batch to a nested tensor in eval
    mode, which the device has no kind of: the error says so and names the constructor
    argument; with it the encoder matches the CPU's."""
    torch.manual_seed(3)

    def make(nested):
        layer = torch.nn.TransformerEncoderLayer(E, H, 32, dropout=0.0, batch_first=True)
        return torch.nn.TransformerEncoder(layer, 2, enable_nested_tensor=nested).eval()

    enc = make(True)
    x, kpm = torch.randn(B, L, E), _masks()["key_padding"]["key_padding_mask"]
    with torch.no_grad(), pytest.raises(NotImplementedError, match=(
            r"has no nested tensors.*construct it with enable_nested_tensor=False")):
        copy.deepcopy(enc).to(dev)(x.to(dev), src_key_padding_mask=kpm.to(dev))
    flat = make(False)
    flat.load_state_dict(enc.state_dict())
    with torch.no_grad():
        want = flat(x, src_key_padding_mask=kpm)
        got = copy.deepcopy(flat).to(dev)(x.to(dev), src_key_padding_mask=kpm.to(dev))
    torch.testing.assert_close(got.cpu(), want, rtol=1e-5, atol=1e-5)
