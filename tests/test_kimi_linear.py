"""The Kimi Linear layer (lesson 07b): the short convolution is a causal depthwise conv1d, the layer
(KimiK3's weight shapes) decodes token by token exactly as in one pass, around every mixer of the family,
and its cache keeps the interface of the other caches (`length`, `nbytes`, and `advance` where they
`append`)."""

import pytest
import torch
import torch.nn.functional as F

from kimik3_lessons import kimi_linear, lab, mixers


def test_short_conv_matches_padded_conv1d():
    x, w = torch.randn(2, 9, 6, dtype=torch.float64), torch.randn(6, 1, 4, dtype=torch.float64)
    y, tail = kimi_linear.short_conv(x, w)
    ref = F.conv1d(x.transpose(1, 2), w, padding=3, groups=6)[..., :9].transpose(1, 2)
    lab.check_close("short conv", ref, y)
    lab.check_close("tail = last inputs", x[:, -3:].transpose(1, 2), tail)


@pytest.mark.parametrize("mixer, gate", [("kda", "mamba2"), ("kda", "bounded")]
                         + [(m, "mamba2") for m in mixers.MIXERS if m != "kda"])
def test_layer_decodes_token_by_token_as_one_pass(mixer, gate):
    torch.manual_seed(0)
    config = kimi_linear.KDAConfig(hidden_size=32, num_heads=2, head_dim=16, forget_gate=gate, chunk_size=16,
                                   mixer=mixer)
    layer = kimi_linear.KimiDeltaAttention(config).double()
    x = torch.randn(2, 40, 32, dtype=torch.float64)
    y_ref, state_ref = layer(x)
    y, state = layer(x[:, :23])                      # a prompt (chunked), then one token at a time
    ys = [y]
    for t in range(23, 40):
        y_t, state = layer(x[:, t:t + 1], state)
        ys.append(y_t)
    lab.check_close(f"{gate}: decode = one pass", y_ref, torch.cat(ys, dim=1))
    for name in ("S", "q_tail", "k_tail", "v_tail"):
        lab.check_close(f"{gate}: state {name}", getattr(state_ref, name), getattr(state, name))
    assert state_ref.length == state.length == 40          # tokens seen, as the KV and latent caches count
    per_sequence = 2 * 16 * 16 + 3 * 2 * 16 * 3                  # S [H, K, V] and three tails [H*K, 3]
    assert layer.config.state_numbers == per_sequence
    assert state.nbytes == 2 * per_sequence * 8                  # the whole batch of 2, float64


def test_layer_parameters_map_to_kimik3_weights():
    """KimiK3's KDA weight list (docs/facts.md): hidden 7168, 96 heads x 128, the bounded gate."""
    with torch.device("meta"):
        config = kimi_linear.KDAConfig(hidden_size=7168, num_heads=96, head_dim=128, forget_gate="bounded")
        layer = kimi_linear.KimiDeltaAttention(config)
    expected = {
        "q_proj.weight": (12288, 7168), "k_proj.weight": (12288, 7168), "v_proj.weight": (12288, 7168),
        "q_conv1d.weight": (12288, 1, 4), "k_conv1d.weight": (12288, 1, 4), "v_conv1d.weight": (12288, 1, 4),
        "f_a_proj.weight": (128, 7168), "f_b_proj.weight": (12288, 128), "b_proj.weight": (96, 7168),
        "A_log": (128,), "dt_bias": (12288,), "o_norm.weight": (128,), "g_proj.weight": (12288, 7168),
        "o_proj.weight": (7168, 12288),
    }
    assert {n: tuple(p.shape) for n, p in layer.named_parameters()} == expected


def test_layer_rejects_unknown_forget_gate():
    with pytest.raises(ValueError, match="^forget_gate must be 'mamba2'"):
        kimi_linear.KDAConfig(32, 2, 16, forget_gate="softmax")
    with pytest.raises(ValueError, match="per head"):
        kimi_linear.KDAConfig(32, 2, 16, forget_gate="bounded", mixer="gated_deltanet")
    with pytest.raises(ValueError, match="no mixer 'mamba'"):
        kimi_linear.KDAConfig(32, 2, 16, mixer="mamba")
    with pytest.raises(ValueError, match="gate_start"):
        kimi_linear.KDAConfig(32, 2, 16, gate_start="zero")
    with pytest.raises(ValueError, match="form must be"):
        kimi_linear.KDAConfig(32, 2, 16, form="parallel")
    with pytest.raises(ValueError, match="form must be a callable"):
        kimi_linear.KimiDeltaAttention(kimi_linear.KDAConfig(32, 2, 16), form="chunked")


def test_kda_cache_advances_as_the_token_caches_append():
    """The three decode caches after the same prompt and decoded tokens: `length` counts the tokens seen
    in each; KVCache and LatentCache grow by `append`, KDACache `advance`s and keeps its size."""
    from kimik3_lessons import gpt2, mla
    torch.manual_seed(0)
    D, H, prompt, steps = 32, 2, 9, 4
    layers = {"KVCache": gpt2.CausalSelfAttention(gpt2.GPTConfig(num_heads=H, hidden_size=D)),
              "LatentCache": mla.MultiHeadLatentAttention(mla.MLAConfig(D, H, None, 16, 16, 4, 16)),
              "KDACache": kimi_linear.KimiDeltaAttention(kimi_linear.KDAConfig(D, H, 16, chunk_size=16))}
    x = torch.randn(1, prompt + steps, D)
    for name, layer in layers.items():
        with torch.no_grad():
            _, cache = layer(x[:, :prompt])
            sizes = [cache.nbytes]
            for t in range(prompt, prompt + steps):
                _, cache = layer(x[:, t:t + 1], cache)
                assert type(cache).__name__ == name and cache.length == t + 1, (name, t, cache.length)
                sizes.append(cache.nbytes)
        grows = all(a < b for a, b in zip(sizes, sizes[1:], strict=False))
        assert grows == (name != "KDACache"), (name, sizes)
        assert name != "KDACache" or len(set(sizes)) == 1, sizes


def test_advance_replaces_the_state_and_counts_the_tokens():
    S, tail = torch.zeros(1, 2, 4, 4), torch.zeros(1, 8, 3)
    cache = kimi_linear.KDACache(S, tail, tail, tail, length=5)
    S_new, tails = torch.ones(1, 2, 4, 4), [torch.full((1, 8, 3), float(i)) for i in range(3)]
    new = cache.advance(3, S_new, *tails)
    assert new.length == 8 and cache.length == 5                      # a new cache; the old one unchanged
    assert new.S is S_new
    assert all(a is b for a, b in zip((new.q_tail, new.k_tail, new.v_tail), tails, strict=True))
