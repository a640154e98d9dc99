"""Lesson 03's exercises: the chunked form as an explicit loop over chunks."""

import torch

from kimik3_lessons import linear_attention
from kimik3_lessons.exercises import Wrong, attempt, exercise, expect_close, expect_tensor


@exercise("03.1", "chunked_loop", "the chunked form as a loop over chunks", difficulty=2)
def check_chunked_loop(chunked_loop):
    B, H, T, K, V, C = 2, 3, 45, 8, 6, 16                 # T is not a multiple of C: the last chunk is padded
    q, k = (linear_attention.elu_feature_map(torch.randn(B, H, T, K, dtype=torch.float64)) for _ in range(2))
    v, S0 = torch.randn(B, H, T, V, dtype=torch.float64), torch.randn(B, H, K, V, dtype=torch.float64)
    o_ref, S_ref = linear_attention.recurrent(q, k, v, initial_state=S0)
    out = attempt(chunked_loop, q, k, v, C, S0)
    if not isinstance(out, tuple) or len(out) != 2:
        raise Wrong(f"return a pair (o, S_T), got {type(out).__name__}")
    o, S = out
    expect_tensor("o", o, o_ref.shape)
    err_o = expect_close("o", o_ref, o, hint="Hint: the chunk's own tokens need tril(Q_n K_n^T) V_n, and the "
                         "earlier chunks Q_n S with S *before* this chunk's update.")
    err_S = expect_close("the final state", S_ref, S, hint="Hint: S <- S + K_n^T V_n after every chunk, "
                         "starting from initial_state.")
    return f"outputs and final state equal the recurrence (relative errors {err_o:.0e}, {err_S:.0e})"
