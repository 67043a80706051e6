"""Where the control loops (the scheduler, the controllers, compaction) run: on which of several
servers sharing one etcd (:mod:`.leader`, a Lease election) and, on the server that runs them,
whether the scheduler gets a process of its own (:mod:`.cores`, the cores this process may use).
"""
