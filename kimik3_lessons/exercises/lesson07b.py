"""Lesson 07b's exercises: one token of the short convolution (the decode step of the layer's local view),
and what a KDA layer carries per sequence."""

import torch

from kimik3_lessons import kimi_linear
from kimik3_lessons.exercises import (
    Wrong,
    attempt,
    exercise,
    expect_close,
    expect_pair,
    expect_tensor,
    hint,
    matches,
    part,
)

F64 = torch.float64


@exercise("07b.1", "short_conv_step", "one token of the short convolution", difficulty=2,
          parts=("the outputs", "the tail"), forbid=("kimi_linear.short_conv",))
def check_short_conv_step(short_conv_step):
    B, T, D, W = 2, int(torch.randint(6, 15, ())), 5, 4
    x = torch.randn(B, T, D, dtype=F64)
    weight = torch.randn(D, 1, W, dtype=F64)
    y_ref, tail_ref = kimi_linear.short_conv(x, weight)                    # the whole sequence at once
    # The same sequence one token at a time through the student's step, from a zero tail.
    tail, steps = torch.zeros(B, D, W - 1, dtype=F64), []
    for t in range(T):
        out = attempt(short_conv_step, x[:, t].clone(), weight.clone(), tail.clone())
        y_t, new_tail = expect_pair("a pair (y_t, new_tail)", out)
        expect_tensor(f"y_t (token {t})", y_t, (B, D), dtype=F64)
        expect_tensor(f"the new tail (token {t})", new_tail, (B, D, W - 1))
        steps.append(y_t)
        tail = new_tail
    y = torch.stack(steps, dim=1)
    with part("the outputs"):
        if not matches(y_ref, y):
            flipped, _ = kimi_linear.short_conv(x, weight.flip(-1))
            if matches(flipped, y):
                raise Wrong("the outputs differ from kimi_linear.short_conv's", hint=hint(
                    "the weights run backwards: weight[:, 0, W-1] multiplies the newest input x_t and "
                    "weight[:, 0, 0] the oldest, x_{t-W+1} (the tail holds the inputs oldest first)."))
            if matches(weight[:, 0, -1] * x, y):
                raise Wrong("each y_t depends on x_t alone", hint=hint(
                    "each y_t is weight[:, 0, W-1] x_t alone: the earlier inputs never reach it. Mix in the "
                    "tail, and return the new tail (the last W-1 inputs, x_t included) so that the next "
                    "token sees them."))
            if matches(y_ref[:, :1], y[:, :1]):
                raise Wrong("the first token is right but later ones are not", hint=hint(
                    "check the new tail, the last W-1 inputs, oldest first (drop the oldest, append x_t)."))
        err = expect_close("the outputs, token by token", y_ref, y, row_dim=1,
                           hint=hint("y_t = sum_i weight[:, 0, i] * window[..., i] over window = [tail, x_t] "
                                     "(oldest first, W inputs); the new tail is window[..., 1:]."))
    with part("the tail"):
        err_tail = expect_close("the final tail", tail_ref, tail, row_dim=-1,
                                hint=hint("the new tail is the last W-1 inputs, oldest first."))
    return (f"{T} tokens one at a time == kimi_linear.short_conv on the whole sequence (relative errors "
            f"{err:.0e}, tail {err_tail:.0e})")


@exercise("07b.2", "state_numbers", "what a KDA layer carries per sequence", difficulty=1,
          forbid=("kimi_linear.KDAConfig.state_numbers", "kimi_linear.KDACache.nbytes",
                  "kimi_linear.KimiDeltaAttention.forward", "mqar.state_numbers",
                  "kimik3.decode_memory_bytes"))
def check_state_numbers(state_numbers):
    worst = ""
    for _ in range(3):
        H, K = int(torch.randint(1, 5, ())), int(torch.randint(2, 9, ()))
        conv_size, B = int(torch.randint(2, 6, ())), int(torch.randint(1, 4, ()))
        config = kimi_linear.KDAConfig(hidden_size=12, num_heads=H, head_dim=K, conv_size=conv_size,
                                       chunk_size=4)
        layer = kimi_linear.KimiDeltaAttention(config).double()
        with torch.no_grad():
            _, cache = layer(torch.randn(B, 7, 12, dtype=F64))
        measured = cache.nbytes // (B * 8)                       # numbers per sequence (float64: 8 bytes)
        out = attempt(state_numbers, H, K, conv_size)
        try:
            out = int(out)
        except (TypeError, ValueError, RuntimeError) as err:
            raise Wrong(f"state_numbers should return one whole number, got {type(out).__name__}") from err
        if out != measured:
            HK = H * K
            tails = 3 * HK * (conv_size - 1)
            explanations = [
                (HK * K, hint("that is the recurrent state S alone; the layer also carries, for each of its "
                              "three short convolutions (q, k, v), the last conv_size - 1 inputs of every "
                              "channel.")),
                (HK * K + tails // 3, hint("one convolution tail is counted; there are three (q, k, v).")),
                (HK * K + 2 * tails // 3, hint("two convolution tails are counted; there are three (q, k and "
                                               "v).")),
                (HK * K + 3 * HK * conv_size, hint("a tail holds conv_size - 1 inputs (the current token is "
                                                   "the conv_size-th), not conv_size.")),
                (HK + tails, hint("the state of one head is K x K (key channels x value channels), not K."))]
            why = next((text for count, text in explanations if count == out),
                       hint("the state S [H, K, K] plus three tails [H*K, conv_size - 1]."))
            raise Wrong(f"for H={H}, K={K}, conv_size={conv_size} a real KDACache holds {measured:,} numbers "
                        f"per sequence, you said {out:,}", hint=why)
        worst = f"H={H}, K={K}, conv_size={conv_size}: {measured:,} numbers"
    return f"matches the bytes of real KDACaches (batches of 1-3) for 3 random layer shapes, e.g. {worst}"
