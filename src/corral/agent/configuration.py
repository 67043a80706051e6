"""What a pod takes from the API besides its own spec: ConfigMaps and Secrets, as environment
variables and as files, and the downward API's fields, as kubelet provides them.

Before each container starts, :meth:`PodConfiguration.prepare` reads the ConfigMaps and Secrets the
pod references (the node authoriser lets a node read those and no others), writes the pod's volumes
(:mod:`corral.agent.volumes`) and answers the container with its environment resolved and the
mounts the runtime makes. A missing object or key that is not ``optional`` is Kubernetes'
``CreateContainerConfigError``: the container waits and is retried with the usual back-off.
Every ``sync_seconds`` :meth:`PodConfiguration.refresh` reads them again and rewrites a volume whose
content changed, as kubelet updates ConfigMap and Secret volumes in place (environment variables
are fixed at start, as in Kubernetes).
"""

from __future__ import annotations

import asyncio
import base64
import binascii
import logging
import math
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Awaitable, Callable

from corral.agent import volumes
from corral.agent.runtimes.base import CONFIG_ERROR, Mount, StartError
from corral.api.kinds.config import references
from corral.api.quantity import QuantityError, parse_quantity
from corral.client import ApiError, ConnectionFailed, NotFound

__all__ = ["PodConfiguration"]

log = logging.getLogger(__name__)

_ENV_NAME = re.compile(r"^[-._a-zA-Z][-._a-zA-Z0-9]*$")
_KINDS = {"configmaps": "configmap", "secrets": "secret"}
_LABELED = re.compile(r"^metadata\.(labels|annotations)\['(?P<key>[^']+)'\]$")

Source = dict[str, Any] | None  # a ConfigMap or Secret as read, None when it does not exist


def _values(resource: str, obj: dict[str, Any]) -> dict[str, bytes]:
    """A ConfigMap's or Secret's keys and their bytes."""
    if resource == "secrets":
        out = {}
        for key, value in (obj.get("data") or {}).items():
            try:
                out[key] = base64.b64decode(value)
            except (binascii.Error, ValueError):
                continue
        return out
    out = {k: v.encode() for k, v in (obj.get("data") or {}).items()}
    for key, value in (obj.get("binaryData") or {}).items():
        try:
            out[key] = base64.b64decode(value)
        except (binascii.Error, ValueError):
            continue
    return out


def _text(value: bytes) -> str:
    """Bytes as an environment value: the process receives exactly these bytes."""
    return value.decode("utf-8", "surrogateescape")


@dataclass(frozen=True, slots=True)
class _Volume:
    resource: str  # configmaps | secrets
    name: str
    optional: bool
    items: tuple[tuple[str, str, int | None], ...] | None  # (key, path, mode); None: every key
    default_mode: int


def _projected(spec_volume: dict[str, Any]) -> _Volume | None:
    for field, resource, name_field in (("configMap", "configmaps", "name"), ("secret", "secrets", "secretName")):
        source = spec_volume.get(field)
        if isinstance(source, dict):
            items = source.get("items")
            return _Volume(resource, source.get(name_field, ""), bool(source.get("optional")),
                           tuple((i.get("key", ""), i.get("path", ""), i.get("mode")) for i in items) if items else None,
                           source.get("defaultMode", volumes.DEFAULT_MODE))
    return None


class PodConfiguration:
    """The agent's reader of ConfigMaps and Secrets and writer of pods' volumes."""

    def __init__(self, get: Callable[[str, str, str], Awaitable[dict[str, Any]]],
                 volumes_dir: Callable[[str], Path], *, node_allocatable: Callable[[], dict[str, str]] = dict) -> None:
        self._get = get  # (resource, namespace, name) → the object; raises NotFound
        self._volumes_dir = volumes_dir  # pod uid → where its volumes live (the runtime's choice)
        self._allocatable = node_allocatable

    async def _read(self, resource: str, namespace: str, name: str, cache: dict | None = None) -> Source:
        key = (resource, namespace, name)
        if cache is not None and key in cache:
            return cache[key]
        try:
            obj: Source = await self._get(resource, namespace, name)
        except NotFound:
            obj = None
        except (ApiError, ConnectionFailed, OSError) as exc:
            raise StartError(CONFIG_ERROR, f"cannot read {_KINDS[resource]} {name!r}: {exc}") from None
        if cache is not None:
            cache[key] = obj
        return obj

    # --- before a container starts -------------------------------------------------------------------

    async def prepare(self, pod: dict[str, Any], container: dict[str, Any],
                      host_ip: str = "") -> tuple[dict[str, Any], tuple[Mount, ...]]:
        """``container`` with its environment resolved (every entry a plain value), and its mounts.
        Raises :class:`StartError` (CreateContainerConfigError) for what is missing."""
        if not references(pod) and not container.get("volumeMounts") and not _needs_env(container):
            return container, ()
        meta = pod.get("metadata") or {}
        namespace = meta.get("namespace", "default")
        cache: dict = {}
        env = await self._environment(pod, container, namespace, host_ip, cache)
        mounts = await self._mounts(pod, container, namespace, cache)
        return {**container, "env": env, "envFrom": []}, mounts

    async def _environment(self, pod: dict[str, Any], container: dict[str, Any], namespace: str, host_ip: str,
                           cache: dict) -> list[dict[str, str]]:
        out: dict[str, str] = {}
        for source in container.get("envFrom") or ():
            for field, resource in (("configMapRef", "configmaps"), ("secretRef", "secrets")):
                ref = source.get(field)
                if not isinstance(ref, dict):
                    continue
                obj = await self._read(resource, namespace, ref.get("name", ""), cache)
                if obj is None:
                    if ref.get("optional"):
                        continue
                    raise StartError(CONFIG_ERROR, f'{_KINDS[resource]} "{ref.get("name", "")}" not found')
                prefix = source.get("prefix") or ""
                for key, value in _values(resource, obj).items():
                    if _ENV_NAME.match(prefix + key):  # as kubelet: a key that is no variable name is skipped
                        out[prefix + key] = _text(value)
        for e in container.get("env") or ():
            name = e.get("name")
            if not name:
                continue
            source = e.get("valueFrom")
            if not isinstance(source, dict):
                out[name] = str(e.get("value", ""))
                continue
            value = await self._value_from(pod, container, source, namespace, host_ip, cache)
            if value is not None:
                out[name] = value
        return [{"name": k, "value": v} for k, v in out.items()]

    async def _value_from(self, pod: dict[str, Any], container: dict[str, Any], source: dict[str, Any],
                          namespace: str, host_ip: str, cache: dict) -> str | None:
        for field, resource in (("configMapKeyRef", "configmaps"), ("secretKeyRef", "secrets")):
            ref = source.get(field)
            if not isinstance(ref, dict):
                continue
            name, key = ref.get("name", ""), ref.get("key", "")
            obj = await self._read(resource, namespace, name, cache)
            values = _values(resource, obj) if obj is not None else {}
            if key in values:
                return _text(values[key])
            if ref.get("optional"):
                return None
            if obj is None:
                raise StartError(CONFIG_ERROR, f'{_KINDS[resource]} "{name}" not found')
            kind = "ConfigMap" if resource == "configmaps" else "Secret"
            raise StartError(CONFIG_ERROR, f"couldn't find key {key} in {kind} {namespace}/{name}")
        if isinstance(source.get("fieldRef"), dict):
            return _field(pod, source["fieldRef"].get("fieldPath", ""), host_ip)
        if isinstance(source.get("resourceFieldRef"), dict):
            return self._resource(pod, container, source["resourceFieldRef"])
        return None

    def _resource(self, pod: dict[str, Any], container: dict[str, Any], ref: dict[str, Any]) -> str:
        """``limits.cpu`` and the like, in units of ``divisor``, rounded up as kubelet rounds; a limit
        not set is the node's allocatable, as in Kubernetes."""
        named = ref.get("containerName")
        if named:
            spec = pod.get("spec") or {}
            container = next((c for c in (*(spec.get("containers") or ()), *(spec.get("initContainers") or ()))
                              if c.get("name") == named), container)
        kind, _, resource = (ref.get("resource") or "").partition(".")
        held = ((container.get("resources") or {}).get(kind) or {}).get(resource)
        if held is None and kind == "limits":
            held = self._allocatable().get(resource)
        try:
            value = parse_quantity(held if held is not None else 0)
            divisor = parse_quantity(ref.get("divisor") or 1)
        except QuantityError:
            return "0"
        return str(math.ceil(value / divisor)) if divisor else "0"

    async def _mounts(self, pod: dict[str, Any], container: dict[str, Any], namespace: str,
                      cache: dict) -> tuple[Mount, ...]:
        spec_volumes = {v.get("name"): v for v in (pod.get("spec") or {}).get("volumes") or ()}
        root = self._volumes_dir((pod.get("metadata") or {}).get("uid", ""))
        mounts = []
        for mount in container.get("volumeMounts") or ():
            spec_volume = spec_volumes.get(mount.get("name"))
            if spec_volume is None:
                raise StartError(CONFIG_ERROR, f'volume "{mount.get("name")}" not found in the pod\'s volumes')
            directory = root / spec_volume["name"]
            projected = _projected(spec_volume)
            if projected is not None:
                await self._write(directory, projected, namespace, cache, required=True)
            elif isinstance(spec_volume.get("emptyDir"), dict):
                volumes.empty_dir(directory)
            else:
                raise StartError(CONFIG_ERROR, f'volume "{spec_volume["name"]}": corral provides configMap, secret '
                                               "and emptyDir volumes, not this kind")
            host = directory
            if mount.get("subPath"):
                host = volumes.inside(directory, mount["subPath"])  # type: ignore[assignment]
                if host is None:
                    raise StartError(CONFIG_ERROR, f'subPath "{mount["subPath"]}" leads out of its volume')
            read_only = bool(mount.get("readOnly")) or projected is not None  # as Kubernetes mounts them
            mounts.append(Mount(str(host), mount.get("mountPath", ""), read_only))
        return tuple(mounts)

    async def _write(self, directory: Path, volume: _Volume, namespace: str, cache: dict, *, required: bool) -> bool:
        obj = await self._read(volume.resource, namespace, volume.name, cache)
        if obj is None and not volume.optional:
            if required:
                raise StartError(CONFIG_ERROR, f'{_KINDS[volume.resource]} "{volume.name}" not found')
            return False  # deleted while the pod runs: kubelet keeps the files it wrote
        values = _values(volume.resource, obj) if obj is not None else {}
        if volume.items is None:
            files = {key: (value, volume.default_mode) for key, value in values.items()}
        else:
            files = {}
            for key, path, mode in volume.items:
                if key not in values:
                    if volume.optional:
                        continue
                    if required:
                        raise StartError(CONFIG_ERROR, f"configmap references non-existent config key: {key}"
                                         if volume.resource == "configmaps" else
                                         f"references non-existent secret key: {key}")
                    return False
                files[path] = (values[key], mode if mode is not None else volume.default_mode)
        return await asyncio.to_thread(volumes.project, directory, files)

    # --- while it runs -------------------------------------------------------------------------------

    async def refresh(self, pods: list[dict[str, Any]]) -> int:
        """Rewrite the ConfigMap and Secret volumes of ``pods`` whose source changed; how many were.
        Each object is read once per call, however many pods use it."""
        cache: dict = {}
        changed = 0
        for pod in pods:
            meta = pod.get("metadata") or {}
            root = self._volumes_dir(meta.get("uid", ""))
            for spec_volume in (pod.get("spec") or {}).get("volumes") or ():
                projected = _projected(spec_volume)
                directory = root / spec_volume.get("name", "")
                if projected is None or not directory.exists():
                    continue  # not projected, or not mounted by a container that started
                try:
                    changed += await self._write(directory, projected, meta.get("namespace", "default"), cache,
                                                 required=False)
                except (StartError, OSError) as exc:
                    log.warning("volume %s of %s/%s not refreshed: %s", spec_volume.get("name"),
                                meta.get("namespace"), meta.get("name"), getattr(exc, "message", exc))
        return changed


def _needs_env(container: dict[str, Any]) -> bool:
    return bool(container.get("envFrom")) or any(isinstance(e.get("valueFrom"), dict) for e in container.get("env") or ())


def _field(pod: dict[str, Any], path: str, host_ip: str) -> str:
    """The downward API's ``fieldRef``: the pod's own fields (IPs: the node's, pods share its network)."""
    meta, spec, status = pod.get("metadata") or {}, pod.get("spec") or {}, pod.get("status") or {}
    labeled = _LABELED.match(path)
    if labeled:
        return str((meta.get(labeled[1]) or {}).get(labeled["key"], ""))
    simple = {"metadata.name": meta.get("name"), "metadata.namespace": meta.get("namespace"),
              "metadata.uid": meta.get("uid"), "spec.nodeName": spec.get("nodeName"),
              "spec.serviceAccountName": spec.get("serviceAccountName") or "default",
              "status.hostIP": status.get("hostIP") or host_ip, "status.hostIPs": status.get("hostIP") or host_ip,
              "status.podIP": status.get("podIP") or host_ip, "status.podIPs": status.get("podIP") or host_ip}
    return str(simple.get(path) or "")
