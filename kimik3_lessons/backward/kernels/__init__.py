"""The backward pass as Triton kernels: the steps of `chunked.chunked_backward`, kernel by kernel.

The launcher (`triton_chunked_backward`) first recomputes the forward's factors and states with the
forward's own kernels (the mixer's intra-chunk kernel and `chunk_kernels.chunk_scan_kernel`: a training
step keeps only the inputs), then runs the four launches of `backward_launches`:

  3'. `chunk_output_backward_kernel`, shared by the four mixers, one program per (block of BR rows, head):
      the backward of O_n = Qd_n S_n + A_qk,n U'_n,
          dA_qk = tril(dO U'^T),   dQd = dO S_n^T,   du_new = A_qk^T dO (the walk adds Kd_n dS);
  2'. `chunk_walk_backward_kernel`, shared, one program per (block of BV value columns, head): the
      forward's walk run backward, chunk N-1 first, with dS [K, BV] on chip,
          dh_n = dS,   dU'_n = A_qk,n^T dO_n + Kd_n dS,   dS <- d_n * dS + Qd_n^T dO_n - W_n^T dU'_n;
  2'. `chunk_state_grad_kernel`, shared, one program per (block of BR rows, head): what the states give
      each chunk,
          dW = -dU' S_n^T,   dKd = U' dh_n^T,   dd = rowsum(S_n * dh_n);
  1'. the mixer's *intra-chunk backward kernel* (`BACKWARD_KERNELS`), one program per (chunk, head): the
      gradients of the factors back into q, k, v, [g,] [beta], through the WY form and the decay.
Then the launcher turns dG into dg (a reverse cumulative sum inside each chunk, one PyTorch line, as the
forward's cumsum is).

The kernels keep the rules written where `chunk_kernels` begins (names, argument groups, loops), and:
  - every product over a chunk's rows is thin: a [C, C] matrix (L_inv, dA, dA_qk) multiplies a block of
    BR rows by reading the matrix back from memory one [BR, BR] block at a time (`chunk_product_rows`),
    so no thread holds a [C, C] tile;
  - the gradient through L_inv = (I + A)^{-1} needs no [C, C] x [C, C] product: dA = -(dk_beta W^T +
    dv_beta U^T) (`chunked.wy_backward`, and `wy_backward` here);
  - KDA's per-channel pairs are taken through one reference row per block of BR rows, the [BR, BR]
    diagonal blocks row by row, exactly (`decayed_product_rows`).

The tensors, by the names the kernels give them ([B*H, ...] per head, contiguous, float32):
    the forward's  a_qk, l_inv [T, C]; w, qd, kd [T, K]; u, u_new [T, V]; decay [N, K]; h [N, K, V]; g_cum
    given          do [T, V]; ds_t [K, V] (the gradient of the final state)
    the walk       dh [N, K, V] (the gradient of S_{n+1}); du_new [T, V]; ds0 [K, V]
    the states     dqd, dw, dkd [T, K]; da_qk [T, C]; ddecay [N, K]
    intra-chunk    da [T, C] (dA, strictly lower); dq, dk [T, K]; dv [T, V]; dbeta [T]; dg_cum [N*C] or
                   [N*C, K] (dG, before the reverse cumsum)

The package, by job; every name is read from it (`kernels.chunk_product_rows`, `kernels.BACKWARD_KERNELS`):
  - `backward.kernels.device`: the device functions (`load_transposed`, `chunk_product_rows`,
    `decayed_product_rows`);
  - `backward.kernels.shared`: the three kernels the four mixers share (steps 3' and 2');
  - `backward.kernels.intra`: step 1' without a decay: the WY form's backward (`wy_backward`), linear
    attention's and DeltaNet's intra-chunk backward kernels;
  - `backward.kernels.intra_decay`: step 1' with a decay: Gated DeltaNet's and KDA's;
  - `backward.kernels.launcher`: the launcher (`triton_chunked_backward`), its plan (`backward_launches`),
    `BACKWARD_KERNELS`, `READ_ONLY_UNDER`, `SLICE` and `LAUNCH`.
"""

from kimik3_lessons.backward.kernels.device import chunk_product_rows, decayed_product_rows, load_transposed
from kimik3_lessons.backward.kernels.intra import (
    deltanet_intra_backward_kernel,
    linear_attention_intra_backward_kernel,
    wy_backward,
)
from kimik3_lessons.backward.kernels.intra_decay import (
    gated_deltanet_intra_backward_kernel,
    kda_intra_backward_kernel,
)
from kimik3_lessons.backward.kernels.launcher import (
    BACKWARD_KERNELS,
    LAUNCH,
    READ_ONLY_UNDER,
    SLICE,
    backward_launches,
    triton_chunked_backward,
)
from kimik3_lessons.backward.kernels.shared import (
    chunk_output_backward_kernel,
    chunk_state_grad_kernel,
    chunk_walk_backward_kernel,
)

__all__ = ["BACKWARD_KERNELS", "LAUNCH", "READ_ONLY_UNDER", "SLICE", "backward_launches",
           "chunk_output_backward_kernel", "chunk_product_rows", "chunk_state_grad_kernel",
           "chunk_walk_backward_kernel", "decayed_product_rows", "deltanet_intra_backward_kernel",
           "gated_deltanet_intra_backward_kernel", "kda_intra_backward_kernel",
           "linear_attention_intra_backward_kernel", "load_transposed", "triton_chunked_backward",
           "wy_backward"]
