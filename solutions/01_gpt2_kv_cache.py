"""Solutions to lesson 01's exercises (kept out of the lesson notebook and of the student edition)."""

import math

import torch


def attend_with_cache(q, k, v, cache_k, cache_v):
    """Append the T new keys and values to the cache, then let new token i read keys 0 … past + i."""
    k_all, v_all = torch.cat([cache_k, k], dim=2), torch.cat([cache_v, v], dim=2)
    T, past = q.shape[2], cache_k.shape[2]
    scores = q @ k_all.transpose(-1, -2) / math.sqrt(q.shape[-1])          # [B, nh, T, past + T]
    allowed = torch.ones(T, past + T, dtype=torch.bool).tril(diagonal=past)
    return scores.masked_fill(~allowed, float("-inf")).softmax(dim=-1) @ v_all, k_all, v_all


def generate_cached(model, idx, max_new_tokens):
    """Prefill the prompt once, then feed only the newest token with the cache the last call returned."""
    logits, cache = model(idx)
    for _ in range(max_new_tokens):
        next_id = logits[:, -1].argmax(dim=-1, keepdim=True)
        idx = torch.cat([idx, next_id], dim=1)
        logits, cache = model(next_id, cache)
    return idx


def gpt2_parameters(num_layers, hidden_size, vocab_size, block_size):
    """Per block: 2 LayerNorms (4 C), q/k/v (3 C^2 + 3 C), output (C^2 + C), MLP (8 C^2 + 5 C).
    Then the token and position embeddings and the final LayerNorm; the LM head is tied."""
    C = hidden_size
    per_block = 12 * C**2 + 13 * C
    return num_layers * per_block + (vocab_size + block_size) * C + 2 * C


# Plausible wrong answers, for the tests of the exercise checks (tests/test_exercises.py): each must fail.

def _attend_mask_without_offset(q, k, v, cache_k, cache_v):
    """tril() as in a forward without a cache: new token i reads only keys 0 … i of the whole sequence."""
    k_all, v_all = torch.cat([cache_k, k], dim=2), torch.cat([cache_v, v], dim=2)
    T, past = q.shape[2], cache_k.shape[2]
    scores = q @ k_all.transpose(-1, -2) / math.sqrt(q.shape[-1])
    allowed = torch.ones(T, past + T, dtype=torch.bool).tril()
    return scores.masked_fill(~allowed, float("-inf")).softmax(dim=-1) @ v_all, k_all, v_all


def _attend_token_misses_itself(q, k, v, cache_k, cache_v):
    """tril(diagonal=past - 1): off by one, a new token does not read its own key."""
    k_all, v_all = torch.cat([cache_k, k], dim=2), torch.cat([cache_v, v], dim=2)
    T, past = q.shape[2], cache_k.shape[2]
    scores = q @ k_all.transpose(-1, -2) / math.sqrt(q.shape[-1])
    allowed = torch.ones(T, past + T, dtype=torch.bool).tril(diagonal=past - 1)
    return scores.masked_fill(~allowed, float("-inf")).softmax(dim=-1) @ v_all, k_all, v_all


def _attend_without_scale(q, k, v, cache_k, cache_v):
    """Forgets the 1/sqrt(head_dim) on the scores."""
    k_all, v_all = torch.cat([cache_k, k], dim=2), torch.cat([cache_v, v], dim=2)
    T, past = q.shape[2], cache_k.shape[2]
    allowed = torch.ones(T, past + T, dtype=torch.bool).tril(diagonal=past)
    scores = (q @ k_all.transpose(-1, -2)).masked_fill(~allowed, float("-inf"))
    return scores.softmax(dim=-1) @ v_all, k_all, v_all


def _attend_new_before_old(q, k, v, cache_k, cache_v):
    """Puts the new keys and values in front of the cached ones."""
    k_all, v_all = torch.cat([k, cache_k], dim=2), torch.cat([v, cache_v], dim=2)
    scores = q @ k_all.transpose(-1, -2) / math.sqrt(q.shape[-1])
    return scores.softmax(dim=-1) @ v_all, k_all, v_all


def _attend_softmax_over_queries(q, k, v, cache_k, cache_v):
    """The softmax runs over the new tokens (dim -2) instead of over the keys."""
    k_all, v_all = torch.cat([cache_k, k], dim=2), torch.cat([cache_v, v], dim=2)
    T, past = q.shape[2], cache_k.shape[2]
    scores = q @ k_all.transpose(-1, -2) / math.sqrt(q.shape[-1])
    allowed = torch.ones(T, past + T, dtype=torch.bool).tril(diagonal=past)
    weights = scores.masked_fill(~allowed, -1e9).softmax(dim=-2)
    return weights @ v_all, k_all, v_all


def _attend_in_float32(q, k, v, cache_k, cache_v):
    """The right attention, returned in float32 (a .float() left in): not the dtype it was given."""
    o, k_all, v_all = attend_with_cache(q, k, v, cache_k, cache_v)
    return o.float(), k_all, v_all


def _generate_without_cache(model, idx, max_new_tokens):
    """Right tokens, but every step re-runs the whole sequence: the cache is never used."""
    for _ in range(max_new_tokens):
        logits, _ = model(idx)
        idx = torch.cat([idx, logits[:, -1].argmax(dim=-1, keepdim=True)], dim=1)
    return idx


def _generate_stale_cache(model, idx, max_new_tokens):
    """Keeps the prompt's cache and never passes back the extended one."""
    logits, cache = model(idx)
    for _ in range(max_new_tokens):
        next_id = logits[:, -1].argmax(dim=-1, keepdim=True)
        idx = torch.cat([idx, next_id], dim=1)
        logits, _ = model(next_id, cache)
    return idx


def _generate_first_row(model, idx, max_new_tokens):
    """Takes the logits of the first position of each call instead of the last."""
    logits, cache = model(idx)
    for _ in range(max_new_tokens):
        next_id = logits[:, 0].argmax(dim=-1, keepdim=True)
        idx = torch.cat([idx, next_id], dim=1)
        logits, cache = model(next_id, cache)
    return idx


def _generate_only_new_tokens(model, idx, max_new_tokens):
    """Returns the generated tokens without the prompt in front."""
    return generate_cached(model, idx, max_new_tokens)[:, idx.shape[1]:]


def _parameters_untied_head(num_layers, hidden_size, vocab_size, block_size):
    """Counts the LM head as a matrix of its own (it is the token embedding, tied)."""
    return gpt2_parameters(num_layers, hidden_size, vocab_size, block_size) + vocab_size * hidden_size


def _parameters_without_biases(num_layers, hidden_size, vocab_size, block_size):
    """Forgets the biases of the four Linear layers per block."""
    C = hidden_size
    return num_layers * (12 * C**2 + 4 * C) + (vocab_size + block_size) * C + 2 * C


def _parameters_without_final_norm(num_layers, hidden_size, vocab_size, block_size):
    """Forgets the final LayerNorm (ln_f)."""
    return gpt2_parameters(num_layers, hidden_size, vocab_size, block_size) - 2 * hidden_size


def _parameters_by_building_the_model(num_layers, hidden_size, vocab_size, block_size):
    """Right count, by building the model and counting its parameters: not a formula."""
    from kimik3_lessons import gpt2
    config = gpt2.GPTConfig(block_size=block_size, vocab_size=vocab_size, num_layers=num_layers, num_heads=1,
                            hidden_size=hidden_size)
    with torch.device("meta"):
        return gpt2.GPT(config).num_parameters()


def _parameters_mlp_width_c(num_layers, hidden_size, vocab_size, block_size):
    """The MLP's hidden layer as wide as the model (C, not 4 C): 2 C^2 + 2 C instead of 8 C^2 + 5 C."""
    C = hidden_size
    return num_layers * (6 * C**2 + 10 * C) + (vocab_size + block_size) * C + 2 * C


WRONG_ANSWERS = {
    "01.1": [_attend_mask_without_offset, _attend_token_misses_itself, _attend_without_scale,
             _attend_new_before_old, _attend_softmax_over_queries, _attend_in_float32],
    "01.2": [_generate_without_cache, _generate_stale_cache, _generate_first_row, _generate_only_new_tokens],
    "01.3": [_parameters_untied_head, _parameters_without_biases, _parameters_without_final_norm,
             _parameters_by_building_the_model, _parameters_mlp_width_c],
}
