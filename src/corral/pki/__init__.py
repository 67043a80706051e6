"""The cluster's certificates and credentials: a CA, the certificates it signs, kubeconfig files.

``corral server`` creates the CA on first start (:mod:`corral.pki.bootstrap`) and keeps it in the
cluster store, so every server sharing one etcd signs with the same CA; each server keeps its own
serving certificate in its data directory. Clients read kubeconfig files (:mod:`corral.pki.kubeconfig`)
the way kubectl does. No network I/O here: files and the store only.
"""

# The two requests a node makes before it has a credential of its own, served by the API server.
CA_PATH = "/corral/v1/ca.crt"  # anyone: the cluster CA, to check against the pin
JOIN_PATH = "/corral/v1/join"  # a join token (or a node's own certificate): a CSR in, a certificate out

# Identities, as Kubernetes names them: a node is user system:node:NAME in group system:nodes;
# system:masters may do everything.
NODE_PREFIX = "system:node:"
NODES_GROUP = "system:nodes"
MASTERS_GROUP = "system:masters"
# The API server, when it reaches an agent's endpoint (logs): the only client an agent answers.
AGENT_CLIENT_USER = "system:apiserver-agent-client"

from corral.pki.ca import CertificateAuthority, IssuedCertificate, ca_pin, certificate_expiry
from corral.pki.files import private_dir, write_private
from corral.pki.kubeconfig import Credentials, KubeconfigError, build_kubeconfig, load_credentials

__all__ = [
    "AGENT_CLIENT_USER", "CA_PATH", "JOIN_PATH", "MASTERS_GROUP", "NODES_GROUP", "NODE_PREFIX", "CertificateAuthority", "Credentials", "IssuedCertificate", "KubeconfigError", "build_kubeconfig",
    "ca_pin", "certificate_expiry", "load_credentials", "private_dir", "write_private",
]
