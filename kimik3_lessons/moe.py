"""Lesson 09: Mixture-of-Experts the KimiK3 way — sigmoid router, shared experts, latent experts, SiTU.

A mixture-of-experts layer replaces one wide MLP by E small ones (experts); each token runs only the
top_k experts a router picks for it, plus a few shared experts that every token runs:

    s = sigmoid(W_r x)                       scores, one per expert, each in (0, 1)
    chosen = top_k(s + b)                     the bias b only decides *which* experts run...
    p_j = s_j / sum_{i in chosen} s_i         ...the weights are the chosen raw scores, renormalized
    y = Shared(x) + W_up RMSNorm( sum_{j in chosen} p_j E_j(W_down x) )

KimiK3's routed experts live in a latent space half as wide as the hidden state (W_down, W_up), so
each costs half the FLOPs; the shared experts stay at full width. `latent_size=None` gives the plain
MoE, y = Shared(x) + sum_j p_j E_j(x). The bias b is not trained by gradients: `update_bias` nudges it
up for experts that got fewer tokens than average and down for busier ones (auxiliary-loss-free
balancing). Every expert is a gated MLP with the SiTU activation:

    situ(gate, up) = [beta tanh(gate / beta) sigmoid(gate)] * [lb tanh(up / lb)]     beta 4, lb 25

Shapes: x [..., hidden]; routed expert weights stacked over experts: w1, w3 [E, F, D], w2 [E, D, F]
(D = latent width, or hidden without latent); router [E, hidden]; shared experts fused into one SiTU
MLP of width num_shared_experts * F.
"""

from dataclasses import dataclass

import torch
import torch.nn as nn
import triton
import triton.language as tl

from kimik3_lessons import contract, rehearsal

# ---------------------------------------------------------------------------------------------------
# Activations


def _check_pair(gate, up):
    for name, t in (("gate", gate), ("up", up)):
        if not isinstance(t, torch.Tensor) or not t.is_floating_point():
            raise ValueError(f"{name} must be a floating-point torch.Tensor, got {getattr(t, 'dtype', t)}")
    if gate.shape != up.shape or gate.dtype != up.dtype:
        raise ValueError(f"up must match gate in shape and dtype: gate {list(gate.shape)} {gate.dtype}, "
                         f"up {list(up.shape)} {up.dtype}")


def situ(gate, up, beta=4.0, linear_beta=25.0):
    """SiTU-GLU, as separate PyTorch ops, computed in float32 (float64 stays float64):

        gate' = beta tanh(gate / beta) sigmoid(gate)      (SiLU with its linear factor soft-capped at ±beta)
        up'   = lb tanh(up / lb)                          (lb = linear_beta; None leaves up as is)
        out   = gate' * up'                               same shape and dtype as gate
    """
    _check_pair(gate, up)
    dtype = contract.compute_dtype(gate)
    g, u = gate.to(dtype), up.to(dtype)
    g = beta * torch.tanh(g / beta) * torch.sigmoid(g)
    if linear_beta is not None:
        u = linear_beta * torch.tanh(u / linear_beta)
    return (g * u).to(gate.dtype)


def swiglu(gate, up):
    """SwiGLU, the activation SiTU replaces: out = silu(gate) * up = gate sigmoid(gate) * up."""
    _check_pair(gate, up)
    dtype = contract.compute_dtype(gate)
    return (torch.nn.functional.silu(gate.to(dtype)) * up.to(dtype)).to(gate.dtype)


@triton.jit
def _exp(x):
    """e^x for x <= 0, to float32's accuracy on a GPU too. Compiled, tl.exp(x) is 2^(x log2 e) with the
    product rounded to float32 first, a relative error near |x| 6e-8 (4.5e-6 at x = -75). So split
    x = n ln2 + r, n an integer >= -126, |r| <= ln2 / 2 (ln2 in two parts: n * 0.693145751953125, 16
    bits, is exact), and take e^x = 2^n 2^(r log2 e): a power of two written into a float32's exponent
    bits (exact) times 2^y of a small y (ex2.approx's own error only, at most 2 ulp)."""
    n = tl.maximum(tl.floor(x * 1.4426950408889634 + 0.5), -126.0)
    r = (x - n * 0.693145751953125) - n * 1.428606820309417e-06
    two_n = ((n.to(tl.int32) + 127) << 23).to(tl.float32, bitcast=True)
    return tl.exp2(r * 1.4426950408889634) * two_n


@triton.jit
def _tanh(x):
    """tanh from exp, safe at both ends. tanh|x| = (1 - e^{-2|x|}) / (1 + e^{-2|x|}) never overflows
    (e^{-2|x|} <= 1); for |x| < 1/8 the odd series x - x^3/3 + 2x^5/15 avoids the cancellation in
    1 - e^{-2|x|} (its truncation error, 17|x|^7/315, is 2e-7 relative at |x| = 1/8, a few float32 ulp,
    about what the cancellation costs the exp form just above)."""
    a = tl.abs(x)
    E = _exp(-2.0 * a)
    t = (1.0 - E) / (1.0 + E)
    x2 = x * x
    series = x * (1.0 - x2 * (1.0 / 3.0 - x2 * (2.0 / 15.0)))
    return tl.where(a < 0.125, series, tl.where(x < 0, -t, t))


@triton.jit
def _sigmoid(x):
    """sigmoid from E = e^{-|x|} <= 1: 1 / (1 + E) for x >= 0, E / (1 + E) below; nothing overflows."""
    E = _exp(-tl.abs(x))
    return tl.where(x >= 0, 1.0, E) / (1.0 + E)


@triton.jit
def bf16_bits_to_float32(Bits):
    """bfloat16 is the upper half of a float32: its 16 bits (read as int16) widen to a float32 by a shift.
    No bfloat16 instruction, which a T4 (sm_75) lacks and triton 3.2 would emit."""
    return (Bits.to(tl.uint16, bitcast=True).to(tl.uint32) << 16).to(tl.float32, bitcast=True)


@triton.jit
def float32_to_bf16_bits(X):
    """X rounded to the nearest bfloat16 (ties to even), as its 16 bits (int16): add just under half of the
    dropped 16 bits' range (plus 1 when the kept part is odd) and drop them."""
    Bits = X.to(tl.uint32, bitcast=True)
    Bits += 0x7FFF + ((Bits >> 16) & 1)
    return (Bits >> 16).to(tl.uint16).to(tl.int16, bitcast=True)


@triton.jit
def situ_kernel(
    # pointers
    gate,       # [n] the gate branch, float16 / bfloat16 (its bits, BF16_BITS) / float32
    up,         # [n] the up branch, same dtype
    out,        # [n] situ(gate, up), same dtype
    # sizes
    n,
    BLOCK: tl.constexpr,
    # scalars
    beta,
    linear_beta,
    # switches
    LINEAR: tl.constexpr,
    BF16_BITS: tl.constexpr,
):
    """out = beta tanh(gate/beta) sigmoid(gate) * lb tanh(up/lb) on one block of BLOCK elements.

    One read of gate and up, one write of out; everything between stays in registers, in float32.
    The last block is masked, so any number of elements n works. BF16_BITS: the tensors are bfloat16
    numbers passed as their int16 bits, converted here by shifts (any GPU, any triton).
    Names as in `chunk_kernels`: lowercase pointers, index vectors and masks; Capitalized tiles.
    """
    i = tl.program_id(0).to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
    mask = i < n
    if BF16_BITS:
        Gate = bf16_bits_to_float32(tl.load(gate + i, mask=mask))
        Up = bf16_bits_to_float32(tl.load(up + i, mask=mask))
    else:
        Gate = tl.load(gate + i, mask=mask).to(tl.float32)
        Up = tl.load(up + i, mask=mask).to(tl.float32)
    Gate = beta * _tanh(Gate / beta) * _sigmoid(Gate)
    if LINEAR:
        Up = linear_beta * _tanh(Up / linear_beta)
    if BF16_BITS:
        tl.store(out + i, float32_to_bf16_bits(Gate * Up), mask=mask)
    else:
        tl.store(out + i, (Gate * Up).to(out.dtype.element_ty), mask=mask)


def situ_triton(gate, up, beta=4.0, linear_beta=25.0, block_size=1024):
    """`situ` as one fused Triton kernel (float32 inside; float16, bfloat16 or float32 in and out).

    Tensors are read as flat arrays (non-contiguous inputs are made contiguous first), so any shape works.
    bfloat16 tensors go to the kernel as their 16-bit patterns (`situ_kernel`'s BF16_BITS).
    """
    _check_pair(gate, up)
    if gate.dtype not in (torch.float16, torch.bfloat16, torch.float32):
        raise ValueError(f"gate/up must be float16, bfloat16 or float32 for the kernel (it computes in "
                         f"float32), got {gate.dtype}: use situ() for float64")
    contract.check_triton_inputs(gate=gate, up=up)
    gate, up = gate.contiguous(), up.contiguous()
    out = torch.empty_like(gate)
    n = gate.numel()
    bits = gate.dtype == torch.bfloat16
    if n:
        as_kernel_sees = (lambda x: x.view(torch.int16)) if bits else (lambda x: x)
        with rehearsal.paused():        # the interpreter's own copies are not the lesson's
            situ_kernel[(triton.cdiv(n, block_size),)](
                gate=as_kernel_sees(gate), up=as_kernel_sees(up), out=as_kernel_sees(out), n=n,
                BLOCK=block_size, beta=float(beta), linear_beta=float(linear_beta or 1.0),
                LINEAR=linear_beta is not None, BF16_BITS=bits)
    return out


class SiTUMLP(nn.Module):
    """A gated MLP with SiTU: y = W_down situ(W_gate x, W_up x); W_gate, W_up [F, H], W_down [H, F].

    KimiK3 uses one for its shared experts (two experts of width 3072 fused into F = 6144) and one for
    the dense first layer (F = 33792).
    """

    def __init__(self, hidden_size, intermediate_size, beta=4.0, linear_beta=25.0):
        super().__init__()
        self.gate_proj = nn.Linear(hidden_size, intermediate_size, bias=False)
        self.up_proj = nn.Linear(hidden_size, intermediate_size, bias=False)
        self.down_proj = nn.Linear(intermediate_size, hidden_size, bias=False)
        self.beta, self.linear_beta = beta, linear_beta

    def forward(self, x):
        return self.down_proj(situ(self.gate_proj(x), self.up_proj(x), self.beta, self.linear_beta))


# ---------------------------------------------------------------------------------------------------
# The MoE layer


@dataclass(frozen=True)
class MoEConfig:
    """The shapes of one MoE layer. `latent_size=None` is a plain MoE (experts at full width)."""
    hidden_size: int
    latent_size: int | None
    num_experts: int
    top_k: int
    num_shared_experts: int
    expert_hidden_size: int
    beta: float = 4.0            # SiTU's gate cap
    linear_beta: float = 25.0    # SiTU's up cap (None: no cap)
    norm_eps: float = 1e-5

    def __post_init__(self):
        for name in ("hidden_size", "num_experts", "expert_hidden_size"):
            value = getattr(self, name)
            if not isinstance(value, int) or value < 1:
                raise ValueError(f"{name} must be a positive integer, got {value!r}")
        if self.latent_size is not None and (not isinstance(self.latent_size, int) or self.latent_size < 1):
            raise ValueError(f"latent_size must be a positive integer or None (no latent), "
                             f"got {self.latent_size!r}")
        if not isinstance(self.top_k, int) or not 1 <= self.top_k <= self.num_experts:
            raise ValueError(f"top_k must be an integer in [1, num_experts = {self.num_experts}], "
                             f"got {self.top_k!r}")
        if not isinstance(self.num_shared_experts, int) or self.num_shared_experts < 0:
            raise ValueError(f"num_shared_experts must be an integer >= 0, got {self.num_shared_experts!r}")


class LatentMoE(nn.Module):
    """KimiK3's MoE layer: sigmoid router with a selection bias, shared SiTU experts at full width,
    routed SiTU experts in a latent of width `latent_size` (None: at full width, a plain MoE).

    LatentMoE(MoEConfig). forward(x [..., hidden]) -> [..., hidden], sparse: each expert runs on the
    tokens routed to it. dense_forward(x): every expert on every token, mixed by the routing weights
    (the reference).
    """

    def __init__(self, config):
        super().__init__()
        if not isinstance(config, MoEConfig):
            raise ValueError(f"config must be a MoEConfig, got {type(config).__name__}")
        self.config = cfg = config
        self.hidden_size, self.latent_size, self.top_k = cfg.hidden_size, cfg.latent_size, cfg.top_k
        self.beta, self.linear_beta = cfg.beta, cfg.linear_beta
        E, F, D = cfg.num_experts, cfg.expert_hidden_size, cfg.latent_size or cfg.hidden_size
        hidden_size, latent_size = cfg.hidden_size, cfg.latent_size

        self.router = nn.Linear(hidden_size, E, bias=False)
        # A weight of the checkpoint, set by `update_bias`, never by gradients.
        self.score_bias = nn.Parameter(torch.zeros(E), requires_grad=False)
        self.shared = SiTUMLP(hidden_size, cfg.num_shared_experts * F, cfg.beta, cfg.linear_beta) \
            if cfg.num_shared_experts else None
        if latent_size is not None:
            self.latent_down = nn.Linear(hidden_size, D, bias=False)
            self.latent_norm = nn.RMSNorm(D, eps=cfg.norm_eps)
            self.latent_up = nn.Linear(D, hidden_size, bias=False)
        self.w1 = nn.Parameter(torch.randn(E, F, D) * D ** -0.5)  # gate
        self.w3 = nn.Parameter(torch.randn(E, F, D) * D ** -0.5)  # up
        self.w2 = nn.Parameter(torch.randn(E, D, F) * F ** -0.5)  # down

    @property
    def num_experts(self):
        return self.w1.shape[0]

    def _tokens(self, x):
        """[..., hidden] -> [N, hidden]."""
        if not isinstance(x, torch.Tensor) or x.dim() < 1 or x.shape[-1] != self.hidden_size:
            got = list(x.shape) if isinstance(x, torch.Tensor) else type(x).__name__
            raise ValueError(f"x must be [..., hidden_size] = [..., {self.hidden_size}], got {got}")
        return x.reshape(-1, self.hidden_size)

    def route(self, x):
        """Router on x [..., hidden] (N tokens) -> (p [N, k] weights, idx [N, k] experts, s [N, E] scores).

        s = sigmoid(W_r x) (float32); idx = top_k(s + b); p = s[idx] / sum s[idx] (the bias only picks).
        """
        x = self._tokens(x)
        s = torch.sigmoid(self.router(x).to(contract.compute_dtype(x)))
        idx = torch.topk(s + self.score_bias.to(s.dtype), self.top_k, dim=-1).indices
        chosen = s.gather(-1, idx)
        return (chosen / chosen.sum(-1, keepdim=True)).to(x.dtype), idx, s

    def expert(self, e, z):
        """Routed expert e on its tokens z [n, D]: W2_e situ(W1_e z, W3_e z) -> [n, D]."""
        return situ(z @ self.w1[e].T, z @ self.w3[e].T, self.beta, self.linear_beta) @ self.w2[e].T

    def _down(self, x):
        return self.latent_down(x) if self.latent_size is not None else x

    def _finish(self, x, X, routed):
        """y = Shared(x) + W_up RMSNorm(routed) (latent) or Shared(x) + routed (plain), shaped like x."""
        y = self.latent_up(self.latent_norm(routed)) if self.latent_size is not None else routed
        if self.shared is not None:
            y = y + self.shared(X)
        return y.reshape(x.shape)

    def forward(self, x):
        """Sparse dispatch: sort the N*k (token, expert) pairs by expert, run each expert once on its
        contiguous group, scale by p and scatter-add the results back to their tokens."""
        X = self._tokens(x)
        p, idx, _ = self.route(X)
        z = self._down(X)
        experts = idx.reshape(-1)                           # [N k] the expert of each pair
        order = torch.argsort(experts, stable=True)         # pairs grouped by expert
        token = order // self.top_k                         # the token of each sorted pair
        counts = torch.bincount(experts, minlength=self.num_experts).tolist()
        groups = z[token].split(counts)
        y = torch.cat([self.expert(e, z_e) for e, z_e in enumerate(groups)])  # empty groups: [0, D]
        routed = torch.zeros_like(z).index_add_(0, token, y * p.reshape(-1)[order, None])
        return self._finish(x, X, routed)

    def dense_forward(self, x):
        """Reference: every expert on every token, y_e = W2_e situ(W1_e z, W3_e z), mixed by the routing
        weights as a dense [N, E] matrix P (zero for experts not chosen): routed = sum_e P[:, e] y_e."""
        X = self._tokens(x)
        p, idx, _ = self.route(X)
        z = self._down(X)
        G = torch.einsum("nd,efd->enf", z, self.w1)
        U = torch.einsum("nd,efd->enf", z, self.w3)
        Y = torch.einsum("enf,edf->end", situ(G, U, self.beta, self.linear_beta), self.w2)
        P = torch.zeros(len(X), self.num_experts, dtype=p.dtype, device=p.device).scatter_(1, idx, p)
        return self._finish(x, X, torch.einsum("ne,end->nd", P, Y))

    @torch.no_grad()
    def expert_load(self, x):
        """Tokens routed to each expert: [E] integers that sum to N * top_k."""
        return torch.bincount(self.route(x)[1].reshape(-1), minlength=self.num_experts)

    @torch.no_grad()
    def update_bias(self, load, rate=1e-3):
        """Auxiliary-loss-free balancing: b_e += rate * sign(mean load - load_e). Busy experts become
        a little less likely to be picked, idle ones a little more; the weights p are unchanged."""
        load = torch.as_tensor(load, device=self.score_bias.device)
        if load.shape != self.score_bias.shape:
            raise ValueError(f"load must be [num_experts] = [{self.num_experts}], got {list(load.shape)}")
        load = load.to(self.score_bias.dtype)
        self.score_bias += rate * torch.sign(load.mean() - load)


def moe_costs(config):
    """Parameters and matmul FLOPs per token of one `LatentMoE(config)` layer, by component.

    Returns {component: (parameters, FLOPs per token)}, FLOPs = 2 per multiply-add of the matmuls a
    token runs (router, shared experts, its top_k routed experts, latent projections); elementwise work
    (activation, norm, weighting) is not counted. Parameters match sum(p.numel()) of the module.
    """
    H, E, k = config.hidden_size, config.num_experts, config.top_k
    S, F, D = config.num_shared_experts, config.expert_hidden_size, config.latent_size or config.hidden_size
    expert = 3 * F * D  # w1, w3 [F, D], w2 [D, F]
    costs = {
        "router": (E * H + E, 2 * E * H),  # weight [E, H] and score bias [E]
        "shared experts": (3 * S * F * H, 2 * 3 * S * F * H),
        "routed experts": (E * expert, 2 * k * expert),
    }
    if config.latent_size is not None:
        costs["latent down + norm + up"] = (2 * H * D + D, 2 * 2 * H * D)
    return costs
