"""Lesson 08's exercises: absorbed MLA attention for one head, and W_uv merged into W_o."""

import torch

from kimik3_lessons import mla
from kimik3_lessons.exercises import (
    Watch,
    Wrong,
    attempt,
    exercise,
    expect_close,
    expect_tensor,
    hint,
    matches,
    part,
)

F64 = torch.float64


def random_layer(**shape):
    """A fresh float64 MLA layer of small, all-different widths (a mixed-up width fails by shape), with
    weights large enough that the softmax is far from uniform (a wrong scale shows)."""
    config = mla.MLAConfig(**{**dict(hidden_size=24, num_heads=4, q_lora_rank=None, kv_lora_rank=11,
                                     qk_nope_head_dim=6, qk_rope_head_dim=4, v_head_dim=5), **shape})
    layer = mla.MultiHeadLatentAttention(config).to(F64)
    with torch.no_grad():
        for p in layer.parameters():
            if p.dim() == 2:
                p.normal_(0.0, 0.6)
    return layer


@exercise("08.1", "absorbed_head", "absorbed MLA attention for one head", difficulty=2,
          parts=("the outputs", "absorbed: no key or value per token"),
          forbid=("mla.MultiHeadLatentAttention.attend_explicit",
                  "mla.MultiHeadLatentAttention.attend_absorbed", "mla.MultiHeadLatentAttention.forward"))
def check_absorbed_head(absorbed_head):
    layer = random_layer()
    cfg = layer.config
    S = int(torch.randint(12, 30, ()))       # more tokens than any head width: [S, width] is per token
    _, cache = layer(torch.randn(1, S, cfg.hidden_size, dtype=F64))          # S cached tokens (RoPE on)
    q_nope, q_rope = layer.queries(torch.randn(1, 1, cfg.hidden_size, dtype=F64), torch.tensor([S]))
    W_uk, W_uv = layer.up_projections()
    ref = layer.attend_explicit(q_nope, q_rope, cache)[0, :, 0]              # [H, d_v], the explicit path

    def explicit_with(scale=None, rope=True):
        """The explicit path with a known mistake built in (for a hint)."""
        saved = layer.scale
        layer.scale = saved if scale is None else scale
        try:
            return layer.attend_explicit(q_nope, q_rope if rope else torch.zeros_like(q_rope), cache)[0, :, 0]
        finally:
            layer.scale = saved

    d_n, d_r, d_c = cfg.qk_nope_head_dim, cfg.qk_rope_head_dim, cfg.kv_lora_rank
    known = [(hint("the scores are not scaled: divide them by sqrt(d_n + d_r) before the softmax"),
              explicit_with(scale=1.0)),
             (hint("the scale is 1/sqrt(d_c + d_r), the width of the absorbed dot product; the softmax scale "
                   "stays 1/sqrt(d_n + d_r), the width of the head's query and key, whatever form computes "
                   "the score"), explicit_with(scale=(d_c + d_r) ** -0.5)),
             (hint("the scale is 1/sqrt(d_n); the key has d_n + d_r numbers (its shared rotary part counts "
                   "too)"), explicit_with(scale=d_n ** -0.5)),
             (hint("the shared rotary part of the score is missing: add q_r · k_r,s to every score"),
              explicit_with(rope=False))]
    worst = 0.0
    for h in range(cfg.num_heads):
        with Watch() as watch:
            out = attempt(absorbed_head, q_nope[0, h, 0], q_rope[0, h, 0], W_uk[h], W_uv[h], cache.c[0],
                          cache.k_rope[0])
        widths = (d_n, cfg.v_head_dim, d_n + d_r)              # a key, a value, a key with its rotary part
        built = sorted(shape for shape in watch.shapes if S in shape and any(w in shape for w in widths))
        fewer = S - 6                                          # the same head over fewer cached tokens
        with Watch() as shorter:
            attempt(absorbed_head, q_nope[0, h, 0], q_rope[0, h, 0], W_uk[h], W_uv[h], cache.c[0, :fewer],
                    cache.k_rope[0, :fewer])
        per_token_ops = (watch.num_ops - shorter.num_ops) / (S - fewer)   # 0 unless it loops over the tokens
        with part("the outputs"):
            expect_tensor(f"head {h}'s output", out, (cfg.v_head_dim,), dtype=F64)
            if not matches(ref[h], out):
                for explanation, wrong in known:
                    if matches(wrong[h], out):
                        raise Wrong(f"head {h}'s output differs from the explicit attention",
                                    hint=explanation)
            worst = max(worst, expect_close(
                f"head {h}'s output", ref[h], out, row_dim=0,
                hint=hint("q_c = W_uk^T q_n [d_c]; scores (c q_c + k_r q_r) / sqrt(d_n + d_r) [S]; softmax "
                          "over the S cached tokens; then W_uv (p c), the up-projection after the weighted "
                          "sum.")))
        with part("absorbed: no key or value per token", needs=("the outputs",)):
            if built:
                raise Wrong(f"your function builds a tensor of shape {list(built[0])}: a key or a value for "
                            f"every one of the S = {S} cached tokens, which the absorbed form never makes",
                            hint=hint("q_c = W_uk^T q_n scores the latents directly (c q_c), and W_uv "
                                      "multiplies the averaged latent p c, one vector of d_c numbers."))
            if per_token_ops >= 1:
                raise Wrong(f"your function loops over the cached tokens: {per_token_ops:.0f} more "
                            f"operations per cached token ({S} tokens: {watch.num_ops}, {fewer}: "
                            f"{shorter.num_ops}); the exercise asks for the absorbed form as a few products "
                            f"over all of them at once",
                            hint=hint("no loop over the cache: score all S latents at once (c q_c), and "
                                      "up-project once, after the weighted sum."))
    return (f"all {cfg.num_heads} heads equal attend_explicit over {S} cached latents (RoPE on), relative "
            f"error {worst:.0e}")


@exercise("08.2", "merged_output", "W_uv merged into W_o (no output gate)", difficulty=2)
def check_merged_output(merged_output):
    layer = random_layer(qk_nope_head_dim=5, v_head_dim=5)       # d_n = d_v: W_uk in place of W_uv fits
    cfg = layer.config
    H, d_c = cfg.num_heads, cfg.kv_lora_rank
    W_uk, W_uv = layer.up_projections()
    a = torch.randn(7, H, d_c, dtype=F64)                        # 7 sets of per-head latent averages
    ref = layer.o_proj(torch.einsum("hvc,nhc->nhv", W_uv, a).reshape(7, -1))   # W_o [W_uv,1 a_1; ...]
    W_ov = attempt(merged_output, layer)
    expect_tensor("W_ov", W_ov, (cfg.hidden_size, H * d_c), dtype=F64)
    out = a.reshape(7, -1) @ W_ov.T
    if not matches(ref, out):
        head_major = W_ov.view(cfg.hidden_size, d_c, H).transpose(1, 2).reshape(cfg.hidden_size, -1)
        if matches(ref, a.reshape(7, -1) @ head_major.T):
            raise Wrong("W_ov has the right numbers in the wrong column order", hint=hint(
                "column h·d_c + c must belong to head h, latent channel c (head-major, like [a_1; ...; "
                "a_H]), not c·H + h."))
        if matches(layer.o_proj(torch.einsum("hvc,nhc->nhv", W_uk, a).reshape(7, -1)), out):
            raise Wrong("W_ov a differs from W_o (W_uv a)", hint=hint(
                "you merged W_uk, the key up-projection; the output side needs W_uv (the second part of each "
                "head's rows of kv_b_proj, as layer.up_projections() returns it)."))
    err = expect_close("W_ov a", ref, out, row_dim=0,
                       hint=hint("W_ov = W_o times the block-diagonal matrix whose h-th block is W_uv,h "
                                 "[d_v, d_c]; view W_o as [hidden, H, d_v] to see which columns meet which "
                                 "head."))
    return f"W_ov a = W_o (W_uv a) for 7 random per-head latent averages, relative error {err:.0e}"

