"""`compare_training`: forward plus backward of every form of one mixer, the gradients against autograd
through the float64 recurrence, then timed: what lesson 13's `%%needs gpu` cell prints."""

import torch

from kimik3_lessons import fla_stand_in, gpu_bench, lab, mixers
from kimik3_lessons.gpu_bench.table import print_training_rows, record
from kimik3_lessons.gpu_bench.workload import fla_dtype, to_fla

# `batch_sizes` and `inputs` are called through the package (`gpu_bench.inputs`): a test that replaces one
# there replaces it for every caller.

# The tolerances of the gradients of `compare_training`, against float64 on the same rounded inputs: a
# float32 backward ("ieee", the PyTorch forms) sums a few thousand rounded terms (measured 3e-7 to 2e-5);
# "bf16" and "fp16" products round every tile a product reads to 8 and 11 mantissa bits, and the rounding
# compounds through the chunk's products (measured up to 2e-2 and 6e-4, lesson 13); FLA in bfloat16 or
# float16 rounds its stored intermediates too.
GRADIENT_TOLERANCE = {"float32": 1e-4, "ieee": 1e-4, "tf32": 2e-2, "bf16": 6e-2, "fp16": 1e-2,
                      "bfloat16": 6e-2, "float16": 2e-2}


def training_forms(mixer, x, dtype):
    """{name: (fn, args, precision)}: forward and backward of `mixer`'s chunked form, each fn(*args) ->
    (o, {input: gradient}) in the lessons' layout, for the loss sum(o * dO) with a fixed random dO: autograd
    through the PyTorch chunked form, lesson 13's kernels (`backward.trainable`) in float32 ("ieee") and in
    FLA's half precision (`dtype`'s products, "bf16" or "fp16"), FLA's chunk_* (its own backward)."""
    from kimik3_lessons.backward import trainable
    family, op = mixers.get(mixer), mixers.FLA.get(mixer)
    dO = torch.randn_like(x["v"])
    half = {torch.bfloat16: "bf16", torch.float16: "fp16"}[dtype]

    def run(form, inputs, layout=lambda t: t):
        leaves = {name: t.detach().clone().requires_grad_() for name, t in inputs.items()}
        o, _ = form(*leaves.values())
        o = layout(o)
        (o.float() * dO).sum().backward()
        return o, {name: layout(t.grad) for name, t in leaves.items()}

    half_x = {name: t if name == "g" else t.to(dtype) for name, t in x.items()}
    calls = {"autograd through chunked (PyTorch)": (run, (family.chunked, x), "float32"),
             "kernels, lesson 13 (ieee)": (run, (trainable(family, input_precision="ieee"), x), "ieee"),
             f"kernels, lesson 13 ({half})": (run, (trainable(family, input_precision=half), half_x), half)}
    if op is not None:
        fla = fla_stand_in.entry_point(mixer)
        fla_x = dict(zip(x, to_fla(x, dtype), strict=True))

        def fla_form(*fla_args):
            return fla(*fla_args, scale=1.0, output_final_state=True, **dict(op.kwargs))

        calls[f"FLA {op.name}"] = (run, (fla_form, fla_x, lambda t: t.transpose(1, 2)),
                                   str(dtype).removeprefix("torch."))
    return calls, dO


def float64_gradients(family, x, dO, budget=None):
    """{input: gradient} of sum(o * dO) for the inputs x (each [B, H, T, ...]): autograd through `family`'s
    float64 recurrence, a group of heads at a time (the heads are independent). Autograd keeps every step
    of the recurrence: for KDA at B = 2, H = 16, T = 8192 and head size 64, about 17 GiB at once, past a
    T4's 15. A group keeps at most `budget` bytes (default: half the GPU's free memory; in the rehearsal
    one head's, so that the groups run there too), as one head's first 64 tokens measure it
    (`backward.cost.saved_bytes`), scaled to T."""
    from kimik3_lessons.backward import cost
    B, H, T = x["q"].shape[:3]
    heads = {name: t.double().flatten(0, 1).unsqueeze(0) for name, t in x.items()}      # [1, B*H, ...]
    dO = dO.double().flatten(0, 1).unsqueeze(0)
    probe = {name: t[:, :1, :64].clone().requires_grad_() for name, t in heads.items()}
    _, per_head = cost.saved_bytes(family.recurrent, *probe.values())
    per_head *= T / probe["q"].shape[2]
    if budget is None:
        budget = torch.cuda.mem_get_info()[0] / 2 if lab.on_gpu() else per_head
    group = max(1, int(budget // per_head))
    grads = {name: torch.empty_like(t) for name, t in heads.items()}
    for i in range(0, B * H, group):
        leaves = {name: t[:, i:i + group].clone().requires_grad_() for name, t in heads.items()}
        o, _ = family.recurrent(*leaves.values())
        (o * dO[:, i:i + group]).sum().backward()
        for name, leaf in leaves.items():
            grads[name][:, i:i + group] = leaf.grad
    return {name: t.squeeze(0).unflatten(0, (B, H)) for name, t in grads.items()}


def compare_training(mixer, D, repeat=None):
    """Forward plus backward of `mixer` at head size D, every form of `training_forms`: the gradients of
    sum(o * dO) with respect to q, k, v, [g,] [beta] against autograd through the float64 recurrence on the
    same rounded inputs (`float64_gradients`; the largest relative error over the inputs), then all timed
    in turn; print, record (kind "train") and return the rows. AssertionError past `GRADIENT_TOLERANCE`."""
    # the rehearsal: three chunks, the last padded
    B, H, T = lab.sizes(cpu=(1, 2, 40), gpu=gpu_bench.batch_sizes())
    dtype = fla_dtype()
    family = mixers.get(mixer)
    x = gpu_bench.inputs(mixer, B, H, T, D, dtype)
    calls, dO = training_forms(mixer, x, dtype)
    reference = float64_gradients(family, x, dO)
    rows = []
    for name, (fn, args, precision) in calls.items():
        _, grads = fn(*args)
        errors = {n: lab.relative_error(reference[n], grads[n]) for n in x}
        rows.append(dict(kind="train", mixer=mixer, B=B, H=H, T=T, D=D, form=name, precision=precision,
                         gradient_error=max(errors.values()), worst=max(errors, key=errors.get),
                         tolerance=GRADIENT_TOLERANCE[precision]))
    seconds = lab.time_in_turn({name: (fn, args) for name, (fn, args, _) in calls.items()},
                               repeat=repeat or lab.sizes(cpu=1, gpu=10), warmup=lab.on_gpu())
    fla_seconds = next((seconds[name] for name in calls if name.startswith("FLA")), None)
    for row in rows:
        row.update(ms=1e3 * seconds[row["form"]],
                   vs_fla=seconds[row["form"]] / fla_seconds if fla_seconds else None)
    print_training_rows(rows, f"{family.name}, B={B}, H={H}, T={T}, head size {D}, forward + backward, "
                              f"{lab.gpu_name()}; gradients against float64 of the same rounded inputs:")
    record(rows)
    bad = [f"{r['mixer']} D={r['D']} {r['form']}: gradient error {r['gradient_error']:.2e} (d{r['worst']}) "
           f"> {r['tolerance']:.0e}" for r in rows if not r["gradient_error"] <= r["tolerance"]]
    assert not bad, "gradients against float64 above tolerance:\n" + "\n".join(bad)
    print(f"✓ {len(rows)} forms: gradients within tolerance of autograd through the float64 recurrence")
    return rows

