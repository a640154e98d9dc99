"""Lesson 11's exercises: KimiK3's layer schedule, where its latents outweigh its states, decoding with
the cache."""

import dataclasses
import random

import torch

from kimik3_lessons import kimik3
from kimik3_lessons.exercises import CacheSpy, Wrong, attempt, exercise, hint, part


def random_configs(n):
    """The full and tiny configurations, the article's (the full one without its last MLA layer), then n
    fresh ones with other numbers of cycles and KDA layers, with and without the last MLA layer."""
    full, tiny = kimik3.KimiK3Config.full(), kimik3.KimiK3Config.tiny()
    configs = [full, tiny, dataclasses.replace(full, final_mla=False)]
    for i in range(n):
        configs.append(dataclasses.replace(random.choice((full, tiny)), num_cycles=random.randint(1, 30),
                                           kda_per_cycle=random.randint(0, 7), first_dense_layers=1,
                                           final_mla=bool(i % 2)))
    return configs


def _shapes_of_latent_and_state(config):
    """(the KDA states' numbers, the MLA latents' numbers per token) of a configuration."""
    kinds = kimik3.layer_kinds(config)
    return (kinds.count("kda") * config.kda_config().state_numbers,
            kinds.count("mla") * (config.kv_lora_rank + config.qk_rope_head_dim))


def exact_crossover_config():
    """A configuration whose states are a whole number of tokens of latents: at that T they weigh the same,
    so the first T with more latent bytes is one further (a `ceil` answer stops one token short here)."""
    full = kimik3.KimiK3Config.full()
    exact = []
    for cycles in range(1, 31):
        for kda_per_cycle in range(1, 8):
            for final_mla in (False, True):
                config = dataclasses.replace(full, num_cycles=cycles, kda_per_cycle=kda_per_cycle,
                                             first_dense_layers=1, final_mla=final_mla)
                states, per_token = _shapes_of_latent_and_state(config)
                if states % per_token == 0:
                    exact.append(config)
    return random.choice(exact)


@exercise("11.1", "layer_kinds", "the layer schedule of KimiK3", difficulty=1,
          forbid=("kimik3.layer_kinds", "kimik3.KimiK3"))
def check_layer_kinds(layer_kinds):
    for config in random_configs(6):
        ref = kimik3.layer_kinds(config)
        out = attempt(layer_kinds, config)
        shape = (f"num_cycles = {config.num_cycles}, kda_per_cycle = {config.kda_per_cycle}, final_mla = "
                 f"{config.final_mla}")
        if not isinstance(out, (list, tuple)) or not all(kind in ("kda", "mla") for kind in out):
            raise Wrong(f"return a list of 'kda' and 'mla', one per layer; got {str(out)[:60]} for {shape}")
        if len(out) != len(ref):
            raise Wrong(f"for {shape}: {len(out)} layers, expected {len(ref)} = num_layers", hint=hint(
                "after the cycles comes one more MLA layer when config.final_mla is true, none when it is "
                "false."))
        if list(out) != ref:
            first = next(i for i, (a, b) in enumerate(zip(out, ref, strict=True)) if a != b)
            raise Wrong(f"for {shape}: layer {first + 1} (1-based) is '{out[first]}', expected "
                        f"'{ref[first]}'",
                        hint=hint("each cycle is kda_per_cycle KDA layers, then its MLA layer."))
    return ("the schedule matches kimik3.layer_kinds on 9 configurations (full, tiny, the article's 92 "
            "layers with final_mla=False, and 6 random)")


@exercise("11.2", "crossover_tokens", "where the MLA latents outweigh the KDA states", difficulty=2,
          forbid=("kimik3.decode_memory_bytes",))
def check_crossover_tokens(crossover_tokens):
    for config in random_configs(4) + [exact_crossover_config()]:
        states = kimik3.decode_memory_bytes(config, 0)
        latents = lambda n, config=config, states=states: kimik3.decode_memory_bytes(config, n) - states
        out = attempt(crossover_tokens, config)
        if not isinstance(out, int) or isinstance(out, bool):
            raise Wrong(f"return an int number of tokens, got {type(out).__name__}")
        if config.kda_per_cycle and not latents(out - 1) <= states < latents(out):
            raise Wrong(f"for num_cycles = {config.num_cycles}, kda_per_cycle = {config.kda_per_cycle}: at "
                        f"{out:,} tokens the latents hold {latents(out):,} bytes and at {out - 1:,} tokens "
                        f"{latents(out - 1):,}, against {states:,} bytes of KDA states", hint=hint(
                            "a KDA layer's state is KDAConfig.state_numbers (S and the convolution tails), "
                            "and you want the first T with more latent bytes, not an equal or smaller "
                            "amount."))
    return (f"{attempt(crossover_tokens, kimik3.KimiK3Config.full()):,} tokens for KimiK3, right on 8 "
            "configurations (one where the states are a whole number of tokens of latents)")


def greedy_without_cache(model, idx, n):
    """The reference: re-run the whole sequence for every new token."""
    for _ in range(n):
        logits, _ = model(idx)
        idx = torch.cat([idx, logits[:, -1].argmax(-1, keepdim=True)], dim=1)
    return idx


@exercise("11.3", "generate", "greedy decoding with the cache", difficulty=2,
          parts=("the tokens", "the cache used"))
def check_generate(generate):
    tiny = kimik3.KimiK3Config.tiny()
    model = kimik3.KimiK3(tiny).double()
    with torch.no_grad():                      # move AttnRes off its uniform start, so every path matters
        model.attn_res.queries.normal_(0, 0.5)
    prompt = torch.randint(0, tiny.vocab_size, (2, random.randint(3, 12)))
    n = random.randint(5, 9)
    how = hint("feed the prompt once, then only the newest token, with the cache the last call returned.")
    spy = CacheSpy(model, how)
    with torch.no_grad():
        out = attempt(generate, spy, prompt.clone(), n)
        ref = greedy_without_cache(model, prompt, n)
    if not isinstance(out, torch.Tensor) or tuple(out.shape) != tuple(ref.shape):
        got = list(out.shape) if isinstance(out, torch.Tensor) else type(out).__name__
        raise Wrong(f"return the prompt and the {n} new tokens, [B, T + n] = {list(ref.shape)}; got {got}")
    if not torch.equal(out[:, :prompt.shape[1]], prompt):
        raise Wrong("the output must start with the prompt itself")
    with part("the tokens"):
        if not torch.equal(out, ref):
            first = int((out != ref).any(0).nonzero()[0]) - prompt.shape[1]
            raise Wrong(f"new token {first + 1} of {n} differs from decoding without a cache", hint=how)
    B, T = prompt.shape
    with part("the cache used", needs=("the tokens",)):
        if spy.misuse is not None:
            raise spy.misuse
        if spy.tokens_fed > B * (T + n):
            raise Wrong(f"your loop fed the model {spy.tokens_fed} token positions; with the cache it needs "
                        f"at most {B * (T + n)} (the prompt once, then one token per step)", hint=how)
    return (f"{n} tokens after a prompt of {T} equal decoding without a cache, from {spy.tokens_fed} token "
            "positions fed")
