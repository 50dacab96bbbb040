"""An uncaught exception's traceback through a model's forward, shown as python shows it.

haiprof's forward-timing hooks (collectors/forward_hooks.py: on the root module, or on every module for the first
steps) send a module's call through torch's hooked path in `nn.Module._call_impl` (`return inner()`, then an
`inner` frame calling forward) where, without them, python takes the plain one (`return forward_call(*args,
**kwargs)`). Every error raised inside forward (a shape mismatch, a user's hook raising) would then print two
lines of torch's code that python never prints. For each such call whose hooks are all haiprof's, the `inner`
frame is left out and the `_call_impl` frame points at the plain call, its line and its columns, as python's
would. A call with any hook of the script's own took the hooked path under python too and is left as it is; any
doubt (another torch, code not found) leaves the traceback unchanged.
"""
from __future__ import annotations

import dis
import linecache
import sys
from types import TracebackType

_PLAIN_CALL = "return forward_call(*args, **kwargs)"
_MODULE_DICTS = ("_forward_hooks", "_forward_pre_hooks", "_backward_hooks", "_backward_pre_hooks")
_GLOBAL_DICTS = ("_global_forward_hooks", "_global_forward_pre_hooks", "_global_backward_hooks",
                 "_global_backward_pre_hooks")
_plain_call_at: dict = {}   # code object of _call_impl -> (line, instruction offset) of its plain call, or None


def as_python(tb: TracebackType | None, ours) -> TracebackType | None:
    """tb with the hooked path of calls hooked only by haiprof shown as the plain path. `ours(fn)`: whether a hook
    function is haiprof's."""
    torch_module = sys.modules.get("torch.nn.modules.module")
    if tb is None or torch_module is None:
        return tb
    try:
        if not all(_only_ours(getattr(torch_module, name, {}), ours) for name in _GLOBAL_DICTS):
            return tb   # a global hook of the script's: every call took the hooked path under python too
        first, prev, cur = tb, None, tb
        while cur is not None:
            nxt = cur.tb_next
            if _hooked_only_by_us(cur, nxt, torch_module, ours):
                line, offset = _plain_call_at[cur.tb_frame.f_code]
                plain = TracebackType(nxt.tb_next, cur.tb_frame, offset, line)
                if prev is None:
                    first = plain
                else:
                    prev.tb_next = plain
                prev, cur = plain, nxt.tb_next
                continue
            prev, cur = cur, nxt
        return first
    except Exception:   # a traceback is never worse than python's own for our trying
        return tb


def _hooked_only_by_us(cur, nxt, torch_module, ours) -> bool:
    code = cur.tb_frame.f_code
    if code.co_name != "_call_impl" or nxt is None or nxt.tb_frame.f_code.co_name != "inner" \
            or code.co_filename != torch_module.__file__ or nxt.tb_frame.f_code.co_filename != code.co_filename:
        return False
    module = cur.tb_frame.f_locals.get("self")
    if module is None or not all(_only_ours(getattr(module, name, None) or {}, ours) for name in _MODULE_DICTS):
        return False
    if code not in _plain_call_at:
        _plain_call_at[code] = _find_plain_call(code)
    return _plain_call_at[code] is not None


def _only_ours(hooks, ours) -> bool:
    return all(ours(h) for h in hooks.values())


def _find_plain_call(code) -> tuple[int, int] | None:
    """(line, offset of the call instruction) of `return forward_call(*args, **kwargs)` before `inner` is
    defined: the plain path; None when this torch's _call_impl has no such line."""
    lines = [n for n in range(code.co_firstlineno, code.co_firstlineno + 200)
             if linecache.getline(code.co_filename, n).strip() == _PLAIN_CALL]
    if not lines:
        return None
    line = lines[0]
    calls = [i.offset for i in dis.get_instructions(code)
             if i.opname.startswith("CALL") and i.positions is not None and i.positions.lineno == line]
    return (line, calls[-1]) if calls else None
