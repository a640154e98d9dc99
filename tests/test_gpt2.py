"""Lesson 01: GPT-2 against transformers, the KV cache against full forwards, and bad input."""

import pytest
import torch
from transformers import GPT2Config, GPT2LMHeadModel

from kimik3_lessons import gpt2, lab

SMALL = dict(n_positions=64, vocab_size=101, n_layer=3, n_head=4, n_embd=32, bos_token_id=0, eos_token_id=0)


@pytest.fixture(scope="module")
def pair():
    """A random Hugging Face GPT-2 and our GPT built from its weights."""
    torch.manual_seed(11)
    hf = GPT2LMHeadModel(GPT2Config(**SMALL)).eval()
    return hf, gpt2.GPT.from_hf(hf).eval()


def test_gpt2_small_has_124_439_808_parameters():
    with torch.device("meta"):                                # shapes only: no memory, no init time
        model = gpt2.GPT(gpt2.GPTConfig())
    assert model.num_parameters() == 124_439_808
    assert model.lm_head.weight is model.wte.weight


def test_logits_match_transformers(pair):
    hf, ours = pair
    idx = torch.randint(0, SMALL["vocab_size"], (2, 37))
    with torch.no_grad():
        lab.check_close("logits vs transformers", hf(idx).logits, ours(idx)[0], rtol=1e-5)


def test_from_hf_transposes_conv1d(pair):
    hf, ours = pair
    hf_w = hf.transformer.h[1].attn.c_attn.weight            # Conv1D: [in, out]
    assert ours.h[1].attn.c_attn.weight.shape == hf_w.t().shape
    assert torch.equal(ours.h[1].attn.c_attn.weight, hf_w.t())
    assert ours.lm_head.weight is ours.wte.weight             # still tied after the conversion


def test_cached_decode_equals_full_forward(pair):
    _, model = pair
    idx = torch.randint(0, SMALL["vocab_size"], (3, 25))
    with torch.no_grad():
        full, _ = model(idx)
        _, cache = model(idx[:, :10])                         # prefill 10 tokens
        _, cache = model(idx[:, 10:17], cache)                # a chunk of 7 more
        rows = []
        for t in range(17, 25):                               # then one token at a time
            logits, cache = model(idx[:, t:t + 1], cache)
            rows.append(logits[:, -1])
    lab.check_close("decode with cache == full forward", full[:, 17:], torch.stack(rows, 1), rtol=1e-5)
    assert cache[0].k.shape == (3, SMALL["n_head"], 25, SMALL["n_embd"] // SMALL["n_head"])


def test_cached_and_uncached_generation_agree(pair):
    _, model = pair
    prompt = torch.randint(0, SMALL["vocab_size"], (2, 5))
    cached = model.generate(prompt, 30, use_cache=True)
    uncached = model.generate(prompt, 30, use_cache=False)
    assert cached.shape == (2, 35)
    assert torch.equal(cached[:, :5], prompt)
    assert torch.equal(cached, uncached)


def test_greedy_generation_matches_transformers(pair):
    hf, model = pair
    prompt = torch.randint(0, SMALL["vocab_size"], (1, 6))
    with torch.no_grad():
        ref = hf.generate(prompt, max_new_tokens=12, do_sample=False, pad_token_id=0)
    assert torch.equal(model.generate(prompt, 12), ref)


def test_top_k_sampling_stays_in_the_top_k():
    torch.manual_seed(0)
    logits = torch.randn(4, 50)
    allowed = torch.topk(logits, 3).indices
    for _ in range(20):
        ids = gpt2.sample(logits, temperature=1.0, top_k=3)
        assert (ids == allowed).any(dim=1).all()


def test_cache_bytes_per_token_formula(pair):
    # GPT-2 small, 1024 tokens, fp16: 2 (k and v) * 12 layers * 768 * 1024 * 2 bytes = 37,748,736
    assert gpt2.GPTConfig().cache_bytes_per_token() * 1024 == 37_748_736
    _, model = pair                                           # and what a real cache holds, batch-wide
    _, cache = model(torch.zeros(2, 9, dtype=torch.long))
    held = sum(layer_cache.nbytes for layer_cache in cache)
    assert held == model.config.cache_bytes_per_token(bytes_per_number=4) * 9 * 2


def test_bad_input_raises(pair):
    _, model = pair
    with pytest.raises(ValueError, match="block_size"):
        model(torch.zeros(1, 65, dtype=torch.long))
    with pytest.raises(ValueError, match="block_size"):
        model.generate(torch.zeros(1, 60, dtype=torch.long), 10)
    _, cache = model(torch.zeros(2, 4, dtype=torch.long))
    with pytest.raises(ValueError, match="B=1"):
        model(torch.zeros(1, 1, dtype=torch.long), cache)
    with pytest.raises(ValueError, match="per layer"):
        model(torch.zeros(2, 1, dtype=torch.long), cache[:2])
    with pytest.raises(ValueError, match="block_size"):
        model(torch.zeros(2, 61, dtype=torch.long), cache)
    with pytest.raises(ValueError, match="token ids"):
        model(torch.zeros(2, 3))
    with pytest.raises(ValueError, match="multiple of num_heads"):
        gpt2.GPTConfig(hidden_size=30, num_heads=4)
