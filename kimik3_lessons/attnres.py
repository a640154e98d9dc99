"""Attention Residuals: each layer reads a softmax-weighted mix of earlier depths (Lesson 10).

A plain residual stream adds every sublayer output with weight one,

    h_l = h_0 + sum_{i<l} f_i(h_i),      (h_0 the embedding, f_i sublayer i with its own RMSNorm)

so the stream grows with depth and a late layer must shout to be heard. Attention Residuals
(arXiv 2603.15031) replace the sum by attention over depth: one learned pseudo-query `w_l` per mix point
scores the earlier sources `v_i` (keys are the RMS-normalized sources, values the raw ones),

    h_l = sum_i softmax_i( w_l · RMSNorm(v_i) ) v_i.

- `attn_res`        the mix itself, over a list of `[..., D]` sources (float32 math, input dtype out)
- `BlockSums`       the sources Block AttnRes keeps during one forward pass: the embedding `b_0`, the sum
                    of each finished block's sublayer outputs `b_1 … b_n`, and the running partial block
- `BlockAttnRes`    the pseudo-queries and key norms of a whole decoder (2 mix points per layer + 1 final)
                    and the call protocol a decoder loop follows; `block_size=None` is full AttnRes
- `ToyStack`        a deep pre-norm stack of small MLP sublayers, with plain residuals or (block) AttnRes
"""

import torch
from torch import nn

from kimik3_lessons import contract


def _check_attn_res_inputs(query, sources, norm_weight):
    if not isinstance(sources, (list, tuple)):
        raise ValueError(f"sources must be a list of [..., D] tensors, got {type(sources).__name__}")
    if len(sources) == 0:
        raise ValueError("sources must be a non-empty list of [..., D] tensors, got an empty list")
    shape = sources[0].shape
    if len(shape) == 0:
        raise ValueError("sources must be [..., D] tensors with a last (width) dimension, got a scalar")
    D = shape[-1]
    for i, v in enumerate(sources):
        if v.shape[-1] != D:
            raise ValueError(f"sources[{i}] has width {v.shape[-1]}, but sources[0] has width {D}: "
                             f"every source must be [..., {D}]")
        if v.shape != shape:
            raise ValueError(f"sources[{i}] is {list(v.shape)}, but sources[0] is {list(shape)}: "
                             "every source must have the same shape [..., D]")
        if v.dtype != sources[0].dtype or v.device != sources[0].device:
            raise ValueError(f"sources[{i}] is {v.dtype} on {v.device}, but sources[0] is "
                             f"{sources[0].dtype} on {sources[0].device}: use one dtype and device")
    for name, w in (("query", query), ("norm_weight", norm_weight)):
        if w.shape != (D,):
            raise ValueError(f"{name} must be [D] = [{D}] (the sources' width), got {list(w.shape)}")


def attn_res(query, sources, norm_weight, norm_eps=1e-6, return_weights=False):
    """Mix `sources` with one softmax over depth: h = sum_i alpha_i v_i.

        k_i     = v_i / sqrt(mean(v_i^2) + norm_eps) * norm_weight     keys: RMSNorm, so a big source does not
                                                                 win by its size
        alpha_i = softmax_i( query · k_i )                        one weight per source, per token
        h       = sum_i alpha_i v_i                               values: the raw sources

    query [D] (the pseudo-query w), sources a non-empty list of N tensors [..., D] (same shape),
    norm_weight [D]. Computed in float32 (float64 stays float64); h [..., D] comes back in the sources'
    dtype, the weights alpha [N, ...] (with `return_weights=True`) stay in the compute dtype.
    A zero query gives every source the same weight: h is the plain average.
    """
    _check_attn_res_inputs(query, sources, norm_weight)
    dtype = contract.compute_dtype(sources[0])
    V = torch.stack(sources).to(dtype)                                  # [N, ..., D] values
    K = nn.functional.rms_norm(V, (V.shape[-1],), norm_weight.to(dtype), norm_eps)  # [N, ..., D] keys
    alpha = (K @ query.to(dtype)).softmax(dim=0)                        # [N, ...]
    h = (alpha.unsqueeze(-1) * V).sum(dim=0).to(sources[0].dtype)       # [..., D]
    return (h, alpha) if return_weights else h


class BlockSums:
    """The sources of Block AttnRes during one forward pass (start one per batch with `BlockAttnRes.start`).

    blocks   [b_0, b_1, …, b_n]: b_0 is the embedding, b_j the sum of block j's sublayer outputs (finished)
    partial  the running sum of the current block's outputs so far, None right after a block boundary
    sources  blocks + [partial]: at most N + 1 tensors [..., D] (embedding + N blocks), not one per sublayer

    `block_sublayers` sublayer outputs make one block (2 per decoder layer: attention and MLP);
    `block_sublayers=1` keeps every output as its own source, which is full (per-layer) AttnRes.
    """

    def __init__(self, embedding, block_sublayers):
        self.blocks = [embedding]
        self.partial = None
        self.block_sublayers = block_sublayers
        self.n_outputs = 0

    def sources(self):
        return self.blocks + ([] if self.partial is None else [self.partial])

    def add_sublayer_output(self, out):
        """partial <- partial + f(h); when the block is full, it becomes the finished block b_n."""
        self.partial = out if self.partial is None else self.partial + out
        self.n_outputs += 1
        if self.n_outputs % self.block_sublayers == 0:
            self.blocks.append(self.partial)
            self.partial = None


class BlockAttnRes(nn.Module):
    """Block Attention Residuals for a decoder of `num_layers` layers (attention + MLP sublayer each).

    Parameters, one row per mix point p = 0 … 2·num_layers (p = 2l before layer l's attention, p = 2l + 1
    before its MLP, p = 2·num_layers before the final norm):
        queries       [2·num_layers + 1, D]  pseudo-queries w_p, zero-initialized (a uniform average at start)
        norm_weights  [2·num_layers + 1, D]  RMSNorm weights of the keys, one-initialized
    `block_size` counts decoder layers per block (KimiK3: 12); `block_size=None` makes every sublayer
    output its own source: full AttnRes, O(L·D) memory instead of O(N·D).

    Call protocol (mix point p may only run after exactly p sublayer outputs were added, else ValueError):

        state = attn_res.start(embedding)                       # embedding [..., D] becomes b_0
        for l, layer in enumerate(layers):
            h = attn_res.mix_before_attention(state, l)         # attention reads the mix
            state.add_sublayer_output(layer.attention(layer.attn_norm(h)))
            h = attn_res.mix_before_mlp(state, l)
            state.add_sublayer_output(layer.mlp(layer.mlp_norm(h)))
        h = attn_res.mix_final(state)                           # then final norm and LM head

    Every mix method takes `return_weights=True` to also return the depth weights alpha [n_sources, ...].
    Checkpoints that store one [1, D] query per sublayer (KimiK3) load into rows 2l (before attention),
    2l + 1 (before the MLP) and 2·num_layers (the final one); the norm weights likewise.
    """

    # A vector per mix point, stored as the rows of one table: trained as vectors, without weight decay
    # (recall_training.parameter_groups reads this).
    no_weight_decay_tables = ("queries", "norm_weights")

    def __init__(self, dim, num_layers, block_size=12, norm_eps=1e-6):
        super().__init__()
        if block_size is not None and (not isinstance(block_size, int) or block_size < 1):
            raise ValueError(f"block_size must be a positive number of decoder layers (or None), "
                             f"got {block_size!r}")
        self.dim, self.num_layers, self.block_size, self.norm_eps = dim, num_layers, block_size, norm_eps
        self.queries = nn.Parameter(torch.zeros(2 * num_layers + 1, dim))
        self.norm_weights = nn.Parameter(torch.ones(2 * num_layers + 1, dim))

    @property
    def block_sublayers(self):
        """Sublayer outputs summed into one source: 2 per decoder layer of a block, 1 for full AttnRes."""
        return 1 if self.block_size is None else 2 * self.block_size

    def start(self, embedding):
        """Begin a forward pass: the embedding [..., D] is block b_0."""
        if embedding.shape[-1] != self.dim:
            raise ValueError(f"embedding must be [..., D] = [..., {self.dim}], got {list(embedding.shape)}")
        return BlockSums(embedding, self.block_sublayers)

    def mix(self, state, point, return_weights=False):
        """h_p = attn_res(w_p, state.sources(), norm_p): the input of sublayer p (or of the final norm)."""
        if state.n_outputs != point:
            raise ValueError(f"mix point {point} needs exactly {point} sublayer outputs added before it, "
                             f"the state holds {state.n_outputs}: follow the call protocol")
        return attn_res(self.queries[point], state.sources(), self.norm_weights[point], self.norm_eps,
                        return_weights)

    def mix_before_attention(self, state, layer, return_weights=False):
        return self.mix(state, 2 * layer, return_weights)

    def mix_before_mlp(self, state, layer, return_weights=False):
        return self.mix(state, 2 * layer + 1, return_weights)

    def mix_final(self, state, return_weights=False):
        return self.mix(state, 2 * self.num_layers, return_weights)


class Sublayer(nn.Module):
    """f(h) = W_2 GELU(W_1 RMSNorm(h)): a pre-norm MLP, standing in for attention or the MLP of a layer."""

    def __init__(self, dim, hidden):
        super().__init__()
        self.norm = nn.RMSNorm(dim)
        self.up = nn.Linear(dim, hidden)
        self.down = nn.Linear(hidden, dim)

    def forward(self, h):
        return self.down(nn.functional.gelu(self.up(self.norm(h))))


class ToyStack(nn.Module):
    """A deep pre-norm network: embed, num_layers × (two sublayers), final norm, linear head.

    residual: "plain" (h <- h + f(h)), "block" (Block AttnRes, `block_size` layers a block) or
    "full" (full AttnRes: every sublayer output is a source). Maps x [..., d_in] to y [..., d_out].

    `forward(x, trace=...)` with a dict records, per mix point p = 0 … 2·num_layers, what the sublayers read:
    trace["embedding"] = h_0; trace["inputs"][p] = the hidden state entering sublayer p (p = 2·num_layers:
    the final norm); trace["outputs"][p] = f_p(that input); trace["weights"][p] = the depth weights
    alpha [n_sources, ...] (None for plain residuals).
    """

    def __init__(self, d_in, d_out, dim=32, num_layers=48, hidden=64, residual="plain", block_size=6):
        super().__init__()
        if residual not in ("plain", "block", "full"):
            raise ValueError(f"residual must be 'plain', 'block' or 'full', got {residual!r}")
        self.residual = residual
        self.embed = nn.Linear(d_in, dim)
        self.layers = nn.ModuleList(
            nn.ModuleDict({"attention": Sublayer(dim, hidden), "mlp": Sublayer(dim, hidden)})
            for _ in range(num_layers))
        self.norm = nn.RMSNorm(dim)
        self.head = nn.Linear(dim, d_out)
        self.attn_res = None if residual == "plain" else \
            BlockAttnRes(dim, num_layers, block_size if residual == "block" else None)

    def forward(self, x, trace=None):
        trace = {} if trace is None else trace
        trace.update(embedding=self.embed(x), inputs=[], outputs=[], weights=[])
        h = self._plain(trace) if self.attn_res is None else self._attn_res(trace)
        return self.head(self.norm(h))

    def _plain(self, trace):
        """h_{p+1} = h_p + f_p(h_p): the residual stream is the running sum of every output."""
        h = trace["embedding"]
        for layer in self.layers:
            for f in (layer["attention"], layer["mlp"]):
                out = f(h)
                trace["inputs"].append(h)
                trace["outputs"].append(out)
                trace["weights"].append(None)
                h = h + out
        trace["inputs"].append(h)
        trace["weights"].append(None)
        return h

    def _attn_res(self, trace):
        """The call protocol of BlockAttnRes: mix before each sublayer, add its output, mix once more."""
        state = self.attn_res.start(trace["embedding"])
        for l, layer in enumerate(self.layers):
            for mix, f in ((self.attn_res.mix_before_attention, layer["attention"]),
                           (self.attn_res.mix_before_mlp, layer["mlp"])):
                h, alpha = mix(state, l, return_weights=True)
                out = f(h)
                state.add_sublayer_output(out)
                trace["inputs"].append(h)
                trace["outputs"].append(out)
                trace["weights"].append(alpha)
        h, alpha = self.attn_res.mix_final(state, return_weights=True)
        trace["inputs"].append(h)
        trace["weights"].append(alpha)
        return h
