"""Where models run: `--device auto|cpu|cuda[:N]` on every stage that runs one. auto is the first CUDA GPU when one is
visible, else the CPU. Tensors are then made on the model's device (never a hard-coded "cpu"), and mixed precision is
chosen per device: bfloat16 where the hardware has it (CPUs, Ampere and later GPUs), float16 with a loss scaler on
older GPUs."""
from __future__ import annotations

import functools

DEVICES = "auto, cpu, cuda or cuda:N"
AUTO = "auto"  # the default --device of every stage without a config field of its own
LLAMACPP_DEVICE = "cpu"  # gpt4all's llama.cpp: its CUDA builds are not shipped here, so GGUF models run on the CPU


def resolve_device(name: str = "auto"):
    """The torch.device for a --device value; a clear error for a GPU that is not there."""
    import torch
    if name in (None, "", "auto"):
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    try:
        device = torch.device(name)
    except RuntimeError as e:
        raise ValueError(f"--device {name!r} is not a device: use {DEVICES}") from e
    if device.type == "cuda" and not torch.cuda.is_available():
        raise ValueError(f"--device {name} asks for a CUDA GPU but none is visible: use --device cpu (or auto)")
    if device.type not in ("cpu", "cuda"):
        raise ValueError(f"--device {name}: only {DEVICES} are supported")
    return device


def as_device(device=None):
    """A torch.device as given, or resolved from a --device value (None: auto)."""
    import torch
    return device if isinstance(device, torch.device) else resolve_device(device or "auto")


def on_cpu(device=None) -> bool:
    """Whether a --device value (or torch.device) means the CPU: where llama.cpp's CPU kernels are the faster way to
    run a GGUF model (whoqa.llm.reader.scoring_runtime)."""
    return as_device(device).type == "cpu"


def mixed_precision(device) -> tuple:
    """(autocast dtype, whether a loss scaler is needed) for training on device."""
    import torch
    if device.type == "cuda" and not torch.cuda.is_bf16_supported():
        return torch.float16, True
    return torch.bfloat16, False


@functools.lru_cache(maxsize=1)
def cpu_bf16_speedup() -> float:
    """float32 time / bfloat16 time of a reader-sized matmul with its backward on this CPU, measured once per process
    (above 1: bfloat16 pays). Some CPUs that report AVX512-BF16 run torch's bfloat16 matmuls far slower than float32
    (an AMD EPYC with torch 2.13: a reader step 37 s vs 1.45 s), so `--bf16` is measured, not assumed."""
    import time
    import torch
    a32 = torch.randn(1024, 384, generator=torch.Generator().manual_seed(0), requires_grad=True)
    b32 = torch.randn(384, 1536, generator=torch.Generator().manual_seed(1), requires_grad=True)

    def best(dtype) -> float:
        times = []
        for _ in range(3):
            t = time.perf_counter()
            with torch.autocast("cpu", dtype=torch.bfloat16, enabled=dtype is torch.bfloat16):
                (a32 @ b32).float().sum().backward()
            times.append(time.perf_counter() - t)
        return min(times)
    fp32 = best(torch.float32)
    return fp32 / max(best(torch.bfloat16), 1e-9)


def bf16_slowdown(device) -> float | None:
    """How many times slower bfloat16 training matmuls are than float32 on this device, where they are (a CPU measured
    by cpu_bf16_speedup); None where bfloat16 pays or the device is a GPU."""
    if device.type != "cpu":
        return None
    speedup = cpu_bf16_speedup()
    return 1 / speedup if speedup < 1 else None
