"""The GPU cells' code, rehearsed on the CPU (KIMIK3_REHEARSE=1): the `%%needs gpu` magic runs the body,
FLA's stand-ins refuse what FLA's entry points refuse, `gpu_bench.compare` checks and times every form,
and `make test-gpu`'s table is written from the rows the cells record."""

import json

import pytest
import torch

from kimik3_lessons import contract, fla_stand_in, gpu_bench, lab, linear_attention, mixers, rehearsal

pytestmark = pytest.mark.skipif(lab.on_gpu(), reason="the rehearsal plays a GPU on a CPU: here the cells run")


@pytest.fixture
def rehearse(monkeypatch):
    monkeypatch.setenv(lab.REHEARSE, "1")
    fla_stand_in.calls.clear()


def fla_inputs(B=1, T=20, H=2, K=16, dtype=torch.bfloat16):
    q, k, v = (torch.randn(B, T, H, K).to(dtype) for _ in range(3))
    return q, k, v, torch.rand(B, T, H).to(dtype)


def test_needs_gpu_runs_the_body_only_in_the_rehearsal(monkeypatch, capsys):
    shell = pytest.importorskip("IPython.core.interactiveshell").InteractiveShell.instance()
    monkeypatch.setattr("IPython.get_ipython", lambda: shell)
    monkeypatch.delenv(lab.REHEARSE, raising=False)
    lab.needs("gpu: sets ran", "ran = 1")
    assert "⏭ skipped" in capsys.readouterr().out and "ran" not in shell.user_ns
    monkeypatch.setenv(lab.REHEARSE, "1")
    lab.needs("gpu: sets ran", "ran = 1")
    assert "🎭 rehearsal" in capsys.readouterr().out and shell.user_ns.pop("ran") == 1


def test_stand_in_refuses_float32_like_chunk_delta_rule(rehearse):
    """Defect 1: lesson 05b gave chunk_delta_rule float32 tensors, which FLA's entry point refuses."""
    chunk_delta_rule = fla_stand_in.entry_point("deltanet")
    with pytest.raises(AssertionError, match="does not support float32"):
        chunk_delta_rule(*fla_inputs(dtype=torch.float32), scale=1.0)
    o, S = chunk_delta_rule(*fla_inputs(), scale=1.0, output_final_state=True)
    assert o.dtype == torch.bfloat16 and S.dtype == torch.float32 and S.shape == (1, 2, 16, 16)


def test_stand_ins_enforce_the_layout_and_the_shapes_of_g_and_beta(rehearse):
    q, k, v, beta = fla_inputs()
    head_first = [x.transpose(1, 2) for x in (q, k, v)]
    with pytest.raises(AssertionError, match=r"beta must be \[B, T, H\]"):
        fla_stand_in.entry_point("deltanet")(*head_first, beta)          # q, k, v [B, H, T, K]
    with pytest.raises(AssertionError, match=r"g must be \[B, T, H, K\]"):
        fla_stand_in.entry_point("kda")(q, k, v, beta.float().log(), beta)  # KDA's g is per channel
    with pytest.raises(AssertionError, match=r"g must be \[B, T, H\]"):
        fla_stand_in.entry_point("gated_deltanet")(q, k, v, -torch.rand(1, 20, 2, 16), beta)
    with pytest.raises(AssertionError, match="share one dtype"):
        fla_stand_in.entry_point("linear_attention")(q, k.float(), v)
    with pytest.raises(AssertionError, match="initial_state must be in float32"):
        fla_stand_in.entry_point("kda")(q, k, v, -torch.rand(1, 20, 2, 16), beta,
                                              initial_state=torch.zeros(1, 2, 16, 16, dtype=torch.bfloat16))


def test_stand_in_applies_fla_s_default_scale(rehearse):
    """scale=None is K^-1/2, as in FLA: a cell that forgets scale=1.0 gets other numbers."""
    q, k, v, beta = fla_inputs()
    unscaled, _ = fla_stand_in.entry_point("deltanet")(q, k, v, beta, scale=1.0)
    default, _ = fla_stand_in.entry_point("deltanet")(q, k, v, beta)
    explicit, _ = fla_stand_in.entry_point("deltanet")(q, k, v, beta, scale=16 ** -0.5)
    lab.check_close("scale=None == scale=K^-1/2", explicit, default)
    assert lab.relative_error(unscaled.float(), default.float()) > 0.5


def test_outside_the_rehearsal_the_entry_point_is_fla_s(monkeypatch):
    monkeypatch.delenv(lab.REHEARSE, raising=False)
    assert fla_stand_in.entry_point("kda").__module__.startswith("fla.")


@pytest.mark.parametrize("mixer", list(mixers.FLA))
def test_fla_gets_its_production_dtype_and_each_precision_one_row(mixer, rehearse):
    """Defects 1, 5 and 6: FLA gets q, k, v, beta in bfloat16 (g in float32, as FLA's layers make it), never
    the float32 the old cells gave it; our kernels get one row per precision, no two rows of one name."""
    x = gpu_bench.inputs(mixer, 1, 2, 40, 16, torch.bfloat16)
    calls = gpu_bench.forms(mixer, x, torch.bfloat16)
    assert list(calls)[1:3] == ["triton_chunked (ieee)", "triton_chunked (tf32)"] and len(calls) == 5
    fla, args, precision = calls[f"FLA {mixers.FLA[mixer].name} (bfloat16)"]
    o, S = fla(*args)
    assert precision == "bfloat16" and o.shape == x["v"].shape and S.shape == (1, 2, 16, 16)
    ((entry, dtypes),) = fla_stand_in.calls
    assert entry == mixers.FLA[mixer].name
    assert dtypes == {name: torch.float32 if name == "g" else torch.bfloat16 for name in x}


@pytest.mark.parametrize("mixer", ["linear_attention"])   # the other three: in their lessons, rehearsed
def test_compare_checks_every_form_against_float64_and_records_its_rows(mixer, rehearse, monkeypatch,
                                                                        tmp_path, capsys):
    """Every form's outputs and final state are compared with float64 at the timed size, then timed; the
    rows go to $KIMIK3_GPU_RESULTS, and `write_table` (make test-gpu's table) collects them."""
    monkeypatch.setattr(gpu_bench, "batch_sizes", lambda: (1, 2, 40))
    monkeypatch.setenv(gpu_bench.RESULTS, str(tmp_path / "rows.jsonl"))
    rows = gpu_bench.compare(mixer, 16, recurrent=True, repeat=1)
    forms = [r["form"] for r in rows]
    assert len(set(forms)) == len(forms) == 6 and forms[-1].startswith("FLA")
    assert all(r["T"] == 40 and r["state_error"] < r["tolerance"] and r["ms"] > 0 for r in rows)
    assert {r["precision"]: r["tolerance"] for r in rows} == {"float32": 1e-4, "ieee": 1e-4, "tf32": 1e-2,
                                                             "bfloat16": 5e-2, "float16": 5e-2}
    recorded = [json.loads(line) for line in (tmp_path / "rows.jsonl").read_text().splitlines()]
    assert [r["form"] for r in recorded] == forms and recorded[0]["gpu"] == "CPU (rehearsal)"
    path = gpu_bench.write_table(tmp_path / "rows.jsonl", folder=tmp_path)
    assert path.name == "gpu-cpu-rehearsal.json" and len(json.loads(path.read_text())["rows"]) == 6
    assert "written:" in capsys.readouterr().out


def test_compare_fails_on_a_wrong_final_state(rehearse, monkeypatch):
    """Defect 6: FLA's final state is compared, not unpacked and dropped."""
    monkeypatch.setattr(gpu_bench, "batch_sizes", lambda: (1, 2, 40))
    real = fla_stand_in.stand_in("linear_attention")
    monkeypatch.setattr(fla_stand_in, "entry_point",
                        lambda mixer: lambda *a, **kw: (real(*a, **kw)[0], torch.zeros(1, 2, 16, 16)))
    with pytest.raises(AssertionError, match=r"FLA chunk_linear_attn \(bfloat16\): state error"):
        gpu_bench.compare("linear_attention", 16, repeat=1)


def test_an_exact_form_is_held_to_float32_accuracy():
    """Defect 6: an "ieee" row 1e-3 off fails (the old cells held FLA and every row to 1e-2 alike)."""
    row = dict(mixer="kda", D=128, form="triton_chunked (ieee)", output_error=1e-3, state_error=1e-7,
               tolerance=gpu_bench.TOLERANCE["ieee"])
    with pytest.raises(AssertionError, match="output error 1.00e-03 > 1e-04"):
        gpu_bench.check([row])


def test_a_t4_gets_one_ieee_row_and_float16(monkeypatch):
    """Defect 6: on a T4 (no TF32) the two "ieee" rows were one dict key; FLA runs there in float16."""
    monkeypatch.setattr(lab, "on_gpu", lambda: True)
    monkeypatch.setattr(contract, "fast_input_precision", lambda: "ieee")
    monkeypatch.setattr(torch.cuda, "get_device_capability", lambda *a: (7, 5))
    assert gpu_bench.precisions() == ("ieee",) and gpu_bench.fla_dtype() == torch.float16
    monkeypatch.setattr(contract, "fast_input_precision", lambda: "tf32")
    monkeypatch.setattr(torch.cuda, "get_device_capability", lambda *a: (9, 0))
    assert gpu_bench.precisions() == ("ieee", "tf32") and gpu_bench.fla_dtype() == torch.bfloat16


def test_the_bandwidth_model_reads_the_gpu(monkeypatch):
    """Defect 7: lesson 09b's model used an H200's 4.8 TB/s on every GPU; a T4 moves 320 GB/s."""
    class T4:
        memory_bus_width, memory_clock_rate = 256, 5_001_000     # bits; kHz (what torch reports for a T4)
    monkeypatch.setattr(lab, "on_gpu", lambda: True)
    monkeypatch.setattr(torch.cuda, "get_device_properties", lambda *a: T4())
    monkeypatch.setattr(torch.cuda, "get_device_name", lambda *a: "Tesla T4")
    bandwidth, name = gpu_bench.memory_bandwidth()
    assert name == "Tesla T4" and abs(bandwidth - 320e9) < 1e9
    monkeypatch.setattr(lab, "on_gpu", lambda: False)
    assert gpu_bench.memory_bandwidth() == (4.8e12, "an H200, the model's GPU; none here")


def test_without_the_bus_width_the_bandwidth_is_measured_not_an_h200_s(monkeypatch):
    """Defect 9: a torch that does not report the bus width fell back to the H200's 4.8 TB/s on any GPU."""
    class Older:
        pass
    monkeypatch.setattr(lab, "on_gpu", lambda: True)
    monkeypatch.setattr(torch.cuda, "get_device_properties", lambda *a: Older())
    monkeypatch.setattr(torch.cuda, "get_device_name", lambda *a: "Tesla T4")
    monkeypatch.setattr(torch, "empty", lambda n, device=None: torch.ones(n))       # no CUDA here
    monkeypatch.setattr(lab, "timeit", lambda fn, *a, **kw: 1e-3)                   # 1 ms for the copy
    bandwidth, name = gpu_bench.memory_bandwidth()
    assert name == "Tesla T4 (measured: a device copy)" and bandwidth == 2 * 2**28 / 1e-3


# ---------------------------------------------------------------------------------------------------
# Two devices: the rehearsal's device is not the host, as on a GPU machine (`rehearsal`)


@pytest.fixture
def two_devices(monkeypatch):
    monkeypatch.setenv(lab.REHEARSE, "1")
    rehearsal.start()
    try:
        yield lab.device()
    finally:
        rehearsal.stop()


def test_a_device_tensor_and_a_host_tensor_cannot_meet(two_devices):
    x = torch.ones(3, 4, device=two_devices)
    assert x.device == rehearsal.DEVICE and not rehearsal.on_device(torch.ones(3, 4))
    with pytest.raises(RuntimeError, match="Expected all tensors to be on the same device"):
        x + torch.ones(3, 4)
    with pytest.raises(RuntimeError, match="Expected all tensors to be on the same device"):
        torch.cat([x, torch.zeros(1, 4)])
    y = x * torch.tensor(2.0) + 1                     # a host scalar may join, as in CUDA
    assert rehearsal.on_device(y) and rehearsal.on_device(x[torch.tensor([0, 2])])   # a host index may index
    assert rehearsal.on_device(torch.zeros(2, device=x.device)) and rehearsal.on_device(x.new_zeros(2))
    host = x.cpu()
    assert not rehearsal.on_device(host) and host.device == torch.device("cpu") and rehearsal.on_device(x)


def test_a_device_tensor_goes_to_numpy_or_a_plot_only_through_cpu(two_devices):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import numpy as np
    x = torch.linspace(0, 1, 5, device=two_devices)
    with pytest.raises(TypeError, match="can't convert cpu:0 device type tensor to numpy. Use Tensor.cpu()"):
        np.asarray(x)
    with pytest.raises(TypeError, match="Use Tensor.cpu()"):
        plt.plot(x)
    plt.plot(x.cpu())
    plt.close("all")
    assert x.sum().item() == pytest.approx(2.5) and x.tolist()[-1] == 1.0          # as CUDA allows


def test_a_module_moved_to_the_device_trains_there(two_devices):
    layer = torch.nn.Linear(4, 3).to(two_devices)
    optimizer = torch.optim.Adam(layer.parameters(), lr=1e-2)
    x = torch.randn(5, 4, device=two_devices)
    layer(x).square().sum().backward()
    optimizer.step()
    assert rehearsal.on_device(layer.weight) and rehearsal.on_device(layer.weight.grad)
    with pytest.raises(RuntimeError, match="same device"):
        layer(torch.randn(5, 4))
    made_there = torch.nn.Linear(4, 3, device=two_devices)          # a Parameter of device data
    assert rehearsal.on_device(made_there.weight) and rehearsal.on_device(made_there(x))


def test_the_kernels_refuse_a_host_tensor_as_compiled_ones_do(two_devices):
    q = torch.randn(1, 1, 20, 16, device=two_devices)
    linear_attention.triton_chunked(q, q, q, chunk_size=16)
    with pytest.raises(ValueError, match="^q is on cpu, but the compiled Triton kernel needs CUDA tensors"):
        linear_attention.triton_chunked(q.cpu(), q.cpu(), q.cpu(), chunk_size=16)
    with pytest.raises(ValueError, match="^k must be on cpu:0 like q, got cpu"):       # cuda:0 on a GPU
        linear_attention.triton_chunked(q, q.cpu(), q, chunk_size=16)


OLD_03_CELL_28 = """
def numbers_per_chunk(d, C, T=1024):
    x = torch.zeros(1, 1, T, d)
    with mock.patch.object(chunk_kernels, "launch") as launches:
        linear_attention.triton_chunked(x, x, x, chunk_size=C)
numbers_per_chunk(64, 16)
"""
OLD_09B_CELL = """
g, u = torch.randn(3, 1007) * 8, torch.randn(3, 1007) * 60
moe.situ_triton(g, u)
"""


@pytest.mark.parametrize("cell", [OLD_03_CELL_28, OLD_09B_CELL], ids=["03-cell-28", "09b-situ"])
def test_the_cells_that_broke_run_all_on_a_gpu_fail_the_rehearsal(cell, two_devices):
    """Two cells that stopped Run All on every GPU (tensors made without device=, given to a kernel)
    passed on a CPU, where the device is the host; the rehearsal's two devices fail them."""
    from unittest import mock

    from kimik3_lessons import chunk_kernels, moe
    with pytest.raises(ValueError, match="is on cpu, but the compiled Triton kernel needs CUDA tensors"):
        exec(cell, dict(torch=torch, mock=mock, chunk_kernels=chunk_kernels, moe=moe, device=two_devices,
                        linear_attention=linear_attention))


def test_the_rehearsal_computes_exp_as_a_gpu_does():
    """`gpu_arithmetic`: the interpreter's tl.exp becomes ex2.approx of x log2(e) rounded to float32, as
    compiled (at x = -75 the rounding alone is a relative error near 4.5e-6; numpy's exp is exact)."""
    import numpy as np
    x = np.float32(-75.0) + np.arange(-64, 64, dtype=np.float32) * np.float32(2 ** -17)
    exact = np.exp(x.astype(np.float64))
    error = np.abs(rehearsal.exp_compiled(x) / exact - 1).max()
    assert 1e-6 < error < 8e-6 and np.abs(np.exp(x) / exact - 1).max() < 1.2e-7


# ---------------------------------------------------------------------------------------------------
# FLA's stand-ins refuse what FLA refuses and return what it returns (defect 7); float16's range (defect 4)


@pytest.mark.parametrize("mixer", ["deltanet", "gated_deltanet", "kda"])
def test_stand_in_refuses_a_key_head_size_above_256(mixer, rehearse):
    K = 272
    q, k, v, beta = fla_inputs(K=K)
    g = -torch.rand(1, 20, 2, *((K,) if mixer == "kda" else ()))
    args = (q, k, v, beta) if mixer == "deltanet" else (q, k, v, g, beta)
    with pytest.raises(AssertionError, match="head dimension larger than 256"):
        fla_stand_in.entry_point(mixer)(*args)


def test_stand_in_of_chunk_linear_attn_normalizes_by_default_and_returns_fla_s_state(rehearse):
    """fla-core's chunk_linear_attn normalizes unless told not to and returns (o, (state or None, z))."""
    q, k, v, _ = fla_inputs(dtype=torch.float16)
    q, k = q.float().exp().half(), k.float().exp().half()          # positive features: a positive denominator
    o, (S, z) = fla_stand_in.entry_point("linear_attention")(q, k, v)
    assert S is None and z.shape == (1, 1, 2, 16) and o.dtype == torch.float16
    o_plain, S_plain = fla_stand_in.entry_point("linear_attention")(q, k, v, normalize=False,
                                                                    output_final_state=True)
    assert S_plain.shape == (1, 2, 16, 16) and lab.relative_error(o_plain.float(), o.float()) > 0.5
    with pytest.raises(TypeError):
        fla_stand_in.entry_point("linear_attention")(q, k, v, normalise=False)   # FLA's own signature


def test_stand_in_in_float16_overflows_to_inf_as_on_a_t4(rehearse):
    q, k, v, _ = fla_inputs(T=64, dtype=torch.float16)
    o, _ = fla_stand_in.entry_point("linear_attention")(q * 20, k * 20, v * 20, scale=1.0, normalize=False)
    assert torch.isinf(o).any()


def test_the_rehearsal_runs_fla_in_both_gpu_classes_dtypes(rehearse):
    x = gpu_bench.inputs("deltanet", 1, 2, 40, 16, torch.bfloat16)
    calls = gpu_bench.forms("deltanet", x, torch.bfloat16)
    assert [calls[name][2] for name in calls if name.startswith("FLA")] == ["bfloat16", "float16"]


def test_float16_s_range_is_checked_at_the_gpu_cell_s_sizes(rehearse, monkeypatch, capsys):
    """Defect 4: elu+1 features at scale 1.0 (the old inputs) give |o| near 70,000 at T = 8192 and head size
    128, inf in float16 on a T4; the inputs scaled by D^-1/2 stay far inside."""
    gpu_bench.check_range("linear_attention", 32)
    assert "a quarter of float16's 65,504" in capsys.readouterr().out
    real = gpu_bench.inputs

    def unscaled(mixer, B, H, T, D, dtype):
        x = real(mixer, B, H, T, D, dtype)
        return dict(x, q=x["q"] * D ** 0.5)
    monkeypatch.setattr(gpu_bench, "inputs", unscaled)
    with pytest.raises(AssertionError, match="above a quarter of float16's 65,504"):
        gpu_bench.check_range("linear_attention", 32)


def test_compare_says_fla_compiles_before_its_first_call(rehearse, monkeypatch, capsys):
    """Defect 6: a GPU cell was silent for minutes while FLA autotuned; it says so first, with the time."""
    monkeypatch.setattr(gpu_bench, "batch_sizes", lambda: (1, 2, 40))
    monkeypatch.setattr(gpu_bench, "check_range", lambda *a: None)
    gpu_bench.compare("kda", 16, repeat=1)
    out = capsys.readouterr().out
    line = "compiling flash-linear-attention's kernels for CPU (rehearsal): about 5 min the first time"
    assert line in out and out.index(line) < out.index("FLA chunk_kda")


@pytest.mark.parametrize("driver, built, available, says", [
    ("12.4", "12.8", False, "newer than the driver's CUDA 12.4: update the driver, or rebuild .venv with "
                           "a torch built for CUDA 12.4 or older: rm -rf .venv && make test-gpu "
                           'TORCH_SPEC="torch --index-url https://download.pytorch.org/whl/cu124"'),
    ("12.4", None, False, 'is a CPU build. Rebuild .venv with a CUDA build: rm -rf .venv && make test-gpu'),
    ("12.8", "12.4", False, "sees no GPU although nvidia-smi lists one"),
    ("12.8", "12.4", True, None)])
def test_make_test_gpu_names_why_torch_sees_no_gpu(driver, built, available, says):
    """Defect 5: a CUDA build newer than the driver turned every GPU cell into a skip and ended in an error
    far from the cause; `make test-gpu` stops first and says which TORCH_SPEC to pass."""
    problem = gpu_bench.cuda_problem(driver, built, available)
    assert (problem is None) if says is None else says in problem


@pytest.mark.parametrize("mixer", list(mixers.MIXERS))
def test_tf32_rows_meet_their_tolerance_with_tf32_s_arithmetic(mixer, gpu_arithmetic):
    """A "tf32" row's tolerance (gpu_bench.TOLERANCE, 1e-2) allows for products of inputs cut to 10
    mantissa bits; with the interpreter's tf32 products cut so (`gpu_arithmetic`), the kernels meet it
    and are measurably less exact than "ieee" (a tolerance met only by full float32 would prove nothing)."""
    family = mixers.get(mixer)
    x = gpu_bench.inputs(mixer, 1, 2, 100, 32, torch.bfloat16)
    o64, S64 = family.recurrent(*(t.double() for t in x.values()))
    errors = {}
    for precision in ("ieee", "tf32"):
        o, S = family.triton_chunked(*x.values(), chunk_size=64, input_precision=precision)
        errors[precision] = max(lab.relative_error(o64, o), lab.relative_error(S64, S))
    assert errors["tf32"] <= gpu_bench.TOLERANCE["tf32"] and errors["ieee"] <= gpu_bench.TOLERANCE["ieee"]
    assert errors["tf32"] > 10 * errors["ieee"], errors


@pytest.mark.parametrize("mixer", ["deltanet", "kda"])
def test_the_float64_reference_in_groups_of_heads_is_the_reference_at_once(mixer):
    """compare_training's reference, autograd through the float64 recurrence, taken a group of heads at a time
    (a T4 cannot hold every head's steps at once): the same gradients as all heads at once, whatever the
    group."""
    family = mixers.get(mixer)
    x = gpu_bench.inputs(mixer, 2, 3, 20, 8, torch.float32)
    dO = torch.randn_like(x["v"])
    leaves = {name: t.double().requires_grad_() for name, t in x.items()}
    o, _ = family.recurrent(*leaves.values())
    (o * dO.double()).sum().backward()
    for budget in (1, 2.5e5, 1e12):                  # one head per group, a few, all at once
        grads = gpu_bench.float64_gradients(family, x, dO, budget=budget)
        for name, leaf in leaves.items():
            torch.testing.assert_close(grads[name], leaf.grad, rtol=0, atol=1e-12)
