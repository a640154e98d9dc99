"""Lesson 11's exercises: KimiK3's layer schedule, where its latents outweigh its states, decoding with
the cache."""

import dataclasses
import random

import torch

from kimik3_lessons import kimik3
from kimik3_lessons.exercises import Wrong, attempt, exercise


def random_configs(n):
    """The full and tiny configurations, then n fresh ones with other numbers of cycles and KDA layers."""
    full, tiny = kimik3.KimiK3Config.full(), kimik3.KimiK3Config.tiny()
    configs = [full, tiny]
    for _ in range(n):
        configs.append(dataclasses.replace(random.choice((full, tiny)), num_cycles=random.randint(1, 30),
                                           kda_per_cycle=random.randint(0, 7), first_dense_layers=1))
    return configs


@exercise("11.1", "layer_kinds", "the layer schedule of KimiK3", difficulty=1)
def check_layer_kinds(layer_kinds):
    for config in random_configs(6):
        ref = kimik3.layer_kinds(config)
        out = attempt(layer_kinds, config)
        shape = f"num_cycles = {config.num_cycles}, kda_per_cycle = {config.kda_per_cycle}"
        if not isinstance(out, (list, tuple)) or not all(kind in ("kda", "mla") for kind in out):
            raise Wrong(f"return a list of 'kda' and 'mla', one per layer; got {str(out)[:60]} for {shape}")
        if len(out) != len(ref):
            raise Wrong(f"for {shape}: {len(out)} layers, expected {len(ref)} = num_layers. Hint: after the "
                        f"cycles comes one more MLA layer.")
        if list(out) != ref:
            first = next(i for i, (a, b) in enumerate(zip(out, ref, strict=True)) if a != b)
            raise Wrong(f"for {shape}: layer {first + 1} (1-based) is '{out[first]}', expected "
                        f"'{ref[first]}'. Hint: each cycle is kda_per_cycle KDA layers, then its MLA layer.")
    return "the schedule matches kimik3.layer_kinds on 8 configurations (full, tiny and 6 random)"


@exercise("11.2", "crossover_tokens", "where the MLA latents outweigh the KDA states", difficulty=2)
def check_crossover_tokens(crossover_tokens):
    for config in random_configs(4):
        states = kimik3.decode_memory_bytes(config, 0)
        latents = lambda n, config=config, states=states: kimik3.decode_memory_bytes(config, n) - states
        out = attempt(crossover_tokens, config)
        if not isinstance(out, int):
            raise Wrong(f"return an int number of tokens, got {type(out).__name__}")
        if config.kda_per_cycle and not latents(out - 1) <= states < latents(out):
            raise Wrong(f"for num_cycles = {config.num_cycles}, kda_per_cycle = {config.kda_per_cycle}: at "
                        f"{out:,} tokens the latents hold {latents(out):,} bytes and at {out - 1:,} tokens "
                        f"{latents(out - 1):,}, against {states:,} bytes of KDA states. Hint: a KDA layer's "
                        f"state is KDAConfig.state_numbers (S and the convolution tails), and you want the "
                        f"first T with more latent bytes, not an equal or smaller amount.")
    return f"{crossover_tokens(kimik3.KimiK3Config.full()):,} tokens for KimiK3, right on 6 configurations"


def greedy_without_cache(model, idx, n):
    """The reference: re-run the whole sequence for every new token."""
    for _ in range(n):
        logits, _ = model(idx)
        idx = torch.cat([idx, logits[:, -1].argmax(-1, keepdim=True)], dim=1)
    return idx


@exercise("11.3", "generate", "greedy decoding with the cache", difficulty=2)
def check_generate(generate):
    tiny = kimik3.KimiK3Config.tiny()
    model = kimik3.KimiK3(tiny).double()
    with torch.no_grad():                      # move AttnRes off its uniform start, so every path matters
        model.attn_res.queries.normal_(0, 0.5)
    prompt = torch.randint(0, tiny.vocab_size, (2, random.randint(3, 20)))
    n = random.randint(6, 12)
    with torch.no_grad():
        ref = greedy_without_cache(model, prompt, n)
        out = attempt(generate, model, prompt, n)
    if not isinstance(out, torch.Tensor) or tuple(out.shape) != tuple(ref.shape):
        got = list(out.shape) if isinstance(out, torch.Tensor) else type(out).__name__
        raise Wrong(f"return the prompt and the {n} new tokens, [B, T + n] = {list(ref.shape)}; got {got}")
    if not torch.equal(out[:, :prompt.shape[1]], prompt):
        raise Wrong("the output must start with the prompt itself")
    if not torch.equal(out, ref):
        first = int((out != ref).any(0).nonzero()[0]) - prompt.shape[1]
        raise Wrong(f"new token {first + 1} of {n} differs from decoding without a cache. Hint: feed the "
                    f"prompt once, then only the newest token, with the cache the last call returned.")
    return f"{n} tokens after a prompt of {prompt.shape[1]} equal decoding without a cache"
