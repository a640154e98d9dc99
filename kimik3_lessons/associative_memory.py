"""Lesson 04: a matrix as an associative memory — write key→value pairs into it, read them back by key.

The memory is a matrix S [D, D_v]. A key k [D] (a row vector) reads k S. Two ways to write a pair (k, v):
    additive (linear attention):   S <- S + k^T v
    delta rule (DeltaNet):         S <- S + beta k^T (v - k S)      (read what k holds, write the difference)
No training and no layer here: only writes, reads and the error of what comes back, so that the
capacity of a D×D state (at most D orthogonal keys) can be seen. Every function is batched over
leading dimensions ("trials"), so one call runs many random memories at once.
Lesson 05 reuses `recall_sequence` to ask the real layer forms the same question.
"""

import torch

RULES = ("additive", "delta")


def random_unit_vectors(trials, n, D, generator=None, dtype=torch.float64):
    """n random directions in R^D per trial: Gaussian rows scaled to norm 1. Returns [trials, n, D].

    Two of them overlap by k_i · k_j ≈ ±1/sqrt(D): almost orthogonal, never exactly.
    """
    x = torch.randn(trials, n, D, generator=generator, dtype=dtype)
    return x / x.norm(dim=-1, keepdim=True)


def orthogonal_keys(trials, n, D, generator=None, dtype=torch.float64):
    """n keys in blocks of D rows, each block a fresh random orthonormal basis of R^D. Returns [trials, n, D].

    The first D keys are exactly orthogonal (the most a D-dimensional space holds); key D+1 starts a new
    basis, so it necessarily overlaps the first ones.
    """
    blocks = -(-n // D)
    x = torch.randn(trials, blocks, D, D, generator=generator, dtype=dtype)
    Q, R = torch.linalg.qr(x)
    Q = Q * torch.sign(torch.diagonal(R, dim1=-2, dim2=-1))[..., None, :]  # a uniformly random basis
    return Q.mT.reshape(trials, blocks * D, D)[:, :n]


def read(S, k):
    """What key k reads from memory S: k S. S [..., D, D_v], k [..., D] -> [..., D_v]."""
    return (k[..., None, :] @ S).squeeze(-2)


def additive_write(S, k, v):
    """Linear attention's write: S + k^T v. S [..., D, D_v], k [..., D], v [..., D_v]."""
    return S + k[..., :, None] * v[..., None, :]


def delta_write(S, k, v, beta=1.0):
    """The delta rule's write: S + beta k^T (v - k S). It moves k's read-back a fraction beta ||k||^2 of
    the way from what k held to v: with ||k|| = 1 and beta = 1, k then reads exactly v.
    beta is a number or a tensor [...] (one per write)."""
    beta = torch.as_tensor(beta, dtype=S.dtype, device=S.device)
    return additive_write(S, k, beta[..., None] * (v - read(S, k)))


def _check_pairs(keys, values):
    if keys.dim() < 2 or values.dim() < 2:
        raise ValueError(f"keys and values must be [..., N, D] and [..., N, D_v], got {list(keys.shape)} "
                         f"and {list(values.shape)}")
    if keys.shape[:-1] != values.shape[:-1]:
        raise ValueError(f"values must be [..., N, D_v] with the leading dims of keys "
                         f"{list(keys.shape[:-1])}, got {list(values.shape)}")


def _write(rule, S, k, v, beta):
    if rule == "additive":
        return additive_write(S, k, v)
    if rule == "delta":
        return delta_write(S, k, v, beta)
    raise ValueError(f"rule must be one of {RULES}, got {rule!r}")


def store(keys, values, rule, beta=1.0, S=None):
    """Write the N pairs (keys[..., i], values[..., i]) one after another into S (zeros by default).

    keys [..., N, D], values [..., N, D_v]; rule is "additive" or "delta". Returns S [..., D, D_v].
    """
    _check_pairs(keys, values)
    if S is None:
        S = keys.new_zeros(*keys.shape[:-2], keys.shape[-1], values.shape[-1])
    for i in range(keys.shape[-2]):
        S = _write(rule, S, keys[..., i, :], values[..., i, :], beta)
    return S


def recall_error(S, keys, values):
    """Relative read-back error of every stored pair: ||k_i S - v_i|| / ||v_i||. Returns [..., N].

    0 means the memory returns v_i exactly; 1 means the error is as large as the value itself.
    """
    _check_pairs(keys, values)
    return (keys @ S - values).norm(dim=-1) / values.norm(dim=-1)


def capacity_curve(keys, values, rule, Ns, beta=1.0):
    """Mean read-back error after storing the first N pairs, for each N in Ns. Returns [len(Ns)].

    One pass of writes serves every N: the memory after N writes is the same whether or not more follow.
    keys [trials, N_max, D], values [trials, N_max, D_v], averaged over the trials and the N stored pairs.
    """
    _check_pairs(keys, values)
    Ns = sorted(Ns)
    if Ns[0] < 1 or Ns[-1] > keys.shape[-2]:
        raise ValueError(f"Ns must lie in [1, {keys.shape[-2]}] (the number of pairs given), "
                         f"got {Ns[0]}..{Ns[-1]}")
    S, errors, start = None, [], 0
    for N in Ns:
        S = store(keys[..., start:N, :], values[..., start:N, :], rule, beta, S)
        errors.append(recall_error(S, keys[..., :N, :], values[..., :N, :]).mean())
        start = N
    return torch.stack(errors)


def recall_sequence(keys, values):
    """The same experiment as a sequence for a layer's mixing op (lesson 05): write, then ask.

    Tokens 0..N-1 write the pairs (k_t = keys, v_t = values); tokens N..2N-1 query the keys in the same
    order with k_t = 0 and v_t = 0, so they write nothing. A form's outputs o[..., N:, :] are the answers.
    keys [B, N, D], values [B, N, D_v] -> q, k [B, 1, 2N, D], v [B, 1, 2N, D_v] (one head).
    """
    _check_pairs(keys, values)
    if keys.dim() != 3:
        raise ValueError(f"keys must be [B, N, D], got {list(keys.shape)}")
    q = torch.cat([torch.zeros_like(keys), keys], dim=1)
    k = torch.cat([keys, torch.zeros_like(keys)], dim=1)
    v = torch.cat([values, torch.zeros_like(values)], dim=1)
    return q[:, None], k[:, None], v[:, None]
