"""The HTTP face of the API: Kubernetes paths and query parameters onto :mod:`corral.server.rest`
(:mod:`.routes`), how query parameters are read (:mod:`.params`), the renderings an ``Accept`` header
may ask for (:mod:`.tables`), the audit log of the requests (:mod:`.audit`), and how requests the
HTTP parser refuses are logged (:mod:`.refused`).

Nothing is imported here: the authorisers and flow control read :mod:`.params`, and the routes
import them, so a package that imported its routes would import itself in a circle.
"""
