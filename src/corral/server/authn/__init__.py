"""Who is asking: bearer tokens and client certificates (:mod:`.authenticator`), the cluster's
certificates and first credentials on the server's side (:mod:`.certificates`), and nodes joining
with a join token (:mod:`.join`)."""

from corral.server.authn.authenticator import ANONYMOUS_PATHS, AUTHENTICATED, BOOTSTRAPPERS, Authenticator, UserInfo

__all__ = ["ANONYMOUS_PATHS", "AUTHENTICATED", "BOOTSTRAPPERS", "Authenticator", "UserInfo"]
