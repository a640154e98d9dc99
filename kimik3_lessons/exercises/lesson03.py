"""Lesson 03's exercises: the chunked form as a loop over chunks, the states every chunk starts from (one
cumsum), and the intra-chunk scores as the first Triton kernel stores them."""

import random

import torch

from kimik3_lessons import chunk_kernels, contract, linear_attention
from kimik3_lessons.exercises import (
    Watch,
    Wrong,
    attempt,
    exercise,
    expect_close,
    expect_pair,
    expect_tensor,
    hint,
    known_mistake,
    part,
)

F64 = torch.float64
# The module's own forms, each computing the outputs and states these exercises build another way.
FORMS = ("linear_attention.recurrent", "linear_attention.parallel", "linear_attention.chunked",
         "linear_attention.triton_chunked", "linear_attention.normalized",
         "linear_attention.linear_attention_step")


def _features(*shape):
    """Random positive features phi(x) = elu(x) + 1, as the layers feed the forms."""
    return linear_attention.elu_feature_map(torch.randn(*shape, dtype=F64))


@exercise("03.1", "chunked_loop", "the chunked form as a loop over chunks", difficulty=2,
          parts=("o", "the final state"), forbid=FORMS)
def check_chunked_loop(chunked_loop):
    B, H, K, V = 2, 3, 8, 6
    C = random.choice([4, 8, 16])
    T = random.randint(2 * C + 1, 4 * C - 1)              # T is not a multiple of C: the last chunk is padded
    q, k = (_features(B, H, T, K) for _ in range(2))
    v, S0 = torch.randn(B, H, T, V, dtype=F64), torch.randn(B, H, K, V, dtype=F64)
    o_ref, S_ref = linear_attention.recurrent(q, k, v, initial_state=S0)
    out = attempt(chunked_loop, q.clone(), k.clone(), v.clone(), C, S0.clone())
    o, S = expect_pair("a pair (o, S_T)", out)
    with part("o"):
        err_o = expect_close("o", o_ref, o, hint=hint("the chunk's own tokens need tril(Q_n K_n^T) V_n, and "
                                                      "the earlier chunks Q_n S with S *before* this chunk's "
                                                      "update."))
    with part("the final state"):
        err_S = expect_close("the final state", S_ref, S, hint=hint("S <- S + K_n^T V_n after every chunk, "
                                                                    "starting from initial_state."))
    return (f"T = {T}, chunks of {C}: outputs and final state equal the recurrence (relative errors "
            f"{err_o:.0e}, {err_S:.0e})")


def _chunk_state_inputs(B, H, K, V, C, N):
    T = random.randint((N - 1) * C + 1, N * C - 1)          # never a multiple of C: the last chunk is padded
    return _features(B, H, T, K), torch.randn(B, H, T, V, dtype=F64), torch.randn(B, H, K, V, dtype=F64)


def _reference_chunk_states(k, v, C, S0):
    """The recurrence's state after the first n*C tokens, for every chunk n."""
    N = -(-k.shape[2] // C)
    return torch.stack([linear_attention.recurrent(k[:, :, :n * C], k[:, :, :n * C], v[:, :, :n * C],
                                                   initial_state=S0)[1] if n else S0
                        for n in range(N)], dim=2)


@exercise("03.2", "chunk_states", "the state every chunk starts from, by one cumsum", difficulty=1,
          parts=("the states", "no loop over chunks"), forbid=FORMS)
def check_chunk_states(chunk_states):
    B, H, K, V = 2, 3, 7, 5
    how = hint("the chunk writes K_n^T V_n for all chunks at once (split_chunks), then torch.cat([S_0, "
               "writes]).cumsum over the chunk dimension, without its last entry.")
    runs = []
    # Two chunk sizes, and twice the chunks: a loop over chunks launches more operations for more chunks.
    for C, N in ((random.choice([4, 8]), random.randint(4, 6)), (16, random.randint(8, 10))):
        k, v, S0 = _chunk_state_inputs(B, H, K, V, C, N)
        ref = _reference_chunk_states(k, v, C, S0)
        with Watch() as watch:
            out = attempt(chunk_states, k.clone(), v.clone(), C, S0.clone())
        expect_tensor(f"the states (chunks of {C})", out, (B, H, N, K, V), dtype=F64)
        writes = contract.split_chunks(k, C).mT @ contract.split_chunks(v, C)
        known = [(hint("chunk n's entry includes chunk n's own write K_n^T V_n: that is the state *after* "
                       "the chunk. The output of chunk n needs the state it starts from, S_n = S_0 + the "
                       "writes of chunks 0..n-1 (an exclusive prefix sum: put S_0 first, then drop the last "
                       "entry)"),
                  S0[:, :, None] + writes.cumsum(2)),
                 (hint("the initial state is missing: S_0 = initial_state, and every later S_n starts from "
                       "it too"), ref - S0[:, :, None]),
                 (hint("these are the chunks' own writes K_n^T V_n, not yet summed over the chunks before"),
                  writes)]
        err = None
        with part("the states"):
            known_mistake(f"the state S_n (chunks of {C})", ref, out, known)
            err = expect_close(f"the states (chunks of {C}, T = {k.shape[2]})", ref, out, row_dim=2, hint=how)
        runs.append((C, N, watch.num_ops, err))
    (C1, N1, ops1, err1), (C2, N2, ops2, err2) = runs
    with part("no loop over chunks", needs=("the states",)):
        if ops2 > ops1:
            raise Wrong(f"your function launched {ops1} operations for {N1} chunks and {ops2} for {N2}: the "
                        "count grows with the number of chunks, so it loops over them. The exercise asks for "
                        "no loop", hint=how)
    return (f"{N1} chunks of {C1} and {N2} of {C2}: every S_n equals the recurrence's state (relative errors "
            f"{err1:.0e}, {err2:.0e}), with {ops2} operations whatever the number of chunks")


def kernel_scores(q, k, C):
    """A_qk as `linear_attention_intra_chunk_kernel` writes it, [B, H, T, C] float32: the kernel itself, run
    through the launcher's own `chunk_kernels.launch` (compiled on a GPU, interpreted on a CPU)."""
    B, H, T, K = q.shape
    device = "cpu" if contract.interpreted() else "cuda"
    q32, k32 = (x.to(device, torch.float32).contiguous() for x in (q, k))
    a_qk = q32.new_zeros(B, H, T, C)
    (_, kernel, grid, constexprs, options), *_ = chunk_kernels.launches(
        linear_attention.linear_attention_intra_chunk_kernel, T, K, K, C, B * H, delta=False, decay=None,
        has_s0=False)
    chunk_kernels.launch(kernel, grid, dict(q=q32, k=k32, a_qk=a_qk), options, T=T, K=K, **constexprs)
    return a_qk.cpu()


@exercise("03.3", "intra_chunk_scores", "the intra-chunk scores, as the first kernel stores them",
          difficulty=2, forbid=FORMS + ("linear_attention.linear_attention_intra_chunk_kernel",
                                        "chunk_kernels.launch", "chunk_kernels.launch_chunked"))
def check_intra_chunk_scores(intra_chunk_scores):
    B, H, K, C = 1, 2, random.choice([12, 20]), random.choice([16, 32])
    T = random.randint(2 * C + 1, 3 * C - 1)              # the last chunk is partial
    q, k = _features(B, H, T, K), _features(B, H, T, K)
    ref = kernel_scores(q, k, C).double()
    out = attempt(intra_chunk_scores, q.clone(), k.clone(), C)
    expect_tensor("A_qk", out, (B, H, T, C))
    scores = contract.split_chunks(q, C) @ contract.split_chunks(k, C).mT    # [B, H, N, C, C]
    as_rows = lambda A: contract.merge_chunks(A, T)                                          # noqa: E731
    known = [(hint("the diagonal is missing (tril(-1)): a token sees itself, q_t . k_t belongs to its own "
                   "output"), as_rows(scores.tril(-1))),
             (hint("nothing is masked: row t of a chunk may only see the keys up to t (tril), never later "
                   "ones"),
              as_rows(scores)),
             (hint("rows and columns are swapped: row t holds q_t . k_j (query t against key j), not k_t . "
                   "q_j"), as_rows(scores.mT.tril()))]
    known_mistake("A_qk", ref, out, known, rtol=1e-5)
    err = expect_close("A_qk", ref, out, rtol=1e-5,
                       hint=hint("split q and k into chunks, tril(Q_n K_n^T) per chunk, then merge_chunks "
                                 "back to [B, H, T, C]: row t holds its scores against the C keys of its own "
                                 "chunk."))
    return (f"equals linear_attention_intra_chunk_kernel's A_qk at T = {T}, K = {K}, C = {C} (relative error "
            f"{err:.0e}: float32 kernel)")
