"""Solutions to lesson 11's exercises (kept out of the lesson notebook and of the student edition)."""

import torch


def layer_kinds(config):
    """num_cycles × (kda_per_cycle KDA layers, then one MLA layer), then one last MLA layer if
    config.final_mla (93 layers for the published configuration, 92 for the article's)."""
    return (["kda"] * config.kda_per_cycle + ["mla"]) * config.num_cycles + ["mla"] * config.final_mla


def crossover_tokens(config):
    """States: n_kda · state_numbers (S and the conv tails); latents: n_mla · (d_c + d_r) per token.
    The first T with n_mla (d_c + d_r) T > n_kda s is floor(n_kda s / (n_mla (d_c + d_r))) + 1."""
    kinds = layer_kinds(config)
    states = kinds.count("kda") * config.kda_config().state_numbers
    per_token = kinds.count("mla") * (config.kv_lora_rank + config.qk_rope_head_dim)
    return states // per_token + 1


def generate(model, idx, n):
    """Greedy decoding: the prompt once, then only the newest token with the cache."""
    logits, cache = model(idx)
    for _ in range(n):
        next_id = logits[:, -1].argmax(-1, keepdim=True)
        idx = torch.cat([idx, next_id], dim=1)
        logits, cache = model(next_id, cache)
    return idx


# Plausible wrong answers, for the tests of the exercise checks (tests/test_exercises.py): each must fail.

def _layer_kinds_no_final_mla(config):
    """Forgets the extra MLA layer after the last cycle (92 layers for KimiK3, the article's count)."""
    return (["kda"] * config.kda_per_cycle + ["mla"]) * config.num_cycles


def _layer_kinds_mla_first(config):
    """Puts each cycle's MLA layer first."""
    return (["mla"] + ["kda"] * config.kda_per_cycle) * config.num_cycles + ["mla"]


def _layer_kinds_always_final_mla(config):
    """Always adds the last MLA layer, ignoring config.final_mla (93 layers for the article's 92)."""
    return (["kda"] * config.kda_per_cycle + ["mla"]) * config.num_cycles + ["mla"]


def _layer_kinds_by_module(config):
    """kimik3.layer_kinds itself."""
    from kimik3_lessons import kimik3
    return kimik3.layer_kinds(config)


def _crossover_tokens_ceil(config):
    """ceil(states / per_token): off by one where the states are a whole number of tokens of latents (at that
    T the two weigh the same; the latents outweigh the states one token later)."""
    import math
    kinds = layer_kinds(config)
    states = kinds.count("kda") * config.kda_config().state_numbers
    return math.ceil(states / (kinds.count("mla") * (config.kv_lora_rank + config.qk_rope_head_dim)))


def _crossover_tokens_equal_is_enough(config):
    """Off by one: the last T where the latents do not yet outweigh the states."""
    kinds = layer_kinds(config)
    states = kinds.count("kda") * config.kda_config().state_numbers
    return states // (kinds.count("mla") * (config.kv_lora_rank + config.qk_rope_head_dim))


def _crossover_tokens_state_only(config):
    """Counts the state S [H, K, K] but forgets the three short-convolution tails."""
    kinds = layer_kinds(config)
    states = kinds.count("kda") * config.kda_heads * config.kda_head_dim ** 2
    return states // (kinds.count("mla") * (config.kv_lora_rank + config.qk_rope_head_dim)) + 1


def _generate_refeeds_everything(model, idx, n):
    """Feeds the whole sequence again at every step, with the cache: every token is counted twice."""
    logits, cache = model(idx)
    for _ in range(n):
        idx = torch.cat([idx, logits[:, -1].argmax(-1, keepdim=True)], dim=1)
        logits, cache = model(idx, cache)
    return idx


def _generate_forgets_the_cache(model, idx, n):
    """Feeds only the newest token but without the cache: the model sees one token of context."""
    logits, _ = model(idx)
    for _ in range(n):
        next_id = logits[:, -1].argmax(-1, keepdim=True)
        idx = torch.cat([idx, next_id], dim=1)
        logits, _ = model(next_id)
    return idx


def _generate_without_cache(model, idx, n):
    """Right tokens, re-running the whole sequence at every step: the cache is never read."""
    for _ in range(n):
        logits, _ = model(idx)
        idx = torch.cat([idx, logits[:, -1].argmax(-1, keepdim=True)], dim=1)
    return idx


def _generate_prompt_cache_kept(model, idx, n):
    """Passes the prompt's cache at every step instead of the one the last call returned."""
    logits, cache = model(idx)
    for _ in range(n):
        next_id = logits[:, -1].argmax(-1, keepdim=True)
        idx = torch.cat([idx, next_id], dim=1)
        logits, _ = model(next_id, cache)
    return idx


WRONG_ANSWERS = {"11.1": [_layer_kinds_no_final_mla, _layer_kinds_mla_first, _layer_kinds_always_final_mla,
                          _layer_kinds_by_module],
                 "11.2": [_crossover_tokens_equal_is_enough, _crossover_tokens_state_only,
                          _crossover_tokens_ceil],
                 "11.3": [_generate_refeeds_everything, _generate_forgets_the_cache, _generate_without_cache,
                          _generate_prompt_cache_kept]}
