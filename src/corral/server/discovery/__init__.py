"""How the API describes itself: discovery (:mod:`.apis`) and the OpenAPI documents (:mod:`.openapi`)."""

from corral.server.discovery.apis import KUBERNETES_VERSION, discovery_documents
from corral.server.discovery.openapi import openapi_documents

__all__ = ["discovery_documents", "openapi_documents", "KUBERNETES_VERSION"]
