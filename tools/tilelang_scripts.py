"""Run TileLang's example scripts (``examples/<dir>/<script>.py``, those without a test
file) as a user would, with only their imports swapped (``tilelang_corpus.rewrite_imports``
on every ``.py`` of the script's folder, subfolders too), each in its own process with a
time limit, a few at a time. Prints one line per script (exit status, seconds, its last
lines) and writes each script's output to ``OUT/<dir>__<script>.log`` and a summary to
``OUT/scripts.json``. The scripts' own checks (``assert_allclose``, ``assert_close``) are
what pass or fail; nothing of TileLang is stored in this repository.

    python tools/tilelang_scripts.py --mirror tl_corpus --out OUT [--jobs 8] \\
        [--timeout 240] deepseek_mla/example_mla_decode_ws.py norm/layernorm.py ...

``--mirror`` is a checkout of TileLang holding ``examples/`` (``tilelang_corpus.py``'s
``--mirror`` when that is a checkout)."""
from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from tilelang_corpus import rewrite_imports  # noqa: E402 - the tool beside this one

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def stage(examples: str, script: str, where: str) -> str:
    """A copy of the script's folder under ``where`` with every ``.py`` rewritten; the
    copy's path."""
    folder = os.path.join(where, script.replace("/", "__"))
    shutil.copytree(os.path.join(examples, os.path.dirname(script)), folder,
                    dirs_exist_ok=True)
    for dirpath, _, files in os.walk(folder):
        for name in files:
            if name.endswith(".py"):
                path = os.path.join(dirpath, name)
                with open(path) as f:
                    text = rewrite_imports(f.read())     # read before "w" truncates it
                with open(path, "w") as f:
                    f.write(text)
    return folder


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--mirror", required=True, help="a checkout of TileLang (examples/)")
    ap.add_argument("--out", required=True, help="the directory for logs and scripts.json")
    ap.add_argument("--jobs", type=int, default=8, help="scripts run at once")
    ap.add_argument("--timeout", type=int, default=240, help="seconds per script")
    ap.add_argument("scripts", nargs="+", help="paths under examples/")
    args = ap.parse_args(argv)
    examples = os.path.join(args.mirror, "examples")
    os.makedirs(args.out, exist_ok=True)
    where = os.path.join(args.out, "tmp")
    pending, running, results = list(args.scripts), [], {}
    while pending or running:
        while pending and len(running) < args.jobs:
            script = pending.pop(0)
            folder = stage(examples, script, where)
            env = dict(os.environ, PYTHONUNBUFFERED="1", PYTHONPATH=os.pathsep.join(
                (ROOT, args.mirror, folder)))
            log = open(os.path.join(args.out, script.replace("/", "__") + ".log"), "w")
            running.append((script, log, time.time(), subprocess.Popen(
                ["timeout", str(args.timeout), sys.executable, os.path.basename(script)],
                cwd=folder, env=env, stdout=log, stderr=subprocess.STDOUT)))
        time.sleep(0.5)
        for item in list(running):
            script, log, start, proc = item
            if proc.poll() is None:
                continue
            running.remove(item)
            log.close()
            with open(log.name) as f:
                tail = f.read().replace(ROOT, "<repo>").splitlines()[-4:]
            results[script] = {"rc": proc.returncode, "seconds": round(time.time() - start, 1),
                               "tail": tail}
            print(proc.returncode, script, round(time.time() - start), "|",
                  " / ".join(tail)[:400], flush=True)
    shutil.rmtree(where, ignore_errors=True)
    with open(os.path.join(args.out, "scripts.json"), "w") as f:
        json.dump(results, f, indent=1)
    return 0 if all(r["rc"] == 0 for r in results.values()) else 1


if __name__ == "__main__":
    sys.exit(main())
