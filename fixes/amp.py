"""amp: mixed precision around the model's forward, without touching the script.

The root module call of the model (see _root.py) runs under torch.autocast; its floating outputs are cast back to
float32 so the script's loss is computed as before. Precision by hardware:
  - CUDA with bf16 (Ampere or newer): bf16 autocast, plus TF32 matmuls;
  - CUDA with fast fp16 only (Volta/Turing): fp16 autocast with loss scaling (GradScaler, applied around
    backward and optimizer.step, see _FP16Scaling);
  - CPU with native bf16 instructions (avx512_bf16 or amx_bf16 in /proc/cpuinfo): bf16 autocast;
  - anything else: skipped, since emulated low precision is slower than float32.
"""
from __future__ import annotations

from .base import FixContext, cuda_available
from ._root import RootForwardHooks

ID = "amp"
VARIANTS: tuple = ()   # takes no ID=VARIANT (checked by parse_spec before the run)
NOT_TRIGGERED = "no module with trainable parameters was called"
CPU_BF16_FLAGS = ("avx512_bf16", "amx_bf16")
CPUINFO = "/proc/cpuinfo"


def cpu_bf16_flags(cpuinfo_path: str = CPUINFO) -> list[str]:
    try:
        with open(cpuinfo_path, encoding="utf-8") as f:
            for line in f:
                if line.startswith("flags"):
                    flags = set(line.split(":", 1)[1].split())
                    return [f for f in CPU_BF16_FLAGS if f in flags]
    except OSError:
        pass
    return []


def plan(torch, device_type: str, cpuinfo_path: str = CPUINFO) -> tuple[object | None, str]:
    """(autocast dtype or None, why) for a model on device_type."""
    if device_type == "cuda":
        major, minor = torch.cuda.get_device_capability()
        if torch.cuda.is_bf16_supported() and major >= 8:
            return torch.bfloat16, f"bf16 autocast (compute capability {major}.{minor})"
        if major >= 7:
            return torch.float16, f"fp16 autocast with loss scaling (compute capability {major}.{minor}, no bf16)"
        return None, f"compute capability {major}.{minor} has no fast fp16/bf16"
    if device_type == "cpu":
        flags = cpu_bf16_flags(cpuinfo_path)
        if not flags:
            return None, "this CPU has no native bf16 instructions (avx512_bf16/amx_bf16): autocast would be slower"
        if not torch.backends.mkldnn.is_available():
            return None, "torch was built without oneDNN, which runs CPU bf16 matmuls"
        return torch.bfloat16, f"bf16 autocast on CPU ({', '.join(flags)})"
    return None, f"no autocast plan for {device_type} devices"


def _to_float32(obj, torch, low):
    if isinstance(obj, torch.Tensor):
        return obj.float() if obj.dtype == low else obj
    if isinstance(obj, tuple) and hasattr(obj, "_fields"):
        return type(obj)(*(_to_float32(x, torch, low) for x in obj))
    if isinstance(obj, (list, tuple)):
        return type(obj)(_to_float32(x, torch, low) for x in obj)
    if isinstance(obj, dict):
        return type(obj)((k, _to_float32(v, torch, low)) for k, v in obj.items())
    return obj


class _FP16Scaling:
    """GradScaler's three calls, placed by hooks: scale the loss at backward, unscale and check before the
    optimizer step (an overflowing step is skipped by dropping its gradients), update after it."""

    def __init__(self, torch, ctx: FixContext):
        self.torch, self.ctx = torch, ctx
        self.scaler = torch.amp.GradScaler("cuda")
        self.skipped_steps = 0

    def install(self):
        torch, ctx = self.torch, self.ctx
        original_backward = torch.autograd.backward

        def backward(tensors, *args, **kwargs):
            if isinstance(tensors, torch.Tensor) and tensors.numel() == 1 and tensors.is_cuda:
                tensors = self.scaler.scale(tensors)
            return original_backward(tensors, *args, **kwargs)

        ctx.patch(torch.autograd, "backward", backward)
        import torch.optim.optimizer as optim_mod
        ctx.on_undo(optim_mod.register_optimizer_step_pre_hook(self._pre_step).remove)
        ctx.on_undo(optim_mod.register_optimizer_step_post_hook(self._post_step).remove)

    def _pre_step(self, optimizer, args, kwargs):
        self.scaler.unscale_(optimizer)
        found = sum(v.item() for v in self.scaler._found_inf_per_device(optimizer).values())
        if found:
            self.skipped_steps += 1
            self.ctx.state.details["fp16_overflow_steps_skipped"] = self.skipped_steps
            for group in optimizer.param_groups:
                for p in group["params"]:
                    p.grad = None   # torch optimizers skip parameters without a gradient: the step is a no-op

    def _post_step(self, optimizer, args, kwargs):
        self.scaler.update()


def install(ctx: FixContext) -> None:
    import torch

    state = ctx.state
    plans: dict = {}          # device type -> (dtype, why)
    stack: list = []          # (autocast context or None, low dtype)
    seen: set = set()
    scaling: dict = {}

    if cuda_available(torch):
        major, _ = torch.cuda.get_device_capability()
        if major >= 8:
            old = (torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32)
            torch.backends.cuda.matmul.allow_tf32 = torch.backends.cudnn.allow_tf32 = True
            ctx.on_undo(lambda: (setattr(torch.backends.cuda.matmul, "allow_tf32", old[0]),
                                 setattr(torch.backends.cudnn, "allow_tf32", old[1])))
            state.applied("matmul", "TF32 tensor-core matmuls and convolutions (Ampere or newer)")

    def on_pre(module, args):
        p = next(module.parameters(), None)
        device_type = p.device.type if p is not None else "cpu"
        key = id(module)
        if device_type not in plans:
            plans[device_type] = plan(torch, device_type)
        dtype, why = plans[device_type]
        reason = None
        if dtype is None:
            reason = why
        elif p.dtype != torch.float32:
            reason = f"the model's parameters are {p.dtype} already"
        elif torch.is_autocast_enabled(device_type):
            reason = "the script already runs the model under autocast"
        if reason is not None:
            if key not in seen:
                seen.add(key)
                state.skipped(reason, type(module).__name__)
            stack.append((None, None))
            return None
        if key not in seen:
            seen.add(key)
            state.applied(type(module).__name__, why, dtype=str(dtype).replace("torch.", ""),
                          device=device_type)
            if dtype == torch.float16 and "scaler" not in scaling:
                scaling["scaler"] = _FP16Scaling(torch, ctx)
                scaling["scaler"].install()
        cm = torch.autocast(device_type, dtype=dtype)
        cm.__enter__()
        stack.append((cm, dtype))
        return None

    def on_post(module, args, output):
        cm, low = stack.pop() if stack else (None, None)
        if cm is None:
            return None
        cm.__exit__(None, None, None)
        return _to_float32(output, torch, low)

    RootForwardHooks(on_pre, on_post).install(ctx)
