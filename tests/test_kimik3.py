"""Tests for kimik3_lessons.kimik3: the layer pattern, the parameter count (against the instantiated
tiny model, the full model built on the meta device, and docs/facts.md's weight shapes multiplied out
here), decoding against one pass, and the decode memory against the real cache."""

import dataclasses
import math

import pytest
import torch

from kimik3_lessons import kimik3, lab, mla
from kimik3_lessons.kimi_linear import KDACache

FULL, TINY = kimik3.KimiK3Config.full(), kimik3.KimiK3Config.tiny()


def test_layer_pattern_full():
    kinds = kimik3.layer_kinds(FULL)
    assert len(kinds) == FULL.num_layers == 93
    assert [i for i, kind in enumerate(kinds, 1) if kind == "mla"] == [*range(4, 93, 4), 93]
    assert kinds.count("kda") == 69 and kinds.count("mla") == 24
    assert set(kinds) == {"kda", "mla"}


def test_tiny_has_the_full_structure():
    kinds = kimik3.layer_kinds(TINY)
    assert kinds == ["kda", "kda", "kda", "mla"] * TINY.num_cycles + ["mla"]
    assert TINY.num_cycles >= 2 and TINY.num_layers > TINY.attnres_block_size   # crosses a block boundary
    assert TINY.first_dense_layers == 1 and TINY.top_k < TINY.num_experts
    model = kimik3.KimiK3(TINY)
    assert isinstance(model.layers[0].mlp, kimik3.moe.SiTUMLP)
    assert all(isinstance(layer.mlp, kimik3.moe.LatentMoE) for layer in model.layers[1:])
    assert model.lm_head.weight.data_ptr() != model.embed_tokens.weight.data_ptr()  # untied


def component_of(name, kinds):
    """The component a parameter name belongs to, decided from the module tree (not from the formula)."""
    parts = name.split(".")
    if parts[0] == "layers":
        layer, where = int(parts[1]), parts[2]
        if where == "self_attn":
            return f"{kinds[layer].upper()} mixers"
        if where in ("input_layernorm", "post_attention_layernorm"):
            return "RMSNorms"
        if parts[3] in ("gate_proj", "up_proj", "down_proj"):   # a dense layer's SiTU MLP itself
            return "dense SiTU MLP"
        return {"router": "MoE router", "score_bias": "MoE router", "shared": "MoE shared experts",
                "w1": "MoE routed experts", "w2": "MoE routed experts", "w3": "MoE routed experts",
                "latent_down": "MoE latent down + norm + up", "latent_norm": "MoE latent down + norm + up",
                "latent_up": "MoE latent down + norm + up"}[parts[3]]
    return {"embed_tokens": "embedding", "attn_res": "AttnRes queries + key norms", "norm": "RMSNorms",
            "lm_head": "LM head"}[parts[0]]


@pytest.mark.parametrize("variant", [{}, {"num_cycles": 3, "kda_per_cycle": 2, "first_dense_layers": 2,
                                          "num_shared_experts": 2, "top_k": 3}])
def test_count_matches_the_instantiated_model(variant):
    config = dataclasses.replace(TINY, **variant)
    model = kimik3.KimiK3(config)
    count = kimik3.count_parameters(config)
    assert count["total"] == sum(p.numel() for p in model.parameters())
    by_module = {}
    for name, p in model.named_parameters():
        key = component_of(name, model.kinds)
        by_module[key] = by_module.get(key, 0) + p.numel()
    assert by_module == {name: total for name, (total, _) in count["components"].items()}
    # active: everything but the embedding and the routed experts a token does not run
    idle = sum((layer.mlp.num_experts - config.top_k) * sum(w[0].numel() for w in
                                                             (layer.mlp.w1, layer.mlp.w2, layer.mlp.w3))
               for layer in model.layers[config.first_dense_layers:])
    assert count["active"] == count["total"] - model.embed_tokens.weight.numel() - idle


def test_full_count_matches_the_model_built_on_the_meta_device():
    with torch.device("meta"):  # shapes without storage: 2.8T parameters in no memory
        model = kimik3.KimiK3(FULL)
    assert kimik3.count_parameters(FULL)["total"] == sum(p.numel() for p in model.parameters())


def test_full_count_from_the_reference_shapes():
    # docs/facts.md's KimiK3 weight list, multiplied out here
    n = lambda *shapes: sum(math.prod(s) for s in shapes)
    kda = n([12288, 7168], [12288, 7168], [12288, 7168], [12288, 1, 4], [12288, 1, 4], [12288, 1, 4],
            [128, 7168], [12288, 128], [96, 7168], [128], [12288], [128])
    mla_ = n([1536, 7168], [1536], [18432, 1536], [576, 7168], [512], [24576, 512])
    every_layer = n([12288, 7168], [7168, 12288], [7168], [7168], [1, 7168], [7168], [1, 7168], [7168])
    dense = n([33792, 7168], [33792, 7168], [7168, 33792])
    shared_router_latent = n([6144, 7168], [6144, 7168], [7168, 6144], [896, 7168], [896], [3584, 7168],
                             [3584], [7168, 3584])
    expert = n([3072, 3584], [3072, 3584], [3584, 3072])
    final = n([7168], [7168], [7168])                        # final RMSNorm, AttnRes output query and norm
    embedding = lm_head = 163840 * 7168
    total = (69 * kda + 24 * mla_ + 93 * every_layer + dense + 92 * (shared_router_latent + 896 * expert)
             + final + embedding + lm_head)
    active = total - embedding - 92 * (896 - 16) * expert
    count = kimik3.count_parameters(FULL)
    assert (count["total"], count["active"]) == (total, active)
    assert round(count["total"] / 1e12, 1) == 2.8                                  # the article's "2.8T"
    assert 0.97 < count["components"]["MoE routed experts"][0] / count["total"] < 0.99
    assert 100e9 < count["active"] < 110e9


def test_decode_equals_one_pass():
    torch.manual_seed(0)
    model = kimik3.KimiK3(TINY).double()
    with torch.no_grad():  # move AttnRes and the routing bias off their neutral starts
        model.attn_res.queries.normal_(0, 0.5)
        for layer in model.layers[1:]:
            layer.mlp.score_bias.normal_(0, 0.1)
    idx = torch.randint(0, TINY.vocab_size, (2, 29))
    with torch.no_grad():
        reference, full_cache = model(idx)
        logits, cache = model(idx[:, :13])                  # a prefill shorter than one KDA chunk (16)
        pieces = [logits]
        logits, cache = model(idx[:, 13:20], cache)         # a multi-token continuation
        pieces.append(logits)
        for t in range(20, 29):                             # then token by token
            logits, cache = model(idx[:, t:t + 1], cache)
            pieces.append(logits)
    lab.check_close("prefill + decode = one pass (float64 logits)", reference, torch.cat(pieces, dim=1))
    for kind, entry, ref in zip(model.kinds, cache, full_cache, strict=True):
        if kind == "kda":
            assert isinstance(entry, KDACache)
            lab.check_close("KDA state after decoding", ref.S, entry.S)
        else:
            assert isinstance(entry, mla.LatentCache) and entry.length == 29
            lab.check_close("MLA latents after decoding", ref.c, entry.c)


def test_every_parameter_learns():
    torch.manual_seed(0)
    model = kimik3.KimiK3(TINY)
    idx = torch.randint(0, TINY.vocab_size, (2, 21))
    logits, _ = model(idx[:, :-1])
    torch.nn.functional.cross_entropy(logits.flatten(0, 1), idx[:, 1:].flatten()).backward()
    frozen = {f"layers.{l}.mlp.score_bias" for l in range(TINY.first_dense_layers, TINY.num_layers)}
    for name, p in model.named_parameters():
        if name in frozen:             # the routing bias is set by update_bias, never by gradients
            assert p.grad is None and not p.requires_grad
            continue
        assert p.grad is not None and torch.isfinite(p.grad).all(), name
        # the key norms reach the loss only through the zero-initialized pseudo-queries: zero at the start
        if name not in ("attn_res.queries", "attn_res.norm_weights"):
            assert p.grad.abs().sum() > 0, name
    # every pseudo-query but mix point 0's (one source: the softmax is 1 whatever its logit) learns
    assert model.attn_res.queries.grad[1:].abs().sum(-1).min() > 0


def test_decode_memory_matches_the_real_cache():
    model = kimik3.KimiK3(TINY)
    with torch.no_grad():
        _, cache = model(torch.randint(0, TINY.vocab_size, (1, 21)))
    held = sum(entry.nbytes for entry in cache)   # one sequence: batch-wide bytes are per-sequence bytes
    assert held == kimik3.decode_memory_bytes(TINY, 21, bytes_per_number=4)   # float32 everywhere


def test_decode_memory_full():
    context = 2 ** 20
    kda_state = 96 * 128 * 128 + 3 * 12288 * 3                # S [96, 128, 128] + three conv tails
    assert kimik3.decode_memory_bytes(FULL, context) == 2 * (69 * kda_state + 24 * 576 * context)
    assert kimik3.decode_memory_bytes(FULL, context, "all-mla") == 2 * 93 * 576 * context
    assert kimik3.decode_memory_bytes(FULL, context, "mha") == 2 * 93 * 2 * 96 * 128 * context  # MLA's heads
    with pytest.raises(ValueError, match="stack"):
        kimik3.decode_memory_bytes(FULL, context, "gqa")


def test_bad_inputs():
    model = kimik3.KimiK3(TINY)
    with pytest.raises(ValueError, match="idx"):
        model(torch.randn(1, 4))
    with pytest.raises(ValueError, match="vocab_size"):
        model(torch.tensor([[0, TINY.vocab_size]]))
    _, cache = model(torch.zeros(1, 3, dtype=torch.long))
    with pytest.raises(ValueError, match="one entry per layer"):
        model(torch.zeros(1, 1, dtype=torch.long), cache[:-1])
    with pytest.raises(ValueError, match=r"cache\[0\] must be a KDACache"):
        model(torch.zeros(1, 1, dtype=torch.long), cache[3:4] + cache[1:])
    with pytest.raises(ValueError, match="top_k"):
        dataclasses.replace(TINY, top_k=TINY.num_experts + 1)
    with pytest.raises(ValueError, match="hidden_size"):
        dataclasses.replace(TINY, hidden_size=0)


def test_the_article_count_drops_the_final_mla_layer():
    article = dataclasses.replace(FULL, final_mla=False)
    assert article.num_layers == 92 == 23 * 4                 # the article's 23 cycles, nothing on top
    assert kimik3.layer_kinds(article) == kimik3.layer_kinds(FULL)[:-1]
    with torch.device("meta"):
        model = kimik3.KimiK3(article)
    assert kimik3.count_parameters(article)["total"] == sum(p.numel() for p in model.parameters())
    with pytest.raises(ValueError, match="final_mla must be True or False"):
        dataclasses.replace(TINY, final_mla=1)


def test_without_memory_is_each_token_alone_with_its_convolution_window():
    """Reference: for every position t, the layer continues a cache built from the W - 1 real tokens
    before t (their convolution tails), with the KDA state emptied; an MLA layer sees token t alone."""
    torch.manual_seed(0)
    model = kimik3.KimiK3(TINY).double()
    x = torch.randn(2, 11, TINY.hidden_size, dtype=torch.float64)
    W = TINY.conv_size
    for layer in (model.layers[0].self_attn, model.layers[3].self_attn):      # a KDA and an MLA mixer
        with torch.no_grad():
            out = kimik3.without_memory(layer, x)
            for t in range(x.shape[1]):
                cache = None
                if isinstance(layer, kimik3.KimiDeltaAttention) and t > 0:
                    _, before = layer(x[:, max(0, t - W + 1):t])
                    cache = KDACache(torch.zeros_like(before.S), before.q_tail, before.k_tail, before.v_tail)
                ref, _ = layer(x[:, t:t + 1], cache)
                lab.check_close(f"{type(layer).__name__} without memory, token {t}", ref, out[:, t:t + 1])


def test_without_memory_sees_no_further_than_the_convolutions():
    config = dataclasses.replace(TINY, num_cycles=1)
    reach = kimik3.layer_kinds(config).count("kda") * (config.conv_size - 1)
    torch.manual_seed(0)
    model = kimik3.KimiK3(config).double()
    idx = torch.randint(0, config.vocab_size, (2, 20))
    changed = idx.clone()
    changed[:, 0] = (changed[:, 0] + 1) % config.vocab_size
    with torch.no_grad():
        delta = {m: (model(idx, memory=m)[0] - model(changed, memory=m)[0]).abs().amax((0, 2))
                 for m in (True, False)}
    assert delta[False][reach + 1:].max() < 1e-12 and delta[False][reach] > 0   # exactly the reach
    assert delta[True][reach + 1:].min() > 0
    logits, cache = model(idx, memory=False)
    assert cache is None
    _, cache = model(idx)
    with pytest.raises(ValueError, match="memory=False reads no past"):
        model(idx[:, :1], cache, memory=False)
