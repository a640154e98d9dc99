"""Lesson 02's exercises: the normalized decode step, the state in tokens of cache, a wider feature map."""

import torch

from kimik3_lessons import gpt2, linear_attention
from kimik3_lessons.exercises import (
    Wrong,
    attempt,
    exercise,
    expect_close,
    expect_pair,
    expect_tensor,
    hint,
    part,
)

# The module's forms: each computes what 02.1 asks (and 02.1's step is one of them).
FORMS = ("linear_attention.normalized", "linear_attention.recurrent", "linear_attention.parallel",
         "linear_attention.chunked", "linear_attention.triton_chunked",
         "linear_attention.linear_attention_step")


def _randint(low, high):
    """A fresh random integer in [low, high]."""
    return int(torch.randint(low, high + 1, ()))


@exercise("02.1", "normalized_step", "one decode step of normalized linear attention", difficulty=2,
          parts=("o", "the final S", "the final z"), forbid=FORMS)
def check_normalized_step(normalized_step):
    B, H, K = 2, _randint(1, 3), _randint(3, 8)
    V, P, T = K + _randint(1, 3), _randint(2, 6), _randint(6, 20)   # K != V; P prompt tokens, then T steps
    q, k, v = (torch.randn(B, H, P + T, D, dtype=torch.float64) for D in (K, K, V))   # raw q, k: no phi yet
    phi = linear_attention.elu_feature_map
    # The reference: the module's normalized recurrence over the whole sequence; its state after the prompt.
    o_ref, state_ref = linear_attention.normalized(linear_attention.recurrent, phi(q), phi(k), v)
    _, prompt_state = linear_attention.normalized(linear_attention.recurrent, phi(q[:, :, :P]),
                                                  phi(k[:, :, :P]), v[:, :, :P])
    S, z = prompt_state[..., :-1], prompt_state[..., -1]                  # [B, H, K, V], [B, H, K]
    outputs = []
    for t in range(P, P + T):
        o_t, S, z = expect_pair("a triple (o_t, S, z)",
                                attempt(normalized_step, S, z, q[:, :, t], k[:, :, t], v[:, :, t]), 3)
        expect_tensor("o_t", o_t, (B, H, V))
        expect_tensor("S", S, (B, H, K, V))
        expect_tensor("z", z, (B, H, K))
        outputs.append(o_t)
    with part("o"):
        err = expect_close("o (the steps' outputs, stacked over t)", o_ref[:, :, P:],
                           torch.stack(outputs, dim=2), row_dim=2,
                           hint=hint("apply phi = elu + 1 to q_t and k_t; write first (S += phi(k_t)^T v_t, "
                                     "z += phi(k_t)), then read o_t = phi(q_t) S / (phi(q_t) . z)."))
    with part("the final S"):
        expect_close("the final S", state_ref[..., :-1], S, hint=hint("S grows by the outer product "
                                                                      "phi(k_t)^T v_t, [K, V]."))
    with part("the final z"):
        expect_close("the final z", state_ref[..., -1], z, row_dim=-1, hint=hint("z grows by phi(k_t)."))
    return f"{T} steps after a {P}-token prompt equal normalized(recurrent, ...) (relative error {err:.0e})"


@exercise("02.2", "cache_tokens_per_state", "a model's linear states, counted in tokens of KV cache",
          difficulty=1)
def check_cache_tokens_per_state(cache_tokens_per_state):
    for _ in range(3):
        num_heads, head_dim = _randint(1, 16), 2 ** _randint(4, 7)
        config = gpt2.GPTConfig(num_layers=_randint(1, 48), num_heads=num_heads,
                                hidden_size=num_heads * head_dim)
        for with_z in (False, True):
            # Measured, not counted: the state one layer's normalized recurrence really ends with (S and z
            # side by side, [B, H, K, V + 1]; without z, S alone), times the layers.
            x = torch.ones(1, num_heads, 1, head_dim, dtype=torch.float64)
            _, state = linear_attention.normalized(linear_attention.recurrent, x, x, x)
            numbers = config.num_layers * (state if with_z else state[..., :-1]).numel()
            ref = numbers * 2 / config.cache_bytes_per_token(bytes_per_number=2)
            out = attempt(cache_tokens_per_state, config, with_z)
            if not isinstance(out, (int, float)) or abs(out - ref) > 1e-9 * ref:
                raise Wrong(f"for {config.num_layers} layers of {num_heads} heads × {head_dim} "
                            f"(with_z={with_z}) you give {out!r}, expected {ref:g} tokens", hint=hint(
                                "a state is head_dim × head_dim per head (not hidden_size² per layer), z "
                                "adds head_dim per head; a token of cache is a key AND a value per layer "
                                "(config.cache_bytes_per_token)."))
    small = attempt(cache_tokens_per_state, gpt2.GPTConfig(), False)
    return f"right for 3 random configurations (GPT-2 small: {small:g} tokens)"


@exercise("02.3", "polynomial_features", "a feature map with phi(q) . phi(k) = (q . k)^2", difficulty=3)
def check_polynomial_features(polynomial_features):
    B, H, d = 2, _randint(1, 3), _randint(3, 6)
    T = d * (d + 1) // 2 + _randint(4, 12)          # more tokens than the rank this kernel can reach
    q, k = (torch.randn(B, H, T, d, dtype=torch.float64) for _ in range(2))
    fq, fk = attempt(polynomial_features, q), attempt(polynomial_features, k)
    for name, f in (("phi(q)", fq), ("phi(k)", fk)):
        if not isinstance(f, torch.Tensor) or f.dim() != 4 or tuple(f.shape[:3]) != (B, H, T):
            got = list(f.shape) if isinstance(f, torch.Tensor) else type(f).__name__
            raise Wrong(f"{name} should be [B, H, T, width] = [{B}, {H}, {T}, width] for q [{B}, {H}, {T}, "
                        f"{d}], got {got}", hint=hint("build features from the last "
                                                                      "dimension."))
    weights = fq @ fk.mT                                 # [B, H, T, T]
    ref = (q @ k.mT) ** 2
    err = expect_close("phi(Q) phi(K)^T", ref, weights,
                       hint=hint("(q . k)^2 = sum_ij q_i q_j k_i k_j, a dot product of the d² products x_i "
                                 "x_j (the outer product x x^T, flattened)."))
    rank = int(torch.linalg.matrix_rank(weights[0, 0]))
    return (f"phi(Q) phi(K)^T = (QK^T)^2 (relative error {err:.0e}); width {fq.shape[-1]}, rank {rank} "
            f"against d = {d}")
