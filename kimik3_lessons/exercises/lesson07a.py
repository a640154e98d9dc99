"""Lesson 07a's exercises: a per-channel decayed score, a fact's retention under per-channel decay, and the
state carried across a chunk with a decay per key row."""

import torch
import torch.nn.functional as F

from kimik3_lessons import deltanet, kda
from kimik3_lessons.exercises import (
    Wrong,
    attempt,
    exercise,
    expect_close,
    expect_tensor,
    hint,
    known_mistake,
    part,
)
from kimik3_lessons.exercises.lesson06 import gradient_check

F64 = torch.float64
FORMS = ("kda.recurrent", "kda.chunked", "kda.triton_chunked", "kda.kda_step")


def channel_log_decays(C, K, dtype=F64):
    """g [C, K]: per-channel log decays whose rates differ by orders of magnitude between channels."""
    rates = torch.logspace(-2.5, 0, K, dtype=dtype)[torch.randperm(K)]        # 0.003 ... 1 per token
    return -rates * torch.empty(C, K, dtype=dtype).uniform_(0.5, 1.5)


@exercise("07a.1", "per_channel_scores", "a per-channel decayed score", difficulty=2,
          parts=("P", "P under strong decay", "its gradient under strong decay"),
          forbid=("kda.decayed_scores", *FORMS))
def check_per_channel_scores(per_channel_scores):
    how = hint("P_ij = sum_d q_id k_jd exp(G_id - G_jd) for i >= j, 0 for j > i: the decay factor sits "
               "inside the sum over channels, one per channel. Form G_i - G_j per channel ([C, C, K]), keep "
               "i >= j before exponentiating, then multiply by q_id k_jd and sum over d.")
    # 1. float64, a chunk that is not a power of two, channels with very different decays.
    C, K = int(torch.randint(9, 24, ())), 6
    C_mild = C
    Q, Kc = torch.randn(C, K, dtype=F64), torch.randn(C, K, dtype=F64)
    G = channel_log_decays(C, K).cumsum(0)
    ref = kda.decayed_scores(Q, Kc, G)
    out = attempt(per_channel_scores, Q.clone(), Kc.clone(), G.clone())
    dots = Q @ Kc.T
    G_mean = G.mean(-1)
    pairwise = G[:, None, :] - G[None, :, :]                                    # [C, C, K]
    known = [(hint("you used one decay for all channels (G averaged over d): that is lesson 06's scalar "
                   "decay. Each channel d has its own factor exp(G_id - G_jd) inside the sum"),
              (dots * torch.exp(G_mean[:, None] - G_mean[None, :])).tril()),
             (hint("you multiplied the plain dot product q_i . k_j by exp of the exponents summed over "
                   "channels; the decay belongs inside the sum, one factor per channel (a sum of exps, not "
                   "the exp of a sum)"), (dots * torch.exp(pairwise.sum(-1))).tril()),
             (hint("entries with j > i must be 0: a query never reads a later key (the causal mask)"),
              (Q[:, None, :] * Kc[None, :, :] * torch.exp(pairwise)).sum(-1)),
             (hint("the diagonal (i = j) is the plain q_i . k_i (no decay, exp(0) = 1): keep i >= j, not i > "
                   "j"), ref.tril(-1))]
    with part("P"):
        expect_tensor("P", out, (C, C), dtype=F64)
        known_mistake("P", ref, out, known)
        err = expect_close("P", ref, out, hint=how)
    # 2. KimiK3's strongest decay, g about -5 per token, float32, a 64-token chunk: G down to -320.
    C = 64
    Q, Kc = torch.randn(C, K), torch.randn(C, K)
    G = torch.empty(C, K).uniform_(-5.5, -4.5).cumsum(0)
    ref = kda.decayed_scores(Q.double(), Kc.double(), G.double())
    out = attempt(per_channel_scores, Q.clone(), Kc.clone(), G.clone())
    with part("P under strong decay"):
        expect_tensor("P under strong decay", out, (C, C))
        if not torch.isfinite(out).all():
            raise Wrong(f"under strong decay (g ≈ -5 per token, G down to {G.min().item():.0f}, float32) P "
                        "holds NaN or inf: exp(G_id) exp(-G_jd) overflows, and so does exp(G_id - G_jd) for "
                        "j > i if it is formed before the mask and then multiplied by 0", hint=how)
        err_strong = expect_close("P under strong decay", ref, out, rtol=1e-5, hint=how)
    # 3. The backward pass (to G) under the same strong decay: the gradients the layer trains with.
    with part("its gradient under strong decay"):
        err_grad = gradient_check("P under strong decay (float32)",
                                  lambda G_in: per_channel_scores(Q.clone(), Kc.clone(), G_in), G,
                                  lambda G_ref: kda.decayed_scores(Q.double(), Kc.double(), G_ref), how)
    return (f"equals kda.decayed_scores on a {C_mild}-token chunk in float64 (relative error {err:.0e}) and "
            f"under g ≈ -5 per token in float32 (relative error {err_strong:.0e}, gradient {err_grad:.0e})")


@exercise("07a.2", "predicted_retention", "a fact's strength under per-channel decay", difficulty=1,
          forbid=FORMS)
def check_predicted_retention(predicted_retention):
    K, steps = 6, 40
    k = F.normalize(torch.rand(K, dtype=F64) + 0.1, dim=0)
    g = -torch.logspace(-3, 0.3, K, dtype=F64)[torch.randperm(K)]          # rates from 0.001 to 2 per token
    # Write v = 1 under k at t = 0 (beta = 1), nothing after; read with q = k at every step.
    keys = torch.zeros(1, 1, steps + 1, K, dtype=F64)
    keys[..., 0, :] = k
    values = torch.zeros(1, 1, steps + 1, 1, dtype=F64)
    values[..., 0, 0] = 1.0
    beta = torch.zeros(1, 1, steps + 1, dtype=F64)
    beta[..., 0] = 1.0
    o, _ = kda.recurrent(k.expand(1, 1, steps + 1, K), keys, values, g.expand(1, 1, steps + 1, K), beta)
    ref = o[0, 0, :, 0]
    outs = []
    for delta in range(steps + 1):
        x = attempt(predicted_retention, k.clone(), g.clone(), delta)
        try:
            outs.append(torch.as_tensor(x, dtype=F64).reshape(()))
        except (TypeError, ValueError, RuntimeError) as err:
            raise Wrong(f"predicted_retention(k, g, {delta}) should return one number, "
                        f"got {type(x).__name__}") from err
    out = torch.stack(outs)
    deltas = torch.arange(steps + 1, dtype=F64)
    known = [(hint("you used one decay, the channels' mean: a fact on several channels does not fade at the "
                   "mean rate. Each channel d keeps its share k_d^2 of the fact at its own rate, exp(g_d Δ)"),
              torch.exp(g.mean() * deltas)),
             (hint("that is exp of the weighted sum of the log decays; the read-back is the weighted sum of "
                   "each channel's exp(g_d Δ), weights k_d^2 (a sum of exps, not the exp of a sum)"),
              torch.exp((k**2 * g).sum() * deltas)),
             (hint("the weights are k_d^2, not k_d: the write puts k_d v on row d, and the read with q = k "
                   "takes k_d of that row back"), (k[None] * torch.exp(g[None] * deltas[:, None])).sum(-1))]
    known_mistake("the retention", ref, out, known)
    err = expect_close("the retention", ref, out, row_dim=0,
                       hint=hint("after the write, row d of S is k_d v; Δ tokens of decay multiply it by "
                                 "exp(g_d Δ); reading with q = k sums k_d times row d."))
    return f"equals kda.recurrent over {steps} tokens (relative error {err:.0e})"


@exercise("07a.3", "chunk_state_update_per_channel", "the state across a chunk, a decay per key row",
          difficulty=2, forbid=(*FORMS, "chunk_kernels.launch_chunked", "chunk_kernels.launch"))
def check_chunk_state_update_per_channel(chunk_state_update_per_channel):
    C, K = int(torch.randint(5, 20, ())), 6      # V = K: decaying the wrong axis of S does not fail by shape
    S0 = torch.randn(K, K, dtype=F64)
    k = F.normalize(torch.randn(C, K, dtype=F64), dim=-1)
    v = torch.randn(C, K, dtype=F64)
    g = channel_log_decays(C, K)
    beta = torch.rand(C, dtype=F64)
    one = lambda x: x[None, None]
    _, S_ref = kda.recurrent(one(k), one(k), one(v), one(g), one(beta), initial_state=one(S0))
    S_ref = S_ref[0, 0]
    # What the chunk form has before the update: G [C, K] and U' = U - W S0 (lesson 07a, section 4).
    G = g.cumsum(0)
    A = (beta[:, None] * kda.decayed_scores(k, k, G)).tril(-1)
    W, U = deltanet.wy_representation(A, beta[:, None] * torch.exp(G) * k, beta[:, None] * v)
    U_new = U - W @ S0
    out = attempt(chunk_state_update_per_channel, S0.clone(), k.clone(), U_new.clone(), G.clone())
    expect_tensor("the state after the chunk", out, (K, K), dtype=F64)
    G_C = G[-1]
    writes = (torch.exp(G_C - G) * k).T @ U_new
    known = [(hint("you decayed the columns of S (its value dimension); the decay of channel d multiplies "
                   "row d, what key channel d stored: exp(G_C)[:, None] * S"),
              torch.exp(G_C)[None, :] * S0 + writes),
             (hint("you used one decay for all channels (G_C averaged): each key row d keeps exp(G_C,d) of "
                   "itself"),
              torch.exp(G_C.mean()) * S0 + (torch.exp(G_C.mean() - G.mean(-1))[:, None] * k).T @ U_new),
             (hint("you decayed after the writes: the chunk's own writes then shrink by the whole chunk's "
                   "decay. The write of token i decays from token i on, exp(G_C - G_i) per channel"),
              torch.exp(G_C)[:, None] * (S0 + k.T @ U_new)),
             (hint("the writes are not decayed: the write of token i still goes through the decays of tokens "
                   "i+1 ... C, a factor exp(G_C,d - G_i,d) on entry (i, d) of K"),
              torch.exp(G_C)[:, None] * S0 + k.T @ U_new)]
    known_mistake("the state after the chunk", S_ref, out, known)
    err = expect_close("the state after the chunk", S_ref, out, row_dim=0,
                       hint=hint("S_next = Diag(exp(G_C)) S + (exp(G_C - G) * K)^T U', with G_C = G[-1] [K] "
                                 "and exp(G_C - G) [C, K] elementwise with K."))
    return f"equals the recurrence's state after a {C}-token chunk (relative error {err:.0e})"
