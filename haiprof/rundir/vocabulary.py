"""The words every layer shares about a run directory: the phases of a step, the marks in its phase records and
the names of its files. One definition of each; collectors write them, analyzers, renderers and the wiring read
them (imports point down to the data model, tests/test_layout.py).

A phase record is [name, start_ns, end_ns, ...]; a name starting with "@" is a mark (start == end), one starting
with GPU_PREFIX a span timed by CUDA events on the device clock.
"""
from __future__ import annotations

# the phases of a training step, in the order every table and chart shows them; "other": nothing recorded ran
PHASES = ("dataloader", "h2d", "forward", "backward", "optimizer", "allreduce")
ALL_PHASES = PHASES + ("other",)

# marks (collectors/phases.py, trace_window.py, trace_requests.py, ddp_comm.py write them)
STEP_MARK = "@step"                       # an optimizer step ended
OPT_STEP_MARK = "@opt-step"               # an optimizer step that did not end the step: another optimizer's will
BACKWARD_MARK = "@backward"               # a backward ended (the step boundary of a script without an optimizer)
GPU_STEP_MARK = "@gpu-step"               # `haiprof analyze`: a ProfilerStep on the device clock
TRACE_BEGIN, TRACE_END = "@trace-begin", "@trace-end"   # the op-level tracing window (profiler on)
WINDOW_MARK = "@trace-window"             # [mark, t, t, first step, steps asked]: a window asked for later
# [mark, t, t, opened after step, steps, due step (-1: a slow stretch), period (0: none), anomalous step seen]:
# the window that follows is the flight recorder's (--trace-on-anomaly)
ANOMALY_MARK = "@anomaly-window"
LOADER_MARK = "@loader"                   # [mark, t, t, num_workers, pin_memory]: a DataLoader's first batch
MEM_MARK = "@mem"                         # device memory counters at a step end
BATCH_MARK = "@batch"                     # [mark, t, t, numel]: the size of a batch the DataLoader returned
DDP_MARK = "@ddp"                         # gradient-sync statistics of an optimizer step
GPU_PREFIX = "gpu:"                       # "gpu:<phase>": the phase's span on the device (CUDA events)
EVAL = "eval"                             # an outermost forward without autograd or in eval() mode

# files of a run directory
META = "meta.json"
PHASES_FILE = "phases.jsonl"              # runs before the chunked store, and `haiprof analyze`'s runs
PHASES_BIN = "phases.bin"                 # the phase records of a run (haiprof/phasestore.py)
STATUS_FILE = "status.jsonl"
SUMMARY = "summary.json"
REPORT = "report.html"
SAMPLES_DIR = "samples"
GATHER_FILE = "gather.json"               # distributed job: which ranks' data reached rank 0
STEPS_FILE = "steps.npz"                  # a rank's per-step table (analysis/rank_digest.py)
TRACE_FILE = "trace_analysis.json"        # haiprof analyze; not trace.json, the tracing window's trace
# the tracing window's op-level trace: compressed at the end of the run, raw if the run was killed before
KINETO_TRACES = ("trace.json.gz", "trace.json")
KINETO_TRACE = KINETO_TRACES[0]


def window_trace(step: int) -> str:
    """The file of a tracing window asked for at `step` (--trace-at, --trace-every, `haiprof trace`)."""
    return f"trace-step{step}.json.gz"
