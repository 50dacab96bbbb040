"""Every threshold the verdict uses, in one place (README: "How each verdict is decided").

Input-bound grades follow XProf's input-pipeline analyzer (5% moderate, 20% high); the communication and
dataloader rules start from the PyTorch profiler TensorBoard plugin's recommendations (dataloader > 5% of the step
→ more workers; communication > 10% → compression / gradient accumulation).
"""

# Share of step time spent waiting for input (dataloader + host-to-device copy).
IO_MODERATE = 0.05
IO_HIGH = 0.20

# Share of step time in exposed (non-overlapped) communication.
COMM_MODERATE = 0.10
COMM_HIGH = 0.20

# A run is compute-bound when forward + backward + optimizer fill at least this share of the step.
COMPUTE_DOMINANT = 0.50

# Unattributed host time (Python between phases, logging, syncs) worth a finding.
OTHER_MODERATE = 0.20

# Below this many steps nothing is concluded: bottleneck "none".
MIN_STEPS = 3

# Steps at the start excluded from statistics (allocator warm-up, lazy init, cudnn autotune).
WARMUP_STEPS = 1

# Launch-bound (op-level analysis): share of step time in many short ops / device waiting on the host.
LAUNCH_MODERATE = 0.15
LAUNCH_HIGH = 0.30

# -- `haiprof analyze` (Kineto traces) ---------------------------------------------------------------------
# Launch-bound on a device trace: share of the traced device span in which the device is idle waiting for the
# host to enqueue work (HTA's "host wait"), graded like XProf's kernel-launch advice (3% moderate, 15% high),
# and only when many kernels are short: at least this share run shorter than their own launch call (HTA's launch
# statistics flag exactly those kernels).
TRACE_HOST_WAIT_MODERATE = 0.03
TRACE_HOST_WAIT_HIGH = 0.15
TRACE_SHORT_KERNEL_SHARE = 0.5
# Without launch/kernel pairs, a kernel shorter than this counts as short (µs).
TRACE_SHORT_KERNEL_US = 10.0
# HTA's consecutive-kernel delay: a gap between kernels on a stream shorter than this is launch overhead (µs).
TRACE_KERNEL_WAIT_US = 30.0
