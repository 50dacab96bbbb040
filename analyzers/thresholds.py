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

# The verdict is the class with the most *removable* time: what its own fix can take off the step at most, as a
# share of that class's time. Waits (io, launch) go in full. Mixed precision at best halves fp32 matmul/conv time
# on tensor cores, and compression or larger buckets hide or shrink about half of exposed collectives.
REMOVABLE = {"io": 1.0, "launch": 1.0, "communication": 0.5, "compute": 0.5}
# On a CPU (no tensor cores) compute's fixes take off less: bf16 autocast pays only on CPUs with bf16 matrix
# units (AMX), and compile fuses the elementwise work around matmuls, not the matmuls themselves.
REMOVABLE_CPU_COMPUTE = 0.25

# A busy neighbour: the host's CPUs at least this busy (mean over cores) while other processes take at least this
# share of the machine's cores: measurements are contended, said as a finding and marked noisy.
HOST_SATURATED = 0.90
NEIGHBOUR_CORES = 0.25

# Below this many steps nothing is concluded: bottleneck "none".
MIN_STEPS = 3

# A run without steps whose child processes burned at least this much of a core (mean) and more than the script's
# own process did: the training ran in processes the script started (torch.multiprocessing.spawn, a Pool), which
# haiprof does not record; the headline says so instead of only "no training steps".
CHILD_WORK_CORES = 0.25

# Steps at the start excluded from statistics (allocator warm-up, lazy init, cudnn autotune).
WARMUP_STEPS = 1

# Launch-bound (op-level analysis): share of step time in many short ops / device waiting on the host.
LAUNCH_MODERATE = 0.15
LAUNCH_HIGH = 0.30

# -- hardware analyzers (energy, links, NUMA, input split) ----------------------------------------------------
# Input-bound split: share of the dataloader wait the loading thread spent on CPU (num_workers=0), or the
# DataLoader workers' CPU as a share of what they could use (min(workers, cores) x 100%).
LOADER_CPU_BUSY = 0.70      # at or above: preprocessing-bound (decode/augment saturates the CPU)
LOADER_CPU_IDLE = 0.50      # at or below: storage/latency-bound (the loader sleeps more than it computes)

# A link (IB port or NIC) running at this share of its capacity, at peak, is worth a finding.
LINK_BUSY = 0.80

# Cross-NUMA allocations (numastat other_node) as a share of all allocations on the node(s).
CROSS_NUMA_MODERATE = 0.10

# Pageable host-to-device copies in a trace worth a finding: this share of the traced steps' time (a handful
# of empty copies, microseconds in all, is no finding).
PAGEABLE_MIN_SHARE = 0.01

# Energy spent while waiting for input (dataloader + h2d) worth an info finding.
ENERGY_WAITING_NOTE = 0.05
# -- distributed runs (analyzers/distributed.py) --
# A rank is a straggler when it arrives last at the gradient sync in at least this share of the compared steps...
STRAGGLER_CONSISTENCY = 0.7
# ...the median wait it causes the fastest rank is at least this share of the step...
STRAGGLER_SKEW_SHARE = 0.15
# ...and its own extra time in one phase (the cause) accounts for at least this share of that wait.
STRAGGLER_EXPLAINED = 0.5
# A culprit leads a job's verdict only when noise alone would make some rank that late with less than this
# chance (analyzers/culprit.chance_late): the usual 5% significance level, not a value fitted to a run.
CULPRIT_CHANCE = 0.05
# A slow rank whose batches are this much larger than the others' is "data imbalance", not "its compute".
DATA_IMBALANCE = 0.10
# -- op-level launch analysis (analyzers/launch.py) ---------------------------------------------------------
# CPU: an op whose own (self) time is below this is dispatch-dominated: on a CPU, framework overhead per op is a
# few microseconds, so below ~20 µs the op's arithmetic no longer dominates its cost.
TINY_OP_SELF_US = 20.0
# "Hundreds of tiny ops per step": fewer ops than this per step cannot make a run launch-bound.
LAUNCH_MIN_OPS_PER_STEP = 100
# GPU: share of the kernel span the device sits idle waiting for the host to launch work. XProf's overview grades
# "kernel launch" time at 3% (moderate) and 15% (high) of the step.
GPU_LAUNCH_MODERATE = 0.03
GPU_LAUNCH_HIGH = 0.15
# ... and it is launch-bound only when short kernels dominate: HTA calls a kernel short when it runs for less
# time than the CPU took to launch it.
SHORT_KERNEL_FRACTION = 0.5
# HTA's idle-time breakdown: a gap between consecutive kernels below this (trace µs) is kernel-launch wait.
CONSECUTIVE_KERNEL_DELAY_US = 30
# --- fix correctness guard (haiprof run --fix) ---
# The fixed run's loss, averaged over the last LOSS_GUARD_WINDOW steps both runs reached, may differ from the
# baseline's by at most LOSS_GUARD_RTOL (relative) or LOSS_GUARD_ATOL (absolute, for losses near zero).
# bf16 autocast moves a float32 loss by well under 1% over tens of steps; a wrong fix (duplicated data,
# broken gradients) moves it by far more.
LOSS_GUARD_RTOL = 0.05
LOSS_GUARD_ATOL = 1e-3
LOSS_GUARD_WINDOW = 5
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
# -- device-first verdict on CUDA runs (analyzers/device_timeline.py) ----------------------------------------
# On the device timeline io, compute, launch and communication are shares of one denominator (the device step
# time). A class can be the verdict when it fills at least this share of the step (or is graded high); below it
# nothing dominates.
DEVICE_VERDICT_MIN = 0.40
# A compute finding on the device timeline: kernels fill at least this share of the step (high from 0.8).
DEVICE_COMPUTE_MODERATE = 0.30
DEVICE_COMPUTE_HIGH = 0.80
# The tracing window's steps are "another regime" when the steady device step is this many times their median
# (the profiler slows steps, never speeds them up): the report says so, the op-level views describe other steps.
TRACE_UNREPRESENTATIVE = 2.0
# -- fixes (analyzers/fix_gain.py) ------------------------------------------------------------------------------
# A fixed run whose steady step is at least this much slower than its baseline's is a regression: reported first,
# and `--fix auto` does not choose those fixes again for that command.
FIX_SLOWER = 0.03
# A rank is an outlier when the time it spends before the gradient sync (step minus exposed communication: what
# the other ranks wait for) exceeds the job's median by OUTLIER_SIGMAS robust standard deviations (1.4826 x MAD,
# so lock-step noise is not named) and by at least OUTLIER_MIN_SHARE of the median step (less costs too little).
OUTLIER_SIGMAS = 5.0
OUTLIER_MIN_SHARE = 0.05
# A node is slow, one finding instead of one per rank, when at least this share of its ranks (and two) are outliers.
SLOW_NODE_SHARE = 0.5
