"""Every node as one row of numpy columns: what Filter and Score plugins compute over.

A row holds a node's allocatable and requested resources, readiness and heartbeat, the
unschedulable flag, its labels and taints as integer codes, the host ports in use, the images it
holds and its measured download throughput. Rows are reused when nodes go away (once no pod is
accounted on them). All columns have the same length, ``capacity``; rows ``>= size`` and rows with
``valid == False`` are not nodes and every plugin answers False / 0 for them.

The scheduling cycle and the informer handlers that update the table run on the same event loop
thread, one after the other, so the table needs no lock and no copy: a cycle sees a consistent
table because nothing changes it while the cycle runs.
"""

from __future__ import annotations

import re
from datetime import datetime
from typing import Any, Iterable

import numpy as np

from corral.api.quantity import QuantityError, to_milli, to_units

__all__ = ["NodeTable", "LabelColumns", "parse_timestamp", "parse_bandwidth"]

_INITIAL_CAPACITY = 64
STANDARD_RESOURCES = ("cpu", "memory", "pods", "ephemeral-storage")
NO_VALUE = -1  # the code of a label value no node has: matches nothing


def parse_timestamp(value: str | None) -> float:
    """RFC 3339 → seconds since the epoch; 0.0 when missing or malformed."""
    if not value:
        return 0.0
    try:
        return datetime.fromisoformat(value).timestamp()  # Python 3.11 reads the "Z" suffix
    except ValueError:
        return 0.0


_BANDWIDTH = re.compile(r"^\s*([0-9.]+)\s*([kKMGT]?)(bps|bit/s|b/s)?\s*$")
_BANDWIDTH_UNITS = {"": 1, "k": 1e3, "K": 1e3, "M": 1e6, "G": 1e9, "T": 1e12}


def parse_bandwidth(value: str | None) -> float:
    """``"940Mbps"`` → 9.4e8 bits per second; NaN when missing or malformed."""
    if not value:
        return float("nan")
    m = _BANDWIDTH.match(value)
    if not m:
        return float("nan")
    return float(m.group(1)) * _BANDWIDTH_UNITS[m.group(2)]


def _grow(array: np.ndarray, capacity: int, fill: Any = 0) -> np.ndarray:
    grown = np.full((capacity, *array.shape[1:]), fill, dtype=array.dtype)
    grown[: len(array)] = array
    return grown


class LabelColumns:
    """Node labels: per label key an int32 column of value codes; 0 means the node lacks the key."""

    def __init__(self, capacity: int) -> None:
        self._capacity = capacity
        self._columns: dict[str, np.ndarray] = {}
        self._codes: dict[str, dict[str, int]] = {}
        self._values: dict[str, list[str | None]] = {}
        self._numeric: dict[str, np.ndarray] = {}
        self._rows: dict[str, list[int]] = {}  # per key and code: how many rows hold it
        self._shared: dict[str, int] = {}  # per key: codes two or more rows hold
        self._empty = np.zeros(capacity, dtype=np.int32)

    def grow(self, capacity: int) -> None:
        self._capacity = capacity
        self._columns = {k: _grow(c, capacity) for k, c in self._columns.items()}
        self._empty = np.zeros(capacity, dtype=np.int32)

    def keys(self) -> Iterable[str]:
        return self._columns.keys()

    def column(self, key: str) -> np.ndarray:
        """Value codes of ``key`` for every row (read-only; a zero column when no node has the key)."""
        return self._columns.get(key, self._empty)

    def code(self, key: str, value: str) -> int:
        """The code of ``key=value``; :data:`NO_VALUE` when no node has that value."""
        return self._codes.get(key, {}).get(value, NO_VALUE)

    def codes(self, key: str, values: Iterable[str]) -> np.ndarray:
        vocab = self._codes.get(key, {})
        return np.array([vocab[v] for v in values if v in vocab], dtype=np.int32)

    def value(self, key: str, code: int) -> str | None:
        values = self._values.get(key)
        return values[code] if values and 0 < code < len(values) else None

    def domain_count(self, key: str) -> int:
        """How many codes (distinct values, plus 1 for 'absent') ``key`` has."""
        return len(self._values.get(key, [None]))

    def numeric(self, key: str) -> np.ndarray:
        """Values of ``key`` as numbers (for Gt / Lt); NaN when absent or not an integer."""
        values = self._values.get(key, [None])
        cached = self._numeric.get(key)
        if cached is None or len(cached) != len(values):
            table = np.full(len(values), np.nan)
            for code, v in enumerate(values):
                if v is not None and re.fullmatch(r"-?[0-9]+", v):
                    table[code] = float(v)
            self._numeric[key] = cached = table
        return cached[self.column(key)]

    def one_per_node(self, key: str) -> bool:
        """Whether no two rows share a value of ``key`` (each node its own domain, as hostnames are)."""
        return self._shared.get(key, 0) == 0

    def _count(self, key: str, code: int, delta: int) -> bool:
        """Count a row holding ``code`` of ``key``; True when one_per_node(key) changed."""
        if code == 0:
            return False
        rows = self._rows[key]
        before = rows[code]
        rows[code] = after = before + delta
        if before < 2 <= after:
            self._shared[key] += 1
            return self._shared[key] == 1
        if after < 2 <= before:
            self._shared[key] -= 1
            return self._shared[key] == 0
        return False

    def set_row(self, row: int, old: dict[str, str], new: dict[str, str]) -> bool:
        """Set ``row``'s labels from ``old`` to ``new``; True when some key's values became shared
        by two nodes or stopped being (a change to other rows' domains, not to this row's alone)."""
        flipped = False
        for key in old:
            if key not in new:
                col = self._columns[key]
                flipped |= self._count(key, int(col[row]), -1)
                col[row] = 0
        for key, value in new.items():
            col = self._columns.get(key)
            if col is None:
                col = self._columns[key] = np.zeros(self._capacity, dtype=np.int32)
                self._codes[key] = {}
                self._values[key] = [None]
                self._rows[key] = [0]
                self._shared[key] = 0
            vocab = self._codes[key]
            code = vocab.get(value)
            if code is None:
                code = vocab[value] = len(self._values[key])
                self._values[key].append(value)
                self._rows[key].append(0)
            before = int(col[row])
            if before != code:
                flipped |= self._count(key, before, -1)
                flipped |= self._count(key, code, +1)
                col[row] = code
        return flipped


class NodeTable:
    def __init__(self, capacity: int = _INITIAL_CAPACITY) -> None:
        self.capacity = capacity
        self.size = 0  # rows in use are < size
        self.names: list[str | None] = [None] * capacity
        self.objects: list[dict[str, Any] | None] = [None] * capacity
        self.row_of: dict[str, int] = {}
        self._free: list[int] = []
        self._labels_of: list[dict[str, str]] = [{} for _ in range(capacity)]
        self.valid = np.zeros(capacity, dtype=bool)
        self.ready = np.zeros(capacity, dtype=bool)
        self.heartbeat = np.zeros(capacity, dtype=np.float64)
        self.unschedulable = np.zeros(capacity, dtype=bool)
        self.allocatable: dict[str, np.ndarray] = {r: np.zeros(capacity, dtype=np.int64) for r in STANDARD_RESOURCES}
        self.requested: dict[str, np.ndarray] = {r: np.zeros(capacity, dtype=np.int64) for r in STANDARD_RESOURCES}
        self.free: dict[str, np.ndarray] = {r: np.zeros(capacity, dtype=np.int64) for r in STANDARD_RESOURCES}
        self.nonzero_cpu = np.zeros(capacity, dtype=np.int64)
        self.nonzero_memory = np.zeros(capacity, dtype=np.int64)
        # Float views the scores compute with, kept current row by row (no conversion per cycle):
        # allocatable, allocatable but at least 1 (a safe divisor), non-zero requested (what
        # NodeResourcesFit scores with) and requested as written (what BalancedAllocation uses).
        self.alloc_f = {r: np.zeros(capacity) for r in ("cpu", "memory")}
        self.alloc_safe_f = {r: np.ones(capacity) for r in ("cpu", "memory")}
        self.nonzero_f = {r: np.zeros(capacity) for r in ("cpu", "memory")}
        self.requested_f = {r: np.zeros(capacity) for r in ("cpu", "memory")}
        self._node_count: tuple[int, int] = (-1, 0)
        self.labels = LabelColumns(capacity)
        self.taints = np.zeros((capacity, 1), dtype=np.int32)  # taint codes, 0 = none
        self.taint_vocab: dict[tuple[str, str, str], int] = {}
        self.taint_list: list[tuple[str, str, str]] = [("", "", "")]  # code → (key, value, effect)
        self.ports: dict[tuple[str, int], np.ndarray] = {}
        self.images: dict[str, np.ndarray] = {}
        self.image_sizes: dict[str, int] = {}
        self.download_bps = np.full(capacity, np.nan)
        self.grow_listeners: list = []  # called with the new capacity when columns grow
        # Results derived from node state alone, kept by plugins as key → (version, size, value).
        self.memo: dict = {}
        self._offered: dict[str, tuple[int, int, bool]] = {}  # offered_everywhere's answers
        self.version = 0  # bumped on every node change (for caches keyed on node state)
        # For answers remembered row by row (a pod signature's feasible rows and scores): the rows
        # changed since a tick, in order, and an epoch bumped by what no row's change describes (rows
        # added, freed or re-purposed, columns added, a node's allocatable or its removal, which move
        # table-wide facts such as offered_everywhere). A new epoch starts an empty log.
        self.epoch = 0
        self._changes: list[int] = []
        self._changes_base = 0  # the tick of _changes[0]

    # --- what changed ----------------------------------------------------------------------------------

    @property
    def tick(self) -> int:
        """A position in the log of changed rows (see :meth:`changed_since`)."""
        return self._changes_base + len(self._changes)

    def changed_since(self, tick: int) -> list[int]:
        """Rows changed since ``tick`` of this epoch, in order, repeats included."""
        return self._changes[tick - self._changes_base:]

    def _touch(self, row: int) -> None:
        self._changes.append(row)
        if len(self._changes) > 4096 + 4 * self.size:  # bounded: a new epoch is cheaper than a long log
            self.new_epoch()

    def new_epoch(self) -> None:
        """Something no row's change describes happened (answers remembered row by row start over)."""
        self.epoch += 1
        self._changes_base += len(self._changes)
        self._changes = []

    # --- rows ----------------------------------------------------------------------------------------

    def _grow_to(self, capacity: int) -> None:
        self.names += [None] * (capacity - self.capacity)
        self.objects += [None] * (capacity - self.capacity)
        self._labels_of += [{} for _ in range(capacity - self.capacity)]
        for name in ("valid", "ready", "unschedulable", "heartbeat", "nonzero_cpu", "nonzero_memory"):
            setattr(self, name, _grow(getattr(self, name), capacity))
        self.download_bps = _grow(self.download_bps, capacity, np.nan)
        self.alloc_f = {k: _grow(v, capacity) for k, v in self.alloc_f.items()}
        self.alloc_safe_f = {k: _grow(v, capacity, 1.0) for k, v in self.alloc_safe_f.items()}
        self.nonzero_f = {k: _grow(v, capacity) for k, v in self.nonzero_f.items()}
        self.requested_f = {k: _grow(v, capacity) for k, v in self.requested_f.items()}
        self.allocatable = {k: _grow(v, capacity) for k, v in self.allocatable.items()}
        self.requested = {k: _grow(v, capacity) for k, v in self.requested.items()}
        self.free = {k: _grow(v, capacity) for k, v in self.free.items()}
        self.taints = _grow(self.taints, capacity)
        self.ports = {k: _grow(v, capacity) for k, v in self.ports.items()}
        self.images = {k: _grow(v, capacity) for k, v in self.images.items()}
        self.labels.grow(capacity)
        self.capacity = capacity
        self.new_epoch()
        for listener in self.grow_listeners:
            listener(capacity)

    def _new_row(self, name: str) -> int:
        if self._free:
            row = self._free.pop()
        else:
            if self.size == self.capacity:
                self._grow_to(self.capacity * 2)
            row = self.size
            self.size += 1
        self.names[row] = name
        self.row_of[name] = row
        self.new_epoch()
        return row

    def row_for_pods(self, name: str) -> int:
        """The row pods on node ``name`` are accounted on, creating a placeholder if the node is unknown."""
        row = self.row_of.get(name)
        return row if row is not None else self._new_row(name)

    # --- nodes ---------------------------------------------------------------------------------------

    def _resource_column(self, columns: dict[str, np.ndarray], name: str) -> np.ndarray:
        col = columns.get(name)
        if col is None:
            col = columns[name] = np.zeros(self.capacity, dtype=np.int64)
            self.new_epoch()
        return col

    def set_node(self, node: dict[str, Any]) -> int:
        """Add or update a node from its API object; returns its row."""
        meta, spec, status = node.get("metadata") or {}, node.get("spec") or {}, node.get("status") or {}
        name = meta.get("name", "")
        row = self.row_of.get(name)
        if row is None:
            row = self._new_row(name)
        self.objects[row] = node
        was_valid = bool(self.valid[row])
        self.valid[row] = True
        alloc = status.get("allocatable") or status.get("capacity") or {}
        seen = set()
        # A change that reaches beyond this row's answers: its allocatable (table-wide facts such as
        # offered_everywhere) or a label value becoming shared or unshared (other nodes' domains).
        beyond_row = False
        for res, q in alloc.items():
            try:
                value = to_milli(q) if res == "cpu" else to_units(q)
            except QuantityError:
                continue
            col = self._resource_column(self.allocatable, res)
            beyond_row |= bool(col[row] != value)
            col[row] = value
            self._resource_column(self.requested, res)
            seen.add(res)
        for res, col in self.allocatable.items():
            if res not in seen:
                beyond_row |= bool(col[row] != 0)
                col[row] = 0
            self._resource_column(self.free, res)[row] = col[row] - self.requested[res][row]
        for res in ("cpu", "memory"):
            self.alloc_f[res][row] = float(self.allocatable[res][row])
            self.alloc_safe_f[res][row] = max(float(self.allocatable[res][row]), 1.0)
        ready, heartbeat = False, 0.0
        for cond in status.get("conditions") or ():
            if cond.get("type") == "Ready":
                ready = cond.get("status") == "True"
                heartbeat = parse_timestamp(cond.get("lastHeartbeatTime"))
        self.ready[row], self.heartbeat[row] = ready, heartbeat
        self.unschedulable[row] = bool(spec.get("unschedulable"))
        new_labels = dict(meta.get("labels") or {})
        new_labels.setdefault("kubernetes.io/hostname", name)
        beyond_row |= self.labels.set_row(row, self._labels_of[row], new_labels)
        self._labels_of[row] = new_labels
        self._set_taints(row, spec.get("taints") or ())
        self._set_images(row, status.get("images") or ())
        throughput = ((status.get("network") or {}).get("throughput")) or {}
        self.download_bps[row] = parse_bandwidth(throughput.get("download"))
        self.version += 1
        if beyond_row or not was_valid:
            self.new_epoch()
        else:
            self._touch(row)
        return row

    def _set_taints(self, row: int, taints: Iterable[dict[str, Any]]) -> None:
        codes = []
        for t in taints:
            triple = (t.get("key", ""), t.get("value", "") or "", t.get("effect", ""))
            code = self.taint_vocab.get(triple)
            if code is None:
                code = self.taint_vocab[triple] = len(self.taint_list)
                self.taint_list.append(triple)
            codes.append(code)
        if len(codes) > self.taints.shape[1]:
            wider = np.zeros((self.capacity, len(codes)), dtype=np.int32)
            wider[:, : self.taints.shape[1]] = self.taints
            self.taints = wider
        self.taints[row] = 0
        self.taints[row, : len(codes)] = codes

    def _set_images(self, row: int, images: Iterable[dict[str, Any]]) -> None:
        for col in self.images.values():
            col[row] = False
        for image in images:
            size = int(image.get("sizeBytes") or 0)
            for name in image.get("names") or ():
                col = self.images.get(name)
                if col is None:
                    col = self.images[name] = np.zeros(self.capacity, dtype=bool)
                col[row] = True
                if size:
                    self.image_sizes[name] = max(size, self.image_sizes.get(name, 0))

    def remove_node(self, name: str) -> None:
        row = self.row_of.get(name)
        if row is None:
            return
        self.valid[row] = False
        self.objects[row] = None
        self.labels.set_row(row, self._labels_of[row], {})
        self._labels_of[row] = {}
        self.taints[row] = 0
        self.version += 1
        self.new_epoch()
        self.release_if_empty(row)

    def release_if_empty(self, row: int) -> None:
        """Free a row whose node is gone once no pod is accounted on it."""
        if self.valid[row] or self.requested["pods"][row] > 0:
            return
        name = self.names[row]
        if name is not None:
            self.row_of.pop(name, None)
        self.names[row] = None
        for col in (*self.allocatable.values(), *self.requested.values(), *self.free.values()):
            col[row] = 0
        self.nonzero_cpu[row] = self.nonzero_memory[row] = 0
        for res in ("cpu", "memory"):
            self.alloc_f[res][row] = self.nonzero_f[res][row] = self.requested_f[res][row] = 0.0
            self.alloc_safe_f[res][row] = 1.0
        for col in self.ports.values():
            col[row] = 0
        for col in self.images.values():
            col[row] = False
        self.ready[row] = self.unschedulable[row] = False
        self.heartbeat[row] = 0.0
        self.download_bps[row] = np.nan
        self._free.append(row)
        self.new_epoch()

    # --- pods' requests --------------------------------------------------------------------------------

    def add_requests(self, row: int, requests: Any, ports: Iterable[Any], sign: int) -> None:
        """Count (sign=+1) or uncount (-1) one pod's requests and host ports on ``row``."""
        req, free = self.requested, self.free
        cpu, memory, ephemeral = requests.cpu, requests.memory, requests.ephemeral
        # Scalar reads with item(), arithmetic on Python ints, one write per column: a numpy scalar's
        # read-modify-write costs several times more (this runs for every pod assumed or bound).
        if cpu:
            col = req["cpu"]
            col[row] = used = col.item(row) + sign * cpu
            self.requested_f["cpu"][row] = used
            col = free["cpu"]
            col[row] = col.item(row) - sign * cpu
        if memory:
            col = req["memory"]
            col[row] = used = col.item(row) + sign * memory
            self.requested_f["memory"][row] = used
            col = free["memory"]
            col[row] = col.item(row) - sign * memory
        if ephemeral:
            col = req["ephemeral-storage"]
            col[row] = col.item(row) + sign * ephemeral
            col = free["ephemeral-storage"]
            col[row] = col.item(row) - sign * ephemeral
        col = req["pods"]
        col[row] = col.item(row) + sign
        col = free["pods"]
        col[row] = col.item(row) - sign
        # The float views follow the integer columns (exact below 2**53, as float() would give).
        self.nonzero_f["cpu"][row] = self.nonzero_cpu[row] = self.nonzero_cpu.item(row) + sign * requests.nonzero_cpu
        self.nonzero_f["memory"][row] = self.nonzero_memory[row] = (
            self.nonzero_memory.item(row) + sign * requests.nonzero_memory)
        for name, amount in requests.extended:  # a resource no node offers yet gets its columns here
            self._resource_column(self.allocatable, name)
            self._resource_column(self.requested, name)[row] += sign * amount
            self._resource_column(self.free, name)[row] -= sign * amount
        for port in ports:
            key = (port.protocol, port.port)
            col = self.ports.get(key)
            if col is None:
                col = self.ports[key] = np.zeros(self.capacity, dtype=np.int32)
                self.new_epoch()
            col[row] += sign
        self._touch(row)

    # --- reads -----------------------------------------------------------------------------------------

    def node_labels(self, row: int) -> dict[str, str]:
        return self._labels_of[row]

    def valid_rows(self) -> np.ndarray:
        return np.flatnonzero(self.valid[: self.size])

    def offered_everywhere(self, resource: str) -> bool:
        """Whether every node has some allocatable ``resource`` (remembered per table version).

        Kubernetes leaves a resource a node does not offer out of that node's resource scores; when
        every node offers it, the scores can skip that per-row bookkeeping."""
        hit = self._offered.get(resource)  # asked several times per decision: kept by the resource alone
        if hit is not None and hit[0] == self.version and hit[1] == self.size:
            return hit[2]
        col = self.allocatable.get(resource)
        n = self.size
        answer = col is not None and bool((col[:n][self.valid[:n]] > 0).all())
        self._offered[resource] = (self.version, self.size, answer)
        return answer

    @property
    def node_count(self) -> int:
        """Valid rows (remembered per table version: it is asked for on every cycle)."""
        if self._node_count[0] != self.version:
            self._node_count = (self.version, int(self.valid[: self.size].sum()))
        return self._node_count[1]
