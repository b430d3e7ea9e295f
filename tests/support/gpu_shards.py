"""`pytest -m gpu` in parallel processes on one GPU: `python tests/support/gpu_shards.py
[SHARDS] [LOG_DIR]`. The collected GPU tests are cut into SHARDS runs of consecutive
tests (neighbours share compiled kernels); each shard's output goes to
LOG_DIR/shard<i>.log, a summary line per shard is printed, and the exit status is
non-zero if any shard failed."""
import os
import re
import subprocess
import sys
import time

TESTS = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
ROOT = os.path.dirname(TESTS)


def gpu_tests():
    """The node ids of the GPU tests, in pytest's collection order."""
    out = subprocess.run([sys.executable, "-m", "pytest", "-m", "gpu", "--co", "-q",
                          "-p", "no:cacheprovider"], cwd=ROOT, capture_output=True, text=True)
    return [line for line in out.stdout.splitlines() if "::" in line]


def main(shards=4, log_dir="gpu-logs"):
    os.makedirs(log_dir, exist_ok=True)
    tests = gpu_tests()
    size = -(-len(tests) // shards)
    groups = [tests[i * size:(i + 1) * size] for i in range(shards)]
    env = dict(os.environ, PYTHONPATH=ROOT + os.pathsep + os.environ.get("PYTHONPATH", ""))
    procs = []
    start = time.time()
    for i, files in enumerate(groups):
        log = open(os.path.join(log_dir, f"shard{i}.log"), "w")
        procs.append((i, files, log, subprocess.Popen(
            [sys.executable, "-m", "pytest", "-m", "gpu", "-q", "-p", "no:cacheprovider",
             *files], cwd=ROOT, env=env, stdout=log, stderr=subprocess.STDOUT)))
    failed = 0
    for i, files, log, proc in procs:
        proc.wait()
        log.close()
        lines = open(os.path.join(log_dir, f"shard{i}.log")).read().splitlines()
        summary = next((ln for ln in reversed(lines)
                        if re.search(r"\d+ (passed|failed|skipped|errors?)\b.* in ", ln)),
                       "(no summary)")
        print(f"shard {i} ({len(files)} tests) rc={proc.returncode}: {summary}")
        failed += proc.returncode != 0
    print(f"{shards} shards in {time.time() - start:.0f} s")
    return 1 if failed else 0


if __name__ == "__main__":
    args = sys.argv[1:]
    sys.exit(main(int(args[0]) if args else 4, args[1] if len(args) > 1 else "gpu-logs"))
