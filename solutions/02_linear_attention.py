"""Solutions to lesson 02's exercises (kept out of the lesson notebook and of the student edition)."""

import torch
import torch.nn.functional as F


def phi(x):
    """elu + 1, as linear_attention.elu_feature_map."""
    return F.elu(x) + 1


def normalized_step(S, z, q_t, k_t, v_t):
    """Write, then read: S += phi(k_t)^T v_t, z += phi(k_t); o_t = phi(q_t) S / (phi(q_t) . z)."""
    q_t, k_t = phi(q_t), phi(k_t)
    S = S + k_t[..., :, None] * v_t[..., None, :]                  # [B, H, K, V]
    z = z + k_t                                                    # [B, H, K]
    numerator = (q_t[..., :, None] * S).sum(dim=-2)                # q_t S: [B, H, V]
    return numerator / (q_t * z).sum(dim=-1, keepdim=True), S, z


def cache_tokens_per_state(config, with_z):
    """All layers' states (head_dim × head_dim per head, plus z) over the bytes of one token of cache."""
    per_head = config.head_dim * (config.head_dim + (1 if with_z else 0))
    state_numbers = config.num_layers * config.num_heads * per_head
    return state_numbers * 2 / config.cache_bytes_per_token(bytes_per_number=2)


def polynomial_features(x):
    """phi(x) = x ⊗ x, flattened: phi(q) . phi(k) = sum_ij q_i q_j k_i k_j = (q . k)^2. Width d²."""
    return (x[..., :, None] * x[..., None, :]).flatten(start_dim=-2)


# Plausible wrong answers, for the tests of the exercise checks (tests/test_exercises.py): each must fail.

def _step_read_before_write(S, z, q_t, k_t, v_t):
    """Reads S and z before adding token t: a token does not see itself."""
    q_t, k_t = phi(q_t), phi(k_t)
    o_t = (q_t[..., :, None] * S).sum(dim=-2) / (q_t * z).sum(dim=-1, keepdim=True)
    return o_t, S + k_t[..., :, None] * v_t[..., None, :], z + k_t


def _step_without_feature_map(S, z, q_t, k_t, v_t):
    """Uses the raw q_t, k_t: weights of any sign, a denominator that crosses zero."""
    S = S + k_t[..., :, None] * v_t[..., None, :]
    z = z + k_t
    return (q_t[..., :, None] * S).sum(dim=-2) / (q_t * z).sum(dim=-1, keepdim=True), S, z


def _step_without_denominator(S, z, q_t, k_t, v_t):
    """Forgets to divide by phi(q_t) . z_t (the un-normalized read)."""
    q_t, k_t = phi(q_t), phi(k_t)
    S = S + k_t[..., :, None] * v_t[..., None, :]
    return (q_t[..., :, None] * S).sum(dim=-2), S, z + k_t


def _step_stale_denominator(S, z, q_t, k_t, v_t):
    """Updates S before the read but z after it: the denominator misses token t."""
    q_t, k_t = phi(q_t), phi(k_t)
    S = S + k_t[..., :, None] * v_t[..., None, :]
    o_t = (q_t[..., :, None] * S).sum(dim=-2) / (q_t * z).sum(dim=-1, keepdim=True)
    return o_t, S, z + k_t


def _step_z_of_raw_keys(S, z, q_t, k_t, v_t):
    """Adds the raw k_t to z (phi applied to the state's write only): the denominator drifts."""
    z = z + k_t
    q_t, k_t = phi(q_t), phi(k_t)
    S = S + k_t[..., :, None] * v_t[..., None, :]
    return (q_t[..., :, None] * S).sum(dim=-2) / (q_t * z).sum(dim=-1, keepdim=True), S, z


def _step_by_the_module(S, z, q_t, k_t, v_t):
    """The right numbers, with the module's own decode step doing the work (not written here)."""
    from kimik3_lessons import linear_attention
    q_t, k_t = phi(q_t), phi(k_t)
    numerator, S = linear_attention.linear_attention_step(S, q_t, k_t, v_t)
    z = z + k_t
    return numerator / (q_t * z).sum(dim=-1, keepdim=True), S, z


def _tokens_without_values(config, with_z):
    """Counts a token of cache as one vector per layer (forgets the value next to the key)."""
    return 2 * cache_tokens_per_state(config, with_z)


def _tokens_one_big_state(config, with_z):
    """One hidden_size × hidden_size state per layer instead of one head_dim × head_dim per head."""
    C = config.hidden_size
    numbers = config.num_layers * C * (C + (1 if with_z else 0))
    return numbers * 2 / config.cache_bytes_per_token(bytes_per_number=2)


def _tokens_forgetting_z(config, with_z):
    """Leaves z out even when asked for it."""
    return cache_tokens_per_state(config, False)


def _tokens_gpt2_small_layers(config, with_z):
    """Hard-codes GPT-2 small's 12 layers (right for the default configuration only)."""
    per_head = config.head_dim * (config.head_dim + (1 if with_z else 0))
    return 12 * config.num_heads * per_head * 2 / config.cache_bytes_per_token(bytes_per_number=2)


def _features_squared(x):
    """x ** 2 elementwise: phi(q) . phi(k) = sum_i q_i² k_i², not (q . k)²."""
    return x**2


def _features_upper_triangle(x):
    """The d(d+1)/2 products x_i x_j with i <= j, without the factor sqrt(2) on the off-diagonal ones."""
    i, j = torch.triu_indices(x.shape[-1], x.shape[-1])
    return x[..., i] * x[..., j]


def _features_concatenated(x):
    """[x, x²]: phi(q) . phi(k) = q . k + sum_i q_i² k_i²."""
    return torch.cat([x, x**2], dim=-1)


def _features_scaled(x):
    """The outer product divided by sqrt(d), as if a softmax scale belonged here: (q . k)^2 / d."""
    return (x[..., :, None] * x[..., None, :]).flatten(start_dim=-2) / x.shape[-1] ** 0.5


WRONG_ANSWERS = {
    "02.1": [_step_read_before_write, _step_without_feature_map, _step_without_denominator,
             _step_stale_denominator, _step_z_of_raw_keys, _step_by_the_module],
    "02.2": [_tokens_without_values, _tokens_one_big_state, _tokens_forgetting_z, _tokens_gpt2_small_layers],
    "02.3": [_features_squared, _features_upper_triangle, _features_concatenated, _features_scaled],
}
