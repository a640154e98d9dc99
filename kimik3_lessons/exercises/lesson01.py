"""Lesson 01's exercises: attention over a KV cache (the mask), the cached decode loop, GPT-2's size."""

import torch

from kimik3_lessons import gpt2
from kimik3_lessons.exercises import (
    CacheSpy,
    Wrong,
    attempt,
    exercise,
    expect_close,
    expect_pair,
    expect_tensor,
    hint,
    part,
)


def _randint(low, high):
    """A fresh random integer in [low, high]."""
    return int(torch.randint(low, high + 1, ()))


def _heads(attn, x):
    """q, k, v [B, num_heads, T, head_dim] of `attn` (a CausalSelfAttention) for x [B, T, C]."""
    B, T, C = x.shape
    return (z.view(B, T, attn.num_heads, C // attn.num_heads).transpose(1, 2)
            for z in attn.c_attn(x).split(C, dim=2))


@exercise("01.1", "attend_with_cache", "attention for T new tokens over a KV cache (append and mask)",
          difficulty=2, parts=("k_all and v_all", "o"),
          forbid=("gpt2.CausalSelfAttention.forward", "gpt2.GPT.forward"))
def check_attend_with_cache(attend_with_cache):
    num_heads, head_dim = _randint(2, 4), _randint(3, 8)
    config = gpt2.GPTConfig(block_size=64, vocab_size=11, num_layers=1, num_heads=num_heads,
                            hidden_size=num_heads * head_dim)
    attn = gpt2.CausalSelfAttention(config).double().eval()
    B, C = 2, config.hidden_size
    errors = []
    # A multi-token continuation (T new tokens after `past` cached ones), then a one-token decode step.
    for past, T in ((_randint(3, 12), _randint(2, 6)), (_randint(3, 12), 1)):
        with torch.no_grad():
            _, cache = attn(torch.randn(B, past, C, dtype=torch.float64))
            x = torch.randn(B, T, C, dtype=torch.float64)
            y_ref, cache_ref = attn(x, cache)                   # the module: CausalSelfAttention with a cache
            q, k, v = _heads(attn, x)
        o, k_all, v_all = expect_pair("a triple (o, k_all, v_all)",
                                      attempt(attend_with_cache, q, k, v, cache.k, cache.v), 3)
        with part("k_all and v_all"):
            for name, ref, got in (("k_all", cache_ref.k, k_all), ("v_all", cache_ref.v, v_all)):
                expect_close(name, ref, got, row_dim=2, dtype=q.dtype, hint=hint(
                    "the new tokens go after the cached ones: torch.cat([cache, new], dim=2) (dim 2 is the "
                    "token dimension)."))
        with part("o"):
            expect_tensor("o", o, q.shape, dtype=q.dtype)
            with torch.no_grad():
                y = attn.c_proj(o.transpose(1, 2).reshape(B, T, C))
            errors.append(expect_close(
                f"o (past = {past}, T = {T}), seen through the layer's output projection", y_ref, y,
                row_dim=1,
                hint=hint("new token i sits at position past + i, so it may read keys 0 … past + i: mask the "
                          f"[T, past + T] scores with tril(diagonal=past) (past = {past} here), scale them "
                          "by 1/sqrt(head_dim), softmax over the keys.")))
    return f"equals CausalSelfAttention with a KV cache (relative error {max(errors):.0e})"


@exercise("01.2", "generate_cached", "greedy decoding with the KV cache", difficulty=1,
          parts=("the tokens", "the cache used"), forbid=("gpt2.GPT.generate",))
def check_generate_cached(generate_cached):
    config = gpt2.GPTConfig(block_size=64, vocab_size=_randint(20, 60), num_layers=2, num_heads=2,
                            hidden_size=16)
    model = gpt2.GPT(config).double().eval()
    B, prompt_len, n = 2, _randint(3, 8), _randint(6, 12)
    prompt = torch.stack([torch.randperm(config.vocab_size)[:prompt_len] for _ in range(B)])  # no repeats
    ref = model.generate(prompt, n, use_cache=False)    # greedy, recomputing everything: the reference
    spy = CacheSpy(model, held=lambda cache: cache[0].length,   # a KVCache per layer
                   hint=hint("pass back the cache the previous call returned (logits, cache = model(next_id, "
                             "cache)) and feed only the newest token."))
    with torch.no_grad():
        out = attempt(generate_cached, spy, prompt.clone(), n)
    expect_tensor("the returned token ids", out, ref.shape)
    with part("the tokens"):
        if not torch.equal(out, ref):
            first = int((out != ref).any(dim=0).nonzero()[0])
            raise Wrong(f"token {first} differs ({'a prompt token' if first < prompt_len else 'generated'}; "
                        f"tokens 0..{first - 1} match)", hint=hint(
                            "feed the prompt once, then only the newest token with the cache, and pick the "
                            "argmax of the logits of the LAST position."))
    needed = B * (prompt_len + n)          # the prompt once, then one token per step (the last may be spared)
    with part("the cache used", needs=("the tokens",)):
        if spy.misuse is not None:
            raise spy.misuse
        if spy.tokens_fed > needed:
            raise Wrong(f"your loop fed the model {spy.tokens_fed} token positions; with the cache it needs "
                        f"at most {needed} (the prompt once, then one token per step)",
                        hint=hint("call model(newest_token, cache), not model(whole_sequence)."))
    return (f"same {n} tokens as decoding without a cache, from {spy.tokens_fed} token positions fed instead "
            f"of {B * sum(range(prompt_len, prompt_len + n))}")


@exercise("01.3", "gpt2_parameters", "GPT-2's parameter count as a formula", difficulty=1,
          forbid=("gpt2.GPT", "gpt2.GPT.num_parameters"))
def check_gpt2_parameters(gpt2_parameters):
    for _ in range(3):
        num_heads = _randint(1, 4)
        config = gpt2.GPTConfig(block_size=_randint(8, 200), vocab_size=_randint(10, 500),
                                num_layers=_randint(1, 6), num_heads=num_heads,
                                hidden_size=num_heads * _randint(2, 16))
        with torch.device("meta"):                       # shapes only: nothing is allocated
            ref = gpt2.GPT(config).num_parameters()
        out = attempt(gpt2_parameters, config.num_layers, config.hidden_size, config.vocab_size,
                      config.block_size)
        if isinstance(out, torch.Tensor) and out.numel() == 1:
            out = out.item()
        if not isinstance(out, (int, float)) or isinstance(out, bool):
            raise Wrong(f"return a whole number (an int), got {type(out).__name__}")
        if out != ref:
            raise Wrong(f"for {config.num_layers} layers, width {config.hidden_size}, vocabulary "
                        f"{config.vocab_size}, {config.block_size} positions you count {out}, the model has "
                        f"{ref:,} ({out - ref:+,} off)", hint=hint(
                            "per block two LayerNorms (weight and bias), q/k/v and output projections, the "
                            "MLP's two matrices, every Linear with a bias; then both embeddings and the "
                            "final LayerNorm; the LM head is the token embedding (tied), counted once."))
    small = attempt(gpt2_parameters, 12, 768, 50257, 1024)
    return f"exact for 3 random configurations (GPT-2 small: {small:,})"
