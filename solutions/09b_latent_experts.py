"""Solutions to lesson 09b's exercises (kept out of the lesson notebook and of the student edition)."""

import dataclasses

import torch


def finer_experts(config, m):
    """m times more experts, m times narrower, m times more of them per token (shared ones too)."""
    return dataclasses.replace(config, num_experts=m * config.num_experts, top_k=m * config.top_k,
                               num_shared_experts=m * config.num_shared_experts,
                               expert_hidden_size=config.expert_hidden_size // m)


def _tanh(x):
    """tanh|x| = (1 - e^{-2|x|}) / (1 + e^{-2|x|}), its sign put back; for |x| < 1/8 the series
    x - x^3/3 + 2x^5/15, where 1 - e^{-2|x|} would lose its digits."""
    e = torch.exp(-2 * x.abs())
    x2 = x * x
    series = x * (1 - x2 * (1 / 3 - x2 * (2 / 15)))
    return torch.where(x.abs() < 0.125, series, torch.sign(x) * (1 - e) / (1 + e))


def _sigmoid(x):
    """From e = e^{-|x|} <= 1: 1 / (1 + e) for x >= 0, e / (1 + e) below."""
    e = torch.exp(-x.abs())
    return torch.where(x >= 0, 1.0, e) / (1 + e)


def situ_from_exp(g, u, beta=4.0, linear_beta=25.0):
    """beta tanh(g / beta) sigmoid(g) * linear_beta tanh(u / linear_beta), in float32, with exp alone."""
    gate = beta * _tanh(g / beta) * _sigmoid(g)
    up = u if linear_beta is None else linear_beta * _tanh(u / linear_beta)
    return gate * up


# Plausible wrong answers, for the tests of the exercise checks (tests/test_exercises.py): each must fail.

def _finer_experts_same_top_k(config, m):
    """Splits the experts but lets each token still pick top_k: the routed FLOPs shrink m times."""
    return dataclasses.replace(config, num_experts=m * config.num_experts,
                               num_shared_experts=m * config.num_shared_experts,
                               expert_hidden_size=config.expert_hidden_size // m)


def _finer_experts_shared_unchanged(config, m):
    """Forgets that the shared experts have the routed experts' width: they shrink m times."""
    return dataclasses.replace(config, num_experts=m * config.num_experts, top_k=m * config.top_k,
                               expert_hidden_size=config.expert_hidden_size // m)


def _finer_experts_always_halved(config, m):
    """Splits every expert in two whatever m (right for m = 2 only)."""
    return finer_experts(config, 2)


def _situ_up_not_capped(g, u, beta=4.0, linear_beta=25.0):
    """Forgets the cap on up: SwiGLU's unbounded up branch."""
    return beta * _tanh(g / beta) * _sigmoid(g) * u


def _situ_gate_without_sigmoid(g, u, beta=4.0, linear_beta=25.0):
    """Caps the gate but drops SiLU's sigmoid: beta tanh(g / beta) alone."""
    up = u if linear_beta is None else linear_beta * _tanh(u / linear_beta)
    return beta * _tanh(g / beta) * up


def _tanh_no_series(x):
    e = torch.exp(-2 * x.abs())
    return torch.sign(x) * (1 - e) / (1 + e)


def _situ_no_series(g, u, beta=4.0, linear_beta=25.0):
    """tanh from e^{-2|x|} everywhere: 1 - e^{-2|x|} cancels to 0 for tiny x."""
    up = u if linear_beta is None else linear_beta * _tanh_no_series(u / linear_beta)
    return beta * _tanh_no_series(g / beta) * _sigmoid(g) * up


def _tanh_overflows(x):
    e = torch.exp(2 * x)
    return torch.where(x.abs() < 0.125, x * (1 - x * x * (1 / 3 - x * x * (2 / 15))), (e - 1) / (e + 1))


def _situ_tanh_overflows(g, u, beta=4.0, linear_beta=25.0):
    """The series near 0, but tanh = (e^{2x} - 1) / (e^{2x} + 1) elsewhere: inf / inf = NaN past x = 44."""
    up = u if linear_beta is None else linear_beta * _tanh_overflows(u / linear_beta)
    return beta * _tanh_overflows(g / beta) * _sigmoid(g) * up


def _situ_with_torch_tanh(g, u, beta=4.0, linear_beta=25.0):
    """The right numbers, but with torch.tanh and torch.sigmoid, which the kernel does not have."""
    up = u if linear_beta is None else linear_beta * torch.tanh(u / linear_beta)
    return beta * torch.tanh(g / beta) * torch.sigmoid(g) * up


def _situ_in_float64(g, u, beta=4.0, linear_beta=25.0):
    """tanh from e^{-2|x|} without the series, hidden by computing in float64."""
    return _situ_no_series(g.double(), u.double(), beta, linear_beta).float()


def _situ_caps_swapped(g, u, beta=4.0, linear_beta=25.0):
    """beta caps the up branch and linear_beta the gate: the two caps swapped."""
    if linear_beta is None:
        return situ_from_exp(g, u, beta, None)
    return linear_beta * _tanh(g / linear_beta) * _sigmoid(g) * beta * _tanh(u / beta)


def _situ_by_sinh_cosh_and_logsigmoid(g, u, beta=4.0, linear_beta=25.0):
    """tanh as sinh / cosh and the sigmoid as exp(logsigmoid): right values, and transcendental functions the
    kernel does not use."""
    def tanh(x):
        x = x.clamp(-20, 20)
        return torch.sinh(x) / torch.cosh(x)
    gate = beta * tanh(g / beta) * torch.exp(torch.nn.functional.logsigmoid(g))
    up = u if linear_beta is None else linear_beta * tanh(u / linear_beta)
    return gate * up


WRONG_ANSWERS = {
    "09b.1": [_finer_experts_same_top_k, _finer_experts_shared_unchanged, _finer_experts_always_halved],
    "09b.2": [_situ_up_not_capped, _situ_gate_without_sigmoid, _situ_no_series, _situ_tanh_overflows,
              _situ_with_torch_tanh, _situ_in_float64, _situ_caps_swapped,
              _situ_by_sinh_cosh_and_logsigmoid],
}
