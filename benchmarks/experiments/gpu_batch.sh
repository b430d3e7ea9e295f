#!/bin/bash
# One device call: correctness of the new code first, then the benchmarks named.
# usage: bash benchmarks/experiments/gpu_batch.sh "<pytest paths>" "<benchmark names>"
export PYTHONPATH=$PWD
export TILEJIT_COMMIT=${TILEJIT_COMMIT:-$(git rev-parse --short HEAD 2>/dev/null)}
mkdir -p $OUT
nvidia-smi --query-gpu=name,clocks.sm,temperature.gpu,power.draw --format=csv > $OUT/gpu.txt 2>&1
if [ -n "$1" ]; then
  timeout ${PYTEST_TIMEOUT:-300} python -m pytest $1 -m gpu -q -x -p no:cacheprovider \
    > $OUT/pytest.log 2>&1 || true
  tail -25 $OUT/pytest.log
fi
if [ -n "$2" ]; then
  timeout ${BENCH_TIMEOUT:-300} python benchmarks/run.py $2 --json $OUT/bench.json > $OUT/bench.log 2>&1
  tail -40 $OUT/bench.log
fi
