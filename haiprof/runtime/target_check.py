"""Whether a target can start, decided as python decides it and said in python's words, before anything runs:
a missing file, a script that does not compile, a module that is not there (haiprof/runtime/launcher.py runs it).
"""
from __future__ import annotations

import os
import sys
import traceback


class LaunchError(Exception):
    """The target cannot be started at all (missing file, unknown module): python's own line, with its exit status
    (`line`, `exit_code`), since haiprof stands in for `python SCRIPT` / `python -m MODULE`."""

    def __init__(self, message: str, exit_code: int = 1):
        super().__init__(message)
        self.exit_code = exit_code
        self.line = f"{sys.executable}: {message}"


class ScriptSyntaxError(Exception):
    """The script does not compile: `text` is python's own caret display, printed as python would (exit 1)."""

    def __init__(self, exc: SyntaxError):
        super().__init__(str(exc))
        self.text = "".join(traceback.format_exception_only(type(exc), exc))


def _module_path0() -> str:
    return os.getcwd()   # python -m puts the current directory first on sys.path


def _check_target(script: str | None, module: str | None, run_parents: bool = True) -> None:
    """Fail as python would before anything runs: a missing file, a script that does not compile, a module not
    found. `run_parents=False` where haiprof launches the script's python: nothing of the user's runs there."""
    if module is not None:
        sys.path.insert(0, _module_path0())
        try:
            _check_module(module, run_parents)
        finally:
            sys.path.pop(0)
        return
    if not os.path.exists(script):
        raise LaunchError(f"can't open file {os.path.abspath(script)!r}: [Errno 2] No such file or directory", 2)
    if os.path.isdir(script) and not os.path.exists(os.path.join(script, "__main__.py")):
        raise LaunchError(f"can't find '__main__' module in {os.path.abspath(script)!r}")
    if _is_zipapp(script):   # a .pyz / zip with __main__.py: python runs it from the archive
        import zipfile
        try:
            with zipfile.ZipFile(script) as z:
                has_main = "__main__.py" in z.namelist() or "__main__.pyc" in z.namelist()
        except (OSError, zipfile.BadZipFile) as e:
            raise LaunchError(f"can't read {os.path.abspath(script)!r}: {e}") from None
        if not has_main:
            raise LaunchError(f"can't find '__main__' module in {os.path.abspath(script)!r}")
    elif os.path.isfile(script):
        _compile(script)


_UNSURE = object()   # only running a parent package's own code would tell


def _spec_without_running(module: str):
    """find_spec's answer without running any package's code. find_spec imports the parents of a dotted name, so
    `-m pkg.train` ran pkg/__init__.py in the launching process and again in the script's python (python: once).
    Each parent is looked up in its parent's folders instead. _UNSURE where that cannot tell: a child not found
    there may be provided by its parent's own code (a __path__ set at import), which python runs before failing;
    the script's python then checks it, as python does."""
    import importlib.util
    from importlib.machinery import PathFinder
    top, _, rest = module.partition(".")
    spec = importlib.util.find_spec(top)   # a top-level name: nothing is imported to find it
    if not rest:
        return spec
    if spec is None:   # python fails here too, before any code of the user's runs
        raise ModuleNotFoundError(f"No module named {top!r}", name=top)
    name = top
    for part in rest.split("."):
        if spec.submodule_search_locations is None:
            return _UNSURE
        parent = spec
        name = f"{name}.{part}"
        spec = PathFinder.find_spec(name, list(parent.submodule_search_locations))
        if spec is None:   # certain where the parent's own code, which python runs first, can do nothing
            return None if _runs_nothing(parent) else _UNSURE
    return spec


def _runs_nothing(spec) -> bool:
    """A namespace package, or an __init__.py with nothing but a docstring: running it changes nothing."""
    if spec.origin is None or spec.loader is None:
        return True
    if not spec.origin.endswith("__init__.py"):
        return False
    import ast
    try:
        with open(spec.origin, "rb") as f:
            body = ast.parse(f.read()).body
    except (OSError, SyntaxError, ValueError):
        return False
    return all(isinstance(n, ast.Expr) and isinstance(n.value, ast.Constant) for n in body)


def _check_module(module: str, run_parents: bool = True) -> None:
    """runpy._get_module_details' checks, with its messages, made before anything runs: a package's own code is
    not run here (its `__main__` is looked for in its folders). In the script's python the parents of a dotted
    name are imported, as find_spec (and python) does; where haiprof launches that python, they are not."""
    import importlib.util
    from importlib.machinery import PathFinder
    if module.startswith("."):
        raise LaunchError("Relative module names not supported")
    try:
        spec = importlib.util.find_spec(module) if run_parents else _spec_without_running(module)
    except (ImportError, AttributeError, TypeError, ValueError) as ex:
        msg = f"Error while finding module specification for {module!r} ({type(ex).__name__}: {ex})"
        if module.endswith(".py"):
            msg += f". Try using '{module[:-3]}' instead of '{module}' as the module name."
        raise LaunchError(msg) from None
    if spec is _UNSURE:   # the script's python checks it, running what python runs
        return
    if spec is None:
        raise LaunchError(f"No module named {module}")
    if spec.submodule_search_locations is not None:
        if module == "__main__" or module.endswith(".__main__"):
            raise LaunchError("Cannot use package as __main__ module")
        if PathFinder.find_spec(f"{module}.__main__", list(spec.submodule_search_locations)) is None:
            raise LaunchError(f"No module named {module}.__main__; {module!r} is a package and cannot be directly "
                              f"executed")
    elif spec.loader is None:
        raise LaunchError(f"{module!r} is a namespace package and cannot be executed")


def _is_zipapp(script: str) -> bool:
    """A file python would run as a zip archive (zipapp): it opens it as one before reading it as source."""
    import zipfile
    try:
        return os.path.isfile(script) and zipfile.is_zipfile(script)
    except OSError:
        return False


def _compile(script: str):
    path = os.path.abspath(script)
    try:
        with open(path, "rb") as f:
            source = f.read()
    except OSError as e:
        raise LaunchError(f"can't open file {path!r}: [Errno {e.errno}] {e.strerror}") from None
    if b"\0" in source:   # python's file reader says so at the line, compile() without one: python's words
        raise ScriptSyntaxError(_null_byte_error(source, path))
    try:
        return compile(source, path, "exec", dont_inherit=True)
    except SyntaxError as e:
        raise ScriptSyntaxError(e) from None


def _null_byte_error(source: bytes, path: str) -> SyntaxError:
    """The SyntaxError python raises running a file with a NUL byte: at the NUL's line, whose text up to the NUL
    is shown (decoded as python decodes the file), no caret."""
    import io
    import tokenize
    nul = source.index(b"\0")
    lineno = source.count(b"\n", 0, nul) + 1
    line = source[source.rfind(b"\n", 0, nul) + 1:nul]
    try:
        encoding, _ = tokenize.detect_encoding(io.BytesIO(source).readline)
    except SyntaxError:
        encoding = "utf-8"
    text = line.decode(encoding, "replace")
    return SyntaxError("source code cannot contain null bytes", (path, lineno, 0, text, lineno, 0))
