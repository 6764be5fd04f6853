"""Tiny Hugging Face `transformers` models on the trn device against the CPU.

    pip install transformers        # (or: pip install -e '.[models]')
    python tools/hf_models.py [NAME ...] [--list]

Each architecture is built twice from one random initialization with a tiny config (2
layers, hidden 64 or less, vocabulary 128), one copy moved to the device. One training step's
loss and every parameter's gradient are compared with the CPU's (gradient error relative to
the parameter's largest CPU gradient, plus 1e-3), then, for causal and sequence-to-sequence
language models, greedy `generate` on a left-padded batch must give the CPU's tokens. The
table prints one row per model and the script exits non-zero if any row fails; the device
runs in its default (kernel) mode, so every op with an NKI kernel runs on the simulated
NeuronCore. What runs on the host instead is listed (`torch.trn.host_ops()`).
"""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Callable
from typing import Any

import torch

SMALL = dict(hidden_size=64, num_hidden_layers=2, num_attention_heads=4, intermediate_size=128,
             vocab_size=128)
GRAD_TOL = 1e-4  # gradient error relative to the largest CPU gradient


def _ids() -> dict[str, torch.Tensor]:
    ids = torch.randint(3, 128, (2, 12))
    return dict(input_ids=ids, labels=ids)


def _classify() -> dict[str, torch.Tensor]:
    return dict(input_ids=torch.randint(3, 128, (2, 12)), labels=torch.tensor([1, 0]))


def _seq2seq() -> dict[str, torch.Tensor]:
    return dict(input_ids=torch.randint(3, 128, (2, 12)), labels=torch.randint(3, 128, (2, 6)))


def _image() -> dict[str, torch.Tensor]:
    return dict(pixel_values=torch.randn(2, 3, 32, 32), labels=torch.tensor([1, 3]))


def _audio() -> dict[str, torch.Tensor]:
    return dict(input_values=torch.randn(2, 1600), labels=torch.randint(1, 30, (2, 5)))


def _mel() -> dict[str, torch.Tensor]:
    return dict(input_features=torch.randn(2, 16, 64), labels=torch.randint(3, 128, (2, 5)))


def models(T: Any) -> dict[str, tuple[Callable[[], Any], Callable[[], dict], str]]:
    """name -> (model factory, batch factory, kind: causal | seq2seq | other)."""
    s = SMALL
    no_drop = dict(hidden_dropout_prob=0, attention_probs_dropout_prob=0)
    return {
        "gpt2": (lambda: T.GPT2LMHeadModel(T.GPT2Config(
            n_embd=64, n_layer=2, n_head=4, vocab_size=128, n_positions=64, resid_pdrop=0,
            embd_pdrop=0, attn_pdrop=0, pad_token_id=0)), _ids, "causal"),
        "llama": (lambda: T.LlamaForCausalLM(T.LlamaConfig(
            **s, num_key_value_heads=2, max_position_embeddings=64, pad_token_id=0)), _ids,
            "causal"),
        "mistral": (lambda: T.MistralForCausalLM(T.MistralConfig(
            **s, num_key_value_heads=2, max_position_embeddings=64, sliding_window=4,
            pad_token_id=0)), _ids, "causal"),
        "mixtral": (lambda: T.MixtralForCausalLM(T.MixtralConfig(
            **s, num_key_value_heads=2, num_local_experts=4, num_experts_per_tok=2,
            max_position_embeddings=64, pad_token_id=0)), _ids, "causal"),
        "qwen2": (lambda: T.Qwen2ForCausalLM(T.Qwen2Config(
            **s, num_key_value_heads=2, max_position_embeddings=64, pad_token_id=0)), _ids,
            "causal"),
        "gemma": (lambda: T.GemmaForCausalLM(T.GemmaConfig(
            **s, num_key_value_heads=2, head_dim=16, max_position_embeddings=64,
            pad_token_id=0)), _ids, "causal"),
        "phi": (lambda: T.PhiForCausalLM(T.PhiConfig(
            **s, max_position_embeddings=64, resid_pdrop=0, embd_pdrop=0, attention_dropout=0,
            pad_token_id=0)), _ids, "causal"),
        "falcon": (lambda: T.FalconForCausalLM(T.FalconConfig(
            hidden_size=64, num_hidden_layers=2, num_attention_heads=4, vocab_size=128,
            hidden_dropout=0, attention_dropout=0, pad_token_id=0)), _ids, "causal"),
        "bloom": (lambda: T.BloomForCausalLM(T.BloomConfig(
            hidden_size=64, n_layer=2, n_head=4, vocab_size=128, hidden_dropout=0,
            attention_dropout=0, pad_token_id=0)), _ids, "causal"),
        "gpt_bigcode": (lambda: T.GPTBigCodeForCausalLM(T.GPTBigCodeConfig(
            n_embd=64, n_layer=2, n_head=4, vocab_size=128, n_positions=64, resid_pdrop=0,
            embd_pdrop=0, attn_pdrop=0, multi_query=True, pad_token_id=0)), _ids, "causal"),
        "gptj": (lambda: T.GPTJForCausalLM(T.GPTJConfig(
            n_embd=64, n_layer=2, n_head=4, vocab_size=128, n_positions=64, rotary_dim=8,
            resid_pdrop=0, embd_pdrop=0, attn_pdrop=0, pad_token_id=0)), _ids, "causal"),
        "gpt_neox": (lambda: T.GPTNeoXForCausalLM(T.GPTNeoXConfig(
            **s, max_position_embeddings=64, hidden_dropout=0, attention_dropout=0,
            pad_token_id=0)), _ids, "causal"),
        "opt": (lambda: T.OPTForCausalLM(T.OPTConfig(
            hidden_size=64, num_hidden_layers=2, num_attention_heads=4, ffn_dim=128,
            vocab_size=128, max_position_embeddings=64, dropout=0, attention_dropout=0,
            word_embed_proj_dim=64, pad_token_id=0)), _ids, "causal"),
        "mpt": (lambda: T.MptForCausalLM(T.MptConfig(
            d_model=64, n_layers=2, n_heads=4, vocab_size=128, max_seq_len=64,
            attn_config={"alibi": True}, no_bias=True, pad_token_id=0)), _ids, "causal"),
        "mamba": (lambda: T.MambaForCausalLM(T.MambaConfig(
            hidden_size=32, num_hidden_layers=2, vocab_size=128, state_size=8, expand=2,
            conv_kernel=4, pad_token_id=0)), _ids, "causal"),
        "rwkv": (lambda: T.RwkvForCausalLM(T.RwkvConfig(
            hidden_size=32, num_hidden_layers=2, vocab_size=128, context_length=64,
            attention_hidden_size=32, intermediate_size=64)), _ids, "other"),
        "xlnet": (lambda: T.XLNetLMHeadModel(T.XLNetConfig(
            d_model=64, n_layer=2, n_head=4, d_inner=128, vocab_size=128, dropout=0)), _ids,
            "other"),
        "bert": (lambda: T.BertForMaskedLM(T.BertConfig(
            **s, **no_drop, max_position_embeddings=64)), _ids, "other"),
        "roberta": (lambda: T.RobertaForMaskedLM(T.RobertaConfig(
            **s, **no_drop, max_position_embeddings=64)), _ids, "other"),
        "albert": (lambda: T.AlbertForMaskedLM(T.AlbertConfig(
            **s, **no_drop, embedding_size=32, max_position_embeddings=64)), _ids, "other"),
        "electra": (lambda: T.ElectraForMaskedLM(T.ElectraConfig(
            **s, **no_drop, embedding_size=32, max_position_embeddings=64)), _ids, "other"),
        "distilbert": (lambda: T.DistilBertForSequenceClassification(T.DistilBertConfig(
            dim=64, n_layers=2, n_heads=4, hidden_dim=128, vocab_size=128, dropout=0,
            attention_dropout=0, seq_classif_dropout=0, max_position_embeddings=64)),
            _classify, "other"),
        "deberta_v2": (lambda: T.DebertaV2ForSequenceClassification(T.DebertaV2Config(
            **s, **no_drop, max_position_embeddings=64, relative_attention=True,
            pos_att_type=["p2c", "c2p"], pooler_dropout=0)), _classify, "other"),
        "fnet": (lambda: T.FNetForMaskedLM(T.FNetConfig(
            hidden_size=64, num_hidden_layers=2, intermediate_size=128, vocab_size=128,
            max_position_embeddings=64, hidden_dropout_prob=0,
            use_tpu_fourier_optimizations=False)), _ids, "other"),
        "t5": (lambda: T.T5ForConditionalGeneration(T.T5Config(
            d_model=64, d_ff=128, num_layers=2, num_heads=4, d_kv=16, vocab_size=128,
            dropout_rate=0, decoder_start_token_id=0, pad_token_id=0)), _seq2seq, "seq2seq"),
        "bart": (lambda: T.BartForConditionalGeneration(T.BartConfig(
            d_model=64, encoder_layers=1, decoder_layers=1, encoder_attention_heads=4,
            decoder_attention_heads=4, encoder_ffn_dim=128, decoder_ffn_dim=128, vocab_size=128,
            max_position_embeddings=64, dropout=0, attention_dropout=0)), _seq2seq, "seq2seq"),
        "whisper": (lambda: T.WhisperForConditionalGeneration(T.WhisperConfig(
            d_model=64, encoder_layers=1, decoder_layers=1, encoder_attention_heads=4,
            decoder_attention_heads=4, encoder_ffn_dim=128, decoder_ffn_dim=128, vocab_size=128,
            num_mel_bins=16, max_source_positions=32, max_target_positions=32, dropout=0,
            attention_dropout=0, activation_dropout=0, decoder_start_token_id=1, pad_token_id=0,
            bos_token_id=1, eos_token_id=2)), _mel, "other"),
        "wav2vec2": (lambda: T.Wav2Vec2ForCTC(T.Wav2Vec2Config(
            hidden_size=64, num_hidden_layers=2, num_attention_heads=4, intermediate_size=128,
            vocab_size=32, conv_dim=(32, 32), conv_stride=(5, 4), conv_kernel=(10, 4),
            num_conv_pos_embeddings=16, num_conv_pos_embedding_groups=4, hidden_dropout=0,
            attention_dropout=0, activation_dropout=0, feat_proj_dropout=0, layerdrop=0,
            mask_time_prob=0, final_dropout=0)), _audio, "other"),
        "vit": (lambda: T.ViTForImageClassification(T.ViTConfig(
            **{k: v for k, v in s.items() if k != "vocab_size"}, **no_drop, image_size=32,
            patch_size=8, num_labels=10)), _image, "other"),
        "swin": (lambda: T.SwinForImageClassification(T.SwinConfig(
            image_size=32, patch_size=4, embed_dim=16, depths=[1, 1], num_heads=[2, 2],
            window_size=4, num_labels=10, drop_path_rate=0, **no_drop)), _image, "other"),
        "convnext": (lambda: T.ConvNextForImageClassification(T.ConvNextConfig(
            num_channels=3, hidden_sizes=[16, 32], depths=[1, 1], num_stages=2, num_labels=10,
            image_size=32, drop_path_rate=0)), _image, "other"),
        "resnet": (lambda: T.ResNetForImageClassification(T.ResNetConfig(
            num_channels=3, embedding_size=16, hidden_sizes=[16, 32], depths=[1, 1],
            num_labels=10)), _image, "other"),
        "segformer": (lambda: T.SegformerForImageClassification(T.SegformerConfig(
            num_channels=3, num_encoder_blocks=2, depths=[1, 1], sr_ratios=[2, 1],
            hidden_sizes=[16, 32], patch_sizes=[7, 3], strides=[4, 2],
            num_attention_heads=[1, 2], mlp_ratios=[2, 2], num_labels=10, drop_path_rate=0,
            classifier_dropout_prob=0, **no_drop)), _image, "other"),
    }


def _generate_check(m: Any, md: Any, kind: str, dev: str) -> bool:
    ids = torch.randint(3, 128, (3, 7))
    mask = torch.ones_like(ids)
    if kind == "causal":  # a left-padded batch
        ids[0, :3] = 0
        mask[0, :3] = 0
    kw = dict(max_new_tokens=5, do_sample=False, pad_token_id=0)
    with torch.no_grad():
        a = m.generate(input_ids=ids, attention_mask=mask, **kw)
        b = md.generate(input_ids=ids.to(dev), attention_mask=mask.to(dev), **kw).cpu()
    return torch.equal(a, b)


def run_one(name: str, make: Callable, batch: Callable, kind: str, dev: str) -> dict[str, Any]:
    torch.manual_seed(0)
    m = make()
    md = make()
    md.load_state_dict(m.state_dict())
    md.to(dev)
    torch.manual_seed(1)
    inp = batch()
    t = time.perf_counter()
    out = m(**inp)
    outd = md(**{k: v.to(dev) for k, v in inp.items()})
    out.loss.backward()
    outd.loss.backward()
    grads = dict(md.named_parameters())
    worst, where, presence = 0.0, "", []
    for k, p in m.named_parameters():
        gd = grads[k].grad
        if (p.grad is None) != (gd is None):
            presence.append(k)
            continue
        if p.grad is None:
            continue
        err = float((p.grad - gd.cpu()).abs().max()) / (float(p.grad.abs().max()) + 1e-3)
        if err > worst:
            worst, where = err, k
    row = dict(name=name, loss=out.loss.item(), loss_dev=outd.loss.item(), grad_err=worst,
               where=where, presence=presence, generate=None)
    if kind in ("causal", "seq2seq"):
        m.eval()
        md.eval()
        row["generate"] = _generate_check(m, md, kind, dev)
    row["seconds"] = time.perf_counter() - t
    row["ok"] = (abs(row["loss"] - row["loss_dev"]) <= 1e-5 * max(1.0, abs(row["loss"]))
                 and worst <= GRAD_TOL and not presence and row["generate"] is not False)
    return row


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("names", nargs="*", help="models to run (default: all)")
    p.add_argument("--list", action="store_true", help="list the models and exit")
    args = p.parse_args(argv)
    try:
        import transformers as T
    except ImportError:
        print("transformers is not installed: pip install transformers", file=sys.stderr)
        return 2
    import trnsim.backend

    dev = trnsim.backend.runtime.name
    zoo = models(T)
    if args.list:
        print("\n".join(zoo))
        return 0
    unknown = [n for n in args.names if n not in zoo]
    if unknown:
        print(f"unknown model(s) {unknown}; --list shows them", file=sys.stderr)
        return 2
    T.logging.set_verbosity_error()
    failed = 0
    print(f"{'model':<12} {'loss cpu':>10} {'loss trn':>10} {'grad err':>9} {'generate':>8} "
          f"{'s':>5}  result")
    for name in args.names or list(zoo):
        try:
            r = run_one(name, *zoo[name], dev)
        except Exception as e:  # a model that fails on the device is a row, not a crash
            failed += 1
            print(f"{name:<12} FAILED {type(e).__name__}: {str(e)[:300]}")
            continue
        failed += not r["ok"]
        gen = {None: "-", True: "equal", False: "DIFFER"}[r["generate"]]
        note = "ok" if r["ok"] else f"FAIL (worst gradient {r['where']}; {r['presence']})"
        print(f"{name:<12} {r['loss']:>10.6f} {r['loss_dev']:>10.6f} {r['grad_err']:>9.1e} "
              f"{gen:>8} {r['seconds']:>5.1f}  {note}")
    ran = sorted(getattr(torch, dev).host_ops())
    print(f"host-run ops over the whole run: {', '.join(ran) if ran else 'none'}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
