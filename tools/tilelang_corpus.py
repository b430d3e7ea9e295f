"""Measure how many of TileLang's own tests run under tilejit with only their imports swapped.

The tool reads TileLang's test files (``testing/python/**/test_*.py``) from a git mirror of
TileLang given on the command line, rewrites only their ``tilelang`` imports to tilejit's
(``import tilelang`` -> ``import tilejit as tilelang``, ``import tilelang.language as T`` ->
``import tilejit.language as T``, ``from tilelang.jit import X`` -> ``from
tilejit.tilelang.jit import X``, ``from tvm import X`` -> ``from tilejit.tilelang.tvm
import X``, ...; nothing else is edited), writes the copies into a
temporary directory (with ``testing/conftest.py`` and ``examples/``, which tests import,
rewritten the same way) and runs each file in its own ``pytest -v -rA`` process (``-v`` so
skipped cases are named too) in tilejit's simulator (``TILEJIT_TARGET=sim``,
``CUDA_VISIBLE_DEVICES=""``, this checkout on ``PYTHONPATH``) with a per-file timeout. It prints
a table of outcomes per test file, then the first line of each failure's exception grouped
by a normalized message (numbers and quoted names replaced), most frequent first.
Nothing of TileLang is stored in this repository: the files are read at run time.

    python tools/tilelang_corpus.py --mirror PATH/TO/TILELANG.git \\
        [--only language/ --only kernel/] [--timeout 120] [--jobs 2] [--json out.json] \\
        [--target sim|sim-gpu|cuda] [--examples]

``--target cuda`` runs the tests on the GPU as a user would (nothing hidden);
``--target sim-gpu`` runs them in the simulator on a GPU machine (CUDA tensors allowed);
``--examples`` adds the ``test_*.py`` files of TileLang's ``examples/``.

``--only`` keeps the test files whose path (under ``testing/python/``) contains one of
the substrings. A mirror may be a bare git repository (read at ``--rev``, default HEAD) or
a checkout (a directory holding ``testing/python``)."""
from __future__ import annotations

import argparse
import collections
import concurrent.futures
import json
import os
import re
import signal
import subprocess
import sys
import tempfile
import threading
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
TESTS_DIR = "testing/python"
# copied (rewritten) beside the tests: TileLang's conftest (seeds; it puts the copy's root on
# sys.path) and the examples, which some tests import (``from examples.gemm_sp import ...``)
COPIED_DIRS = ("testing", "examples")


# ----------------------------------------------------------------------------------------
# import rewriting (a pure function of the source text)

def tilejit_modules(root: str = ROOT) -> tuple[frozenset, frozenset]:
    """The names of tilejit's top-level modules and of ``tilejit.tilelang``'s modules."""
    def names(path):
        if not os.path.isdir(path):
            return frozenset()
        return frozenset(n[:-3] if n.endswith(".py") else n for n in os.listdir(path)
                         if not n.startswith(("_", ".")) and
                         (n.endswith(".py") or os.path.isfile(os.path.join(path, n,
                                                                           "__init__.py"))))
    return names(os.path.join(root, "tilejit")), names(os.path.join(root, "tilejit",
                                                                     "tilelang"))


def map_module(dotted: str, modules: tuple[frozenset, frozenset] | None = None) -> str:
    """tilejit's module for TileLang's ``dotted`` (``tilelang`` or ``tilelang.a.b``):
    ``tilejit.a.b`` when tilejit has a module ``a``, ``tilejit.tilelang.a.b`` when only
    ``tilejit.tilelang`` has it (``jit``, ``math``, ``tvm``), else ``tilejit.a.b`` (the
    import then fails, naming the missing module)."""
    top, front = modules if modules is not None else tilejit_modules()
    parts = dotted.split(".")
    assert parts[0] == "tilelang", dotted
    if len(parts) == 1:
        return "tilejit"
    if parts[1] not in top and parts[1] in front:
        return ".".join(["tilejit", "tilelang", *parts[1:]])
    return ".".join(["tilejit", *parts[1:]])


_MOD = r"tilelang(?:\.\w+)*"
_FROM_RE = re.compile(rf"^(\s*from\s+)({_MOD})(\s+import\b.*)$")
# ``from tvm import DataType``: TileLang's programs reach its bundled TVM after ``from
# tilelang import tvm``; here that module is tilejit's (``tilejit/tilelang/tvm.py``)
_FROM_TVM_RE = re.compile(r"^(\s*from\s+)tvm(\s+import\b.*)$")
_IMPORT_RE = re.compile(r"^(\s*import\s+)(.*)$")
_ALIAS_RE = re.compile(rf"^\s*({_MOD})(?:\s+as\s+(\w+))?\s*$")


def _rewrite_import_list(names: str, modules) -> str | None:
    """``a, tilelang.b as c, d`` with TileLang's modules swapped, or None if none is
    TileLang's (or the list is not a plain one, e.g. it carries a comment)."""
    code, sep, comment = names.partition("#")
    items = code.rstrip().rstrip(";").split(",")
    out, binds_tilelang, changed = [], False, False
    for item in items:
        m = _ALIAS_RE.match(item)
        if m is None or not (m.group(1) == "tilelang" or m.group(1).startswith("tilelang.")):
            out.append(item.strip())
            continue
        changed = True
        dotted, alias = m.group(1), m.group(2)
        target = map_module(dotted, modules)
        if alias:
            out.append(f"{target} as {alias}")
        elif dotted == "tilelang":
            out.append("tilejit as tilelang")
        else:
            # ``import tilelang.testing`` binds ``tilelang``: import the module, then bind
            # the name ``tilelang`` to tilejit so ``tilelang.testing`` resolves
            out.append(target)
            binds_tilelang = True
    if not changed:
        return None
    if binds_tilelang and "tilejit as tilelang" not in out:
        out.append("tilejit as tilelang")
    return ", ".join(out) + (f"  {sep}{comment}" if sep else "")


def rewrite_imports(source: str, modules: tuple[frozenset, frozenset] | None = None) -> str:
    """``source`` with its ``tilelang`` imports made tilejit's, line by line; every other
    line (strings, comments, uses of ``tilelang.x``) is left as it is. Lines keep their
    numbers, so tracebacks point at TileLang's lines."""
    modules = modules if modules is not None else tilejit_modules()
    lines = source.splitlines(keepends=True)
    for i, line in enumerate(lines):
        body = line.rstrip("\r\n")
        end = line[len(body):]
        m = _FROM_RE.match(body)
        if m:
            lines[i] = m.group(1) + map_module(m.group(2), modules) + m.group(3) + end
            continue
        m = _FROM_TVM_RE.match(body)
        if m:
            lines[i] = m.group(1) + "tilejit.tilelang.tvm" + m.group(2) + end
            continue
        m = _IMPORT_RE.match(body)
        if m and "tilelang" in m.group(2):
            names = _rewrite_import_list(m.group(2), modules)
            if names is not None:
                lines[i] = m.group(1) + names + end
    return "".join(lines)


# ----------------------------------------------------------------------------------------
# reading the mirror

def list_files(mirror: str, rev: str) -> tuple[list[str], callable]:
    """The mirror's files under testing/ and examples/ and a function reading one file."""
    if os.path.isdir(os.path.join(mirror, TESTS_DIR)):       # a checkout
        paths = []
        for top in COPIED_DIRS:
            for base, _, files in os.walk(os.path.join(mirror, top)):
                paths += [os.path.relpath(os.path.join(base, f), mirror) for f in files]

        def read(path):
            with open(os.path.join(mirror, path), encoding="utf-8") as f:
                return f.read()
        return sorted(p.replace(os.sep, "/") for p in paths), read
    out = subprocess.run(["git", "-C", mirror, "ls-tree", "-r", "--name-only", rev, *COPIED_DIRS],
                         check=True, capture_output=True, text=True).stdout
    return out.split(), lambda path: subprocess.run(
        ["git", "-C", mirror, "show", f"{rev}:{path}"], check=True, capture_output=True,
        text=True).stdout


# ----------------------------------------------------------------------------------------
# running pytest and reading its report

_SUMMARY_RE = re.compile(r"^(PASSED|FAILED|ERROR|XFAIL|XPASS) (\S+?)(?: - (.*))?$")
_SKIP_RE = re.compile(r"^SKIPPED \[\d+\] (\S+?): (.*)$")
_COLLECT_RE = re.compile(r"^_+ ERROR collecting (\S+) _+$")
_PROGRESS_RE = re.compile(r"^(\S+::\S+) (PASSED|FAILED|ERROR|SKIPPED|XFAIL|XPASS)\b"
                          r"(?: \((.*)\))?")
OUTCOME = {"PASSED": "passed", "FAILED": "failed", "ERROR": "error", "SKIPPED": "skipped",
           "XFAIL": "skipped", "XPASS": "passed"}


def parse_pytest_output(text: str) -> list[dict]:
    """Each case's ``{"id", "outcome", "message"}`` from ``pytest -v -rA`` output: the
    outcomes from the progress lines, the failures' first exception lines from the short
    summary (which also names the collection errors, a file's ``ERROR path``)."""
    cases: dict[str, dict] = {}
    collecting = {}             # a collection error's first "E   " line, by file
    current = None
    for line in text.splitlines():
        m = _COLLECT_RE.match(line)
        if m:
            current = m.group(1)
            continue
        if current and line.startswith("E   ") and current not in collecting:
            collecting[current] = line[4:].strip()[:200]
            continue
        m = _PROGRESS_RE.match(line)
        if m:
            case = cases.setdefault(m.group(1), {"id": m.group(1), "message": ""})
            case["outcome"] = OUTCOME[m.group(2)]
            if m.group(2) == "SKIPPED" and m.group(3):
                case["message"] = m.group(3)[:200]
            continue
        m = _SUMMARY_RE.match(line)
        if m:
            case = cases.setdefault(m.group(2), {"id": m.group(2), "message": ""})
            case["outcome"] = OUTCOME[m.group(1)]
            if m.group(3):
                case["message"] = m.group(3).strip()[:200]
            elif m.group(2) in collecting:
                case["message"] = collecting[m.group(2)]
            continue
        m = _SKIP_RE.match(line)
        if m and "::" in m.group(1):                 # pytest -v names the skipped case
            case = cases.setdefault(m.group(1), {"id": m.group(1), "message": ""})
            case["outcome"], case["message"] = "skipped", m.group(2)[:200]
    return list(cases.values())


# the pytest processes running now, each the leader of its own process group; stopping
# the tool (SIGTERM, SIGINT: an outer `timeout`, Ctrl-C) stops them and starts no more,
# so no worker outlives the tool (they went on loading the GPU's host, 2026-12-04)
_WORKERS: set = set()
_WORKERS_LOCK = threading.Lock()
_STOPPING = threading.Event()


def stop_workers(signum=None, frame=None):
    """Kill every running worker's process group; with a signal, exit as it asks."""
    with _WORKERS_LOCK:         # (a worker starts under this lock: none slips past)
        _STOPPING.set()
        procs = list(_WORKERS)
    for proc in procs:
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
    if signum is not None:
        raise SystemExit(128 + signum)


def run_file(tmp: str, path: str, timeout: float, target: str = "sim") -> dict:
    """Run one rewritten test file under pytest; its cases, time and status. ``target``
    "sim": tilejit's simulator with CUDA hidden; "sim-gpu": the simulator on a GPU
    machine (the tests' CUDA tensors simulated on host copies); "cuda": the GPU, as a
    user runs them."""
    hidden = {"sim": {"TILEJIT_TARGET": "sim", "CUDA_VISIBLE_DEVICES": ""},
              "sim-gpu": {"TILEJIT_TARGET": "sim"}}.get(target, {})
    # unbuffered: a process that dies by a signal loses no line it printed
    env = dict(os.environ, **hidden, CI="1", COLUMNS="400", PYTHONDONTWRITEBYTECODE="1",
               PYTHONUNBUFFERED="1",
               PYTHONPATH=os.pathsep.join(p for p in (ROOT, os.environ.get("PYTHONPATH"))
                                          if p))
    env.pop("PYTEST_ADDOPTS", None)     # one process per file (not the caller's xdist)
    cmd = [sys.executable, "-m", "pytest", "-v", "-rA", "-p", "no:cacheprovider",
           "--color=no", path]
    start = time.monotonic()
    with _WORKERS_LOCK:
        if _STOPPING.is_set():                       # the tool is stopping: start nothing
            return {"file": path, "cases": [], "seconds": 0.0, "returncode": None,
                    "timed_out": False}
        proc = subprocess.Popen(cmd, cwd=tmp, env=env, stdout=subprocess.PIPE,
                                stderr=subprocess.STDOUT, text=True, start_new_session=True)
        _WORKERS.add(proc)
    try:
        out, _ = proc.communicate(timeout=timeout)
        timed_out = False
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, 9)                       # the pytest process and its children
        out, _ = proc.communicate()
        timed_out = True
    finally:
        with _WORKERS_LOCK:
            _WORKERS.discard(proc)
    cases = parse_pytest_output(out)
    if timed_out:
        cases.append({"id": f"{path}::<timeout>", "outcome": "error",
                      "message": f"Timeout: the file ran past {timeout:g} s"})
    elif proc.returncode is not None and proc.returncode < 0:
        # killed by a signal (an abort in a native library): the case it was running and
        # every later one are unreported, and the summary with the failures' messages lost
        try:
            name = signal.Signals(-proc.returncode).name
        except ValueError:
            name = f"signal {-proc.returncode}"
        # the case it died in: the last progress line without an outcome
        started = [m.group(1) for m in re.finditer(r"^(\S+::\S+) (?!PASSED|FAILED|ERROR|"
                                                    r"SKIPPED|XFAIL|XPASS)", out, re.M)]
        reported = {c["id"] for c in cases}
        dying = next((c for c in reversed(started) if c not in reported), None)
        where = (f"in {dying.split('::', 1)[-1]}" if dying else
                 f"after {cases[-1]['id'].split('::', 1)[-1]}" if cases else
                 "before any case ran (while collecting)")
        for case in cases:
            if case.get("outcome") in ("failed", "error") and not case.get("message"):
                case["message"] = f"(its message was lost: the process died by {name})"
        tail = " | ".join(ln.strip() for ln in out.strip().splitlines()[-2:])[:200]
        cases.append({"id": f"{path}::<crash>", "outcome": "error",
                      "message": f"the pytest process died by {name} {where}: {tail}"})
    elif not cases and proc.returncode == 5:         # pytest's "no tests collected": a
        pass                                         # helper module named test_*.py
    elif not cases:                                  # crashed before reporting anything
        tail = [ln for ln in out.strip().splitlines() if ln.strip()][-1:] or ["no output"]
        cases.append({"id": f"{path}::<run>", "outcome": "error",
                      "message": f"pytest exited {proc.returncode}: {tail[0][:160]}"})
    for case in cases:
        case["file"] = path
        if case.get("message"):       # paths of this machine's: relative to the checkouts
            case["message"] = case["message"].replace(ROOT + os.sep, "").replace(
                tmp.rstrip(os.sep) + os.sep, "<corpus copy>/")
    return {"file": path, "cases": cases, "seconds": round(time.monotonic() - start, 1),
            "returncode": proc.returncode, "timed_out": timed_out}


# ----------------------------------------------------------------------------------------
# summarizing

def normalize(message: str) -> str:
    """The grouping key of a failure message: quoted names, numbers and addresses
    replaced, so one cause with different values is one group."""
    key = re.sub(r"'[^']*'?|\"[^\"]*\"?|`[^`]*`?", "'…'", message)
    key = re.sub(r"0x[0-9a-fA-F]+", "N", key)
    key = re.sub(r"\b\d+(\.\d+)?(e[-+]?\d+)?\b", "N", key)
    return re.sub(r"\s+", " ", key).strip()


def counts(cases) -> collections.Counter:
    return collections.Counter(c["outcome"] for c in cases)


def groups(cases) -> list[tuple[str, int, str, str]]:
    """(key, count, example message, example id) of the failed and errored cases, most
    frequent first."""
    by_key: dict[str, list[dict]] = collections.defaultdict(list)
    for c in cases:
        if c["outcome"] in ("failed", "error"):
            by_key[normalize(c["message"] or "(no message)")].append(c)
    rows = [(k, len(v), v[0]["message"], v[0]["id"]) for k, v in by_key.items()]
    return sorted(rows, key=lambda r: (-r[1], r[0]))


def top_dir(path: str) -> str:
    rest = path[len(TESTS_DIR) + 1:] if path.startswith(TESTS_DIR + "/") else path
    return rest.split("/")[0] if "/" in rest else "."


def report(results, top: int, out=sys.stdout) -> None:
    cols = ("passed", "failed", "error", "skipped")
    print(f"{'file':<72} " + " ".join(f"{c:>7}" for c in cols) + "   secs", file=out)
    for r in results:
        n = counts(r["cases"])
        flag = "  TIMEOUT" if r["timed_out"] else ""
        print(f"{r['file'][len(TESTS_DIR) + 1:]:<72} " + " ".join(f"{n[c]:>7}" for c in cols)
              + f" {r['seconds']:>6}{flag}", file=out)
    cases = [c for r in results for c in r["cases"]]
    per_dir: dict[str, list] = collections.defaultdict(list)
    for c in cases:
        per_dir[top_dir(c["file"])].append(c)
    print(f"\n{'directory':<24} " + " ".join(f"{c:>7}" for c in cols), file=out)
    for d in sorted(per_dir):
        n = counts(per_dir[d])
        print(f"{d:<24} " + " ".join(f"{n[c]:>7}" for c in cols), file=out)
    n = counts(cases)
    print(f"{'TOTAL':<24} " + " ".join(f"{n[c]:>7}" for c in cols), file=out)
    print("\nfailure groups (failed + error), most frequent first:", file=out)
    for key, count, _, example in groups(cases)[:top]:
        print(f"{count:>5}  {key[:150]}\n       e.g. {example}", file=out)


def _run_all(args, paths, read, tests, modules, results: list) -> None:
    """Every test file under pytest, ``args.jobs`` at a time, each one's result appended
    to ``results`` as it finishes (what a stopped tool still reports)."""
    with tempfile.TemporaryDirectory(prefix="tilelang_corpus_") as tmp:
        # every .py under testing/ and examples/ (helpers the tests import), rewritten
        for path in paths:
            if path.endswith(".py"):
                dest = os.path.join(tmp, path)
                os.makedirs(os.path.dirname(dest), exist_ok=True)
                with open(dest, "w", encoding="utf-8") as f:
                    f.write(rewrite_imports(read(path), modules))
        with concurrent.futures.ThreadPoolExecutor(max(1, args.jobs)) as pool:
            futures = [pool.submit(run_file, tmp, p, args.timeout, args.target)
                       for p in tests]
            for i, fut in enumerate(concurrent.futures.as_completed(futures), 1):
                r = fut.result()
                results.append(r)
                n = counts(r["cases"])
                print(f"[{i}/{len(tests)}] {r['file']}: {n['passed']} passed, "
                      f"{n['failed'] + n['error']} failed, {n['skipped']} skipped "
                      f"({r['seconds']} s)", file=sys.stderr, flush=True)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--mirror", required=True, help="TileLang's git mirror or checkout")
    ap.add_argument("--rev", default="HEAD", help="the revision of a git mirror to read")
    ap.add_argument("--only", action="append", default=[],
                    help="keep test files whose path under testing/python contains this")
    ap.add_argument("--timeout", type=float, default=120, help="seconds per test file")
    ap.add_argument("--jobs", type=int, default=2, help="test files run at once")
    ap.add_argument("--json", help="write every case and the summary to this file")
    ap.add_argument("--top", type=int, default=40, help="failure groups printed")
    ap.add_argument("--target", choices=("sim", "sim-gpu", "cuda"), default="sim",
                    help="sim: the simulator, CUDA hidden; sim-gpu: the simulator with "
                         "the GPU's tensors; cuda: on the GPU")
    ap.add_argument("--examples", action="store_true",
                    help="also run the test_*.py files of TileLang's examples/")
    args = ap.parse_args(argv)

    paths, read = list_files(args.mirror, args.rev)
    roots = (TESTS_DIR + "/",) + (("examples/",) if args.examples else ())
    tests = [p for p in paths if p.startswith(roots) and p.endswith(".py")
             and os.path.basename(p).startswith("test_")
             and (not args.only or any(s in p.split("/", 2)[-1] if p.startswith(TESTS_DIR)
                                       else s in p for s in args.only))]
    if not tests:
        print("no test files matched", file=sys.stderr)
        return 2
    modules = tilejit_modules()
    start = time.monotonic()
    _STOPPING.clear()
    handlers = {sig: signal.signal(sig, stop_workers)   # no worker outlives the tool
                for sig in (signal.SIGTERM, signal.SIGINT)}
    results, stopped = [], None
    try:
        _run_all(args, paths, read, tests, modules, results)
    except SystemExit as stop:                  # the files that finished are reported
        stopped = stop.code
    finally:
        for sig, handler in handlers.items():
            signal.signal(sig, handler)
    results.sort(key=lambda r: r["file"])
    elapsed = time.monotonic() - start
    report(results, args.top)
    print(f"\n{len(tests)} files in {elapsed:.0f} s", file=sys.stdout)
    if args.json:
        cases = [c for r in results for c in r["cases"]]
        summary = {"files": len(tests), "seconds": round(elapsed, 1), "totals": counts(cases),
                   "per_directory": {d: counts([c for c in cases if top_dir(c["file"]) == d])
                                     for d in sorted({top_dir(c["file"]) for c in cases})},
                   "groups": [{"key": k, "count": n, "example_message": m, "example_id": e}
                              for k, n, m, e in groups(cases)]}
        with open(args.json, "w", encoding="utf-8") as f:
            json.dump({"summary": summary, "files": results}, f, indent=1)
    if stopped is not None:
        print(f"stopped after {len(results)} of {len(tests)} files", file=sys.stderr)
        return stopped
    return 0


if __name__ == "__main__":
    sys.exit(main())
