"""Lesson 05: DeltaNet — the delta rule, its recurrence, its chunkwise (WY/UT) form and a Triton kernel.

The delta rule reads what key k already holds, k S, and writes only the difference:
    u_t = beta_t (v_t - k_t S_{t-1})        S_t = S_{t-1} + k_t^T u_t        o_t = q_t S_t
State S is [K, V] per head; q, k are [B, H, T, K], v is [B, H, T, V], beta is [B, H, T].
No scaling or normalization happens inside: layers L2-normalize q and k themselves.

Three forms, one answer (the contract of `contract.py`), each returning (o, final_state):
- `recurrent`       the definition, one token at a time (`deltanet_step`);
- `chunked`         the WY/UT chunk form: per chunk of C rows,
                        A = strict_tril(diag(beta) K K^T),  L_inv = (I + A)^{-1}  (the papers' T),
                        W = L_inv diag(beta) K,  U = L_inv diag(beta) V  (`wy_representation`, given A:
                        lessons 06 and 07 reuse it with their decayed A and keys),
                        U' = U - W S,  O = Q S + tril(Q K^T) U',  S <- S + K^T U';
- `triton_chunked`  the same three steps as Triton kernels: `deltanet_intra_chunk_kernel` (A, L_inv, W, U
                    for every chunk in parallel), then the scan over chunks and the outputs that every
                    mixer shares (`chunk_kernels.chunk_scan_kernel`, `chunk_kernels.chunk_output_kernel`),
                    whose switch DELTA adds to lesson 03's scan only U' = U - W S.
L_inv = (I + A)^{-1} comes from forward substitution: row by row (`forward_substitution`, the definition),
by blocks of 16 rows (`blocked_forward_substitution`, the PyTorch form: fewer, larger steps), and row by row
on a tile in the kernel (`forward_substitution_tile`: a masked reduction per row, no matrix product).
`householder_product` multiplies the generalized Householder factors of a chunk, the matrix that the WY
representation I - K^T W stands for.
`recurrent_flops`, `chunked_flops` and the `*_flops` of the inversions count their FLOPs.
"""

import torch
import triton
import triton.language as tl

from kimik3_lessons import chunk_kernels, contract


def deltanet_step(S, q_t, k_t, v_t, beta_t):
    """One token of the delta rule (the decode step); returns (o_t, S_t).

        u_t = beta_t (v_t - k_t S)      S_t = S + k_t^T u_t      o_t = q_t S_t

    S [B, H, K, V]; q_t, k_t [B, H, K]; v_t [B, H, V]; beta_t [B, H].
    Gated DeltaNet and KDA reuse it: they decay S first and then take this same step.
    """
    u_t = beta_t[..., None] * (v_t - torch.einsum("bhk,bhkv->bhv", k_t, S))
    S = S + k_t[..., :, None] * u_t[..., None, :]
    o_t = torch.einsum("bhk,bhkv->bhv", q_t, S)
    return o_t, S


def recurrent(q, k, v, beta, initial_state=None):
    """The definition, one token at a time. Returns (o [B, H, T, V] in v's dtype, S [B, H, K, V]).

    Computes in float32 (float64 for float64 inputs); the final state stays in that precision.
    """
    out_dtype = v.dtype
    q, k, v, _, beta, S = contract.prepare(q, k, v, beta=beta, initial_state=initial_state, **MIXER.switches)
    o = q.new_empty(*v.shape)
    for t in range(q.shape[2]):
        o[:, :, t], S = deltanet_step(S, q[:, :, t], k[:, :, t], v[:, :, t], beta[:, :, t])
    return o.to(out_dtype), S


def forward_substitution(A):
    """(I + A)^{-1} for a strictly lower-triangular A [..., C, C], one row at a time.

    (I + A) L_inv = I gives, row by row, L_inv_i = e_i - A_i L_inv: row i needs only the rows above it,
    L_inv_i = e_i - A[i, :i] L_inv[:i]. Each of the C - 1 steps is one batched product over all leading
    dims; rows are appended, never written in place, so autograd can differentiate through it.
    """
    C = A.shape[-1]
    I = torch.eye(C, dtype=A.dtype, device=A.device).expand(A.shape)
    L_inv = I[..., :1, :]
    for i in range(1, C):  # row i = [-A[i, :i] L_inv[:i, :i], then e_i from column i on]
        row = torch.cat([-(A[..., i:i + 1, :i] @ L_inv[..., :, :i]), I[..., i:i + 1, i:]], dim=-1)
        L_inv = torch.cat([L_inv, row], dim=-2)
    return L_inv


def blocked_forward_substitution(A, block=16):
    """(I + A)^{-1} for a strictly lower-triangular A [..., C, C]: forward substitution by blocks of rows.

    The same substitution as `forward_substitution`, with blocks of b = 16 rows in place of single rows:
      1. the diagonal blocks L_jj = (I + A_jj)^{-1}, all at once, by `forward_substitution` (b - 1 steps);
      2. block row j from the finished rows above it:  L_{j,<j} = -L_jj A_{j,<j} L_{<j,<j}  (one step each).
    C = 64 takes 15 + 3 batched steps instead of 63, for about the same FLOPs. No general inverse is formed.
    """
    C = A.shape[-1]
    if C <= block:
        return forward_substitution(A)
    n = -(-C // block)
    pad = n * block - C  # zero rows and columns: (I + A) gains an identity block, T is unchanged above it
    A = torch.nn.functional.pad(A, (0, pad, 0, pad))
    A_blocks = A.unflatten(-1, (n, block)).unflatten(-3, (n, block))  # [..., n, b, n, b]
    A_diag = torch.diagonal(A_blocks, dim1=-4, dim2=-2).movedim(-1, -3)  # [..., n, b, b]
    L_diag = forward_substitution(A_diag)
    L_inv = L_diag[..., 0, :, :]                                       # the finished rows, [..., jb, jb]
    for j in range(1, n):
        rows = slice(j * block, (j + 1) * block)
        left = -L_diag[..., j, :, :] @ (A[..., rows, :j * block] @ L_inv)   # -L_jj A_{j,<j} L_{<j,<j}
        L_inv = torch.cat([torch.cat([L_inv, L_inv.new_zeros(*L_inv.shape[:-1], block)], dim=-1),
                           torch.cat([left, L_diag[..., j, :, :]], dim=-1)], dim=-2)
    return L_inv[..., :C, :C]


def householder_product(k, beta):
    """P = H_C ... H_2 H_1 with H_t = I - beta_t k_t^T k_t: what one chunk does to the state it inherits.

    The delta rule is S_t = H_t S_{t-1} + beta_t k_t^T v_t, so a chunk maps S to P S + (new writes).
    k [..., C, K], beta [..., C] -> P [..., K, K]. One factor at a time: H_t P = P - beta_t k_t^T (k_t P).
    """
    K = k.shape[-1]
    P = torch.eye(K, dtype=k.dtype, device=k.device).expand(*k.shape[:-2], K, K)
    for t in range(k.shape[-2]):
        k_t = k[..., t, None, :]
        P = P - beta[..., t, None, None] * k_t.mT @ (k_t @ P)
    return P


def wy_representation(A, k_beta, v_beta):
    """The WY/UT form of a chunk, given its A: W = L_inv diag(beta) K and U = L_inv diag(beta) V, with
    L_inv = (I + A)^{-1} (`blocked_forward_substitution`).

    A [..., C, C] strictly lower-triangular; k_beta = diag(beta) K [..., C, K], v_beta = diag(beta) V
    [..., C, V] -> W [..., C, K], U [..., C, V]. DeltaNet's A is strict_tril(diag(beta) K K^T), and then
    the chunk's Householder product is I - K^T W; gated DeltaNet and KDA pass theirs, with the decay inside
    A and in k_beta the keys decayed from the chunk's start. The leading dims can hold every chunk of
    every head: all are transformed at once.
    """
    L_inv = blocked_forward_substitution(A)
    return L_inv @ k_beta, L_inv @ v_beta


def chunk_state_scan(W, U, K, S, decay=None):
    """Carry the state across chunks: the only sequential part of the chunked form, one step per chunk.

        S_n     = the state chunk n inherits
        U'_n    = U_n - W_n S_n                    what the chunk still has to write, once S_n has answered
        S_{n+1} = decay_n * S_n + K_n^T U'_n       (decay = 1 here; lessons 06-07 pass exp(G_C))

    W, K [B, H, N, C, K]; U [B, H, N, C, V]; S [B, H, K, V], the state before the first chunk; decay None,
    or [B, H, N, 1] (one per head) or [B, H, N, K] (one per key channel) with K the keys decayed to the end
    of their chunk. Returns (S_n [B, H, N, K, V], U' [B, H, N, C, V], the state after the last chunk).
    """
    S_n, U_new = [], []
    for n in range(U.shape[2]):  # lists, not in-place writes, so autograd can train through the scan
        S_n.append(S)
        U_new.append(U[:, :, n] - W[:, :, n] @ S)
        S = S if decay is None else decay[:, :, n, :, None] * S
        S = S + K[:, :, n].mT @ U_new[-1]
    return torch.stack(S_n, dim=2), torch.stack(U_new, dim=2), S


def chunked(q, k, v, beta, chunk_size=64, initial_state=None):
    """The chunkwise-parallel form. Returns (o [B, H, T, V] in v's dtype, S [B, H, K, V]).

    A = strict_tril(diag(beta) K K^T), then W and U from `wy_representation`, for all chunks and heads at
    once. Only the state pass is sequential (`chunk_state_scan`): U'_n = U_n - W_n S_n,
    S_{n+1} = S_n + K_n^T U'_n. Then every chunk's output comes at once:
        O_n = Q_n S_n + tril(Q_n K_n^T) U'_n.
    chunk_size 1 is the recurrence; chunk_size >= T is one chunk. T is zero-padded to a multiple of C.
    """
    contract.check_chunk_size(chunk_size)
    T, out_dtype = q.shape[2], v.dtype
    q, k, v, _, beta, S = contract.prepare(q, k, v, beta=beta, initial_state=initial_state, **MIXER.switches)
    q, k, v, beta = (contract.split_chunks(x, chunk_size) for x in (q, k, v, beta))
    k_beta = beta[..., None] * k
    A = torch.tril(k_beta @ k.mT, diagonal=-1)
    W, U = wy_representation(A, k_beta, beta[..., None] * v)
    S_n, U_new, S = chunk_state_scan(W, U, k, S)
    O = q @ S_n + torch.tril(q @ k.mT) @ U_new
    return contract.merge_chunks(O, T).to(out_dtype), S


def recurrent_flops(seq_len, head_dim):
    """FLOPs of `recurrent` per head: 6 L d^2 (K = V = d). Matrix products only, a multiply-add counts 2:
    per token the read-before-write k S, the write k^T u and the read q S cost 2 d^2 each."""
    return 6 * seq_len * head_dim**2


def blocked_forward_substitution_flops(C, block=16):
    """FLOPs of `blocked_forward_substitution` on one C x C matrix: sum_i 2 i^2 for the rows of each
    diagonal block, then 2 b (jb)^2 + 2 b^2 (jb) for block row j (C is padded up to n blocks of b)."""
    if C <= block:
        return (C - 1) * C * (2 * C - 1) // 3
    n = -(-C // block)
    rows = sum(2 * block * (j * block) ** 2 + 2 * block**2 * (j * block) for j in range(1, n))
    return n * blocked_forward_substitution_flops(block, block) + rows


def forward_substitution_tile_flops(C):
    """FLOPs of `forward_substitution_tile` (the kernel's inverse) on one C x C tile: C - 1 rows, each
    A_i L_inv over the whole tile (C^2 multiply-adds, zeros included: a tile cannot skip them), so
    2 C^2 (C - 1), about 3 times `forward_substitution`'s (C - 1) C (2C - 1) / 3. (Computing each row with
    a C x C matrix product instead would cost 2 C^3 per row, 2 C^3 (C - 1) in all: C times more.)"""
    return 2 * C**2 * (C - 1)


def chunked_flops(seq_len, head_dim, chunk_size):
    """FLOPs of `chunked` per head: {"state", "wy", "intra", "total"}. Same convention as
    `recurrent_flops` (matrix products only, [m, n] @ [n, p] = 2 m n p, K = V = d), over the padded
    length L = N C. Per chunk:
        state  W S, K^T U', Q S                    6 C d^2   (in all 6 L d^2: the recurrence's own count)
        wy     A = (bK) K^T, W = L_inv bK, U = L_inv bV     6 C^2 d,  plus the inverse (about 2 C^3 / 3)
        intra  Q K^T and tril(Q K^T) U'             4 C^2 d
    """
    contract.check_chunk_size(chunk_size)
    C, d = chunk_size, head_dim
    N = -(-seq_len // C)
    flops = {"state": N * 6 * C * d**2,
             "wy": N * (6 * C**2 * d + blocked_forward_substitution_flops(C)),
             "intra": N * 4 * C**2 * d}
    flops["total"] = sum(flops.values())
    return flops


# ---------------------------------------------------------------------------------------------------
# The Triton kernel: lesson 03's intra-chunk kernel with the WY form added (the scan and output kernels are
# lesson 03's, with the delta rule's correction switched on).


@triton.jit
def forward_substitution_tile(
    # tiles
    A,          # [C, C], strictly lower-triangular
    # sizes
    C: tl.constexpr,
):
    """(I + A)^{-1} of a strictly lower-triangular tile A [C, C], row by row: `forward_substitution` on chip.

    Row i of the inverse is e_i - A_i L_inv, where A_i (row i of A) is zero from column i on, so only the
    rows above, already finished, count. A tile cannot be indexed, so row i is picked with a mask and a
    sum: each step is two masked reductions over the tile, C^2 multiply-adds, and the C - 1 steps cost
    C^3 in all, like forward substitution on paper, with no matrix product (no tensor cores needed).
    """
    r = tl.arange(0, C)
    L_inv = tl.where(r[:, None] == r[None, :], 1.0, 0.0)
    for i in range(1, C):
        A_i = tl.sum(tl.where(r[:, None] == i, A, 0.0), axis=0)                 # row i of A, [C]
        A_i_L_inv = tl.sum(A_i[:, None] * L_inv, axis=0)                        # A_i L_inv, [C]
        L_inv = tl.where(r[:, None] == i, L_inv - A_i_L_inv[None, :], L_inv)    # row i := e_i - A_i L_inv
    return L_inv


@triton.jit
def wy_slices(
    # pointers: inputs
    l_inv,      # [T, C]       L_inv of each chunk, as the intra-chunk kernel stored it
    beta,       # [T]
    g_cum,      # [N*C] ("head") or [N*C, width] ("channel"): G (read under DECAY)
    x,          # [T, width]   K (for W) or V (for U)
    # pointers: outputs
    out,        # [T, width]   W or U
    # indices
    n,          # the chunk
    # sizes
    T,
    width,
    C: tl.constexpr,
    SLICE: tl.constexpr,
    # switches
    DECAY: tl.constexpr,      # the mixer's decay: None, "head" or "channel"
    PRECISION: tl.constexpr,
    ACC: tl.constexpr,
):
    """out = L_inv diag(Beta) (D * X) for chunk n's rows of x [T, width] (W from K, U from V), written
    SLICE columns at a time: the WY form's products. D is the rows' decay from the chunk's start: 1 (DECAY
    None; g_cum is not read), e^{G_j} per row ("head", g_cum [N*C]) or e^{G_jd} per entry ("channel",
    g_cum [N*C, width]).

    L_inv is read back from l_inv [T, C], where the kernel stored it, SLICE columns at a time, each with
    the SLICE rows of X it multiplies, and the products accumulate (`acc=`): every product is SLICE deep.
    One [C, C] x [C, SLICE] product of the tile in registers would be C deep, and on the CUDA cores
    ("ieee") each thread would hold a row of L_inv and columns of X C long: most of its registers.
    """
    t = n * C + tl.arange(0, C)
    c0 = 0
    while c0 < width:           # a runtime bound: a while loop (the rules in `chunk_kernels`)
        cols = c0 + tl.arange(0, SLICE)
        OUT = tl.zeros([C, SLICE], dtype=ACC)
        for j0 in range(0, C, SLICE):
            j = n * C + j0 + tl.arange(0, SLICE)                       # rows j of X, columns j of L_inv
            Beta_j = tl.load(beta + j, mask=j < T, other=0.0)
            X_j = Beta_j[:, None] * chunk_kernels.load_rows(x=x, t=j, cols=cols, T=T, width=width)
            if DECAY == "head":
                X_j *= tl.exp(tl.load(g_cum + j))[:, None]
            if DECAY == "channel":
                X_j *= tl.exp(chunk_kernels.load_rows(x=g_cum, t=j, cols=cols, T=n * C + C, width=width))
            L_inv_j = chunk_kernels.load_rows(x=l_inv, t=t, cols=j0 + tl.arange(0, SLICE), T=T, width=C)
            OUT = chunk_kernels.mma(X=L_inv_j, Y=X_j, Acc=OUT, PRECISION=PRECISION)
        chunk_kernels.store_rows(x=out, t=t, cols=cols, X=OUT, T=T, width=width)
        c0 += SLICE


@triton.jit
def deltanet_intra_chunk_kernel(
    # pointers: inputs
    q,          # [B*H, T, K]
    k,          # [B*H, T, K]
    v,          # [B*H, T, V]
    beta,       # [B*H, T]
    # pointers: outputs
    a_qk,       # [B*H, T, C]  A_n = tril(Q_n K_n^T)
    l_inv,      # [B*H, T, C]  L_inv = (I + A)^{-1} (read back by `wy_slices`)
    w,          # [B*H, T, K]  W_n
    u,          # [B*H, T, V]  U_n
    # sizes
    T,
    K,
    V,
    C: tl.constexpr,
    SLICE: tl.constexpr,
    # switches
    PRECISION: tl.constexpr,
    ACC: tl.constexpr,
):
    """Everything chunk n of head bh needs from itself (rows t = nC ... nC + C - 1, zeros past T):

        A     = strict_tril(diag(Beta) K K^T)   A_qk = tril(Q K^T)
        L_inv = (I + A)^{-1}                     row by row (`forward_substitution_tile`)
        W     = L_inv diag(Beta) K               U = L_inv diag(Beta) V

    Lesson 03's intra-chunk kernel computes A_qk alone; this one adds the WY form. K and V are read in
    slices of SLICE columns (16), so every product is thin whatever the head size.
    """
    n = tl.program_id(0)
    bh = tl.program_id(1).to(tl.int64)
    r = tl.arange(0, C)
    t = n * C + r
    q += bh * T * K
    k += bh * T * K
    v += bh * T * V
    beta += bh * T
    a_qk += bh * T * C
    l_inv += bh * T * C
    w += bh * T * K
    u += bh * T * V
    Beta = tl.load(beta + t, mask=t < T, other=0.0)
    # K K^T
    A = chunk_kernels.dot_rows(x=k, y=k, t=t, T=T, K=K, C=C, SLICE=SLICE, PRECISION=PRECISION, ACC=ACC)
    L_inv = forward_substitution_tile(A=tl.where(r[:, None] > r[None, :], Beta[:, None] * A, 0.0), C=C)
    chunk_kernels.store_rows(x=l_inv, t=t, cols=r, X=L_inv, T=T, width=C)     # read back by `wy_slices`
    tl.debug_barrier()          # all of L_inv is in memory before any thread reads a slice of it back
    # W = L_inv diag(Beta) K, U = L_inv diag(Beta) V; without decay g_cum is never read (beta stands in)
    wy_slices(l_inv=l_inv, beta=beta, g_cum=beta, x=k, out=w, n=n, T=T, width=K, C=C, SLICE=SLICE, DECAY=None,
              PRECISION=PRECISION, ACC=ACC)
    wy_slices(l_inv=l_inv, beta=beta, g_cum=beta, x=v, out=u, n=n, T=T, width=V, C=C, SLICE=SLICE, DECAY=None,
              PRECISION=PRECISION, ACC=ACC)
    # Q K^T
    A_qk = chunk_kernels.dot_rows(x=q, y=k, t=t, T=T, K=K, C=C, SLICE=SLICE, PRECISION=PRECISION, ACC=ACC)
    chunk_kernels.store_rows(x=a_qk, t=t, cols=r, X=tl.where(r[:, None] >= r[None, :], A_qk, 0.0), T=T,
                             width=C)


def triton_chunked(q, k, v, beta, chunk_size=64, initial_state=None, input_precision="ieee"):
    """The chunked form as Triton kernels (forward). Returns (o in v's dtype, S [B, H, K, V] in float32).

    `deltanet_intra_chunk_kernel` for every chunk at once, then the shared scan over chunks with the delta
    correction U' = U - W S, then the outputs. Computes in float32 whatever the input dtype; chunk_size is
    a power of two >= 16 (tl.dot's smallest tile); input_precision "ieee" (exact float32) or "tf32"
    (tensor cores, sm_80+).
    """
    return chunk_kernels.launch_chunked(MIXER, q, k, v, beta=beta, chunk_size=chunk_size,
                                        initial_state=initial_state, input_precision=input_precision)


MIXER = contract.Mixer(name="deltanet", title="DeltaNet", lesson="05a", delta=True, decay=None,
                       recurrent=recurrent, chunked=chunked, triton_chunked=triton_chunked,
                       step=deltanet_step, intra_chunk_kernel=deltanet_intra_chunk_kernel)
