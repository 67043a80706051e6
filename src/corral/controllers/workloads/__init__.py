"""The workload controllers: ReplicaSets, Deployments, DaemonSets, Jobs and CronJobs; what they share
(pods and their order, revisions, one pod per node rolled out within budgets); and the status of the
disruption budgets that guard their pods."""
