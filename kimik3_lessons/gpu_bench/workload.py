"""What a GPU cell runs at: its sizes on a GPU and in the rehearsal (`batch_sizes`, `head_size`), the
dtype FLA runs in (`fla_dtype`) and the precisions our kernels run in (`precisions`), and its random inputs
(`inputs`), in the lessons' layout and in FLA's (`to_fla`)."""

import torch
import torch.nn.functional as F

from kimik3_lessons import contract, lab, linear_attention, mixers


def fla_dtype():
    """FLA's production dtype here: bfloat16 on sm_80 and newer (and in the rehearsal, which plays an
    sm_80+ GPU), float16 on older GPUs (a T4, sm_75, has no bfloat16 tensor cores)."""
    if lab.on_gpu() and torch.cuda.get_device_capability()[0] < 8:
        return torch.float16
    return torch.bfloat16


def fla_dtypes():
    """The dtypes FLA runs in, one row each: this GPU's (`fla_dtype`); in the rehearsal both GPU classes',
    bfloat16 (sm_80+) and float16 (a T4), each with its own range (float16 holds at most 65,504)."""
    return (torch.bfloat16, torch.float16) if lab.rehearsing() else (fla_dtype(),)


def gpu_head_size(D):
    """The head size a GPU cell uses on a GPU, given the one it runs at here (`head_size`'s inverse)."""
    return lab.sizes(cpu=4 * D, gpu=D)


def precisions():
    """The `input_precision`s our kernels run in: ("ieee", "tf32") where TF32 exists (sm_80+, and in the
    rehearsal, which plays such a GPU), ("ieee",) on a T4: one row each, never two rows of one name."""
    tf32 = lab.rehearsing() or contract.fast_input_precision() == "tf32"
    return ("ieee", "tf32") if tf32 else ("ieee",)


def head_size(d):
    """The head size a GPU cell uses: `d` on a GPU, d / 4 in the rehearsal (the interpreter is slow)."""
    return lab.sizes(cpu=d // 4, gpu=d)


def batch_sizes():
    """(B, H, T) of the GPU cells: (2, 16, 8192) on a GPU; (1, 2, 100) in the rehearsal (100 tokens: not a
    multiple of the chunk, so the padding of the last chunk is exercised)."""
    return lab.sizes(cpu=(1, 2, 100), gpu=(2, 16, 8192))


def inputs(mixer, B, H, T, D, dtype):
    """Random inputs of `mixer` in the lessons' [B, H, T, D] layout, rounded to `dtype` (FLA's) and
    returned in float32: q, k (the feature map of lesson 02 for linear attention, q scaled by D^-1/2; unit
    rows for the delta rule), v, then beta in (0, 1) and g = log decay in (-0.1, 0], one per head (gated
    DeltaNet) or per key channel (KDA). g is not rounded: FLA's layers compute it in float32."""
    dev = lab.device()
    if mixer == "linear_attention":      # q scaled by D^-1/2 as a layer scales it: o fits float16
        q, k = (linear_attention.elu_feature_map(torch.randn(B, H, T, D, device=dev)) for _ in range(2))
        q = q * D ** -0.5
    else:
        q, k = (F.normalize(torch.randn(B, H, T, D, device=dev), dim=-1) for _ in range(2))
    x = dict(q=q, k=k, v=torch.randn(B, H, T, D, device=dev))
    family = mixers.get(mixer)
    if "g" in family.args:
        per_channel = (D,) if family.decay == "channel" else ()
        x["g"] = -0.1 * torch.rand(B, H, T, *per_channel, device=dev)
    if "beta" in family.args:
        x["beta"] = torch.rand(B, H, T, device=dev)
    return {name: t if name == "g" else t.to(dtype).float() for name, t in x.items()}


def to_fla(x, dtype):
    """The lessons' [B, H, T, ...] -> FLA's [B, T, H, ...], in `dtype` (g stays float32)."""
    return [t.transpose(1, 2).contiguous().to(torch.float32 if name == "g" else dtype)
            for name, t in x.items()]
