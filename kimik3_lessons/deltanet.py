"""Lesson 05: DeltaNet — the delta rule, its recurrence, its chunkwise (WY/UT) form and a Triton kernel.

The delta rule reads what key k already holds, k S, and writes only the difference:
    u_t = beta_t (v_t - k_t S_{t-1})        S_t = S_{t-1} + k_t^T u_t        o_t = q_t S_t
State S is [K, V] per head; q, k are [B, H, T, K], v is [B, H, T, V], beta is [B, H, T].
No scaling or normalization happens inside: layers L2-normalize q and k themselves.

Three forms, one answer (DESIGN.md contract), each returning (o, final_state):
- `recurrent`       the definition, one token at a time (`delta_rule_step`);
- `chunked`         the WY/UT chunk form: per chunk of C rows,
                        A = strict_tril(diag(b) K K^T),  T = (I + A)^{-1}  (`ut_transform`),
                        W = T diag(b) K,  U = T diag(b) V  (`wy_representation`),
                        U' = U - W S,  O = Q S + tril(Q K^T) U',  S <- S + K^T U';
- `triton_chunked`  the same chunk form as one Triton program per (batch, head) holding S on chip.
T comes from forward substitution, row by row (`forward_substitution`) or by blocks of 16 rows
(`ut_transform`). `householder_product` multiplies the generalized Householder factors of a chunk, the
matrix that the WY representation I - K^T W stands for. `recurrent_flops` and `chunked_flops` count the
matrix-product FLOPs of the two PyTorch forms.
"""

import torch
import triton
import triton.language as tl

from kimik3_lessons import contract


def delta_rule_step(S, q_t, k_t, v_t, beta_t):
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
    B, H, T, K, V = contract.check_inputs(q, k, v, beta=beta, initial_state=initial_state,
                                            delta=True)
    dtype, out_dtype = contract.compute_dtype(q), v.dtype
    q, k, v, beta = (x.to(dtype) for x in (q, k, v, beta))
    S = q.new_zeros(B, H, K, V) if initial_state is None else initial_state.to(dtype)
    o = torch.empty(B, H, T, V, dtype=dtype, device=q.device)
    for t in range(T):
        o[:, :, t], S = delta_rule_step(S, q[:, :, t], k[:, :, t], v[:, :, t], beta[:, :, t])
    return o.to(out_dtype), S


def forward_substitution(A):
    """(I + A)^{-1} for a strictly lower-triangular A [..., C, C], one row at a time.

    (I + A) T = I gives, row by row, T_i = e_i - A_i T: row i of T needs only the rows above it,
    T_i = e_i - A[i, :i] T[:i]. Each of the C - 1 steps is one batched product over all leading dims;
    rows are appended, never written in place, so autograd can differentiate through it.
    """
    C = A.shape[-1]
    I = torch.eye(C, dtype=A.dtype, device=A.device).expand(A.shape)
    T = I[..., :1, :]
    for i in range(1, C):  # row i = [-A[i, :i] T[:i, :i], then e_i from column i on]
        row = torch.cat([-(A[..., i:i + 1, :i] @ T[..., :, :i]), I[..., i:i + 1, i:]], dim=-1)
        T = torch.cat([T, row], dim=-2)
    return T


def ut_transform(A, block=16):
    """T = (I + A)^{-1} for a strictly lower-triangular A [..., C, C]: forward substitution by blocks of rows.

    The same substitution as `forward_substitution`, with blocks of b = 16 rows in place of single rows:
      1. the diagonal blocks T_jj = (I + A_jj)^{-1}, all at once, by `forward_substitution` (b - 1 steps);
      2. block row j from the finished rows above it:  T_{j,<j} = -T_jj A_{j,<j} T_{<j,<j}  (one step each).
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
    T_diag = forward_substitution(A_diag)
    T = T_diag[..., 0, :, :]                                           # the finished rows, [..., jb, jb]
    for j in range(1, n):
        rows = slice(j * block, (j + 1) * block)
        left = -T_diag[..., j, :, :] @ (A[..., rows, :j * block] @ T)   # T_{j,<j} = -T_jj A_{j,<j} T_{<j,<j}
        T = torch.cat([torch.cat([T, T.new_zeros(*T.shape[:-1], block)], dim=-1),
                       torch.cat([left, T_diag[..., j, :, :]], dim=-1)], dim=-2)
    return T[..., :C, :C]


def householder_product(k, beta):
    """P = H_C ... H_2 H_1 with H_t = I - beta_t k_t^T k_t: what one chunk does to the state it inherits.

    The delta rule is S_t = H_t S_{t-1} + beta_t k_t^T v_t, so a chunk maps S to P S + (new writes).
    k [..., C, K], beta [..., C] -> P [..., K, K]. One factor at a time: H_t P = P - beta_t k_t^T (k_t P).
    """
    K = k.shape[-1]
    P = torch.eye(K, dtype=k.dtype, device=k.device).expand(*k.shape[:-2], K, K)
    for t in range(k.shape[-2]):
        k_t = k[..., t, None, :]
        P = P - beta[..., t, None, None] * k_t.transpose(-1, -2) @ (k_t @ P)
    return P


def wy_representation(k, v, beta):
    """The WY/UT form of a chunk: W = T diag(b) K and U = T diag(b) V, with T = (I + A)^{-1} and
    A = strict_tril(diag(b) K K^T). Then the chunk's Householder product is I - K^T W.

    k [..., C, K], v [..., C, V], beta [..., C] -> W [..., C, K], U [..., C, V]. The leading dims can
    hold every chunk of every head, so all of them are transformed at once.
    """
    k_beta = beta[..., None] * k
    A = torch.tril(k_beta @ k.transpose(-1, -2), diagonal=-1)
    T = ut_transform(A)
    return T @ k_beta, T @ (beta[..., None] * v)


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
        S = S + K[:, :, n].transpose(-1, -2) @ U_new[-1]
    return torch.stack(S_n, dim=2), torch.stack(U_new, dim=2), S


def chunked(q, k, v, beta, chunk_size=64, initial_state=None):
    """The chunkwise-parallel form. Returns (o [B, H, T, V] in v's dtype, S [B, H, K, V]).

    W and U come from `wy_representation` for all chunks and heads at once. Only the state pass is
    sequential (`chunk_state_scan`): U'_n = U_n - W_n S_n, S_{n+1} = S_n + K_n^T U'_n. Then every
    chunk's output comes at once:  O_n = Q_n S_n + tril(Q_n K_n^T) U'_n.
    chunk_size 1 is the recurrence; chunk_size >= T is one chunk. T is zero-padded to a multiple of C.
    """
    B, H, T, K, V = contract.check_inputs(q, k, v, beta=beta, initial_state=initial_state,
                                            delta=True)
    contract.check_chunk_size(chunk_size)
    dtype, out_dtype = contract.compute_dtype(q), v.dtype
    q, k, v, beta = (contract.split_chunks(x.to(dtype), chunk_size) for x in (q, k, v, beta))
    W, U = wy_representation(k, v, beta)
    S = q.new_zeros(B, H, K, V) if initial_state is None else initial_state.to(dtype)
    S_n, U_new, S = chunk_state_scan(W, U, k, S)
    o = q @ S_n + torch.tril(q @ k.transpose(-1, -2)) @ U_new
    return contract.merge_chunks(o, T).to(out_dtype), S


def recurrent_flops(seq_len, head_dim):
    """FLOPs of `recurrent` per head: 6 L d^2 (K = V = d). Matrix products only, a multiply-add counts 2:
    per token the read-before-write k S, the write k^T u and the read q S cost 2 d^2 each."""
    return 6 * seq_len * head_dim**2


def ut_transform_flops(C, block=16):
    """FLOPs of `ut_transform` on one C x C matrix: sum_i 2 i^2 for the rows of each diagonal block, then
    2 b (jb)^2 + 2 b^2 (jb) for block row j (C is padded up to n blocks of b)."""
    if C <= block:
        return (C - 1) * C * (2 * C - 1) // 3
    n = -(-C // block)
    rows = sum(2 * block * (j * block) ** 2 + 2 * block**2 * (j * block) for j in range(1, n))
    return n * ut_transform_flops(block, block) + rows


def chunked_flops(seq_len, head_dim, chunk_size):
    """FLOPs of `chunked` per head: {"state", "wy", "intra", "total"}. Same convention as
    `recurrent_flops` (matrix products only, [m, n] @ [n, p] = 2 m n p, K = V = d), over the padded
    length L = N C. Per chunk:
        state  W S, K^T U', Q S                    6 C d^2   (in all 6 L d^2: the recurrence's own count)
        wy     A = (bK) K^T, W = T bK, U = T bV     6 C^2 d,  plus `ut_transform` (about 2 C^3 / 3)
        intra  Q K^T and tril(Q K^T) U'             4 C^2 d
    """
    contract.check_chunk_size(chunk_size)
    C, d = chunk_size, head_dim
    N = -(-seq_len // C)
    flops = {"state": N * 6 * C * d**2,
             "wy": N * (6 * C**2 * d + ut_transform_flops(C)),
             "intra": N * 4 * C**2 * d}
    flops["total"] = sum(flops.values())
    return flops


@triton.jit
def delta_rule_chunk_kernel(q, k, v, beta, o, S_in, S_out, seq_len,
                            K: tl.constexpr, V: tl.constexpr, C: tl.constexpr,
                            BK: tl.constexpr, BV: tl.constexpr, HAS_INITIAL_STATE: tl.constexpr):
    """One program per (batch, head) walks its chunks with the state S [K, V] held on chip.

    Per chunk (rows Q, K, V, b; rows past the end of the sequence load as zeros and write nothing):
        A  = strict_tril(diag(b) K K^T)
        T  = (I + A)^{-1}           forward substitution: T_i = e_i - A_i T, row after row
        W  = T diag(b) K            U = T diag(b) V
        U' = U - W S                O = Q S + tril(Q K^T) U'          S <- S + K^T U'
    q, k [B*H, seq_len, K], v, o [B*H, seq_len, V], beta [B*H, seq_len], S_in, S_out [B*H, K, V]; fp32.
    """
    bh = tl.program_id(0).to(tl.int64)
    q, k, beta = q + bh * seq_len * K, k + bh * seq_len * K, beta + bh * seq_len
    v, o = v + bh * seq_len * V, o + bh * seq_len * V
    rows, ck, cv = tl.arange(0, C), tl.arange(0, BK), tl.arange(0, BV)
    state = ck[:, None] * V + cv[None, :]
    state_mask = (ck[:, None] < K) & (cv[None, :] < V)
    if HAS_INITIAL_STATE:
        S = tl.load(S_in + bh * K * V + state, mask=state_mask, other=0.0)
    else:
        S = tl.zeros([BK, BV], dtype=tl.float32)
    eye = tl.where(rows[:, None] == rows[None, :], 1.0, 0.0)
    for start in range(0, seq_len, C):
        t = start + rows
        k_mask = (t[:, None] < seq_len) & (ck[None, :] < K)
        v_mask = (t[:, None] < seq_len) & (cv[None, :] < V)
        Kc = tl.load(k + t[:, None] * K + ck[None, :], mask=k_mask, other=0.0)
        Qc = tl.load(q + t[:, None] * K + ck[None, :], mask=k_mask, other=0.0)
        Vc = tl.load(v + t[:, None] * V + cv[None, :], mask=v_mask, other=0.0)
        b = tl.load(beta + t, mask=t < seq_len, other=0.0)
        Kb = b[:, None] * Kc
        # A = strict_tril(diag(b) K K^T)
        A = tl.where(rows[:, None] > rows[None, :], tl.dot(Kb, tl.trans(Kc), input_precision="ieee"), 0.0)
        # T = (I + A)^{-1} by forward substitution: row i of T, still e_i, becomes e_i - A_i T. A_i is zero
        # from column i on, so only the finished rows above count. (A with all rows but i masked) @ T is A_i T
        # in row i and zero elsewhere: one tl.dot per row, no reduction (fast in the interpreter too).
        T = eye
        for i in range(1, C):
            T -= tl.dot(tl.where(rows[:, None] == i, A, 0.0), T, input_precision="ieee")
        W = tl.dot(T, Kb, input_precision="ieee")
        U = tl.dot(T, b[:, None] * Vc, input_precision="ieee")
        # U' = U - W S: what each row still has to write once the inherited state has answered
        U = U - tl.dot(W, S, input_precision="ieee")
        QK = tl.where(rows[:, None] >= rows[None, :], tl.dot(Qc, tl.trans(Kc), input_precision="ieee"), 0.0)
        Oc = tl.dot(Qc, S, input_precision="ieee") + tl.dot(QK, U, input_precision="ieee")
        tl.store(o + t[:, None] * V + cv[None, :], Oc, mask=v_mask)
        S += tl.dot(tl.trans(Kc), U, input_precision="ieee")
    tl.store(S_out + bh * K * V + state, S, mask=state_mask)


def triton_chunked(q, k, v, beta, chunk_size=64, initial_state=None):
    """The chunk form as a Triton kernel (forward). Returns (o in v's dtype, S [B, H, K, V] in float32).

    Computes in float32 whatever the input dtype. chunk_size is a power of two >= 16 (tl.dot's smallest
    tile); head dims are padded up to a power of two >= 16 inside the kernel.
    """
    B, H, T, K, V = contract.check_inputs(q, k, v, beta=beta, initial_state=initial_state,
                                            delta=True)
    contract.check_triton_options(chunk_size)
    contract.check_triton_inputs(q=q, k=k, v=v, beta=beta, initial_state=initial_state)
    out_dtype = v.dtype
    q, k, v, beta = (x.float().contiguous() for x in (q, k, v, beta))
    o = torch.empty(B, H, T, V, dtype=torch.float32, device=q.device)
    S = torch.empty(B, H, K, V, dtype=torch.float32, device=q.device)
    S0 = S if initial_state is None else initial_state.float().contiguous()
    delta_rule_chunk_kernel[(B * H,)](
        q, k, v, beta, o, S0, S, T, K=K, V=V, C=chunk_size,
        BK=max(16, triton.next_power_of_2(K)), BV=max(16, triton.next_power_of_2(V)),
        HAS_INITIAL_STATE=initial_state is not None)
    return o.to(out_dtype), S
