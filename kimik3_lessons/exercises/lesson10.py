"""Lesson 10's exercises: the mix over depth, the sources of Block AttnRes, and how many there are."""

import random

import torch

from kimik3_lessons import attnres
from kimik3_lessons.exercises import (
    Wrong,
    attempt,
    exercise,
    expect_close,
    expect_pair,
    expect_tensor,
    hint,
    part,
)

# The module's AttnRes: the mix itself, and the block sums with every method that reads them.
MIX = ("attnres.attn_res", "attnres.BlockAttnRes.mix", "attnres.BlockAttnRes.mix_before_attention",
       "attnres.BlockAttnRes.mix_before_mlp", "attnres.BlockAttnRes.mix_final")
BLOCKS = ("attnres.BlockSums", "attnres.BlockSums.add_sublayer_output", "attnres.BlockSums.sources",
          "attnres.BlockAttnRes.start", "attnres.BlockAttnRes.block_sublayers")


def _count(n, what):
    return f"{n} {what}{'s' if n != 1 else ''}"


def _close(a, b):
    return a.shape == b.shape and bool((a - b).abs().max() <= 1e-9 * b.abs().max())


@exercise("10.1", "depth_mix", "attention over depth: softmax_i(w · RMSNorm(v_i)) v_i", difficulty=2,
          parts=("alpha", "h"), forbid=MIX)
def check_depth_mix(depth_mix):
    N, B, T, D = random.randint(3, 7), 2, random.randint(3, 9), 16
    sizes = torch.logspace(-0.7, 1, N, dtype=torch.float64)[torch.randperm(N)]   # sources of different sizes
    V = torch.randn(N, B, T, D, dtype=torch.float64) * sizes[:, None, None, None]
    w = 0.5 * torch.randn(D, dtype=torch.float64)
    g = 1 + 0.3 * torch.randn(D, dtype=torch.float64)
    eps = 1e-6
    h_ref, alpha_ref = attnres.attn_res(w, list(V), g, eps, return_weights=True)
    out = attempt(depth_mix, w.clone(), V.clone(), g.clone(), eps)
    h, alpha = expect_pair("a pair (h, alpha)", out)
    # The classic mistakes, computed here so the verdict can name the one that was made.
    K = V / (V.pow(2).mean(-1, keepdim=True) + eps).sqrt() * g
    logits = K @ w
    with part("alpha"):
        expect_tensor("alpha", alpha, alpha_ref.shape)
        if _close(alpha, (V @ w).softmax(0)) or _close(alpha, ((V * g) @ w).softmax(0)):
            raise Wrong("alpha differs from attn_res's", hint=hint(
                "alpha scores the raw sources: the keys are RMSNorm(v_i) (times the norm weight), so a large "
                "source does not win by its size."))
        for dim in (1, 2):
            if _close(alpha, logits.softmax(dim)):
                raise Wrong("alpha differs from attn_res's", hint=hint(
                    f"alpha is a softmax over dimension {dim} (batch or tokens): the softmax runs over "
                    "depth, the sources (dimension 0), separately for every token."))
        err_alpha = expect_close("alpha", alpha_ref, alpha, rtol=1e-9, row_dim=0,
                                 hint=hint("k_i = v_i / sqrt(mean(v_i²) + eps) * g; alpha = softmax over i "
                                           "of w · k_i."))
    with part("h"):
        expect_tensor("h", h, h_ref.shape)
        if _close(h, (alpha_ref.unsqueeze(-1) * K).sum(0)):
            raise Wrong("h differs from attn_res's", hint=hint("h mixes the normalized keys: the values are "
                                                               "the raw sources v_i."))
        err_h = expect_close("h", h_ref, h, rtol=1e-9, row_dim=1,
                             hint=hint("h = sum_i alpha_i v_i (the raw sources)."))
    return f"equals attn_res (relative errors {err_alpha:.0e} for alpha, {err_h:.0e} for h)"


def _walk(embedding, outputs, block_size):
    """The sources before every mix point, from BlockSums (what BlockAttnRes reads)."""
    res = attnres.BlockAttnRes(embedding.shape[-1], len(outputs) // 2, block_size)
    state, sources = res.start(embedding), []
    for p in range(len(outputs) + 1):
        sources.append(state.sources())
        if p < len(outputs):
            state.add_sublayer_output(outputs[p])
    return sources


@exercise("10.2", "block_sources", "the sources of Block AttnRes, from the list of outputs", difficulty=2,
          forbid=BLOCKS)
def check_block_sources(block_sources):
    num_layers, D = random.randint(4, 9), 6
    for block_size in sorted({1, random.randint(2, 4), num_layers + 2}):
        embedding = torch.randn(3, D, dtype=torch.float64)
        outputs = [torch.randn(3, D, dtype=torch.float64) for _ in range(2 * num_layers)]
        for p, ref in enumerate(_walk(embedding, outputs, block_size)):
            got = attempt(block_sources, embedding, list(outputs), block_size, p)
            where = f"mix point {p} ({num_layers} layers, blocks of {_count(block_size, 'layer')})"
            if not isinstance(got, (list, tuple)) or len(got) != len(ref):
                n = len(got) if isinstance(got, (list, tuple)) else type(got).__name__
                raise Wrong(f"{where}: expected {_count(len(ref), 'source')}, got {n}", hint=hint(
                    "the embedding, one sum per finished block of 2·block_size sublayer outputs, then the "
                    "current block's partial sum only if it is not empty."))
            for i, (r, v) in enumerate(zip(ref, got, strict=True)):
                expect_close(f"{where}, source {i}", r, v, rtol=1e-12, row_dim=0,
                             hint=hint("mix point p reads outputs f_0 … f_{p-1} only (not f_p); a block "
                                       "holds the outputs of block_size layers, two per layer."))
    return f"every mix point of {num_layers} layers reads the same sources as BlockSums, for 3 block sizes"


@exercise("10.3", "n_sources", "how many sources a mix point reads", difficulty=1, forbid=BLOCKS)
def check_n_sources(n_sources):
    layouts = [(93, 12), (92, 12)] + [(random.randint(2, 30), random.randint(1, 8)) for _ in range(4)]
    layouts += [(random.randint(2, 30), None)]
    for num_layers, block_size in layouts:
        outputs = [torch.zeros(1)] * (2 * num_layers)
        ref = [len(s) for s in _walk(torch.zeros(1), outputs, block_size)]
        for p, n in enumerate(ref):
            got = attempt(n_sources, num_layers, block_size, p)
            if got != n:
                raise Wrong(f"mix point {p} of {num_layers} layers in blocks of {block_size}: BlockSums "
                            f"holds {_count(n, 'source')}, you said {got}", hint=hint(
                                "the embedding + the finished blocks (2·block_size sublayer outputs each) + "
                                "the partial block if it is not empty; None is full AttnRes."))
    return (f"matches BlockSums at every mix point of {len(layouts)} layouts (KimiK3's 93 and 92 layers "
            "among them)")
