"""GPU metrics through NVML (nvidia-ml-py's `pynvml`), behind one choke point.

`Nvml` is the only place that touches pynvml: it initialises lazily, shuts NVML down at exit, and turns every
failure (no library, no driver, a function this driver lacks, a metric this GPU does not support) into a recorded
reason instead of an exception. A metric that is unsupported once is not asked again, so sampling stays cheap.

Per device and sample: SM utilization (% of the last sample period with a kernel running), memory used/total,
power draw (mW), the total energy counter (mJ since driver load, Volta+), SM and memory clocks (MHz),
temperature (C), PCIe TX/RX (cumulative byte counters where the driver has them, else the 20 ms KB/s window,
taken every PCIE_WINDOW_EVERY samples because each call blocks ~20 ms), and the clock throttle reason bitmask.
Per process: GPU memory used by the training process tree (NVML reports host pids; inside a container with its
own pid namespace they do not match and the sample says so).
"""
from __future__ import annotations

import atexit
import os

from .proctree import tree

PCIE_WINDOW_EVERY = 10
FI_PCIE_TX_BYTES, FI_PCIE_RX_BYTES = 197, 198  # NVML_FI_DEV_PCIE_COUNT_TX/RX_BYTES


class Nvml:
    """Lazy NVML session; `call` returns (value, None) or (None, reason) and never raises."""

    def __init__(self):
        self.lib = None
        self.reason: str | None = None   # why NVML as a whole is unavailable
        self._tried = False

    def init(self) -> tuple[bool, str]:
        if self._tried:
            return self.lib is not None, self.reason or ""
        self._tried = True
        import pynvml   # nvidia-ml-py, a dependency of haiprof; without a driver nvmlInit fails below
        try:
            pynvml.nvmlInit()
        except pynvml.NVMLError as e:
            self.reason = self._explain(pynvml, e)
            return False, self.reason
        except OSError as e:  # a broken libnvidia-ml.so fails in the loader, not as an NVMLError
            self.reason = f"NVML library could not be loaded: {e}"
            return False, self.reason
        self.lib = pynvml
        atexit.register(self.shutdown)
        return True, ""

    @staticmethod
    def _explain(pynvml, e) -> str:
        known = {
            "NVMLError_LibraryNotFound": "NVML library (libnvidia-ml.so.1) not found: no NVIDIA driver on this host",
            "NVMLError_DriverNotLoaded": "NVIDIA kernel driver is not loaded",
            "NVMLError_NoPermission": "no permission to talk to the NVIDIA driver (/dev/nvidiactl)",
            "NVMLError_FunctionNotFound": "this NVML/driver version lacks the function",
            "NVMLError_NotSupported": "not supported on this device",
            "NVMLError_InsufficientPower": "GPU external power cables not connected",
            "NVMLError_GpuIsLost": "the GPU fell off the bus or became unresponsive",
        }
        return known.get(type(e).__name__, f"NVML error: {e}")

    def call(self, fn: str, *args):
        if self.lib is None:
            return None, self.reason or "NVML not initialised"
        f = getattr(self.lib, fn, None)
        if f is None:
            return None, f"{fn} not in this nvidia-ml-py"
        try:
            return f(*args), None
        except self.lib.NVMLError as e:
            return None, f"{fn}: {self._explain(self.lib, e)}"
        except (OSError, AttributeError, TypeError, ValueError) as e:  # ctypes symbol missing in an old driver
            return None, f"{fn}: {type(e).__name__}: {e}"

    def shutdown(self) -> None:
        if self.lib is not None:
            try:
                self.lib.nvmlShutdown()
            except self.lib.NVMLError:
                pass  # shutting down at exit: nothing left to report to
            self.lib = None


def _decode(x):
    return x.decode() if isinstance(x, bytes) else x


class NvmlSampler:
    name = "gpu"
    needs_pid = True  # watches the training process tree
    enable_hint = "needs an NVIDIA GPU with its driver (libnvidia-ml.so.1) and nvidia-ml-py installed"

    def __init__(self, root_pid: int, proc_root: str = "/proc", nvml: Nvml | None = None):
        self.nvml = nvml or Nvml()
        ok, reason = self.nvml.init()
        if not ok:
            raise RuntimeError(reason)
        self.root_pid, self.proc_root = root_pid, proc_root
        self.exclude = {os.getpid()}
        count, why = self.nvml.call("nvmlDeviceGetCount")
        if why:
            raise RuntimeError(why)
        self.devices = []
        for i in range(count):
            h, why = self.nvml.call("nvmlDeviceGetHandleByIndex", i)
            if h is None:
                continue
            name, _ = self.nvml.call("nvmlDeviceGetName", h)
            pci, _ = self.nvml.call("nvmlDeviceGetPciInfo", h)
            self.devices.append({"index": i, "handle": h, "name": _decode(name),
                                 "pci_bus_id": _decode(getattr(pci, "busId", None))})
        self.unsupported: dict[str, str] = {}
        self._reported: set = set()
        self._n = 0
        self._clock_ids = (getattr(self.nvml.lib, "NVML_CLOCK_SM", 1), getattr(self.nvml.lib, "NVML_CLOCK_MEM", 2))

    @staticmethod
    def available() -> tuple[bool, str]:
        nvml = Nvml()
        ok, reason = nvml.init()
        if not ok:
            return False, reason
        count, why = nvml.call("nvmlDeviceGetCount")
        nvml.shutdown()
        if why:
            return False, why
        if not count:
            return False, "NVML works but reports no GPU"
        return True, ""

    def _get(self, metric: str, fn: str, *args):
        if metric in self.unsupported:
            return None
        value, why = self.nvml.call(fn, *args)
        if why:
            self.unsupported[metric] = why
        return value

    def _device(self, d: dict) -> dict:
        h, lib = d["handle"], self.nvml.lib
        out: dict = {"index": d["index"]}
        util = self._get("sm_util", "nvmlDeviceGetUtilizationRates", h)
        if util is not None:
            out["sm_util_pct"], out["mem_util_pct"] = util.gpu, util.memory
        mem = self._get("memory", "nvmlDeviceGetMemoryInfo", h)
        if mem is not None:
            out["mem_used_bytes"], out["mem_total_bytes"] = mem.used, mem.total
        out["power_mw"] = self._get("power", "nvmlDeviceGetPowerUsage", h)
        out["energy_mj"] = self._get("energy", "nvmlDeviceGetTotalEnergyConsumption", h)
        out["sm_clock_mhz"] = self._get("sm_clock", "nvmlDeviceGetClockInfo", h, self._clock_ids[0])
        out["mem_clock_mhz"] = self._get("mem_clock", "nvmlDeviceGetClockInfo", h, self._clock_ids[1])
        out["temperature_c"] = self._get("temperature", "nvmlDeviceGetTemperature", h,
                                         getattr(lib, "NVML_TEMPERATURE_GPU", 0))
        reasons = self._get("throttle", "nvmlDeviceGetCurrentClocksEventReasons", h)
        if reasons is None and "throttle" in self.unsupported:  # older nvidia-ml-py / driver name
            self.unsupported.pop("throttle")
            reasons = self._get("throttle", "nvmlDeviceGetCurrentClocksThrottleReasons", h)
        out["throttle_reasons"] = reasons
        fields = self._get("pcie_bytes", "nvmlDeviceGetFieldValues", h, [FI_PCIE_TX_BYTES, FI_PCIE_RX_BYTES])
        if fields is not None and all(f.nvmlReturn == 0 for f in fields):
            out["pcie_tx_bytes"], out["pcie_rx_bytes"] = fields[0].value.ullVal, fields[1].value.ullVal
        elif self._n % PCIE_WINDOW_EVERY == 0:
            tx = self._get("pcie_window", "nvmlDeviceGetPcieThroughput", h, getattr(lib, "NVML_PCIE_UTIL_TX_BYTES", 0))
            rx = self._get("pcie_window", "nvmlDeviceGetPcieThroughput", h, getattr(lib, "NVML_PCIE_UTIL_RX_BYTES", 1))
            if tx is not None and rx is not None:
                out["pcie_tx_kbps"], out["pcie_rx_kbps"] = tx, rx
        return {k: v for k, v in out.items() if v is not None}

    def _process_memory(self, d: dict, pids: set) -> int | None:
        total, seen = 0, False
        for metric, fn in (("procs_compute", "nvmlDeviceGetComputeRunningProcesses"),
                           ("procs_graphics", "nvmlDeviceGetGraphicsRunningProcesses")):
            procs = self._get(metric, fn, d["handle"])
            for p in procs or []:
                if p.pid in pids:
                    seen = True
                    total += p.usedGpuMemory or 0  # None where the driver hides it (e.g. some containers)
        return total if seen else None

    def sample(self) -> dict:
        pids = set(tree(self.root_pid, self.proc_root, self.exclude))
        devices = []
        for d in self.devices:
            rec = self._device(d)
            mine = self._process_memory(d, pids)
            if mine is not None:
                rec["proc_mem_bytes"] = mine
            devices.append(rec)
        self._n += 1
        rec: dict = {"devices": devices}
        if self._n == 1:
            rec["info"] = [{"index": d["index"], "name": d["name"], "pci_bus_id": d["pci_bus_id"]}
                           for d in self.devices]
        new = {k: v for k, v in self.unsupported.items() if k not in self._reported}
        if new:
            rec["unsupported"] = new
            self._reported |= set(new)
        return rec
