"""tools/tilelang_corpus.py: its import rewriting, output parsing and message grouping
(pure functions: no TileLang mirror, no pytest subprocess)."""
import importlib.util
import os

_PATH = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "tools",
                     "tilelang_corpus.py")
_spec = importlib.util.spec_from_file_location("tilelang_corpus", _PATH)
corpus = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(corpus)

# tilejit's top-level modules and tilejit.tilelang's, as the tool reads them
MODULES = (frozenset({"language", "testing", "utils", "profiler", "autotuner", "carver"}),
           frozenset({"jit", "math", "tvm", "utils", "profiler"}))


def rewrite(src):
    return corpus.rewrite_imports(src, MODULES)


def test_plain_imports():
    assert rewrite("import tilelang\n") == "import tilejit as tilelang\n"
    assert rewrite("import tilelang as tl\n") == "import tilejit as tl\n"
    assert rewrite("import tilelang.language as T\n") == "import tilejit.language as T\n"


def test_submodule_import_binds_tilelang():
    out = rewrite("import tilelang.testing\n")
    assert out == "import tilejit.testing, tilejit as tilelang\n"
    namespace = {}
    exec(out, namespace)
    assert namespace["tilelang"].testing is namespace["tilejit"].testing


def test_from_imports_and_frontend_modules():
    src = ("from tilelang import tvm as tvm\n"
           "from tilelang.language import Kernel\n"
           "from tilelang.jit import JITKernel\n"
           "from tilelang.utils.tensor import map_torch_type\n"
           "from tilelang.layout import make_swizzled_layout\n")
    assert rewrite(src) == ("from tilejit import tvm as tvm\n"
                            "from tilejit.language import Kernel\n"
                            "from tilejit.tilelang.jit import JITKernel\n"
                            "from tilejit.utils.tensor import map_torch_type\n"
                            "from tilejit.layout import make_swizzled_layout\n")


def test_other_lines_left_alone():
    src = ("import os, torch\n"
           "    import tilelang.language as T  # indented\n"
           "x = tilelang.compile(f)  # import tilelang\n"
           "s = 'from tilelang import jit'\n"
           "import tilelangx\n"
           "from tilelang.jit import (\n    JITKernel,\n)\r\n")
    out = rewrite(src)
    lines = out.splitlines(keepends=True)
    assert lines[0] == "import os, torch\n"
    assert lines[1] == "    import tilejit.language as T  # indented\n"
    assert lines[2:5] == src.splitlines(keepends=True)[2:5]
    assert lines[5] == "from tilejit.tilelang.jit import (\n"
    assert out.endswith(")\r\n") and len(lines) == len(src.splitlines())


def test_mixed_import_list():
    assert rewrite("import torch, tilelang.testing as tt, tilelang\n") == \
        "import torch, tilejit.testing as tt, tilejit as tilelang\n"


def test_parse_and_group():
    out = "\n".join([
        "t.py::test_a PASSED                     [ 25%]",
        "t.py::test_b SKIPPED (needs a CUDA device) [ 50%]",
        "t.py::test_c[4-8] FAILED                [ 75%]",
        "t.py::test_d FAILED                     [100%]",
        "=== short test summary info ===",
        "PASSED t.py::test_a",
        "FAILED t.py::test_c[4-8] - ValueError: bad shape 4 for 'A'",
        "FAILED t.py::test_d - ValueError: bad shape 16 for 'B'",
    ])
    cases = {c["id"]: c for c in corpus.parse_pytest_output(out)}
    assert {k: c["outcome"] for k, c in cases.items()} == {
        "t.py::test_a": "passed", "t.py::test_b": "skipped", "t.py::test_c[4-8]": "failed",
        "t.py::test_d": "failed"}
    assert cases["t.py::test_b"]["message"] == "needs a CUDA device"
    assert cases["t.py::test_d"]["message"] == "ValueError: bad shape 16 for 'B'"
    (key, count, _, example), = corpus.groups(list(cases.values()))
    assert key == "ValueError: bad shape N for '…'" and count == 2
    assert example == "t.py::test_c[4-8]"


def test_from_tvm_imports_become_tilejit_s_tvm_module():
    src = "from tvm import DataType\nimport tvm\nfrom tvm.tirx import IndexMap\n"
    assert rewrite(src) == ("from tilejit.tilelang.tvm import DataType\nimport tvm\n"
                            "from tvm.tirx import IndexMap\n")
    namespace = {}
    exec(rewrite("from tvm import DataType\n"), namespace)
    assert namespace["DataType"]("float16").bits == 16


def test_a_file_without_tests_has_no_cases_and_a_crash_is_an_error(tmp_path):
    run_file = corpus.run_file
    (tmp_path / "test_helpers.py").write_text("def helper():\n    return 1\n")
    (tmp_path / "test_broken.py").write_text("import no_such_module_anywhere\n")
    empty = run_file(str(tmp_path), "test_helpers.py", 120)
    assert empty["returncode"] == 5 and empty["cases"] == []
    broken = run_file(str(tmp_path), "test_broken.py", 120)
    assert [c["outcome"] for c in broken["cases"]] == ["error"]


def test_stopping_the_tool_stops_its_workers(tmp_path):
    """An outer `timeout` (SIGTERM) stops the tool and every pytest worker it started:
    none goes on running (they loaded the GPU's host once, 2026-12-04)."""
    import signal
    import subprocess
    import sys
    import time
    tests = tmp_path / "mirror" / "testing" / "python"
    tests.mkdir(parents=True)
    pids = tmp_path / "pids"
    pids.mkdir()
    for k in range(3):
        (tests / f"test_sleep{k}.py").write_text(
            "import os, time\n\n\ndef test_sleep():\n"
            f"    open(os.path.join({str(pids)!r}, str(os.getpid())), 'w').close()\n"
            "    time.sleep(120)\n")
    (tests / "test_fast.py").write_text("def test_fast():\n    pass\n")
    report = tmp_path / "report.json"
    proc = subprocess.Popen([sys.executable, _PATH, "--mirror", str(tmp_path / "mirror"),
                             "--jobs", "2", "--timeout", "300", "--json", str(report)],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + 60
    while len(list(pids.iterdir())) < 2 and time.monotonic() < deadline:     # two sleep
        time.sleep(0.2)
    started = [int(p.name) for p in pids.iterdir()]
    assert len(started) == 2, "the workers did not start"
    proc.send_signal(signal.SIGTERM)
    assert proc.wait(timeout=60) == 128 + signal.SIGTERM
    time.sleep(0.5)
    def running(pid):
        """Alive and not a zombie (a killed process its parent, here init, has not yet
        reaped)."""
        try:
            with open(f"/proc/{pid}/stat") as f:
                return f.read().rsplit(")", 1)[1].split()[0] != "Z"
        except FileNotFoundError:
            return False
    alive = [pid for pid in started if running(pid)]
    assert not alive, f"workers still running: {alive}"
    assert len(list(pids.iterdir())) == 2, "a worker started after the tool was stopped"
    # the files that finished before the stop are still reported
    import json
    finished = json.loads(report.read_text())["files"]
    assert [r["file"] for r in finished if r["cases"]] in ([], ["testing/python/test_fast.py"])


def test_a_process_killed_by_a_signal_is_reported_with_its_last_case(tmp_path):
    # TileLang's atomic test file died by SIGABRT in an LLVM assertion: its unreported
    # cases and lost messages are said to be so, not left as failures without a message
    (tmp_path / "test_dies.py").write_text(
        "import os, signal\n"
        "def test_one():\n    assert True\n"
        "def test_two():\n    assert False\n"
        "def test_three():\n    os.kill(os.getpid(), signal.SIGABRT)\n"
        "def test_four():\n    assert True\n")
    result = corpus.run_file(str(tmp_path), "test_dies.py", 120)
    assert result["returncode"] < 0
    by_id = {c["id"].split("::")[-1]: c for c in result["cases"]}
    assert by_id["test_one"]["outcome"] == "passed"
    assert by_id["test_two"]["outcome"] == "failed"
    assert "the process died by SIGABRT" in by_id["test_two"]["message"]
    assert by_id["<crash>"]["message"].startswith("the pytest process died by SIGABRT in "
                                                  "test_three")
    assert "test_four" not in by_id
    (tmp_path / "test_dies_early.py").write_text("import os, signal\n"
                                                 "os.kill(os.getpid(), signal.SIGABRT)\n")
    early = corpus.run_file(str(tmp_path), "test_dies_early.py", 120)
    assert early["cases"][-1]["message"].startswith(
        "the pytest process died by SIGABRT before any case ran (while collecting)")


def test_the_scripts_runner_runs_each_script_swapped_and_reports_it(tmp_path):
    """tools/tilelang_scripts.py: every .py of the script's folder (subfolders too) is
    rewritten, not emptied (an earlier runner opened each file for writing before
    reading it), and the script's own exit status and output are what it reports."""
    spec = importlib.util.spec_from_file_location(
        "tilelang_scripts", os.path.join(os.path.dirname(_PATH), "tilelang_scripts.py"))
    scripts = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(scripts)
    mirror = tmp_path / "mirror"
    (mirror / "examples" / "demo" / "helpers").mkdir(parents=True)
    (mirror / "examples" / "demo" / "helpers" / "util.py").write_text(
        "import tilelang.language as T\nNAME = T.__name__\n")
    (mirror / "examples" / "demo" / "run_me.py").write_text(
        "import tilelang\nfrom helpers.util import NAME\nprint(tilelang.__name__, NAME)\n")
    (mirror / "examples" / "demo" / "fails.py").write_text("raise SystemExit(3)\n")
    out = tmp_path / "out"
    rc = scripts.main(["--mirror", str(mirror), "--out", str(out), "--jobs", "2",
                       "demo/run_me.py", "demo/fails.py"])
    assert rc == 1
    log = (out / "demo__run_me.py.log").read_text()
    assert "tilejit tilejit.language" in log
    import json
    summary = json.loads((out / "scripts.json").read_text())
    assert summary["demo/run_me.py"]["rc"] == 0 and summary["demo/fails.py"]["rc"] == 3
