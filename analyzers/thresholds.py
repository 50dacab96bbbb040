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

# --- fix correctness guard (haiprof run --fix) ---
# The fixed run's loss, averaged over the last LOSS_GUARD_WINDOW steps both runs reached, may differ from the
# baseline's by at most LOSS_GUARD_RTOL (relative) or LOSS_GUARD_ATOL (absolute, for losses near zero).
# bf16 autocast moves a float32 loss by well under 1% over tens of steps; a wrong fix (duplicated data,
# broken gradients) moves it by far more.
LOSS_GUARD_RTOL = 0.05
LOSS_GUARD_ATOL = 1e-3
LOSS_GUARD_WINDOW = 5
