"""Every Triton kernel of the course compiles for a T4 (sm_75), an A100 (sm_80) and an H100 (sm_90), at head
sizes 64 and 128, quickly, without spilling registers and within the target's shared memory: checked on
a machine without a GPU (Triton compiles for a given target; ptxas from the triton wheel reports)."""

import json
import subprocess
import sys
import textwrap

import pytest

from kimik3_lessons import contract, deltanet, gated_deltanet, gpu_targets, kda, linear_attention, moe


def kernels_in_the_package():
    """Every Triton entry point of the course: the objects named *_kernel in the lesson modules."""
    names = set()
    for module in (contract, linear_attention, deltanet, gated_deltanet, kda, moe):
        names |= {name for name, obj in vars(module).items()
                  if name.endswith("_kernel") and hasattr(obj, "fn")}
    return names


def run(args, timeout):
    return subprocess.run([sys.executable, "-m", "kimik3_lessons", "compile-kernels", *args],
                          capture_output=True, text=True, timeout=timeout)


def test_every_kernel_compiles_for_every_target_without_spills(tmp_path):
    rows_file = tmp_path / "rows.json"
    done = run(["--check", "--json", str(rows_file)], timeout=900)
    assert done.returncode == 0, done.stdout[-4000:] + done.stderr[-2000:]
    rows = json.loads(rows_file.read_text())
    for row in rows:
        assert not gpu_targets.problems(row), row
        assert row["registers"] <= 255 and row["spill_bytes"] == 0
    # every *_kernel of the package is among those compiled (a kernel added later must be added there too)
    listed = {k.__name__ for _, _, k, *_ in gpu_targets.course_kernels(128, 64)}
    names = kernels_in_the_package()
    assert names == listed, f"kernels not compiled by gpu_targets: {names - listed}"
    # each mixer's three steps, for each target and head size
    for family in gpu_targets.FAMILIES[:-1]:
        for cap in (75, 80, 90):
            for head_dim in (64, 128):
                where = (f"sm_{cap}", head_dim)
                steps = {row["kernel"].split(",")[0].split(":")[-1].strip() for row in rows
                         if family in row["families"] and (row["target"], row["head_dim"]) == where}
                assert steps == {"intra-chunk", "scan", "output"}, (family, cap, head_dim, steps)
    print(gpu_targets.table(rows))


SPILLING_KERNEL = '''
import triton
import triton.language as tl


@triton.jit
def big_tile_kernel(a, b, c, M: tl.constexpr):
    """One [M, M] x [M, M] float32 product held by one program: far too much for registers."""
    r = tl.arange(0, M)
    A = tl.load(a + r[:, None] * M + r[None, :])
    B = tl.load(b + r[:, None] * M + r[None, :])
    tl.store(c + r[:, None] * M + r[None, :], tl.dot(A, B, input_precision="ieee"))
'''


def test_the_check_catches_spills_and_too_much_shared_memory(tmp_path):
    """A negative control: a kernel built to spill must fail the same checks."""
    (tmp_path / "spiller.py").write_text(SPILLING_KERNEL)
    script = textwrap.dedent(f"""
        import json, sys
        from kimik3_lessons import gpu_targets
        gpu_targets.compile_mode()
        sys.path.insert(0, {str(tmp_path)!r})
        import spiller
        row = gpu_targets.compile_kernel(spiller.big_tile_kernel, dict(M=128), dict(num_warps=4),
                                         {{"*": "*fp32"}}, 75)
        print(json.dumps(dict(row, problems=gpu_targets.problems(row))))
    """)
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    row = json.loads(done.stdout.strip().splitlines()[-1])
    assert row["spill_bytes"] > 0 and any("spills" in p for p in row["problems"]), row
    assert row["shared_bytes"] > row["shared_limit"], row
    assert any("shared memory" in p for p in row["problems"]), row


@pytest.mark.parametrize("change, message", [
    (dict(spill_bytes=8), "spills 8 bytes"), (dict(shared_bytes=70_000), "shared memory"),
    (dict(seconds=11.0), "CPU s >"), (dict(registers=None), "ptxas reported nothing"),
    (dict(error="SyntaxError: x"), "compile error")])
def test_problems_names_each_failure(change, message):
    fine = dict(registers=100, spill_bytes=0, shared_bytes=16_384, shared_limit=65_536, seconds=1.0)
    assert gpu_targets.problems(fine) == []
    assert any(message in p for p in gpu_targets.problems(dict(fine, **change)))


def test_a_notebook_can_compile_in_a_subprocess():
    """The notebooks run Triton in the interpreter; compile_in_subprocess gives them real GPU compiles."""
    rows = gpu_targets.compile_in_subprocess(families=("linear_attention",), head_dims=(128,), targets=(75,))
    assert {row["kernel"] for row in rows} == {"linear attention: intra-chunk", "scan, linear attention",
                                              "output, all four mixers"}
    assert all(row["registers"] and row["spill_bytes"] == 0 for row in rows)
