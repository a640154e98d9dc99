"""Solutions to lesson 08's exercises (kept out of the lesson notebook and of the student edition)."""

import torch


def absorbed_head(q_n, q_r, W_uk, W_uv, c, k_r):
    """One head attends over the cached latents: fold W_uk into the query, apply W_uv after the sum."""
    q_c = W_uk.T @ q_n                                           # [d_c], the latent query
    scores = (c @ q_c + k_r @ q_r) / (q_n.shape[0] + q_r.shape[0]) ** 0.5
    p = torch.softmax(scores, dim=0)                             # [S]
    return W_uv @ (p @ c)                                        # average the latents, then up-project


def merged_output(layer):
    """W_ov [hidden, H * d_c] = W_o · blockdiag(W_uv,1 ... W_uv,H)."""
    H, d_v = layer.config.num_heads, layer.config.v_head_dim
    W_uv = layer.up_projections()[1]                             # [H, d_v, d_c]
    W_o = layer.o_proj.weight.view(-1, H, d_v)                   # [hidden, H, d_v]
    return torch.einsum("ohv,hvc->ohc", W_o, W_uv).reshape(W_o.shape[0], -1)


# Plausible wrong answers, for the tests of the exercise checks (tests/test_exercises.py): each must fail.

def _absorbed_head_no_scale(q_n, q_r, W_uk, W_uv, c, k_r):
    """Forgets the softmax scale."""
    p = torch.softmax(c @ (W_uk.T @ q_n) + k_r @ q_r, dim=0)
    return W_uv @ (p @ c)


def _absorbed_head_latent_width_scale(q_n, q_r, W_uk, W_uv, c, k_r):
    """Scales by the width of the absorbed dot product, 1/sqrt(d_c + d_r), instead of 1/sqrt(d_n + d_r)."""
    p = torch.softmax((c @ (W_uk.T @ q_n) + k_r @ q_r) / (c.shape[1] + k_r.shape[1]) ** 0.5, dim=0)
    return W_uv @ (p @ c)


def _absorbed_head_no_rope_part(q_n, q_r, W_uk, W_uv, c, k_r):
    """Drops the shared rotary part of the score."""
    p = torch.softmax(c @ (W_uk.T @ q_n) / (q_n.shape[0] + q_r.shape[0]) ** 0.5, dim=0)
    return W_uv @ (p @ c)


def _absorbed_head_explicit(q_n, q_r, W_uk, W_uv, c, k_r):
    """The right output from explicit per-token keys c W_uk^T and values c W_uv^T: not absorbed."""
    keys, values = c @ W_uk.T, c @ W_uv.T                         # [S, d_n], [S, d_v]
    p = torch.softmax((keys @ q_n + k_r @ q_r) / (q_n.shape[0] + q_r.shape[0]) ** 0.5, dim=0)
    return p @ values


def _absorbed_head_uk_not_transposed(q_n, q_r, W_uk, W_uv, c, k_r):
    """W_uk q_n instead of W_uk^T q_n: the shapes do not fit (d_n != d_c)."""
    p = torch.softmax((c @ (W_uk @ q_n) + k_r @ q_r) / (q_n.shape[0] + q_r.shape[0]) ** 0.5, dim=0)
    return W_uv @ (p @ c)


def _merged_output_channel_major(layer):
    """The right products, flattened in the wrong order: column c * H + h instead of h * d_c + c."""
    H, d_v = layer.config.num_heads, layer.config.v_head_dim
    W_uv = layer.up_projections()[1]
    W_o = layer.o_proj.weight.view(-1, H, d_v)
    return torch.einsum("ohv,hvc->och", W_o, W_uv).reshape(W_o.shape[0], -1)


def _merged_output_key_projection(layer):
    """Merges W_uk (the first part of each head's rows of kv_b_proj) instead of W_uv."""
    H, d_v = layer.config.num_heads, layer.config.v_head_dim
    W_uk = layer.up_projections()[0]
    W_o = layer.o_proj.weight.view(-1, H, d_v)
    return torch.einsum("ohv,hvc->ohc", W_o, W_uk).reshape(W_o.shape[0], -1)


def _merged_output_in_float32(layer):
    """The right matrix, cast to float32 (a .float() left in): the layer is float64."""
    return merged_output(layer).float()


def _absorbed_head_token_by_token(q_n, q_r, W_uk, W_uv, c, k_r):
    """A key and a value per cached token, one at a time (no [S, width] tensor): the explicit path in a
    loop."""
    scale = (q_n.shape[0] + q_r.shape[0]) ** -0.5
    scores = torch.stack([(q_n @ (W_uk @ c[s]) + q_r @ k_r[s]) * scale for s in range(c.shape[0])])
    p = torch.softmax(scores, dim=0)
    return sum(p[s] * (W_uv @ c[s]) for s in range(c.shape[0]))


WRONG_ANSWERS = {
    "08.1": [_absorbed_head_no_scale, _absorbed_head_latent_width_scale, _absorbed_head_no_rope_part,
             _absorbed_head_explicit, _absorbed_head_uk_not_transposed,
             _absorbed_head_token_by_token],
    "08.2": [_merged_output_channel_major, _merged_output_key_projection, _merged_output_in_float32],
}
