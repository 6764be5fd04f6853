"""The loop nest of flash_attention_backward (FlashAttention-2 backward) for one kv head and
the query heads that share it. Layer: kernel library; public NKI API only.

Matmul layouts (contraction on partitions): scores and dP use Q^T / dO^T (D on partitions)
against K^T / V^T; dV += P^T dO and dK += dS^T Q use P and dS as they are (queries on
partitions) against dO and Q rows; dQ += dS K needs dS^T (TensorE transposes) against K rows.
"""

from __future__ import annotations

from trnsim.nki import isa as nisa
from trnsim.nki import language as nl

from ._common import fail, scalar_copy
from ._flash_scores import K_BLOCK, K_TILE, Q_TILE, load_rows, load_transposed, transpose_probs
from ._kmajor import P_MAX, Mat, load_kmajor, store_rows

RESIDENT_SHARE = 0.7  # share of usable SBUF for the resident operands and accumulators


def _check_budget(heads: list, k_m: Mat) -> None:
    sq, skv, d = heads[0]["q"].rows, k_m.rows, k_m.cols
    isz = k_m.t.dtype.itemsize
    nq, nk = -(-sq // P_MAX), -(-skv // P_MAX)
    need = (2 * skv + nk * d) * isz  # K^T, V^T, K rows
    need += (2 * sq + 3 * nq * d) * isz + nq * d * 4 + 16 * nq  # Q^T, dO^T, Q/dO/O rows, dQ
    if len(heads) > 1:
        need += 2 * nk * d * 4  # fp32 dK, dV accumulated over the group's query heads
    budget = nl.tile_size.total_available_sbuf_size * RESIDENT_SHARE
    if need > budget:
        fail(f"flash_attention_backward: Sq={sq}, Skv={skv}, D={d} need {need} bytes per "
             f"partition for the resident operands and fp32 accumulators; at most "
             f"{int(budget)} fit")


def backward_group(heads: list, k_m: Mat, v_m: Mat, dk_m: Mat, dv_m: Mat, scale: float):
    """dq of every head in `heads` (dicts of head matrices and their Masking), and dk, dv of
    the kv head they share."""
    _check_budget(heads, k_m)
    skv, d = k_m.rows, k_m.cols
    nk = -(-skv // P_MAX)
    k_t = load_transposed(k_m, "k_res")
    v_t = load_transposed(v_m, "vT_res")
    k_rows = load_rows(k_m, "k_rows")
    accs = None
    if len(heads) > 1:
        accs = [nl.ndarray((P_MAX, nk, d), dtype=nl.float32, buffer=nl.sbuf, name=n)
                for n in ("dk_acc", "dv_acc")]
    for hi, head in enumerate(heads):
        _backward_head(head, k_t, v_t, k_rows, dk_m, dv_m, accs, hi == 0, scale)
    if accs is not None:
        for acc, dst in zip(accs, (dk_m, dv_m), strict=True):
            out = nl.ndarray((P_MAX, nk, d), dtype=dst.t.dtype, buffer=nl.sbuf, name="dkv_out")
            _rows_op(lambda o, a: nisa.tensor_copy(dst=o, src=a), out, acc, skv)
            store_rows(dst, out, 0, skv, 0, d)


def _row_slices(nrows: int, t0: int = 0) -> list[tuple]:
    """Index tuples covering nrows rows of a [128, T, ...] tile from tile t0: the full
    tiles, then the ragged last one (so no instruction reads rows nothing wrote)."""
    full, rem = divmod(nrows, P_MAX)
    out = []
    if full:
        out.append((slice(None), slice(t0, t0 + full)))
    if rem:
        out.append((slice(0, rem), t0 + full))
    return out


def _rows_op(fn, dst, src, nrows: int, t0: int = 0) -> None:
    """fn(dst[rows], src[rows]) over the row slices of nrows rows (dst from tile t0)."""
    for dsl, ssl in zip(_row_slices(nrows, t0), _row_slices(nrows), strict=True):
        fn(dst[dsl], src[ssl])


def _row_stats(head: dict, do_rows, sq: int):
    """(-lse, Di = rowsum(dO * O)) as [128, nq, 1] fp32 tiles (query tile t on column t)."""
    nq = -(-sq // P_MAX)
    d = head["o"].cols
    lse = nl.ndarray((P_MAX, nq, 1), dtype=nl.float32, buffer=nl.sbuf, name="lse")
    load_kmajor(lse, head["lse"], 0, sq, 0, 1, "direct")
    o_rows = load_rows(head["o"], "o_rows")
    neg = nl.ndarray((P_MAX, nq, 1), dtype=nl.float32, buffer=nl.sbuf, name="neg_lse")
    prod = nl.ndarray((P_MAX, nq, d), dtype=nl.float32, buffer=nl.sbuf, name="do_o")
    di = nl.ndarray((P_MAX, nq, 1), dtype=nl.float32, buffer=nl.sbuf, name="di")
    for sl in _row_slices(sq):
        nisa.activation(dst=neg[sl], op=nl.copy, data=lse[sl], scale=-1.0)
        nisa.tensor_tensor(dst=prod[sl], data1=do_rows[sl], data2=o_rows[sl], op=nl.multiply)
        nisa.tensor_reduce(dst=di[sl], op=nl.add, data=prod[sl], axis=len(prod[sl].shape) - 1)
    return neg, di


def _backward_head(head, k_t, v_t, k_rows, dk_m: Mat, dv_m: Mat, accs, first_head, scale):
    q_m, masking = head["q"], head["masking"]
    sq, d = q_m.rows, q_m.cols
    skv = k_t.shape[2]
    nq = -(-sq // P_MAX)
    q_t = load_transposed(q_m, "q_res")
    q_rows = load_rows(q_m, "q_rows")
    do_rows = load_rows(head["do"], "do_rows")
    do_t = load_transposed(head["do"], "doT_res")
    neg_lse, di = _row_stats(head, do_rows, sq)
    dq_acc = nl.ndarray((P_MAX, nq, d), dtype=nl.float32, buffer=nl.sbuf, name="dq_acc")
    pdtype = q_m.t.dtype
    xs = masking.xs
    for kb in nl.affine_range(-(-skv // K_BLOCK)):
        k0 = kb * K_BLOCK
        kw = min(K_BLOCK, skv - k0)
        n_t = -(-kw // K_TILE)
        dk_ps = nl.ndarray((K_TILE, n_t, d), dtype=nl.float32, buffer=nl.psum, name="dk_ps")
        dv_ps = nl.ndarray((K_TILE, n_t, d), dtype=nl.float32, buffer=nl.psum, name="dv_ps")
        first = True
        for qt in nl.affine_range(nq):
            q0 = qt * Q_TILE
            mq = min(Q_TILE, sq - q0)
            if masking.causal and q0 + mq - 1 < k0:
                continue  # every key of the block is later than every query of the tile
            s_ps = nl.ndarray((Q_TILE, kw), dtype=nl.float32, buffer=nl.psum, name="scores")
            nisa.nc_matmul(dst=s_ps[0:mq, :], stationary=q_t[0:d, 0, q0 : q0 + mq],
                           moving=k_t[0:d, 0, k0 : k0 + kw])
            x, _ = masking.scores(s_ps, q0, mq, k0, kw, False)
            p = nl.ndarray((Q_TILE, kw), dtype=pdtype, buffer=nl.sbuf, name="p")
            nisa.activation(dst=p[0:mq, :], op=nl.exp, data=x, bias=neg_lse[0:mq, qt, :],
                            scale=xs)
            dp_ps = nl.ndarray((Q_TILE, kw), dtype=nl.float32, buffer=nl.psum, name="dp")
            nisa.nc_matmul(dst=dp_ps[0:mq, :], stationary=do_t[0:d, 0, q0 : q0 + mq],
                           moving=v_t[0:d, 0, k0 : k0 + kw])
            ds = nl.ndarray((Q_TILE, kw), dtype=pdtype, buffer=nl.sbuf, name="ds")
            nisa.scalar_tensor_tensor(dst=ds[0:mq, :], data=dp_ps[0:mq, :], op0=nl.subtract,
                                      operand0=di[0:mq, qt, :], op1=nl.multiply,
                                      operand1=p[0:mq, :])
            for t in range(n_t):
                rt = min(K_TILE, kw - t * K_TILE)
                cols = slice(t * K_TILE, t * K_TILE + rt)
                nisa.nc_matmul(dst=dv_ps[0:rt, t, :], stationary=p[0:mq, cols],
                               moving=do_rows[0:mq, qt, :], accumulate=not first)
                nisa.nc_matmul(dst=dk_ps[0:rt, t, :], stationary=ds[0:mq, cols],
                               moving=q_rows[0:mq, qt, :], accumulate=not first)
            _dq_update(dq_acc, ds, mq, kw, qt, k_rows, k0, d, kb == 0)
            first = False
        _finish_block(dk_ps, dv_ps, first, k0, kw, dk_m, dv_m, accs, first_head, scale)
    out = nl.ndarray((P_MAX, nq, d), dtype=head["dq"].t.dtype, buffer=nl.sbuf, name="dq_out")
    _rows_op(lambda o, a: nisa.activation(dst=o, op=nl.copy, data=a, scale=scale),
             out, dq_acc, sq)
    store_rows(head["dq"], out, 0, sq, 0, d)


def _dq_update(dq_acc, ds, mq: int, kw: int, qt: int, k_rows, k0: int, d: int, first: bool):
    """dq_acc[:, qt] (+)= dS K for one (query tile, key block): dS^T by TensorE transposes."""
    ds_t = transpose_probs(ds, mq, kw)
    dq_ps = nl.ndarray((Q_TILE, d), dtype=nl.float32, buffer=nl.psum, name="dq_ps")
    n_t = -(-kw // K_TILE)
    for t in range(n_t):
        rt = min(K_TILE, kw - t * K_TILE)
        nisa.nc_matmul(dst=dq_ps[0:mq, :], stationary=ds_t[0:rt, t, 0:mq],
                       moving=k_rows[0:rt, k0 // K_TILE + t, :], accumulate=t > 0)
    if first:
        nisa.tensor_copy(dst=dq_acc[0:mq, qt, :], src=dq_ps[0:mq, :])
    else:
        nisa.tensor_tensor(dst=dq_acc[0:mq, qt, :], data1=dq_acc[0:mq, qt, :],
                           data2=dq_ps[0:mq, :], op=nl.add)


def _finish_block(dk_ps, dv_ps, empty, k0, kw, dk_m, dv_m, accs, first_head, scale) -> None:
    """dK (times scale) and dV of one key block: stored (one query head per kv head) or
    added to the fp32 accumulators (GQA). A block no query sees (causal, Skv > Sq) is 0."""
    d = dk_ps.shape[2]
    n_t = dk_ps.shape[1]
    for i, (ps, dst, s) in enumerate(((dk_ps, dk_m, scale), (dv_ps, dv_m, 1.0))):
        engine = nisa.engine.vector if i == 0 else nisa.engine.scalar
        if accs is None:
            out = nl.ndarray((K_TILE, n_t, d), dtype=dst.t.dtype, buffer=nl.sbuf, name="dkv")
            if empty:
                nisa.memset(dst=out, value=0.0)
            else:
                _rows_op(lambda o, a, s=s, e=engine: _scaled(o, a, s, e), out, ps, kw)
            store_rows(dst, out, k0, kw, 0, d)
            continue
        acc = accs[i]
        t0 = k0 // K_TILE
        if empty and first_head:
            nisa.memset(dst=acc[:, t0 : t0 + n_t, :], value=0.0)
        elif not empty and first_head:
            _rows_op(lambda o, a, s=s, e=engine: _scaled(o, a, s, e), acc, ps, kw, t0)
        elif not empty:
            _rows_op(lambda o, a, s=s: nisa.scalar_tensor_tensor(
                dst=o, data=a, op0=nl.multiply, operand0=s, op1=nl.add, operand1=o),
                acc, ps, kw, t0)


def _scaled(dst, src, s: float, engine) -> None:
    """dst = s * src (with a cast) on VectorE or ScalarE."""
    if engine == nisa.engine.scalar:
        if s == 1.0:
            scalar_copy(dst, src)
        else:
            nisa.activation(dst=dst, op=nl.copy, data=src, scale=s)
    elif s == 1.0:
        nisa.tensor_copy(dst=dst, src=src)
    else:
        nisa.tensor_scalar(dst=dst, data=src, op0=nl.multiply, operand0=s)
