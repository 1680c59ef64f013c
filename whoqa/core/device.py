"""Where models run: `--device auto|cpu|cuda[:N]` on every stage that runs one. auto is the first CUDA GPU when one is
visible, else the CPU. Tensors are then made on the model's device (never a hard-coded "cpu"), and mixed precision is
chosen per device: bfloat16 where the hardware has it (CPUs, Ampere and later GPUs), float16 with a loss scaler on
older GPUs."""
from __future__ import annotations

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
    run a GGUF model (whoqa.reader.llm.scoring_runtime)."""
    return as_device(device).type == "cpu"


def mixed_precision(device) -> tuple:
    """(autocast dtype, whether a loss scaler is needed) for training on device."""
    import torch
    if device.type == "cuda" and not torch.cuda.is_bf16_supported():
        return torch.float16, True
    return torch.bfloat16, False
