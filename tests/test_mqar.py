"""Tests for kimik3_lessons.mqar: the generator's pairs and queries, every mixer's model trains with finite
gradients, the ablations change what they claim to change, the state sizes match the real caches, and
attention learns the smallest setting."""

import pytest
import torch

from kimik3_lessons import gpt2, kda, lab, mla, mqar

TASK = mqar.MQARTask(seq_len=64, num_pairs=8, vocab_size=64, min_distance=16)


@pytest.mark.parametrize("pairs", [1, 4, 16])
def test_the_generator_is_what_it_claims(pairs):
    task = mqar.MQARTask(seq_len=64, num_pairs=pairs, vocab_size=64, min_distance=16)
    inputs, targets = mqar.mqar_batch(task, 300, torch.Generator().manual_seed(pairs))
    distances = mqar.check_batch(task, inputs, targets)
    assert distances.min() >= task.min_distance
    assert distances.max() > 2 * task.min_distance              # spread, not one fixed offset
    # every query position of the allowed range is used by some sequence, none before it
    used = (targets != mqar.IGNORE).any(0).nonzero()[:, 0]
    assert used.min() == task.first_query and used.max() == task.seq_len - 1


def test_check_batch_catches_leaks_and_near_queries():
    inputs, targets = mqar.mqar_batch(TASK, 4, torch.Generator().manual_seed(0))
    leaked = inputs.clone()
    q = (targets[0] != mqar.IGNORE).nonzero()[0, 0]
    leaked[0, q + 1] = targets[0, q]                              # the answer right after its query
    with pytest.raises(AssertionError, match="leaks"):
        mqar.check_batch(TASK, leaked, targets)
    near = mqar.MQARTask(seq_len=64, num_pairs=8, vocab_size=64, min_distance=17)
    with pytest.raises(AssertionError, match="min_distance"):     # a query can sit at distance 16
        mqar.check_batch(near, *mqar.mqar_batch(TASK, 200, torch.Generator().manual_seed(1)))
    wrong = targets.clone()
    wrong[0, q] = inputs[0, 1] if targets[0, q] != inputs[0, 1] else inputs[0, 3]
    with pytest.raises(AssertionError, match="target"):
        mqar.check_batch(TASK, inputs, wrong)


def test_layout_and_distances_by_hand():
    keys, values, queries = torch.tensor([[5, 9]]), torch.tensor([[40, 33]]), torch.tensor([[12, 7]])
    inputs, targets = mqar.mqar_layout(keys, values, queries, 14)
    assert inputs.tolist() == [[5, 40, 9, 33, 0, 0, 0, 9, 0, 0, 0, 0, 5, 0]]
    assert targets.tolist() == [[-100] * 7 + [33] + [-100] * 4 + [40, -100]]
    assert mqar.query_distances(inputs, targets, 2).tolist() == [[12 - 1, 7 - 3]]


def test_bad_tasks():
    with pytest.raises(ValueError, match="seq_len"):
        mqar.MQARTask(seq_len=32, num_pairs=8, vocab_size=64, min_distance=16)
    with pytest.raises(ValueError, match="num_pairs"):
        mqar.MQARTask(seq_len=256, num_pairs=40, vocab_size=64)
    with pytest.raises(ValueError, match="mixer"):
        mqar.RecallConfig("mamba")


@pytest.mark.parametrize("mixer", list(mqar.MIXERS))
def test_every_mixer_trains_with_finite_gradients(mixer):
    torch.manual_seed(0)
    model = mqar.RecallModel(mqar.RecallConfig(mixer, vocab_size=64, hidden_size=32))
    assert mqar.conv_reach(model.config) < TASK.min_distance
    opt = torch.optim.AdamW(model.parameters(), lr=1e-2)
    gen = torch.Generator().manual_seed(0)
    losses = []
    for _ in range(3):
        x, y = mqar.mqar_batch(TASK, 8, gen)
        loss = mqar.answer_loss(model(x), y)
        opt.zero_grad()
        loss.backward()
        for name, p in model.named_parameters():
            assert p.grad is not None and torch.isfinite(p.grad).all(), name
        opt.step()
        losses.append(loss.item())
    assert all(map(torch.isfinite, map(torch.tensor, losses)))


def test_the_models_are_causal():
    """Changing a later token changes no earlier logit (the mixers read only the past)."""
    torch.manual_seed(0)
    x = torch.randint(0, 64, (2, 40))
    for mixer in mqar.MIXERS:
        model = mqar.RecallModel(mqar.RecallConfig(mixer, vocab_size=64, hidden_size=32)).double()
        y = x.clone()
        y[:, 25] = (y[:, 25] + 1) % 64
        with torch.no_grad():
            a, b = model(x), model(y)
        assert torch.equal(a[:, :25], b[:, :25]), mixer
        assert not torch.allclose(a[:, 25:], b[:, 25:]), mixer


def test_no_conv_makes_every_convolution_the_identity():
    torch.manual_seed(0)
    model = mqar.RecallModel(mqar.RecallConfig("hybrid", vocab_size=64, hidden_size=32, conv=False))
    convs = [m for m in model.modules() if isinstance(m, torch.nn.Conv1d)]
    assert len(convs) == 3 * 3 + 1                                # q, k, v in 3 KDA layers, 1 before MLA
    x = torch.randn(2, 9, 32)
    for conv in convs:
        assert not conv.weight.requires_grad
        channels = x.repeat(1, 1, conv.weight.shape[0] // 32)
        lab.check_close("a frozen convolution", channels, kda.short_conv(channels, conv.weight)[0], rtol=1e-6)
    assert mqar.conv_reach(model.config) == 0


def test_no_decay_removes_the_gates():
    torch.manual_seed(0)
    x = torch.randn(2, 10, 32)
    layer = mqar.build_mixer(mqar.RecallConfig("kda", hidden_size=32, decay=False), "kda")
    assert torch.equal(layer.log_decay(x), torch.zeros(2, 10, 2, 16))
    gated = mqar.build_mixer(mqar.RecallConfig("gated_deltanet", hidden_size=32, decay=False), "gated")
    delta = mqar.build_mixer(mqar.RecallConfig("deltanet", hidden_size=32), "delta")
    state = {k: v for k, v in gated.state_dict().items() if k in delta.state_dict()}
    delta.load_state_dict(state)                 # same weights: gated DeltaNet with g = 0 is DeltaNet
    lab.check_close("gated DeltaNet with g = 0 vs DeltaNet", delta(x), gated(x), rtol=1e-5)


def test_state_numbers_match_the_real_caches():
    """The per-layer numbers `state_numbers` counts are what the lesson modules' caches hold."""
    T, D, H = 21, 32, 2
    config = mqar.RecallConfig("hybrid", hidden_size=D, num_heads=H)
    x = torch.randn(1, T, D)
    numbers = mqar.state_numbers(config, T)
    _, kda_cache = kda.KimiDeltaAttention(config.kda_config())(x)
    assert numbers[0] == kda_cache.nbytes // 4
    _, latent = mla.MultiHeadLatentAttention(config.mla_config())(x)
    conv_tail = D * (config.conv_size - 1)
    assert numbers[3] == latent.nbytes // 4 + conv_tail
    attention = mqar.RecallConfig("attention", hidden_size=D, num_heads=H)
    _, kv = gpt2.CausalSelfAttention(gpt2.GPTConfig(num_heads=H, hidden_size=D))(x)
    assert mqar.state_numbers(attention, T) == [kv.nbytes // 4 + conv_tail] * 2


def test_attention_learns_the_smallest_setting():
    task = mqar.MQARTask(seq_len=64, num_pairs=4, vocab_size=64, min_distance=16)
    torch.manual_seed(0)
    model = mqar.RecallModel(mqar.RecallConfig("attention", vocab_size=64, hidden_size=64))
    result = mqar.train(model, task, mqar.TrainConfig(steps=400), log=None)
    assert result["accuracy"][0] >= 0.95, result["curve"]
