"""What clients send, read safely: JSON and YAML decoded within bounds (:mod:`.decoding`) and
Kubernetes' protobuf request bodies (:mod:`.protobuf`), both into the JSON-shaped dicts the rest
of corral uses."""
