"""Topology domains over columns, shared by InterPodAffinity and PodTopologySpread.

A domain is a value of the topology label (a zone, a hostname); a row's domain is its code in that
label's column, and code 0 means the node has no such label and so belongs to no domain.
"""

from __future__ import annotations

import numpy as np

__all__ = ["domain_totals", "count_in_domain"]


def domain_totals(table, key: str, per_node: np.ndarray, eligible: np.ndarray | None = None
                  ) -> tuple[np.ndarray, np.ndarray]:
    """(the key's code column, total of ``per_node`` per domain code) over ``eligible`` rows."""
    n = table.size
    col = table.labels.column(key)[:n]
    weights = per_node[:n] if eligible is None else np.where(eligible, per_node[:n], 0)
    totals = np.bincount(col, weights=weights, minlength=table.labels.domain_count(key))
    totals[0] = 0  # rows without the label are in no domain
    return col, totals


def count_in_domain(table, key: str, per_node: np.ndarray) -> np.ndarray:
    """Per row: the total of ``per_node`` over the row's whole domain (0 for rows without the key)."""
    col, totals = domain_totals(table, key, per_node)
    return totals[col]
