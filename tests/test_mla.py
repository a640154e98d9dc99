"""Tests for kimik3_lessons.mla: the cache, absorption, decoding, and two outside references.

References: a per-token, per-head loop written here from the equations (complex-number RoPE), and
the MLA attention layers of Hugging Face transformers (DeepSeek-V3 with RoPE, Kimi Linear with NoPE).
"""

import copy
import itertools
import math

import pytest
import torch

from kimik3_lessons import lab, mla

VARIANTS = [dict(use_rope=rope, q_lora_rank=lora, output_gate=gate)
            for rope, lora, gate in itertools.product((True, False), (None, 12), (False, True))]


def make_layer(seed=0, dtype=torch.float64, hidden=32, heads=3, kv_lora_rank=10, nope=6, rope=4, v=5,
               **variant):
    """A small layer with weights large enough that softmax is far from uniform."""
    variant = {"use_rope": True, "q_lora_rank": 12, "output_gate": False, **variant}
    cfg = mla.MLAConfig(hidden, heads, kv_lora_rank=kv_lora_rank, qk_nope_head_dim=nope,
                        qk_rope_head_dim=rope, v_head_dim=v, **variant)
    torch.manual_seed(seed)
    layer = mla.MultiHeadLatentAttention(cfg).to(dtype)
    with torch.no_grad():
        for p in layer.parameters():
            p.normal_(0.0, 0.5 if p.dim() == 2 else 1.0)
            if p.dim() == 1:
                p.add_(1.0)
    return layer


def rope_complex(x, p, theta):
    """RoPE as complex multiplication: pair (x_i, x_{i+D/2}) is the number x_i + j x_{i+D/2}."""
    half = x.shape[-1] // 2
    omega = theta ** (-2.0 * torch.arange(half, dtype=torch.float64) / x.shape[-1])
    z = torch.complex(x[..., :half], x[..., half:]) * torch.polar(torch.ones(half, dtype=torch.float64),
                                                                    p * omega)
    return torch.cat([z.real, z.imag], dim=-1)


def naive_mla(layer, x):
    """The layer computed from its equations: one token, one head, one cached token at a time."""
    cfg, W = layer.config, {k: t.detach() for k, t in layer.state_dict().items()}
    H, dc, dn, dr, dv = (cfg.num_heads, cfg.kv_lora_rank, cfg.qk_nope_head_dim, cfg.qk_rope_head_dim,
                         cfg.v_head_dim)
    rms = lambda a, w: a / torch.sqrt((a * a).mean() + cfg.norm_eps) * w
    pos = (lambda a, p: rope_complex(a, p, cfg.rope_theta)) if cfg.use_rope else (lambda a, p: a)
    B, T, _ = x.shape
    y = torch.zeros_like(x)
    for b in range(B):
        keys, values = [[] for _ in range(H)], [[] for _ in range(H)]
        for t in range(T):
            xt = x[b, t]
            if cfg.q_lora_rank is None:
                q = W["q_proj.weight"] @ xt
            else:
                q = W["q_b_proj.weight"] @ rms(W["q_a_proj.weight"] @ xt, W["q_a_norm.weight"])
            a = W["kv_a_proj.weight"] @ xt
            c, k_r = rms(a[:dc], W["kv_a_norm.weight"]), pos(a[dc:], t)
            heads = []
            for h in range(H):
                W_kv = W["kv_b_proj.weight"][h * (dn + dv):(h + 1) * (dn + dv)]
                keys[h].append(torch.cat([W_kv[:dn] @ c, k_r]))
                values[h].append(W_kv[dn:] @ c)
                q_h = q[h * (dn + dr):(h + 1) * (dn + dr)]
                q_h = torch.cat([q_h[:dn], pos(q_h[dn:], t)])
                p = torch.softmax(torch.stack(keys[h]) @ q_h / math.sqrt(dn + dr), dim=0)
                heads.append(p @ torch.stack(values[h]))
            o = torch.cat(heads)
            if cfg.output_gate:
                o = torch.sigmoid(W["g_proj.weight"] @ xt) * o
            y[b, t] = W["o_proj.weight"] @ o
    return y


# ----------------------------------------------------------------------------------------------------
# The cache


@pytest.mark.parametrize("dtype", [torch.float64, torch.float32, torch.bfloat16])
def test_cache_holds_only_latent_and_rope_key(dtype):
    layer = make_layer(dtype=dtype, output_gate=True)
    x = torch.randn(2, 7, 32, dtype=dtype)
    _, cache = layer(x)
    assert tuple(cache.c.shape) == (2, 7, 10) and tuple(cache.k_rope.shape) == (2, 7, 4)
    per_token = cache.nbytes / (2 * 7)
    assert per_token == (10 + 4) * x.element_size()
    assert per_token == mla.cache_bytes_per_token("mla", kv_lora_rank=10, qk_rope_head_dim=4,
                                                     bytes_per_number=x.element_size())
    for step in range(3):  # each decoded token adds exactly one row
        _, cache = layer(torch.randn(2, 1, 32, dtype=dtype), cache)
        assert cache.length == 8 + step and cache.nbytes == (8 + step) * 2 * per_token


def test_kv_cache_bytes_per_token_known_models():
    # DeepSeek-V2 (paper): 576 numbers per token and layer for MLA, 2 * 128 * 128 for MHA.
    assert mla.cache_bytes_per_token("mla", kv_lora_rank=512, qk_rope_head_dim=64,
                                        bytes_per_number=1) == 576
    assert mla.cache_bytes_per_token("mha", num_heads=128, head_dim=128, bytes_per_number=1) == 32768
    assert mla.cache_bytes_per_token("gqa", num_kv_heads=8, head_dim=128, bytes_per_number=1) == 2048
    assert mla.cache_bytes_per_token("mqa", head_dim=128, bytes_per_number=1) == 256
    # GPT-2 small: 2 * n_layer * n_embd numbers per token, 4 bytes each in float32.
    assert mla.cache_bytes_per_token("mha", num_layers=12, num_heads=12, head_dim=64,
                                        bytes_per_number=4) == 2 * 12 * 768 * 4
    # Default: 2 bytes per number (bf16), layers multiply.
    assert mla.cache_bytes_per_token("mla", num_layers=60, kv_lora_rank=512, qk_rope_head_dim=64) == \
        60 * 576 * 2


# ----------------------------------------------------------------------------------------------------
# Correctness against references


def test_rope_is_a_complex_rotation_and_relative():
    torch.manual_seed(0)
    x = torch.randn(3, 5, 8, dtype=torch.float64)
    positions = torch.tensor([0, 1, 7, 100, 4096])
    lab.check_close("rope vs complex rotation", torch.stack([rope_complex(x[:, i], int(p), 1e4)
                                                              for i, p in enumerate(positions)], dim=1),
                    mla.rope(x, positions))
    q, k = torch.randn(2, 1, 8, dtype=torch.float64)
    score = lambda t, s: (mla.rope(q, torch.tensor([t])) * mla.rope(k, torch.tensor([s]))).sum()
    lab.check_close("rope score depends on t - s", score(3, 1), score(1003, 1001))
    assert abs(score(3, 1) - score(3, 2)) > 1e-3


@pytest.mark.parametrize("variant", VARIANTS, ids=lambda v: "-".join(f"{k}={x}" for k, x in v.items()))
@pytest.mark.parametrize("absorb", [False, True])
def test_matches_naive_loop(variant, absorb):
    layer = make_layer(seed=1, **variant)
    x = torch.randn(2, 9, 32, dtype=torch.float64)
    y, _ = layer(x, absorb=absorb)
    lab.check_close("layer vs per-token loop", naive_mla(layer, x), y, rtol=1e-12)


def test_matches_transformers_deepseek_v3_attention():
    from transformers.models.deepseek_v3.configuration_deepseek_v3 import DeepseekV3Config
    from transformers.models.deepseek_v3.modeling_deepseek_v3 import (
        DeepseekV3Attention,
        DeepseekV3RotaryEmbedding,
    )
    layer = make_layer(seed=2, dtype=torch.float32, use_rope=True, q_lora_rank=12)
    hf_config = DeepseekV3Config(
        hidden_size=32, num_attention_heads=3, num_key_value_heads=3, q_lora_rank=12, kv_lora_rank=10,
        qk_nope_head_dim=6, qk_rope_head_dim=4, v_head_dim=5, rope_interleave=False, attention_bias=False,
        rms_norm_eps=layer.config.norm_eps, rope_parameters={"rope_type": "default", "rope_theta": 1e4})
    hf_config._attn_implementation = "eager"
    hf = DeepseekV3Attention(hf_config, layer_idx=0)
    names = {"q_a_layernorm": "q_a_norm", "kv_a_proj_with_mqa": "kv_a_proj", "kv_a_layernorm": "kv_a_norm"}
    hf.load_state_dict({k: layer.state_dict()[names.get(k.split(".")[0], k.split(".")[0]) + ".weight"]
                        for k in hf.state_dict()})
    T = 11
    x = torch.randn(2, T, 32)
    position_ids = torch.arange(T)[None].expand(2, T)
    mask = torch.full((T, T), float("-inf")).triu(1)[None, None]
    with torch.no_grad():
        ref, _ = hf(x, DeepseekV3RotaryEmbedding(hf_config)(x, position_ids), mask)
        for absorb in (False, True):
            lab.check_close(f"transformers DeepSeek-V3 MLA, absorb={absorb}", ref, layer(x, absorb=absorb)[0])


def test_matches_transformers_kimi_linear_attention():
    from transformers.models.kimi_linear.configuration_kimi_linear import KimiLinearConfig
    from transformers.models.kimi_linear.modeling_kimi_linear import KimiLinearAttention
    layer = make_layer(seed=3, dtype=torch.float32, use_rope=False, q_lora_rank=None)
    hf_config = KimiLinearConfig(
        hidden_size=32, num_attention_heads=3, num_key_value_heads=3, q_lora_rank=None, kv_lora_rank=10,
        qk_nope_head_dim=6, qk_rope_head_dim=4, v_head_dim=5, attention_bias=False,
        rms_norm_eps=layer.config.norm_eps)
    hf_config._attn_implementation = "eager"
    hf = KimiLinearAttention(hf_config, layer_idx=0)
    names = {"kv_a_proj_with_mqa": "kv_a_proj", "kv_a_layernorm": "kv_a_norm"}
    hf.load_state_dict({k: layer.state_dict()[names.get(k.split(".")[0], k.split(".")[0]) + ".weight"]
                        for k in hf.state_dict()})
    T = 11
    x = torch.randn(2, T, 32)
    mask = torch.full((T, T), float("-inf")).triu(1)[None, None]
    with torch.no_grad():
        ref, _ = hf(x, mask)
        for absorb in (False, True):
            lab.check_close(f"transformers Kimi Linear MLA, absorb={absorb}", ref, layer(x, absorb=absorb)[0])


# ----------------------------------------------------------------------------------------------------
# Absorption and decoding


@pytest.mark.parametrize("variant", VARIANTS, ids=lambda v: "-".join(f"{k}={x}" for k, x in v.items()))
def test_absorbed_equals_explicit_float64(variant):
    layer = make_layer(seed=4, **variant)
    x = torch.randn(3, 13, 32, dtype=torch.float64)
    y_explicit, cache = layer(x)
    y_absorbed, _ = layer(x, absorb=True)
    lab.check_close("prefill: absorbed vs explicit", y_explicit, y_absorbed, rtol=1e-12)
    x_next = torch.randn(3, 1, 32, dtype=torch.float64)
    lab.check_close("decode step: absorbed vs explicit", layer(x_next, cache, absorb=False)[0],
                    layer(x_next, cache, absorb=True)[0], rtol=1e-12)


@pytest.mark.parametrize("variant", VARIANTS, ids=lambda v: "-".join(f"{k}={x}" for k, x in v.items()))
@pytest.mark.parametrize("absorb", [False, True])
def test_prefill_then_decode_equals_one_pass(variant, absorb):
    layer = make_layer(seed=5, **variant)
    x = torch.randn(2, 12, 32, dtype=torch.float64)
    y_full, cache_full = layer(x, absorb=absorb)
    ys, cache = [], None
    for start, stop in [(0, 5), (5, 8)] + [(t, t + 1) for t in range(8, 12)]:  # prefill, a chunk, tokens
        y, cache = layer(x[:, start:stop], cache, absorb=absorb)
        ys.append(y)
    lab.check_close("prefill + decode vs one pass", y_full, torch.cat(ys, dim=1), rtol=1e-12)
    lab.check_close("cached latents", cache_full.c, cache.c, rtol=1e-12)
    lab.check_close("cached rope keys", cache_full.k_rope, cache.k_rope, rtol=1e-12)


# ----------------------------------------------------------------------------------------------------
# NoPE, the gate, precision


def test_nope_reads_the_context_as_a_set():
    """Without positions, the next token cannot tell in which order the context came."""
    x = torch.randn(1, 10, 32, dtype=torch.float64)
    x_next = torch.randn(1, 1, 32, dtype=torch.float64)
    perm = torch.randperm(10)
    for use_rope in (False, True):
        layer = make_layer(seed=6, use_rope=use_rope)
        y = layer(x_next, layer(x)[1])[0]
        y_shuffled = layer(x_next, layer(x[:, perm])[1])[0]
        err = lab.relative_error(y, y_shuffled)
        assert (err < 1e-12) if not use_rope else (err > 1e-3), (use_rope, err)


def test_output_gate_at_zero_weight_halves_the_output():
    gated, plain = make_layer(seed=7, output_gate=True), make_layer(seed=7, output_gate=False)
    plain.load_state_dict({k: v for k, v in gated.state_dict().items() if not k.startswith("g_proj")})
    torch.nn.init.zeros_(gated.g_proj.weight)  # sigmoid(0) = 1/2 on every channel
    x = torch.randn(2, 6, 32, dtype=torch.float64)
    lab.check_close("gate sigmoid(0) = 1/2", 0.5 * plain(x)[0], gated(x)[0], rtol=1e-12)
    assert gated.g_proj.weight.shape == (3 * 5, 32)


def test_bfloat16_layer_stays_bfloat16_and_close_to_float32():
    layer32 = make_layer(seed=8, dtype=torch.float32, output_gate=True)
    layer16 = copy.deepcopy(layer32).bfloat16()
    x = torch.randn(2, 9, 32)
    for absorb in (False, True):
        y16, cache = layer16(x.bfloat16(), absorb=absorb)
        assert y16.dtype == torch.bfloat16 and cache.c.dtype == torch.bfloat16
        lab.check_close("bf16 vs float32", layer32(x, absorb=absorb)[0], y16, rtol=5e-2)


# ----------------------------------------------------------------------------------------------------
# Errors


def test_bad_inputs_raise_value_error():
    layer = make_layer()
    x = torch.randn(2, 3, 32, dtype=torch.float64)
    _, cache = layer(x)
    with pytest.raises(ValueError, match=r"x must be \[B, T, hidden_size\] = \[B, T, 32\], got \[2, 3, 31\]"):
        layer(torch.randn(2, 3, 31, dtype=torch.float64))
    with pytest.raises(ValueError, match=r"x must be \[B, T, hidden_size\]"):
        layer(torch.randn(3, 32, dtype=torch.float64))
    with pytest.raises(ValueError, match=r"cache.c must be \[B, S, 10\] = \[1, 3, 10\] for x of batch 1"):
        layer(x[:1, :1], cache)
    with pytest.raises(ValueError, match=r"cache.c must be \[B, S, 10\]"):
        layer(x[:, :1], mla.LatentCache(cache.c[..., :9], cache.k_rope))
    with pytest.raises(ValueError, match=r"cache.k_rope must be \[B, S, 4\]"):
        layer(x[:, :1], mla.LatentCache(cache.c, cache.k_rope[..., :2]))
    with pytest.raises(ValueError, match=r"cache.k_rope must be \[B, S, 4\] = \[2, 3, 4\]"):
        layer(x[:, :1], mla.LatentCache(cache.c, cache.k_rope[:, :2]))
    with pytest.raises(ValueError, match="cache must be a LatentCache or None"):
        layer(x[:, :1], (cache.c, cache.k_rope))


def test_bad_config_and_cache_formula_raise_value_error():
    good = dict(hidden_size=32, num_heads=2, q_lora_rank=None, kv_lora_rank=8, qk_nope_head_dim=4,
                qk_rope_head_dim=4, v_head_dim=4)
    for bad in (dict(qk_rope_head_dim=3), dict(num_heads=0), dict(q_lora_rank=0), dict(kv_lora_rank=2.5)):
        (name,) = bad
        with pytest.raises(ValueError, match=f"^{name} must be"):
            mla.MLAConfig(**{**good, **bad})
    with pytest.raises(ValueError, match="config must be an MLAConfig"):
        mla.MultiHeadLatentAttention(good)
    with pytest.raises(ValueError, match="attention must be one of"):
        mla.cache_bytes_per_token("linear", head_dim=64)
    with pytest.raises(ValueError, match=r"gqa needs exactly \('num_kv_heads', 'head_dim'\)"):
        mla.cache_bytes_per_token("gqa", num_heads=8, head_dim=64)
    with pytest.raises(ValueError, match="head_dim must be a positive integer"):
        mla.cache_bytes_per_token("mha", num_heads=8, head_dim=0)


def test_lesson_08_uses_the_course_definitions_of_kimik3_decode_memory():
    """Lessons 08 and 11 quote one MHA baseline and one KDA state for KimiK3: lesson 08 computes them from
    gpt2.cache_bytes_per_token and kimi_linear.KDAConfig(...).state_numbers, lesson 11 from
    decode_memory_bytes."""
    from kimik3_lessons import gpt2, kimi_linear, kimik3
    full, context = kimik3.KimiK3Config.full(), 2**20
    mha = gpt2.cache_bytes_per_token("mha", num_layers=93, num_heads=96, head_dim=128) * context
    assert kimik3.decode_memory_bytes(full, context, "mha") == mha
    states = 69 * kimi_linear.KDAConfig(7168, 96, 128, forget_gate="bounded").state_numbers * 2
    latents = mla.cache_bytes_per_token("mla", num_layers=24, kv_lora_rank=512, qk_rope_head_dim=64) * context
    assert kimik3.decode_memory_bytes(full, context) == states + latents


@pytest.mark.parametrize("T, absorbed", [(1, True), (4, False)])
def test_default_absorbs_only_a_single_decoded_token(monkeypatch, T, absorbed):
    """absorb=None: the absorbed path for one new token (decoding), the explicit one for a prompt."""
    layer = make_layer(seed=9)
    _, cache = layer(torch.randn(2, 5, 32, dtype=torch.float64))
    called = []
    for name in ("attend_absorbed", "attend_explicit"):
        method = getattr(layer, name)
        monkeypatch.setattr(layer, name, lambda *a, _m=method, _n=name: called.append(_n) or _m(*a))
    layer(torch.randn(2, T, 32, dtype=torch.float64), cache)
    assert called == ["attend_absorbed" if absorbed else "attend_explicit"]
