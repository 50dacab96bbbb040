"""compress and bucket on a real 2-rank DDP job (torchrun, gloo): the DDP model really has the hook and the bucket
size, and the loss stays within the guard's tolerance of the unfixed run's."""
import json
import os
import shlex
import subprocess
import sys

from conftest import SCRIPTS, load_summary

WORKLOAD = SCRIPTS / "ddp_fix_workload.py"


def torchrun(parent, name, *haiprof_args):
    # Each rank gets its own run directory (name/rank0, name/rank1).
    inner = " ".join(shlex.quote(a) for a in (sys.executable, "-m", "haiprof", "run", "--quiet", *haiprof_args))
    cmd = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc-per-node", "2",
           "--no-python", "sh", "-c",
           f'exec {inner} --out {shlex.quote(str(parent))}/{name}-rank$LOCAL_RANK {shlex.quote(str(WORKLOAD))}']
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=300, env={**os.environ, "OMP_NUM_THREADS": "1"})
    assert r.returncode == 0, r.stderr[-3000:]
    line = [x for x in r.stdout.splitlines() if x.startswith("PROBE ")][-1]
    return json.loads(line[len("PROBE "):])


def test_compress_and_bucket_on_ddp(tmp_path):
    base = torchrun(tmp_path, "base")
    assert base["comm_hook"] in (None, "") and base["bucket_cap_bytes"] == 25 * 2**20
    fixed = torchrun(tmp_path, "fixed", "--fix", "compress,bucket")
    assert fixed["world"] == 2
    assert fixed["comm_hook"] == "fp16_compress_hook"          # DDP's own record of the registered hook
    grad_bytes = (64 * 256 + 256 + 256 * 4 + 4) * 4
    assert fixed["bucket_cap_bytes"] == int(max(1.0, round(grad_bytes / 2**20 / 4, 2)) * 2**20)
    s = load_summary(tmp_path / "fixed-rank0")
    res = {r["id"]: r for r in s["fixes"]["results"]}
    assert res["compress"]["status"] == "applied" and "fp16" in res["compress"]["reason"]
    assert res["bucket"]["status"] == "applied" and "bucket_cap_mb=1.0" in res["bucket"]["reason"]
    assert s["fixes"]["baseline_run"] == str((tmp_path / "base-rank0").resolve())
    assert s["loss_guard"]["status"] == "ok", s["loss_guard"]
    assert abs(fixed["loss"] - base["loss"]) < 0.05


def test_powersgd_variant(tmp_path):
    fixed = torchrun(tmp_path, "psgd", "--fix", "compress=powersgd")
    assert fixed["comm_hook"] == "powerSGD_hook"
