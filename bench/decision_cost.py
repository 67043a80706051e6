"""Instructions per scheduling decision, for cachegrind: wall time on a shared machine moves by 2×
within minutes, an instruction count does not.

    for n in 500 1500; do OPENBLAS_NUM_THREADS=1 PYTHONHASHSEED=0 setarch -R valgrind --tool=cachegrind \\
        --cache-sim=no --cachegrind-out-file=/dev/null .venv/bin/python bench/decision_cost.py $n 2>&1 | grep 'I *refs'; done

(the 1,500-decision count less the 500-decision one, over 1,000: one decision and the pod assumed).
Both runs build the same 5,000 nodes and 1,500 pods (bench/scheduler_bench.py's shapes), so only the
decisions differ. Run it without valgrind for decisions/s.
"""

from __future__ import annotations

import gc
import os
import sys
import time

sys.path.insert(0, os.path.dirname(__file__))
import scheduler_bench as sb  # noqa: E402  (it puts src/ on the path)

from corral.scheduler.cache.cache import Cache  # noqa: E402
from corral.scheduler.framework.podinfo import PodInfo  # noqa: E402
from corral.scheduler.profiles import build_frameworks, parse_config  # noqa: E402
from corral.scheduler.schedule_one import schedule_pod  # noqa: E402

MADE = 1500


def main() -> None:
    decisions = int(sys.argv[1]) if len(sys.argv) > 1 else MADE
    if not 0 < decisions <= MADE:
        sys.exit(f"decision_cost.py: the number of decisions must be 1 to {MADE}")
    cache = Cache()
    for i in range(5000):
        cache.set_node(sb.node(i))
    fwk = build_frameworks(parse_config({}), cache=cache, clock=time.time)["default-scheduler"]
    infos = [PodInfo.from_object(sb.pod(i)) for i in range(MADE)][:decisions]
    gc.collect()
    gc.freeze()
    start = time.perf_counter()
    for info in infos:
        cache.assume(info, schedule_pod(fwk, cache, info).node)
    print(f"{decisions} decisions: {decisions / (time.perf_counter() - start):,.0f}/s")


if __name__ == "__main__":
    main()
