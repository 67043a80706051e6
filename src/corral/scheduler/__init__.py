"""The scheduler: queue → filter → score → bind, over numpy node columns.

- ``framework/``: the plugin API (extension points, Status, PodInfo) and the runtime of a profile;
- ``cache/``: the node table (one row of numpy columns per node) and pods assumed or bound;
- ``queue/``: activeQ, backoffQ and the unschedulable set;
- ``plugins/``: the default plugins, one module each;
- ``schedule_one``: one decision and its explanation; ``scheduler``: the service around it;
- ``profiles``: configuration; ``cluster``: writes (bindings, conditions, events);
  ``sources``: reads (the server's watch cache, or informers).

The cycle is synchronous and pure; only binding, status and event writes do I/O.
"""

from corral.scheduler.profiles import SchedulerConfig, load_config, parse_config
from corral.scheduler.scheduler import Scheduler

__all__ = ["Scheduler", "SchedulerConfig", "load_config", "parse_config"]
