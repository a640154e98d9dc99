"""Solutions to lesson 12's exercises (kept out of the lesson notebook and of the student edition)."""

import torch

BLANK, IGNORE = 0, -100


def mqar_layout(keys, values, queries, seq_len):
    """Pairs at 2i, 2i + 1; key i again at queries[:, i], where the target is value i."""
    B, P = keys.shape
    inputs = torch.full((B, seq_len), BLANK, dtype=torch.long)
    targets = torch.full((B, seq_len), IGNORE, dtype=torch.long)
    inputs[:, 0:2 * P:2], inputs[:, 1:2 * P:2] = keys, values
    inputs.scatter_(1, queries, keys)
    targets.scatter_(1, queries, values)
    return inputs, targets


def query_distances(inputs, targets, num_pairs):
    """For each pair i, the position of its query minus 2i + 1 (where its value sits)."""
    B = inputs.shape[0]
    distances = torch.empty(B, num_pairs, dtype=torch.long)
    for b in range(B):
        for t in (targets[b] != IGNORE).nonzero()[:, 0].tolist():
            i = (inputs[b, 0:2 * num_pairs:2] == inputs[b, t]).nonzero()[0, 0].item()
            distances[b, i] = t - (2 * i + 1)
    return distances


def state_numbers(config, seq_len):
    """Per layer: attention 2 H K per token, MLA d_c + d_r per token (+ D (W - 1) for the convolution in
    front of either); a recurrent mixer H K K, + 3 H K (W - 1) for its q, k, v convolutions."""
    D, H, K, W = config.hidden_size, config.num_heads, config.head_dim, config.conv_size
    numbers = []
    for kind in config.layers:
        if kind == "attention":
            numbers.append(2 * H * K * seq_len + D * (W - 1))
        elif kind == "mla":
            c = config.mla_config()
            numbers.append((c.kv_lora_rank + c.qk_rope_head_dim) * seq_len + D * (W - 1))
        else:
            numbers.append(H * K * K + 3 * H * K * (W - 1))
    return numbers


# Plausible wrong answers, for the tests of the exercise checks (tests/test_exercises.py): each must fail.

def _mqar_layout_shifted_targets(keys, values, queries, seq_len):
    """Next-token habit: puts each answer one position after its query."""
    inputs, targets = mqar_layout(keys, values, queries, seq_len)
    return inputs, torch.roll(targets, 1, dims=1)


def _mqar_layout_leaks_the_answer(keys, values, queries, seq_len):
    """Writes the value right after its query in the input, as a next-token stream would: the answer leaks."""
    inputs, targets = mqar_layout(keys, values, queries, seq_len)
    after = (queries + 1).clamp(max=seq_len - 1)
    return inputs.scatter(1, after, values), targets


def _mqar_layout_by_module(keys, values, queries, seq_len):
    """mqar.mqar_layout itself."""
    from kimik3_lessons import mqar
    return mqar.mqar_layout(keys, values, queries, seq_len)


def _mqar_layout_value_first(keys, values, queries, seq_len):
    """Each pair written value first (2i the value, 2i + 1 the key)."""
    inputs, targets = mqar_layout(keys, values, queries, seq_len)
    P = keys.shape[1]
    inputs[:, 0:2 * P:2], inputs[:, 1:2 * P:2] = values, keys
    return inputs, targets


def _query_distances_from_the_key(inputs, targets, num_pairs):
    """Measures from the key (2i) instead of the value (2i + 1): one token too many."""
    return query_distances(inputs, targets, num_pairs) + 1


def _query_distances_in_query_order(inputs, targets, num_pairs):
    """Lists the distances in the order the queries come, not by pair."""
    d = query_distances(inputs, targets, num_pairs)
    keys = inputs[:, 0:2 * num_pairs:2]
    order = torch.stack([torch.tensor([(keys[b] == inputs[b, t]).nonzero()[0, 0].item()
                                       for t in (targets[b] != IGNORE).nonzero()[:, 0].tolist()])
                         for b in range(len(inputs))])
    return d.gather(1, order)


def _query_distances_by_module(inputs, targets, num_pairs):
    """mqar.query_distances itself."""
    from kimik3_lessons import mqar
    return mqar.query_distances(inputs, targets, num_pairs)


def _query_distances_positions(inputs, targets, num_pairs):
    """The query positions themselves, not their distance from the pair's value."""
    return query_distances(inputs, targets, num_pairs) + 2 * torch.arange(num_pairs) + 1


def _state_numbers_keys_only(config, seq_len):
    """Attention caches keys only (forgets the values)."""
    D, H, K, W = config.hidden_size, config.num_heads, config.head_dim, config.conv_size
    return [H * K * seq_len + D * (W - 1) if kind == "attention" else n
            for kind, n in zip(config.layers, state_numbers(config, seq_len), strict=True)]


def _state_numbers_one_head(config, seq_len):
    """A recurrent state of K × K for the whole layer (forgets that every head has its own)."""
    H, K, W = config.num_heads, config.head_dim, config.conv_size
    return [K * K + 3 * H * K * (W - 1) if kind not in ("attention", "mla") else n
            for kind, n in zip(config.layers, state_numbers(config, seq_len), strict=True)]


def _state_numbers_without_tails(config, seq_len):
    """Forgets the short convolutions' tails."""
    D, H, K, W = config.hidden_size, config.num_heads, config.head_dim, config.conv_size
    return [n - (D * (W - 1) if kind in ("attention", "mla") else 3 * H * K * (W - 1))
            for kind, n in zip(config.layers, state_numbers(config, seq_len), strict=True)]


def _state_numbers_by_module(config, seq_len):
    """mqar.state_numbers itself."""
    from kimik3_lessons import mqar
    return mqar.state_numbers(config, seq_len)


WRONG_ANSWERS = {"12.1": [_mqar_layout_shifted_targets, _mqar_layout_leaks_the_answer, _mqar_layout_by_module,
                          _mqar_layout_value_first],
                 "12.2": [_query_distances_from_the_key, _query_distances_in_query_order,
                          _query_distances_by_module, _query_distances_positions],
                 "12.3": [_state_numbers_keys_only, _state_numbers_one_head, _state_numbers_without_tails,
                          _state_numbers_by_module]}
