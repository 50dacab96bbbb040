"""torch.compile's worker processes are children of the training process but no DataLoader workers: the system
sampler counts them apart (by their command line), so the input split never reports them as loader workers."""
import os
import subprocess
import sys
import time

from haiprof.analyzers.input_split import worker_cpu
from haiprof.collectors.proctree import cmdline, is_compile_worker
from haiprof.collectors.system import SystemSampler


def test_is_compile_worker_by_cmdline():
    assert is_compile_worker([sys.executable, "/x/site-packages/torch/_inductor/compile_worker/__main__.py",
                              "--pickler=torch._inductor.compile_worker.subproc_pool.SubprocPickler", "--workers=8"])
    assert is_compile_worker([sys.executable, "-m", "torch._inductor.compile_worker"])
    assert not is_compile_worker([sys.executable, "-m", "haiprof", "run", "train.py"])
    assert not is_compile_worker([])
    assert cmdline(os.getpid())[0] == sys.argv[0] or cmdline(os.getpid())


def test_real_compile_pool_is_not_counted_as_loader_workers():
    from torch._inductor.compile_worker.subproc_pool import SubprocPool
    pool = SubprocPool(2)       # inductor's real compile worker subprocess (and its process pool)
    busy = subprocess.Popen([sys.executable, "-c", "import time\nt=time.time()\nwhile time.time()-t<3: pass"])
    try:
        pool.submit(int, "1").result(timeout=120)   # the pool is up and has run a job
        s = SystemSampler(os.getpid())
        samples = []
        for _ in range(4):
            samples.append({"t_ns": time.monotonic_ns(), **s.sample()})
            time.sleep(0.3)
    finally:
        busy.wait()
        pool.shutdown()
    last = samples[-1]
    assert last["compile_procs"] >= 1, last          # the SubprocPool process, at least
    assert last["procs"] == 2, last                  # this process and the one real child, not the compile pool
    assert worker_cpu(samples, cores=2)["workers"] == 1
