"""The GPU cells' code, rehearsed on the CPU (KIMIK3_REHEARSE=1): the `%%needs gpu` magic runs the body,
FLA's stand-ins refuse what FLA's entry points refuse, `gpu_bench.compare` checks and times every form,
and `make test-gpu`'s table is written from the rows the cells record."""

import json

import pytest
import torch

from kimik3_lessons import contract, fla_stand_in, gpu_bench, lab, mixers

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
    assert list(calls)[1:3] == ["triton_chunked (ieee)", "triton_chunked (tf32)"] and len(calls) == 4
    fla, args, precision = calls[f"FLA {mixers.FLA[mixer].name}"]
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
    assert len(set(forms)) == len(forms) == 5 and forms[-1].startswith("FLA")
    assert all(r["T"] == 40 and r["state_error"] < r["tolerance"] and r["ms"] > 0 for r in rows)
    assert {r["precision"]: r["tolerance"] for r in rows} == {"float32": 1e-4, "ieee": 1e-4, "tf32": 1e-2,
                                                             "bfloat16": 5e-2}
    recorded = [json.loads(line) for line in (tmp_path / "rows.jsonl").read_text().splitlines()]
    assert [r["form"] for r in recorded] == forms and recorded[0]["gpu"] == "CPU (rehearsal)"
    path = gpu_bench.write_table(tmp_path / "rows.jsonl", folder=tmp_path)
    assert path.name == "gpu-cpu-rehearsal.json" and len(json.loads(path.read_text())["rows"]) == 5
    assert "written:" in capsys.readouterr().out


def test_compare_fails_on_a_wrong_final_state(rehearse, monkeypatch):
    """Defect 6: FLA's final state is compared, not unpacked and dropped."""
    monkeypatch.setattr(gpu_bench, "batch_sizes", lambda: (1, 2, 40))
    real = fla_stand_in.stand_in("linear_attention")
    monkeypatch.setattr(fla_stand_in, "entry_point",
                        lambda mixer: lambda *a, **kw: (real(*a, **kw)[0], torch.zeros(1, 2, 16, 16)))
    with pytest.raises(AssertionError, match="FLA chunk_linear_attn: state error"):
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
