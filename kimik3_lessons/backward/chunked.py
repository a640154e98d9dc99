"""The backward pass of every mixer's chunked form, in PyTorch, written as the equations (no autograd).

The forward of every mixer is three steps (`chunk_kernels` says it for the kernels), for chunk n of C rows:

    1. factors   from chunk n alone: A_qk, W, U, Qd, Kd, d        (`*_factors`, one function per mixer)
    2. the walk  U'_n = U_n - W_n S_n,   S_{n+1} = d_n * S_n + Kd_n^T U'_n    (`deltanet.chunk_state_scan`)
    3. outputs   O_n = Qd_n S_n + A_qk,n U'_n

and its backward runs them in reverse, given dO (and dS_T, the gradient of the final state):

    3'. dA_qk = mask(dO U'^T),   dQd = dO S_n^T                                 (`outputs_backward`)
    2'. the walk in reverse, from dS = dS_T:                                     (`state_walk_backward`)
            dU'_n = A_qk,n^T dO_n + Kd_n dS,    dS <- d_n * dS + Qd_n^T dO_n - W_n^T dU'_n
        then dW = -dU' S_n^T,  dKd = U' dS_{n+1}^T,  dd = rowsum(S_n * dS_{n+1}),  dU = dU'
    1'. each mixer's factors backward: dq, dk, dv, [dg,] [dbeta]               (`*_factors_backward`)

The backward walk is the forward walk with Kd and W trading places: the forward writes Kd^T U' into S and
reads W S out of it; the backward writes Qd^T dO - W^T dU' into dS and reads Kd dS out of it.

Shapes: everything is split into chunks, [B, H, N, C, .] (`contract.split_chunks`); states [B, H, N, K, V].
`chunked_backward(mixer, ...)` puts the steps together for any mixer of the family; `states` lets a caller
pass the S_n its forward kept (the "store states" strategy) instead of recomputing them.
"""

from dataclasses import dataclass

import torch

from kimik3_lessons import contract, deltanet, gated_deltanet, kda, mixers


@dataclass
class Factors:
    """Step 1 for every chunk at once: what the walk and the outputs need from a chunk alone.

    A_qk [B, H, N, C, C] (lower triangle with the diagonal); W [B, H, N, C, K] (None without the delta
    rule); U [B, H, N, C, V]; Qd, Kd [B, H, N, C, K], the queries decayed from the chunk's start and the
    keys to its end (Q and K without decay); decay [B, H, N, K] or [B, H, N, 1] (one per head), d_n = exp(G_C)
    (None without decay). A mixer's factors backward returns a Factors of their gradients."""
    A_qk: torch.Tensor
    W: torch.Tensor | None
    U: torch.Tensor
    Qd: torch.Tensor
    Kd: torch.Tensor
    decay: torch.Tensor | None


# ---------------------------------------------------------------------------------------------------
# Steps 2' and 3': the walk and the outputs, the same for every mixer


def state_walk(F, S):
    """Step 2, the forward walk: (S_n [B, H, N, K, V], U' [B, H, N, C, V], S_N) from the factors and the
    state before the first chunk: lesson 05's `deltanet.chunk_state_scan`; without the delta rule and the
    decay, lesson 03's running sum, S_n = S_0 + K_0^T V_0 + ... + K_{n-1}^T V_{n-1}, and U' = U = V."""
    if F.W is None and F.decay is None:
        S_n = torch.cat([S[:, :, None], F.Kd.mT @ F.U], dim=2).cumsum(dim=2)        # S_0 ... S_N
        return S_n[:, :, :-1].clone(), F.U, S_n[:, :, -1].clone()    # views would pin all N + 1 states
    W = torch.zeros_like(F.Kd) if F.W is None else F.W
    return deltanet.chunk_state_scan(W, F.U, F.Kd, S, F.decay)


def outputs(F, S_n, U_new):
    """Step 3: O_n = Qd_n S_n + A_qk,n U'_n for every chunk at once."""
    return F.Qd @ S_n + F.A_qk @ U_new


def outputs_backward(F, S_n, U_new, dO):
    """Step 3': the gradients of O_n = Qd_n S_n + A_qk,n U'_n that need no walk:

        dA_qk = tril(dO U'^T)  (A_qk's entries: the lower triangle and the diagonal)     dQd = dO S_n^T

    (its gradients into S_n and U'_n, Qd^T dO and A_qk^T dO, feed the backward walk)."""
    return torch.tril(dO @ U_new.mT), dO @ S_n.mT


def state_walk_backward(F, dO, dS):
    """Step 2': the walk of `state_walk` run backward, chunk N-1 first, from dS = dS_T (the gradient of the
    final state; zeros when the loss does not use it):

        dU'_n = A_qk,n^T dO_n + Kd_n dS                 what chunk n's writes are asked for
        dS   <- d_n * dS + Qd_n^T dO_n - W_n^T dU'_n    the gradient of the state chunk n started from

    A_qk^T dO and Qd^T dO need no walk and are computed for every chunk at once; only the two lines above
    are sequential. Returns (dU' [B, H, N, C, V], dS_next [B, H, N, K, V]: the gradient of the state
    each chunk leaves, S_{n+1}, and dS_0, the gradient of the initial state)."""
    dU_local, dS_local = F.A_qk.mT @ dO, F.Qd.mT @ dO
    dU_new, dS_next = [], []
    for n in reversed(range(dO.shape[2])):   # lists, not in-place writes, as in the forward walk
        dS_next.append(dS)
        dU_new.append(dU_local[:, :, n] + F.Kd[:, :, n] @ dS)
        dS = dS if F.decay is None else F.decay[:, :, n, :, None] * dS
        dS = dS + dS_local[:, :, n]
        if F.W is not None:
            dS = dS - F.W[:, :, n].mT @ dU_new[-1]
    return torch.stack(dU_new[::-1], dim=2), torch.stack(dS_next[::-1], dim=2), dS


def factors_gradient(F, S_n, U_new, dO, dS):
    """Steps 3' and 2' together: the gradients of the factors (a Factors) and dS_0.

        dA_qk, dQd (step 3');  dU' and dS_{n+1} (step 2');
        dW = -dU' S_n^T,  dKd = U' dS_{n+1}^T,  dd = rowsum(S_n * dS_{n+1}) (summed over K: one d per head),
        dU = dU' (U' = U - W S_n)."""
    dA_qk, dQd = outputs_backward(F, S_n, U_new, dO)
    dU_new, dS_next, dS0 = state_walk_backward(F, dO, dS)
    dW = None if F.W is None else -dU_new @ S_n.mT
    ddecay = None if F.decay is None else (S_n * dS_next).sum(-1).sum_to_size(F.decay.shape)
    return Factors(A_qk=dA_qk, W=dW, U=dU_new, Qd=dQd, Kd=U_new @ dS_next.mT, decay=ddecay), dS0


# ---------------------------------------------------------------------------------------------------
# Through the WY form (lesson 05), and through the decay (lessons 06, 07a)


def wy_backward(L_inv, W, U, dW, dU):
    """The backward of the WY form W = L_inv k_beta, U = L_inv v_beta, L_inv = (I + A)^{-1}:

        dk_beta = L_inv^T dW        dv_beta = L_inv^T dU
        dA      = -(dk_beta W^T + dv_beta U^T), on A's entries (strictly lower)

    The gradient through the inverse, d(X^{-1}) = -X^{-1} dX X^{-1} read backward, is
    dA = -L_inv^T dL_inv L_inv^T with dL_inv = dW k_beta^T + dU v_beta^T; and since L_inv k_beta = W and
    L_inv v_beta = U, that is -(L_inv^T dW)(L_inv k_beta)^T - (L_inv^T dU)(L_inv v_beta)^T: no inverse and
    no [C, C] x [C, C] product, only the two products the WY form's own gradients need and two thin ones.
    Shapes [..., C, C], [..., C, K], [..., C, V]. Returns (dA, dk_beta, dv_beta)."""
    dk_beta, dv_beta = L_inv.mT @ dW, L_inv.mT @ dU
    return -torch.tril(dk_beta @ W.mT + dv_beta @ U.mT, -1), dk_beta, dv_beta


def pair_gradient(E):
    """dG from a matrix of pairwise factors exp(G_i - G_j): E_ij = (gradient of entry ij) * (entry ij),
    [..., C, C] -> [..., C]. Entry ij grows with G_i and shrinks with G_j, by itself times the same amount:
    dG_i += sum_j E_ij, dG_j -= sum_i E_ij. Only differences of G appear: no exp(-G), nothing to overflow."""
    return E.sum(-1) - E.sum(-2)


def reverse_cumsum(x, dim):
    """sum over i >= t along `dim`: the backward of G = cumsum(g) (dg_t = dG_t + dG_{t+1} + ... + dG_C)."""
    return x.flip(dim).cumsum(dim).flip(dim)


def decayed_product(P, Y, G):
    """Z_i = sum_{j <= i} P_ij exp(G_i - G_j) * Y_j: the per-channel decayed product, the backward's twin of
    `kda.decayed_scores` (which sums X_i exp(G_i - G_j) Y_j over channels; this sums over j, per channel).

    P [..., C, C] lower triangular; Y, G [..., C, K] with G non-increasing down the chunk; returns Z
    [..., C, K]. The same secondary chunking as `decayed_scores`: on the diagonal the factor is 1; every
    lower-left quadrant of a block, whose rows i all come after its columns j, goes through the block's
    reference row r (its upper half's last), exp(G_i - G_j) = exp(G_i - G_r) exp(G_r - G_j), both <= 1,
    so the quadrant is one matrix product, exp(G_i - G_r) * (P_quadrant (exp(G_r - G_j) * Y_j)).
    C is padded to a power of two inside."""
    C, K = Y.shape[-2:]
    n = 1 << (C - 1).bit_length()
    if n > C:  # zero rows and columns add nothing; repeating G's last row keeps every exponent <= 0
        P = torch.nn.functional.pad(P, (0, n - C, 0, n - C))
        Y = torch.cat([Y, Y.new_zeros(*Y.shape[:-2], n - C, K)], dim=-2)
        G = torch.cat([G, G[..., -1:, :].expand(*G.shape[:-2], n - C, K)], dim=-2)
    Z = P.diagonal(dim1=-2, dim2=-1)[..., None] * Y
    s = n
    while s > 1:
        h = s // 2
        Yb, Gb, Zb = (x.unflatten(-2, (n // s, s)) for x in (Y, G, Z))           # [..., n/s blocks, s, K]
        P_blocks = P.unflatten(-2, (n // s, s)).unflatten(-1, (n // s, s)).diagonal(dim1=-4, dim2=-2)
        quadrant = P_blocks.movedim(-1, -3)[..., h:, :h]                          # [..., n/s, h, h]
        G_r = Gb[..., h - 1:h, :]
        cols = Yb[..., :h, :] * (G_r - Gb[..., :h, :]).exp()                     # the columns, scaled to r
        Zb[..., h:, :] += (Gb[..., h:, :] - G_r).exp() * (quadrant @ cols)
        s = h
    return Z[..., :C, :]


def decayed_scores_backward(dP, X, Y, G):
    """The backward of P = decayed_scores(X, Y, G), P_ij = sum_d X_id Y_jd exp(G_id - G_jd) (i >= j):

        dX_i = sum_{j <= i} dP_ij exp(G_i - G_j) * Y_j        `decayed_product(dP, Y, G)`
        dY_j = sum_{i >= j} dP_ij exp(G_i - G_j) * X_i        the same product read backward in time
        dG   = X * dX - Y * dY                                 each term's own G_id and -G_jd

    dP [..., C, C] lower triangular; X, Y, G [..., C, K]. dY is `decayed_product` on the chunk reversed:
    with rows counted from the end, i >= j becomes j' <= i', and exp(G_i - G_j) = exp(H_j' - H_i') with
    H = -G reversed, again non-increasing. Returns (dX, dY, dG)."""
    dX = decayed_product(dP, Y, G)
    dY = decayed_product(dP.mT.flip(-2, -1), X.flip(-2), -G.flip(-2)).flip(-2)
    return dX, dY, X * dX - Y * dY


# ---------------------------------------------------------------------------------------------------
# Step 1 and 1', per mixer. Each `*_factors` returns (Factors, what its backward needs besides them); each
# `*_factors_backward(x, F, saved, dF)` returns {input name: gradient} for the chunked inputs x.


def linear_attention_factors(q, k, v):
    """A_qk = tril(Q K^T); U = V; Qd = Q, Kd = K; no W, no decay (lesson 03)."""
    return Factors(A_qk=torch.tril(q @ k.mT), W=None, U=v, Qd=q, Kd=k, decay=None), {}


def linear_attention_factors_backward(x, F, saved, dF):
    """dq = dA_qk K + dQd,  dk = dA_qk^T Q + dKd,  dv = dU."""
    q, k = x["q"], x["k"]
    return dict(q=dF.A_qk @ k + dF.Qd, k=dF.A_qk.mT @ q + dF.Kd, v=dF.U)


def deltanet_factors(q, k, v, beta):
    """A = strict_tril(k_beta K^T), L_inv = (I + A)^{-1}, W = L_inv k_beta, U = L_inv v_beta (lesson 05);
    A_qk = tril(Q K^T); Qd = Q, Kd = K."""
    k_beta, v_beta = beta[..., None] * k, beta[..., None] * v
    L_inv = deltanet.blocked_forward_substitution(torch.tril(k_beta @ k.mT, -1))
    F = Factors(A_qk=torch.tril(q @ k.mT), W=L_inv @ k_beta, U=L_inv @ v_beta, Qd=q, Kd=k, decay=None)
    return F, dict(L_inv=L_inv, k_beta=k_beta)


def deltanet_factors_backward(x, F, saved, dF):
    """Through the WY form (`wy_backward`), then A = strict_tril(k_beta K^T) and k_beta = beta K:

        dk_beta += dA K,   dk = dA^T k_beta + beta dk_beta + dA_qk^T Q + dKd,   dq = dA_qk K + dQd
        dv = beta dv_beta,   dbeta = rowsum(dk_beta * K) + rowsum(dv_beta * V)"""
    q, k, v, beta = x["q"], x["k"], x["v"], x["beta"]
    dA, dk_beta, dv_beta = wy_backward(saved["L_inv"], F.W, F.U, dF.W, dF.U)
    dk_beta = dk_beta + dA @ k
    dk = dA.mT @ saved["k_beta"] + beta[..., None] * dk_beta + dF.A_qk.mT @ q + dF.Kd
    dbeta = (dk_beta * k).sum(-1) + (dv_beta * v).sum(-1)
    return dict(q=dF.A_qk @ k + dF.Qd, k=dk, v=beta[..., None] * dv_beta, beta=dbeta)


def gated_deltanet_factors(q, k, v, g, beta):
    """Lesson 06, with G = cumsum(g) and Gamma_ij = exp(G_i - G_j) (`gated_deltanet.decay_mask`):
    M = strict_tril(K K^T * Gamma), A = diag(beta) M; k_beta = beta exp(G) K; A_qk = Q K^T * Gamma;
    Qd = exp(G) Q, Kd = exp(G_C - G) K, d = exp(G_C) (one per head: [B, H, N, 1])."""
    G = g.cumsum(-1)
    Gamma = gated_deltanet.decay_mask(G)
    M = torch.tril((k @ k.mT) * Gamma, -1)
    k_decayed = torch.exp(G)[..., None] * k
    k_beta, v_beta = beta[..., None] * k_decayed, beta[..., None] * v
    L_inv = deltanet.blocked_forward_substitution(beta[..., None] * M)
    G_C = G[..., -1:]
    F = Factors(A_qk=(q @ k.mT) * Gamma, W=L_inv @ k_beta, U=L_inv @ v_beta, Qd=torch.exp(G)[..., None] * q,
                Kd=torch.exp(G_C - G)[..., None] * k, decay=torch.exp(G_C))
    return F, dict(G=G, Gamma=Gamma, M=M, k_decayed=k_decayed, L_inv=L_inv, k_beta=k_beta)


def gated_deltanet_factors_backward(x, F, saved, dF):
    """Lesson 05's backward plus the decay. Every factor holds G only as exp(G_i - G_j), exp(G_i),
    exp(G_C - G_i) or exp(G_C), all <= 1, and each such factor's gradient into G is itself times its
    gradient (`pair_gradient` for the pairs); then dg = `reverse_cumsum`(dG), G_C being the chunk's last G:

        dM = beta dA:    dk += (dM Gamma) K + (dM Gamma)^T K,   dG += pair(dM * M)
        A_qk:            dq  = (dA_qk Gamma) K,  dk += (dA_qk Gamma)^T Q,   dG += pair(dA_qk * A_qk)
        k_beta:          dk += beta exp(G) dk_beta,   dG_i += dk_beta_i . k_beta_i
        Qd, Kd, d:       dq += exp(G) dQd, dG_i += dQd_i . Qd_i;  dk += exp(G_C - G) dKd,
                         dG_i -= dKd_i . Kd_i,
                         dG_C += sum_i dKd_i . Kd_i + sum(dd * d)"""
    q, k, v, beta = x["q"], x["k"], x["v"], x["beta"]
    G, Gamma, M = saved["G"], saved["Gamma"], saved["M"]
    dA, dk_beta, dv_beta = wy_backward(saved["L_inv"], F.W, F.U, dF.W, dF.U)
    dM = beta[..., None] * dA
    dKK, dQK = dM * Gamma, dF.A_qk * Gamma
    dq = dQK @ k + torch.exp(G)[..., None] * dF.Qd
    dk = (dKK + dKK.mT) @ k + dQK.mT @ q + beta[..., None] * torch.exp(G)[..., None] * dk_beta \
        + torch.exp(G[..., -1:] - G)[..., None] * dF.Kd
    dbeta = (dA * M).sum(-1) + (dk_beta * saved["k_decayed"]).sum(-1) + (dv_beta * v).sum(-1)
    e_Kd = (dF.Kd * F.Kd).sum(-1)
    dG = pair_gradient(dM * M) + pair_gradient(dF.A_qk * F.A_qk) + (dk_beta * saved["k_beta"]).sum(-1) \
        + (dF.Qd * F.Qd).sum(-1) - e_Kd
    dG[..., -1] += e_Kd.sum(-1) + (dF.decay * F.decay).sum(-1)
    return dict(q=dq, k=dk, v=beta[..., None] * dv_beta, g=reverse_cumsum(dG, -1), beta=dbeta)


def kda_factors(q, k, v, g, beta):
    """Lesson 07a, with G = cumsum(g) per channel [C, K]: M = strict_tril(decayed_scores(K, K, G)),
    A = diag(beta) M, A_qk = decayed_scores(Q, K, G); k_beta = beta exp(G) * K; Qd = exp(G) * Q,
    Kd = exp(G_C - G) * K, d = exp(G_C) [B, H, N, K]."""
    G = g.cumsum(-2)
    S_kk, A_qk = kda.decayed_scores(torch.stack([k, q]), k, G)
    M = torch.tril(S_kk, -1)
    k_decayed = torch.exp(G) * k
    k_beta, v_beta = beta[..., None] * k_decayed, beta[..., None] * v
    L_inv = deltanet.blocked_forward_substitution(beta[..., None] * M)
    G_C = G[..., -1:, :]
    F = Factors(A_qk=A_qk, W=L_inv @ k_beta, U=L_inv @ v_beta, Qd=torch.exp(G) * q, Kd=torch.exp(G_C - G) * k,
                decay=torch.exp(G_C[..., 0, :]))
    return F, dict(G=G, M=M, k_decayed=k_decayed, L_inv=L_inv, k_beta=k_beta)


def kda_factors_backward(x, F, saved, dF):
    """Gated DeltaNet's backward with the decay per channel: the pairwise factors are inside sums over
    channels, so their backward is `decayed_scores_backward`, and every dG term is per channel:

        dM = beta dA:   (dK_1, dK_2, dG_1) = decayed_scores_backward(dM, K, K, G),  dk = dK_1 + dK_2
        A_qk:           (dq, dK_3, dG_2) = decayed_scores_backward(dA_qk, Q, K, G)
        k_beta:         dk += beta exp(G) * dk_beta,   dG += dk_beta * k_beta
        Qd, Kd, d:      dq += exp(G) * dQd, dG += dQd * Qd;   dk += exp(G_C - G) * dKd, dG -= dKd * Kd,
                        dG_C += sum_i dKd_i * Kd_i + dd * d
    then dg = `reverse_cumsum`(dG) down the chunk."""
    q, k, v, beta = x["q"], x["k"], x["v"], x["beta"]
    G = saved["G"]
    dA, dk_beta, dv_beta = wy_backward(saved["L_inv"], F.W, F.U, dF.W, dF.U)
    dK_1, dK_2, dG_kk = decayed_scores_backward(beta[..., None] * dA, k, k, G)
    dq, dK_3, dG_qk = decayed_scores_backward(dF.A_qk, q, k, G)
    dq = dq + torch.exp(G) * dF.Qd
    dk = dK_1 + dK_2 + dK_3 + beta[..., None] * torch.exp(G) * dk_beta + torch.exp(G[..., -1:, :] - G) * dF.Kd
    dbeta = (dA * saved["M"]).sum(-1) + (dk_beta * saved["k_decayed"]).sum(-1) + (dv_beta * v).sum(-1)
    e_Kd = dF.Kd * F.Kd
    dG = dG_kk + dG_qk + dk_beta * saved["k_beta"] + dF.Qd * F.Qd - e_Kd
    dG[..., -1, :] += e_Kd.sum(-2) + dF.decay * F.decay
    return dict(q=dq, k=dk, v=beta[..., None] * dv_beta, g=reverse_cumsum(dG, -2), beta=dbeta)


# ---------------------------------------------------------------------------------------------------
# The whole backward, for any mixer of the family

FACTORS = {   # mixer name: (step 1, step 1')
    "linear_attention": (linear_attention_factors, linear_attention_factors_backward),
    "deltanet": (deltanet_factors, deltanet_factors_backward),
    "gated_deltanet": (gated_deltanet_factors, gated_deltanet_factors_backward),
    "kda": (kda_factors, kda_factors_backward),
}


def example(mixer, B=1, H=2, T=100, K=32, V=32, g_scale=0.5, dtype=torch.float64, device="cpu",
            generator=None):
    """Random inputs of `mixer` (a name or a `contract.Mixer`) and the gradients a loss sends back:
    ({"q", "k", "v", ["g",] ["beta"]}, S_0, dO, dS_T). q and v normal, k unit rows (as layers make them),
    g in [-g_scale, 0] (one per head or per key channel, as the mixer decays), beta in (0, 1), S_0, dO and
    dS_T normal. Drawn in float64 on the CPU from `generator` (torch's global one when None), then cast
    and moved, so every dtype and device sees the same numbers up to rounding."""
    mixer = mixers.get(mixer) if isinstance(mixer, str) else mixer

    def draw(*shape, uniform=False):
        make = torch.rand if uniform else torch.randn
        return make(*shape, generator=generator, dtype=torch.float64)

    x = dict(q=draw(B, H, T, K), k=torch.nn.functional.normalize(draw(B, H, T, K), dim=-1),
             v=draw(B, H, T, V))
    if mixer.decay:
        x["g"] = -g_scale * draw(*((B, H, T) if mixer.decay == "head" else (B, H, T, K)), uniform=True)
    if mixer.delta:
        x["beta"] = draw(B, H, T, uniform=True)
    rest = (draw(B, H, K, V), draw(B, H, T, V), draw(B, H, K, V))
    x, rest = ({n: t.to(device=device, dtype=dtype) for n, t in x.items()},
               [t.to(device=device, dtype=dtype) for t in rest])
    return (x, *rest)


def chunks(mixer, q, k, v, g=None, beta=None, chunk_size=64, initial_state=None):
    """The inputs of `mixer` checked (`contract.prepare`) and split into chunks:
    ({name: [B, H, N, C, .]}, S_0)."""
    contract.check_chunk_size(chunk_size)
    q, k, v, g, beta, S0 = contract.prepare(q, k, v, g, beta, initial_state, **mixer.switches)
    x = dict(q=q, k=k, v=v, g=g, beta=beta)
    return {name: contract.split_chunks(t, chunk_size) for name, t in x.items() if t is not None}, S0


def chunked_forward(mixer, q, k, v, g=None, beta=None, chunk_size=64, initial_state=None):
    """The chunked form as its three steps: (o [B, H, T, V] in v's dtype, S_T, S_n [B, H, N, K, V]).
    The same numbers as `mixer.chunked` (tests/test_backward.py checks it), with the states S_n kept."""
    mixer = mixers.get(mixer) if isinstance(mixer, str) else mixer
    x, S0 = chunks(mixer, q, k, v, g, beta, chunk_size, initial_state)
    F, _ = FACTORS[mixer.name][0](**x)
    S_n, U_new, S_T = state_walk(F, S0)
    return contract.merge_chunks(outputs(F, S_n, U_new), q.shape[2]).to(v.dtype), S_T, S_n


def chunked_backward(mixer, do, dS_T, q, k, v, g=None, beta=None, chunk_size=64, initial_state=None,
                     states=None):
    """The gradients of the chunked form of `mixer` (a name or a `contract.Mixer`), given the gradients of
    its outputs, do [B, H, T, V], and of its final state, dS_T [B, H, K, V] (None: the loss does not use it).

    Runs the forward's step 1 again (the factors, from the inputs), and step 2 too unless `states` gives
    the S_n [B, H, N, K, V] the forward kept (then U'_n = U_n - W_n S_n is one product per chunk); then
    steps 3', 2' and 1'. Computes in float32 (float64 for float64 inputs), like the forward.
    Returns {"q", "k", "v", ["g",] ["beta",] "initial_state": gradient}, each in its input's shape (the
    initial state's None when none was given)."""
    mixer = mixers.get(mixer) if isinstance(mixer, str) else mixer
    T, C = q.shape[2], chunk_size
    x, S0 = chunks(mixer, q, k, v, g, beta, chunk_size, initial_state)
    factors, factors_backward = FACTORS[mixer.name]
    F, saved = factors(**x)
    if states is None:
        S_n, U_new, _ = state_walk(F, S0)
    else:
        S_n = states.to(S0.dtype)
        U_new = F.U if F.W is None else F.U - F.W @ S_n
    dO = contract.split_chunks(do.to(S0.dtype), C)
    dS = torch.zeros_like(S0) if dS_T is None else dS_T.to(S0.dtype)
    dF, dS0 = factors_gradient(F, S_n, U_new, dO, dS)
    grads = factors_backward(x, F, saved, dF)
    grads = {name: contract.merge_chunks(grad, T) for name, grad in grads.items()}
    return dict(grads, initial_state=None if initial_state is None else dS0)
