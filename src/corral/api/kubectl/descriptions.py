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
    "PriorityClass.value": "The priority of pods that name this class; higher values are placed first.",
    "PriorityClass.globalDefault": "Whether pods that name no class get this one (at most one class).",
    "PriorityClass.preemptionPolicy": "PreemptLowerPriority (the default) or Never.",
    "PriorityClass.description": "What the class is for, for people.",
    "LeaseSpec.holderIdentity": "Who holds the lease.",
    "LeaseSpec.leaseDurationSeconds": "How long the holder's claim lasts after each renewal.",
    "LeaseSpec.renewTime": "When the holder last renewed it.",
}
