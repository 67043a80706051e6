"""The controllers that follow nodes: lost nodes and their pods placed again (node lifecycle), and the
pods whose node is gone or whose run is over removed (pod garbage collection)."""
