"""Solutions to lesson 07b's exercises (kept out of the lesson notebook and of the student edition)."""

import torch


def short_conv_step(x_t, weight, tail):
    """One token of the causal depthwise convolution. x_t [B, D]; weight [D, 1, W]; tail [B, D, W - 1], the
    last W - 1 inputs, oldest first. Returns (y_t [B, D], the new tail [B, D, W - 1])."""
    window = torch.cat([tail, x_t[..., None]], dim=-1)                    # [B, D, W], oldest first
    return (weight[:, 0, :] * window).sum(-1), window[..., 1:]


def state_numbers(num_heads, head_dim, conv_size):
    """Numbers a KDA layer carries per sequence: S [H, K, K] plus three short-convolution tails
    [H*K, conv_size - 1] (q, k and v)."""
    HK = num_heads * head_dim
    return HK * head_dim + 3 * HK * (conv_size - 1)


# Plausible wrong answers, for the tests of the exercise checks (tests/test_exercises.py): each must fail.

def _short_conv_step_reversed(x_t, weight, tail):
    """Weights applied newest-first: a correlation read backwards."""
    window = torch.cat([tail, x_t[..., None]], dim=-1)
    return (weight[:, 0, :].flip(-1) * window).sum(-1), window[..., 1:]


def _short_conv_step_stale_tail(x_t, weight, tail):
    """Right output, but the tail is never updated: every later token sees zeros as its past."""
    window = torch.cat([tail, x_t[..., None]], dim=-1)
    return (weight[:, 0, :] * window).sum(-1), tail


def _short_conv_step_by_module(x_t, weight, tail):
    """kimi_linear.short_conv on the one-token sequence with the tail: right numbers, the step not written."""
    from kimik3_lessons import kimi_linear
    y, new_tail = kimi_linear.short_conv(x_t[:, None, :], weight, tail)
    return y[:, 0], new_tail


def _short_conv_step_tail_newest_first(x_t, weight, tail):
    """Puts x_t at the front of the new tail (newest first) while the window reads it oldest first."""
    window = torch.cat([tail, x_t[..., None]], dim=-1)
    return (weight[:, 0, :] * window).sum(-1), torch.cat([x_t[..., None], tail[..., :-1]], dim=-1)


def _state_numbers_without_tails(num_heads, head_dim, conv_size):
    """Counts the recurrent state only."""
    return num_heads * head_dim**2


def _state_numbers_full_window(num_heads, head_dim, conv_size):
    """Counts conv_size inputs per tail instead of conv_size - 1."""
    HK = num_heads * head_dim
    return HK * head_dim + 3 * HK * conv_size


def _state_numbers_two_tails(num_heads, head_dim, conv_size):
    """Counts the tails of q and k but not v's."""
    HK = num_heads * head_dim
    return HK * head_dim + 2 * HK * (conv_size - 1)


def _state_numbers_by_config(num_heads, head_dim, conv_size):
    """KDAConfig.state_numbers: the module's count, not yours."""
    from kimik3_lessons import kimi_linear
    config = kimi_linear.KDAConfig(hidden_size=8, num_heads=num_heads, head_dim=head_dim, conv_size=conv_size)
    return config.state_numbers


WRONG_ANSWERS = {
    "07b.1": [_short_conv_step_reversed, _short_conv_step_stale_tail, _short_conv_step_by_module,
              _short_conv_step_tail_newest_first],
    "07b.2": [_state_numbers_without_tails, _state_numbers_full_window, _state_numbers_two_tails,
              _state_numbers_by_config],
}
