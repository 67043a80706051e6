"""``corral bench``: scheduler benchmarks on the workloads Kubernetes' scheduler_perf uses.

- ``workloads/``: the shipped workload files (YAML), ``workloads.py`` reads and expands them;
- ``targets.py``: where a run happens — in this process (server, store and scheduler together, as
  scheduler_perf runs kube-scheduler) or against a running server over HTTP;
- ``runner.py``: carries out a workload's ops and measures; ``report.py`` prints the results.
"""

CREATORS = 64  # create requests in flight at once, by default (``corral bench --creators``)
MAX_CREATORS = 4096
