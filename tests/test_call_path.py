"""runtime/call_path.py: an error raised in forward prints python's traceback although haiprof's hooks sent the
call through torch's hooked path; a call the script hooked itself keeps the path python took too. In process on
real torch tracebacks, then end to end: an error in forward at step 1 (haiprof's hooks then on every module) and
at step 4 (on the root), haiprof's stderr against python's."""
import traceback

import pytest
import torch

from conftest import SCRIPTS, in_parallel, run_haiprof, run_python
from haiprof.runtime.call_path import as_python


class Boom(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.inner = torch.nn.Linear(2, 2)

    def forward(self, x):
        return self.inner(x) + undefined_name   # noqa: F821  (a NameError inside forward)


def _ours(fn):
    return getattr(fn, "__name__", "") == "timing_hook"


def timing_hook(module, args, output=None):
    return None


def _printed(model) -> str:
    try:
        model(torch.zeros(1, 2))
    except NameError as e:
        tb = as_python(e.__traceback__, _ours)
        return "".join(traceback.format_exception(type(e), e, tb))
    raise AssertionError("forward did not raise")


def test_the_hooked_path_of_our_hooks_prints_as_the_plain_one():
    plain = _printed(Boom())
    assert "return forward_call(*args, **kwargs)" in plain and "in inner" not in plain
    m = Boom()
    m.register_forward_pre_hook(timing_hook)
    m.register_forward_hook(timing_hook, always_call=True)
    assert _printed(m) == plain
    h = torch.nn.modules.module.register_module_forward_hook(timing_hook)   # haiprof's first steps: global hooks
    try:
        assert _printed(Boom()) == plain
    finally:
        h.remove()


def test_a_hook_of_the_scripts_keeps_the_hooked_path():
    m = Boom()
    m.register_forward_hook(timing_hook)
    m.register_forward_hook(lambda mod, a, out: None)   # the script's own: python took the hooked path too
    text = _printed(m)
    assert "return inner()" in text and "in inner" in text
    h = torch.nn.modules.module.register_module_forward_hook(lambda mod, a, out: None)
    try:
        assert "in inner" in _printed(Boom())
    finally:
        h.remove()


@pytest.mark.parametrize("at", [1, 4])
def test_an_error_in_forward_prints_pythons_traceback(tmp_path, at):
    script = SCRIPTS / "forward_raises.py"
    plain, r = in_parallel(lambda: run_python(script, at, cwd=tmp_path),
                           lambda: run_haiprof("run", "--out", tmp_path / "r", script, at, cwd=tmp_path))
    assert plain.returncode == r.returncode == 1
    ours = "".join(line for line in r.stderr.splitlines(keepends=True) if not line.startswith("haiprof: "))
    assert ours == plain.stderr and "return forward_call(*args, **kwargs)" in ours, (ours, plain.stderr)
    assert (tmp_path / "r" / "report.html").is_file()
