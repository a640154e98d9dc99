"""The GPU under the bench: whether torch sees it, and what to do when it does not (`check_cuda`, `make
test-gpu`'s first check), and its memory bandwidth (`memory_bandwidth`)."""

import re

import torch

from kimik3_lessons import lab


def memory_bandwidth():
    """(bytes per second, name) of this GPU's memory: from its bus width and memory clock (two transfers a
    clock) where torch reports them, else measured, a 256 MiB device-to-device copy (read and written: 2 x
    256 MiB moved) timed by `lab.timeit`, below the rated figure as any copy is. Without a GPU: an H200's
    4.8e12, the model's GPU, said so in the name."""
    if lab.on_gpu():
        p = torch.cuda.get_device_properties(0)
        width, clock = getattr(p, "memory_bus_width", 0), getattr(p, "memory_clock_rate", 0)   # bits, kHz
        if width and clock:
            return 2 * width / 8 * clock * 1e3, torch.cuda.get_device_name()
        x = torch.empty(2**26, device="cuda")                # 256 MiB of float32
        y = torch.empty_like(x)
        seconds = lab.timeit(y.copy_, x, warmup=2, repeat=10)
        return 2 * x.nbytes / seconds, f"{torch.cuda.get_device_name()} (measured: a device copy)"
    return 4.8e12, "an H200, the model's GPU; none here"


def cuda_problem(driver_cuda, torch_cuda, available):
    """Why torch sees no GPU on a machine whose driver `nvidia-smi` lists (driver_cuda: the newest CUDA the
    driver runs, "12.4"; torch_cuda: the CUDA torch was built for, `torch.version.cuda`, None for a CPU
    build), and what to pass instead; None when torch sees the GPU."""
    if available:
        return None
    if torch_cuda is None:
        return (f"this torch ({torch.__version__}) is a CPU build. Rebuild .venv with a CUDA build: "
                f'rm -rf .venv && make test-gpu TORCH_SPEC="torch"')
    tag = "cu" + "".join(driver_cuda.split(".")[:2]) if driver_cuda else "cu118"
    version = lambda v: tuple(map(int, v.split(".")[:2]))
    if driver_cuda and version(torch_cuda) > version(driver_cuda):
        return (f"this torch ({torch.__version__}) is built for CUDA {torch_cuda}, newer than the driver's "
                f"CUDA {driver_cuda}: update the driver, or rebuild .venv with a torch built for CUDA "
                f'{driver_cuda} or older: rm -rf .venv && make test-gpu TORCH_SPEC="torch '
                f'--index-url https://download.pytorch.org/whl/{tag}"')
    return (f"torch {torch.__version__} (CUDA {torch_cuda}) sees no GPU although nvidia-smi lists one "
            f"(driver CUDA {driver_cuda or 'unknown'}): check CUDA_VISIBLE_DEVICES and the driver's install")


def check_cuda():
    """`make test-gpu`'s first check: exit 1, naming the cause and the fix (`cuda_problem`), when torch does
    not see the GPU that nvidia-smi lists; else print the GPU and the versions."""
    import subprocess
    import sys
    smi = subprocess.run(["nvidia-smi"], capture_output=True, text=True).stdout
    found = re.search(r"CUDA Version:\s*([\d.]+)", smi)
    problem = cuda_problem(found and found.group(1), torch.version.cuda, torch.cuda.is_available())
    if problem:
        print(f"make test-gpu: torch does not see the GPU: {problem}")
        sys.exit(1)
    print(f"make test-gpu: {torch.cuda.get_device_name()}, torch {torch.__version__} "
          f"(CUDA {torch.version.cuda})")

