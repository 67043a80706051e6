"""What ``kubectl explain`` says about corral's kinds and fields: the descriptions of the OpenAPI
documents (``corral.server.discovery.openapi``), keyed by model name and ``Model.field``.

Written for corral: each says what the field means and what corral does with it, including where
corral differs from Kubernetes. A field without an entry is explained by its type alone.
"""

from __future__ import annotations

__all__ = ["DESCRIPTIONS"]

DESCRIPTIONS: dict[str, str] = {
    # --- kinds ---
    "Pod": "A group of containers that run together on one node, placed there by the scheduler and run by "
           "that node's agent.",
    "Node": "A machine that runs pods: registered by its agent, which reports its capacity and condition "
            "and renews its Lease in kube-node-lease.",
    "Namespace": "A scope for names: namespaced objects are unique by namespace and name.",
    "Event": "A report of something that happened to an object (scheduled, started, failed, evicted).",
    "Lease": "A time-limited claim: a node's heartbeat, or a leader's hold on leadership.",
    "PriorityClass": "A named priority for pods: pods of a higher value are placed first.",
    "ObjectMeta": "Metadata every stored object has: who it is, what it is labelled, and the server's "
                  "bookkeeping.",
    # --- ObjectMeta ---
    "ObjectMeta.name": "The object's name, unique within its namespace (within the cluster for cluster-scoped "
                       "kinds); a DNS subdomain for most kinds.",
    "ObjectMeta.generateName": "A prefix from which the server makes a unique name when name is empty.",
    "ObjectMeta.namespace": "The namespace the object lives in; empty for cluster-scoped kinds.",
    "ObjectMeta.uid": "Set by the server at creation, unique across time: a recreated object gets a new one.",
    "ObjectMeta.resourceVersion": "The store revision of this version of the object; an update that names it "
                                  "succeeds only if the object has not changed since (compare-and-swap).",
    "ObjectMeta.labels": "Key/value pairs that selectors match (label selectors, node selectors, affinity).",
    "ObjectMeta.annotations": "Key/value pairs for tools and people; never matched by selectors.",
    "ObjectMeta.creationTimestamp": "When the server stored the object first (RFC 3339, UTC).",
    "ObjectMeta.deletionTimestamp": "Set when a graceful deletion began; the object goes once its agent "
                                    "reports its containers stopped, or the grace period ends.",
    "ObjectMeta.ownerReferences": "The objects this one belongs to.",
    "ObjectMeta.finalizers": "Names that must be removed before the object is deleted.",
    # --- Pod ---
    "PodSpec": "What the pod should run and where it may run.",
    "PodSpec.containers": "The containers of the pod, started together once the pod is on a node. At least one.",
    "PodSpec.initContainers": "Containers run one after another, each to success, before the containers start.",
    "PodSpec.nodeName": "The node the pod runs on: set by the scheduler's binding. Set by hand, it bypasses "
                        "the scheduler, and the pod is still refused by a node it does not fit.",
    "PodSpec.nodeSelector": "Labels a node must have (all of them) for the pod to be placed on it.",
    "PodSpec.affinity": "Rules about which nodes the pod prefers or requires, and which pods it wants near or "
                        "away from.",
    "PodSpec.tolerations": "Taints the pod tolerates: a node's NoSchedule and NoExecute taints keep away pods "
                           "that do not tolerate them.",
    "PodSpec.topologySpreadConstraints": "How evenly pods matching a selector must (or should) spread over "
                                         "the values of a node label, such as zones.",
    "PodSpec.priority": "The pod's priority, resolved by the server from priorityClassName; higher is placed "
                        "first.",
    "PodSpec.priorityClassName": "The PriorityClass whose value becomes priority; an unknown name is refused.",
    "PodSpec.preemptionPolicy": "PreemptLowerPriority or Never, from the priority class.",
    "PodSpec.schedulerName": "The scheduler profile that places the pod (default-scheduler unless configured).",
    "PodSpec.restartPolicy": "Always (the default), OnFailure or Never: whether the agent restarts a container "
                             "that exited, with a growing back-off.",
    "PodSpec.terminationGracePeriodSeconds": "Seconds between the stop signal and the kill when the pod is "
                                             "deleted (default 30).",
    "PodSpec.overhead": "Resources the pod uses beyond its containers' requests, added to them when placing it.",
    "Container": "One process (or container image) of a pod.",
    "Container.name": "The container's name, unique within the pod (a DNS label).",
    "Container.image": "The image to run. On the docker runtime, pulled by its policy; the process runtime "
                       "runs command directly and keeps the image only as a name.",
    "Container.imagePullPolicy": "Always, IfNotPresent or Never; default Always for :latest or no tag, "
                                 "IfNotPresent otherwise.",
    "Container.command": "The program and its arguments (the image's entrypoint is replaced).",
    "Container.args": "Arguments to the command (or to the image's entrypoint).",
    "Container.workingDir": "The directory the command starts in.",
    "Container.env": "Environment variables set for the command.",
    "Container.ports": "Ports the container serves; a hostPort is claimed on the node, and two pods asking "
                       "for the same one never share a node.",
    "Container.resources": "The cpu, memory and extended resources the container requests and may not exceed.",
    "ContainerPort.containerPort": "The port the container listens on.",
    "ContainerPort.hostPort": "The node's port forwarded to it; unique per node, protocol and host IP.",
    "ContainerPort.protocol": "TCP (the default), UDP or SCTP.",
    "EnvVar.name": "The variable's name.",
    "EnvVar.value": "Its value; $(OTHER) refers to a variable defined before it.",
    "ResourceRequirements.requests": "What the scheduler reserves for the container on its node: cpu (cores "
                                     "or millicores, 500m), memory (bytes, 128Mi), extended resources.",
    "ResourceRequirements.limits": "The most the container may use, enforced by the runtime (cgroups). A "
                                   "request left out defaults to its limit.",
    "Toleration.key": "The taint key this tolerates; empty with operator Exists tolerates every taint.",
    "Toleration.operator": "Equal (the default: key and value must match) or Exists (any value).",
    "Toleration.value": "The taint value to match with operator Equal.",
    "Toleration.effect": "The taint effect to tolerate (NoSchedule, PreferNoSchedule, NoExecute); empty: all.",
    "Toleration.tolerationSeconds": "For NoExecute: how long the pod may stay after the taint appears "
                                    "(default: forever).",
    "Affinity.nodeAffinity": "Which nodes the pod requires or prefers, by their labels.",
    "Affinity.podAffinity": "Pods this pod wants to run near (in the same topology domain).",
    "Affinity.podAntiAffinity": "Pods this pod wants to run away from.",
    "NodeAffinity.requiredDuringSchedulingIgnoredDuringExecution": "Terms of which a node must match one "
                                                                  "to be considered.",
    "NodeAffinity.preferredDuringSchedulingIgnoredDuringExecution": "Weighted terms that raise the score of "
                                                                   "nodes matching them.",
    "TopologySpreadConstraint.maxSkew": "The largest difference allowed between the domain with the most "
                                        "matching pods and the one with the fewest.",
    "TopologySpreadConstraint.topologyKey": "The node label whose values are the domains (e.g. "
                                            "topology.kubernetes.io/zone).",
    "TopologySpreadConstraint.whenUnsatisfiable": "DoNotSchedule (a filter) or ScheduleAnyway (a score).",
    "TopologySpreadConstraint.labelSelector": "Which pods are counted.",
    "PodStatus": "What the agent and scheduler last reported about the pod.",
    "PodStatus.phase": "Pending (not yet running), Running, Succeeded, Failed or Unknown.",
    "PodStatus.conditions": "PodScheduled, Initialized, ContainersReady and Ready, each True or False with a "
                            "reason.",
    "PodStatus.nominatedNodeName": "The node the pod will go to once pods it preempts there are gone.",
    "PodStatus.containerStatuses": "One per container: its state, readiness and restart count.",
    # --- Node ---
    "NodeSpec.unschedulable": "Cordoned: no new pods are placed on the node; those on it stay.",
    "NodeSpec.taints": "Taints keep away pods that do not tolerate them.",
    "Taint.key": "The taint's key.",
    "Taint.value": "The taint's value.",
    "Taint.effect": "NoSchedule (no new pods), PreferNoSchedule (avoid if possible) or NoExecute (also evict "
                    "pods already there that do not tolerate it).",
    "NodeStatus.capacity": "The node's total resources as its agent measured them.",
    "NodeStatus.allocatable": "What pods may request on the node: capacity less what is reserved for the "
                              "system.",
    "NodeStatus.conditions": "Ready (the agent reports in time) and the pressure conditions.",
    "NodeStatus.nodeInfo": "The machine's identity and software versions, as the agent found them.",
    # --- others ---
    "Placement": "Copies of one pod template on nodes picked by a policy, decided as one batch: PickAll (every "
                 "eligible node), PickN (the best N, optionally spread) or PickFixed (named nodes). Running copies "
                 "are not moved when nodes change (IgnoredDuringExecution).",
    "PlacementSpec.template": "The pod each selected node runs a copy of.",
    "PlacementSpec.policy": "Which nodes get a copy.",
    "PlacementSpec.strategy": "How a changed template or policy is rolled out: RollingUpdate within maxUnavailable "
                              "and maxSurge.",
    "PlacementPolicy.placementType": "PickAll (the default), PickN or PickFixed; fixed once created.",
    "PlacementPolicy.numberOfNodes": "PickN: how many nodes get a copy.",
    "PlacementPolicy.nodeNames": "PickFixed: the nodes that get a copy.",
    "PlacementPolicy.affinity": "Node terms a node must match (required, ORed) and preferred terms that add "
                                "their weight (-100..100) or a property sorter's scaled weight.",
    "PlacementPolicy.topologySpreadConstraints": "PickN: how evenly copies spread over a topology label.",
    "PlacementPolicy.tolerations": "Taints the copies tolerate, added to the template's.",
    "PlacementPreference.weight": "-100..100: added to the score of the nodes the term matches.",
    "PlacementPreference.preference": "A node selector term.",
    "PlacementPreference.propertySorter": "A node number (allocatable/RESOURCE, available/RESOURCE, capacity/RESOURCE, "
                                          "network/download); the weight scaled between its smallest and largest.",
    "PlacementStatus.policyHash": "The policy (less numberOfNodes) the decisions were taken for: another one is "
                                  "decided afresh, this one keeps the nodes that hold copies.",
    "PlacementStatus.policySnapshot": "The ControllerRevision keeping the policy the decisions were taken for.",
    "PlacementStatus.decisions": "Each node decided on: selected or not, its score (by plugin, for up to 1,000 "
                                 "decisions), the reason, and its state.",
    "PlacementStatus.bound": "Selected nodes with a copy bound to them.",
    "NodeDecision.state": "Scheduled (selected, no copy bound yet), Bound (a copy is bound there) or "
                          "Unscheduled (let go; its copy goes as the rollout allows).",
    "NodeDecision.scores": "The score by plugin and by preferred term (preference[i]).",
    "NodeDecision.policySnapshot": "An Unscheduled decision's snapshot, when an earlier policy selected it.",
    "PlacementStatus.desired": "Copies the policy asks for.",
    "PlacementStatus.scheduled": "Nodes selected for a copy.",
    "PlacementStatus.available": "Copies running for unavailablePeriodSeconds.",
    "PodGroup": "A gang of pods (labelled scheduling.corral.dev/pod-group: NAME) that the scheduler places "
                "all or nothing: none is bound until minMember of them have a place.",
    "PodGroupSpec.minMember": "How many members must have a place before any is bound.",
    "PodGroupSpec.scheduleTimeoutSeconds": "How long places are held for a gang that is not complete (300).",
    "PodGroupStatus.phase": "Pending, Scheduling (places held, waiting for the rest) or Scheduled.",
    "PodGroupStatus.scheduled": "Members with a place: bound, or held for the gang.",
    "PodGroupStatus.members": "Members that exist.",
    "PodGroupStatus.message": "Why the rest of the gang waits.",
    "PriorityClass.value": "The priority of pods that name this class; higher values are placed first.",
    "PriorityClass.globalDefault": "Whether pods that name no class get this one (at most one class).",
    "PriorityClass.preemptionPolicy": "PreemptLowerPriority (the default) or Never.",
    "PriorityClass.description": "What the class is for, for people.",
    "LeaseSpec.holderIdentity": "Who holds the lease.",
    "LeaseSpec.leaseDurationSeconds": "How long the holder's claim lasts after each renewal.",
    "LeaseSpec.renewTime": "When the holder last renewed it.",
    # --- workloads ---
    "Deployment": "Keeps replicas copies of a pod template running and rolls a changed template out through "
                  "ReplicaSets, a few pods at a time (kubectl rollout status|history|undo|pause|resume).",
    "ReplicaSet": "Keeps replicas pods of its template running: creates missing ones, deletes surplus ones, "
                  "adopts matching pods no controller owns. Usually made by a Deployment.",
    "DaemonSet": "Runs one pod of its template on every node its selector, affinity and tolerations allow; "
                 "the scheduler binds each to its node.",
    "Job": "Runs pods until completions of them succeed, parallelism at a time; fails past backoffLimit "
           "failures or activeDeadlineSeconds.",
    "CronJob": "Makes a Job at each time of its cron schedule, in its time zone.",
    "ControllerRevision": "A DaemonSet's template at one revision, kept for kubectl rollout history and undo.",
    "DeploymentSpec.replicas": "How many pods to keep running (1 by default); also set by kubectl scale.",
    "DeploymentSpec.strategy": "RollingUpdate (default: at most maxSurge extra pods and maxUnavailable missing "
                               "ones during a rollout) or Recreate (every old pod gone before a new one starts).",
    "DeploymentSpec.minReadySeconds": "How long a new pod must be ready before it counts as available.",
    "DeploymentSpec.progressDeadlineSeconds": "A rollout without progress this long is reported "
                                              "ProgressDeadlineExceeded (600 by default).",
    "DeploymentSpec.revisionHistoryLimit": "Old ReplicaSets kept for rollout undo (10 by default).",
    "DeploymentSpec.paused": "No rollout while true; scaling still applies, in proportion across ReplicaSets.",
    "DaemonSetSpec.updateStrategy": "RollingUpdate (default: node by node, at most maxUnavailable nodes without "
                                    "an available pod) or OnDelete (a pod is replaced only when deleted).",
    "JobSpec.completions": "How many pods must succeed (one index each, for Indexed); unset with parallelism: "
                           "a work queue, done when one succeeds and the rest have finished.",
    "JobSpec.parallelism": "How many pods run at once.",
    "JobSpec.completionMode": "NonIndexed (default) or Indexed: each pod gets an index (JOB_COMPLETION_INDEX) "
                              "and each index must succeed once.",
    "JobSpec.backoffLimit": "Failures (failed pods, and container restarts under OnFailure) after which the Job "
                            "fails (6 by default); a failed pod is replaced after 10 s, doubling to 6 min.",
    "JobSpec.activeDeadlineSeconds": "The Job fails, its pods stopped, once it has run this long.",
    "JobSpec.ttlSecondsAfterFinished": "The Job, and its pods, are deleted this long after it completed or failed.",
    "JobSpec.suspend": "While true no pod runs (running ones are deleted).",
    "CronJobSpec.schedule": "Cron's five fields (minute hour day-of-month month day-of-week), names, ranges, "
                            "steps, or @hourly, @daily, @weekly, @monthly, @yearly.",
    "CronJobSpec.timeZone": "The IANA time zone the schedule is read in (UTC when unset).",
    "CronJobSpec.concurrencyPolicy": "Allow (default), Forbid (skip a time while a Job runs) or Replace "
                                     "(delete the running Jobs first).",
    "CronJobSpec.startingDeadlineSeconds": "A scheduled time missed by more than this is skipped.",
    "CronJobSpec.successfulJobsHistoryLimit": "Completed Jobs kept (3 by default).",
    "CronJobSpec.failedJobsHistoryLimit": "Failed Jobs kept (1 by default).",
    # --- configuration ---
    "ConfigMap": "Settings for pods, as environment variables or files; a mounted file follows changes.",
    "Secret": "Like a ConfigMap, for values to keep secret: encrypted in the store, readable only with the "
              "rights for Secrets (not the view role), and by a node only for its own pods.",
    "Secret.data": "Keys and their values, base64 encoded.",
    "Secret.stringData": "Write-only: plain values, folded into data (base64) when written.",
    "Secret.type": "Opaque (default), or a built-in type whose keys are checked (kubernetes.io/tls needs tls.crt "
                   "and tls.key).",
    "ConfigMap.data": "Keys and their text values.",
    "ConfigMap.binaryData": "Keys and their binary values, base64 encoded.",
    "Volume": "Storage a pod's containers mount: a ConfigMap or Secret as files (updated in place), or an "
              "emptyDir the pod's containers share. Other sources are kept but not provided.",
    "VolumeMount.mountPath": "Where the volume appears: that path for the docker runtime; inside the "
                             "container's own directory for the process runtime (/etc/app is etc/app).",
    "EnvVarSource": "Where a variable's value comes from: a ConfigMap's or Secret's key, a field of the pod "
                    "(fieldRef), or a resource of the container (resourceFieldRef).",
    "Probe": "A check the agent runs on a running container: exec, httpGet, tcpSocket or grpc, every "
             "periodSeconds (10); failureThreshold (3) failures in a row fail it.",
    "Container.livenessProbe": "Failing: the container is killed and restarted as restartPolicy says.",
    "Container.readinessProbe": "Passing: the container is ready; the pod is Ready when all are.",
    "Container.startupProbe": "Until it passes, liveness and readiness probes wait; failing, it kills the container.",
}
