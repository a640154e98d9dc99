"""Attention Residuals: the mix against flash-linear-attention and a float64 loop, the block sums against
the per-layer definition, the toy stack's residual forms, and the errors."""

import pytest
import torch

from kimik3_lessons import attnres, lab


def sources_like(shape, n, dtype=torch.float32, seed=0):
    gen = torch.Generator().manual_seed(seed)
    return [(torch.randn(shape, generator=gen, dtype=torch.float64) * (i + 1)).to(dtype) for i in range(n)]


def mix_loop(query, sources, norm_weight, eps):
    """The definition, one source at a time in float64: softmax_i(w · RMSNorm(v_i)) v_i."""
    V = [v.double() for v in sources]
    logits = [(v / (v.pow(2).mean(-1, keepdim=True) + eps).sqrt() * norm_weight.double()) @ query.double()
              for v in V]
    z = torch.stack(logits).exp()
    alpha = z / z.sum(0)
    return sum(a.unsqueeze(-1) * v for a, v in zip(alpha, V, strict=True)), alpha


@pytest.mark.parametrize("dtype, rtol", [(torch.float32, 1e-5), (torch.bfloat16, 1e-2)])
def test_attn_res_matches_fla_naive(dtype, rtol):
    from fla.ops.attnres.naive import naive_attnres

    torch.manual_seed(1)
    D = 48
    sources = sources_like((2, 7, D), 5, dtype)
    query, norm_weight = torch.randn(D) * 0.3, 1 + 0.2 * torch.randn(D)
    h, alpha = attnres.attn_res(query, sources, norm_weight, norm_eps=1e-5, return_weights=True)
    h_ref, alpha_ref = naive_attnres(query, sources, norm_weight, rms_eps=1e-5, scale=1.0,
                                     return_weights=True)
    assert h.dtype == dtype and alpha.dtype == torch.float32
    lab.check_close("h vs FLA", h_ref, h, rtol=rtol)
    lab.check_close("alpha vs FLA", alpha_ref, alpha, rtol=1e-5)
    assert not torch.allclose(alpha, torch.full_like(alpha, 1 / 5), atol=1e-2)  # the query does something


def test_attn_res_float64_matches_the_loop_and_stays_float64():
    D = 16
    sources = sources_like((3, D), 4, torch.float64, seed=2)
    gen = torch.Generator().manual_seed(3)
    query = torch.randn(D, generator=gen, dtype=torch.float64)
    norm_weight = torch.rand(D, generator=gen, dtype=torch.float64) + 0.5
    h, alpha = attnres.attn_res(query, sources, norm_weight, norm_eps=1e-6, return_weights=True)
    h_ref, alpha_ref = mix_loop(query, sources, norm_weight, 1e-6)
    assert h.dtype == torch.float64 and alpha.dtype == torch.float64
    lab.check_close("h", h_ref, h, rtol=1e-12)
    lab.check_close("alpha", alpha_ref, alpha, rtol=1e-12)


def test_zero_query_is_the_uniform_average():
    sources = sources_like((4, 10), 6, seed=4)
    h, alpha = attnres.attn_res(torch.zeros(10), sources, torch.randn(10), return_weights=True)
    lab.check_close("h = the mean", torch.stack(sources).mean(0), h, rtol=1e-6)
    lab.check_close("alpha = 1/6", torch.full((6, 4), 1 / 6), alpha, rtol=1e-6)


def test_keys_are_scale_free():
    """Scaling a source changes its value, not its key: the weights stay the same (eps aside)."""
    sources = sources_like((5, 12), 3, torch.float64, seed=5)
    query = torch.randn(12, dtype=torch.float64, generator=torch.Generator().manual_seed(6))
    ones = torch.ones(12, dtype=torch.float64)
    _, alpha = attnres.attn_res(query, sources, ones, norm_eps=0.0, return_weights=True)
    _, alpha_scaled = attnres.attn_res(query, [sources[0] * 40, *sources[1:]], ones, norm_eps=0.0,
                                       return_weights=True)
    lab.check_close("alpha with a source scaled", alpha, alpha_scaled, rtol=1e-12)


def test_bad_input_raises():
    v = torch.randn(2, 8)
    w = torch.zeros(8)
    with pytest.raises(ValueError, match=r"^sources must be a non-empty list"):
        attnres.attn_res(w, [], w)
    with pytest.raises(ValueError, match=r"^sources\[1\] has width 9"):
        attnres.attn_res(w, [v, torch.randn(2, 9)], w)
    with pytest.raises(ValueError, match=r"^sources\[1\] is \[3, 8\], but sources\[0\] is \[2, 8\]"):
        attnres.attn_res(w, [v, torch.randn(3, 8)], w)
    with pytest.raises(ValueError, match=r"^query must be \[D\]"):
        attnres.attn_res(torch.zeros(1, 8), [v], w)
    with pytest.raises(ValueError, match=r"^norm_weight must be \[D\]"):
        attnres.attn_res(w, [v], torch.ones(7))
    with pytest.raises(ValueError, match=r"^block_size must be a positive number"):
        attnres.BlockAttnRes(8, 4, block_size=0)
    with pytest.raises(ValueError, match=r"^residual must be 'plain', 'block' or 'full'"):
        attnres.ToyStack(4, 4, residual="highway")


def random_stack(residual, num_layers, block_size, seed=0):
    torch.manual_seed(seed)
    model = attnres.ToyStack(6, 3, dim=16, num_layers=num_layers, hidden=24, residual=residual,
                             block_size=block_size).double()
    if model.attn_res is not None:
        with torch.no_grad():  # away from the zero initialization, so each weight matters
            model.attn_res.queries.normal_(0, 0.5)
            model.attn_res.norm_weights.uniform_(0.5, 1.5)
    return model


@pytest.mark.parametrize("num_layers, block_size", [(7, 1), (7, 3), (7, 5), (5, 9)])
def test_block_attn_res_is_the_definition_on_block_sums(num_layers, block_size):
    """Each mix point p reads [embedding, sums of the finished blocks, sum of the current block so far],
    built here from the list of every sublayer output, per the paper's definition."""
    model = random_stack("block", num_layers, block_size)
    trace = {}
    model(torch.randn(4, 6, dtype=torch.float64), trace=trace)
    outputs, S = trace["outputs"], 2 * block_size
    res = model.attn_res
    for p in range(2 * num_layers + 1):
        finished = [sum(outputs[j * S:(j + 1) * S]) for j in range(p // S)]
        partial = [sum(outputs[(p // S) * S:p])] if p % S else []
        sources = [trace["embedding"], *finished, *partial]
        assert len(sources) <= -(-num_layers // block_size) + 1  # N blocks + the embedding
        h_ref, _ = mix_loop(res.queries[p].detach(), sources, res.norm_weights[p].detach(), res.norm_eps)
        lab.check_close(f"block mix {p}", h_ref, trace["inputs"][p], rtol=1e-10)
        assert trace["weights"][p].shape == (len(sources), 4)


def test_full_attn_res_reads_every_sublayer_output():
    model = random_stack("full", 4, None)
    trace = {}
    model(torch.randn(3, 6, dtype=torch.float64), trace=trace)
    res = model.attn_res
    for p in range(9):
        sources = [trace["embedding"], *trace["outputs"][:p]]
        h_ref, _ = mix_loop(res.queries[p].detach(), sources, res.norm_weights[p].detach(), res.norm_eps)
        lab.check_close(f"full mix {p}", h_ref, trace["inputs"][p], rtol=1e-10)


def test_plain_stack_is_the_running_sum():
    model = random_stack("plain", 6, None)
    trace = {}
    x = torch.randn(3, 6, dtype=torch.float64)
    y = model(x, trace=trace)
    h_last = trace["embedding"] + sum(trace["outputs"])  # h_L = h_0 + sum_i f_i(h_i)
    lab.check_close("last input = the running sum", h_last, trace["inputs"][-1], rtol=1e-12)
    lab.check_close("output", model.head(model.norm(h_last)), y, rtol=1e-12)


def test_zero_initialized_queries_average_and_learn():
    torch.manual_seed(7)
    model = attnres.ToyStack(6, 3, dim=16, num_layers=3, hidden=24, residual="block", block_size=1)
    assert torch.count_nonzero(model.attn_res.queries) == 0
    trace = {}
    model(torch.randn(5, 6), trace=trace).pow(2).mean().backward()
    # the first mix has one source
    lab.check_close("first mix = the embedding", trace["embedding"], trace["inputs"][0], rtol=1e-6)
    # before layer 2's MLP: [b_0, b_1, b_2, f_4] averaged with equal weights
    o = trace["outputs"]
    mean = (trace["embedding"] + (o[0] + o[1]) + (o[2] + o[3]) + o[4]) / 4
    lab.check_close("mix 5 = the mean of its sources", mean, trace["inputs"][5], rtol=1e-6)
    grad = model.attn_res.queries.grad.abs().sum(-1)
    assert grad[0] == 0 and grad[1:].gt(0).all()  # every query learns, but the first: it has one source


def test_kimik3_block_layout_and_call_protocol():
    """93 layers in blocks of 12: the final mix reads the embedding and 8 block sums."""
    res = attnres.BlockAttnRes(dim=4, num_layers=93, block_size=12)
    assert res.queries.shape == (187, 4) and res.norm_weights.shape == (187, 4)
    state = res.start(torch.zeros(1, 4))
    most = 1
    for layer in range(93):
        res.mix_before_attention(state, layer)
        state.add_sublayer_output(torch.ones(1, 4))
        most = max(most, len(state.sources()))
        res.mix_before_mlp(state, layer)
        state.add_sublayer_output(torch.ones(1, 4))
    assert len(state.blocks) == 1 + 7 and state.partial is not None  # 7 full blocks + 9 layers in the 8th
    h = res.mix_final(state)
    assert len(state.sources()) == 9 and most == 9
    uniform = torch.full((1, 4), (7 * 24 + 18) / 9)                    # zero queries: the mean of the 9 sums
    lab.check_close("final mix", uniform, h, rtol=1e-6)
    with pytest.raises(ValueError, match=r"^mix point 1 needs exactly 1 sublayer outputs added before it"):
        res.mix_before_mlp(res.start(torch.zeros(1, 4)), 0)  # the attention output was never added
    with pytest.raises(ValueError, match=r"^embedding must be \[\.\.\., D\]"):
        res.start(torch.zeros(1, 5))
