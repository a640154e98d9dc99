"""Solutions to lesson 10's exercises (kept out of the lesson notebook and of the student edition)."""

import torch


def depth_mix(w, V, g, eps):
    """h = sum_i softmax_i(w · RMSNorm(v_i)) v_i over the sources V [N, ..., D]."""
    K = V * torch.rsqrt(V.pow(2).mean(-1, keepdim=True) + eps) * g     # keys: RMS-normalized sources
    alpha = (K @ w).softmax(dim=0)                                       # [N, ...]: one softmax over depth
    return (alpha.unsqueeze(-1) * V).sum(dim=0), alpha                   # values: the raw sources


def _block_sums(embedding, outputs, S, p):
    """[b_0, the sum of each finished block of S outputs, the current block's sum so far if not empty]."""
    finished = [sum(outputs[j * S:(j + 1) * S]) for j in range(p // S)]
    partial = [sum(outputs[p // S * S:p])] if p % S else []
    return [embedding, *finished, *partial]


def block_sources(embedding, outputs, block_size, p):
    """The sources mix point p reads, from f_0 … f_{p-1}: a block is 2·block_size sublayer outputs."""
    return _block_sums(embedding, outputs, 2 * block_size, p)


def n_sources(num_layers, block_size, p):
    if block_size is None:
        return 1 + p                                     # full AttnRes: the embedding and every output
    S = 2 * block_size
    return 1 + p // S + (p % S > 0)


# Plausible wrong answers, for the tests of the exercise checks (tests/test_exercises.py): each must fail.

def _depth_mix_raw_keys(w, V, g, eps):
    """Scores the raw sources: a large source wins by its size."""
    alpha = ((V * g) @ w).softmax(dim=0)
    return (alpha.unsqueeze(-1) * V).sum(dim=0), alpha


def _depth_mix_mixes_keys(w, V, g, eps):
    """Mixes the normalized keys instead of the raw values."""
    K = V * torch.rsqrt(V.pow(2).mean(-1, keepdim=True) + eps) * g
    alpha = (K @ w).softmax(dim=0)
    return (alpha.unsqueeze(-1) * K).sum(dim=0), alpha


def _depth_mix_softmax_over_tokens(w, V, g, eps):
    """Softmax over the last dimension of the logits (the tokens), not over depth."""
    K = V * torch.rsqrt(V.pow(2).mean(-1, keepdim=True) + eps) * g
    alpha = (K @ w).softmax(dim=-1)
    return (alpha.unsqueeze(-1) * V).sum(dim=0), alpha


def _depth_mix_no_norm_weight(w, V, g, eps):
    """Forgets the key norm's learned weight g."""
    return depth_mix(w, V, torch.ones_like(g), eps)


def _depth_mix_by_module(w, V, g, eps):
    """attnres.attn_res itself: the right mix, not written."""
    from kimik3_lessons import attnres
    return attnres.attn_res(w, list(V), g, eps, return_weights=True)


def _depth_mix_eps_outside_sqrt(w, V, g, eps):
    """RMS norm with eps added after the square root: v / (sqrt(mean(v^2)) + eps)."""
    K = V / (V.pow(2).mean(-1, keepdim=True).sqrt() + eps) * g
    alpha = (K @ w).softmax(dim=0)
    return (alpha.unsqueeze(-1) * V).sum(dim=0), alpha


def _block_sources_layer_blocks(embedding, outputs, block_size, p):
    """A block of block_size sublayer outputs: forgets that each layer has two."""
    return _block_sums(embedding, outputs, block_size, p)


def _block_sources_reads_its_own_output(embedding, outputs, block_size, p):
    """Off by one: the partial block also holds f_p, the output mix point p is about to produce."""
    S = 2 * block_size
    finished = [sum(outputs[j * S:(j + 1) * S]) for j in range(p // S)]
    return [embedding, *finished, sum(outputs[p // S * S:p + 1])]


def _block_sources_empty_partial(embedding, outputs, block_size, p):
    """Keeps an empty partial block as a zero source at a block boundary (it takes softmax weight)."""
    sources = block_sources(embedding, outputs, block_size, p)
    return sources + [torch.zeros_like(embedding)] if p % (2 * block_size) == 0 else sources


def _block_sources_by_blocksums(embedding, outputs, block_size, p):
    """BlockSums walked to mix point p: the right sources, the definition not used."""
    from kimik3_lessons import attnres
    sums = attnres.BlockSums(embedding, 2 * block_size)
    for out in outputs[:p]:
        sums.add_sublayer_output(out)
    return sums.sources()


def _block_sources_without_embedding(embedding, outputs, block_size, p):
    """Forgets the embedding b_0 (and returns no source at all at mix point 0)."""
    return block_sources(embedding, outputs, block_size, p)[1:]


def _n_sources_always_partial(num_layers, block_size, p):
    """Counts a partial block even right after a boundary."""
    return 1 + p if block_size is None else 1 + p // (2 * block_size) + 1


def _n_sources_layer_blocks(num_layers, block_size, p):
    """A block of block_size sublayer outputs, not 2·block_size."""
    return 1 + p if block_size is None else 1 + p // block_size + (p % block_size > 0)


def _n_sources_full_without_embedding(num_layers, block_size, p):
    """Full AttnRes counted as the p outputs, without the embedding."""
    return p if block_size is None else n_sources(num_layers, block_size, p)


WRONG_ANSWERS = {
    "10.1": [_depth_mix_raw_keys, _depth_mix_mixes_keys, _depth_mix_softmax_over_tokens,
             _depth_mix_no_norm_weight, _depth_mix_by_module, _depth_mix_eps_outside_sqrt],
    "10.2": [_block_sources_layer_blocks, _block_sources_reads_its_own_output, _block_sources_empty_partial,
             _block_sources_by_blocksums, _block_sources_without_embedding],
    "10.3": [_n_sources_always_partial, _n_sources_layer_blocks, _n_sources_full_without_embedding],
}
