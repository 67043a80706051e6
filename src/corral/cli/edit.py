"""``corral label``, ``corral annotate`` and ``corral edit``: change one object in place, as kubectl does."""

from __future__ import annotations

import os
import shlex
import subprocess
import tempfile
from typing import Any

import click

from corral.cli.common import CliError, make_client, namespace_option, resolve_kind, run, server_option

__all__ = ["label", "annotate", "edit"]


def _changes(items: tuple[str, ...], what: str) -> dict[str, str | None]:
    """``k=v`` sets, ``k-`` removes; anything else is a one-line error naming it."""
    out: dict[str, str | None] = {}
    for item in items:
        if item.endswith("-") and "=" not in item:
            out[item[:-1]] = None
        elif "=" in item:
            key, _, value = item.partition("=")
            out[key] = value
        else:
            raise CliError(f"{item!r} is neither KEY=VALUE (set the {what[:-1]}) nor KEY- (remove it)")
        if not (item.partition("=")[0].rstrip("-")):
            raise CliError(f"{item!r}: the {what[:-1]} key is empty")
    return out


async def _set_metadata(field: str, done: str, kind: str, name: str, items: tuple[str, ...], namespace: str | None,
                        server: str | None, overwrite: bool) -> None:
    resource = resolve_kind(kind)
    ns = (namespace or "default") if resource.namespaced else None
    changes = _changes(items, field)
    async with make_client(server) as client:
        current = await client.get(resource, name, ns, raw=True)
        meta = current.get("metadata") or {}
        existing = meta.get(field) or {}
        for key, value in changes.items():
            if value is not None and key in existing and existing[key] != value and not overwrite:
                raise CliError(f"'{key}' already has a value ({existing[key]}), and --overwrite is false")
        # Pinned to the version read: a change made meanwhile is a conflict, never silently undone.
        patch = {"metadata": {field: changes, "resourceVersion": meta.get("resourceVersion")}}
        await client.patch(resource, name, patch, ns, raw=True)
    click.echo(f"{resource.singular}/{name} {done}")


def _metadata_command(field: str, done: str, doc: str) -> click.Command:
    """``corral label`` and ``corral annotate``: the same command over metadata.labels or .annotations."""

    @click.command(name={"labels": "label", "annotations": "annotate"}[field], help=doc)
    @click.argument("kind")
    @click.argument("name")
    @click.argument(field, nargs=-1, required=True)
    @namespace_option
    @server_option
    @click.option("--overwrite", is_flag=True, help=f"Replace {'a label' if field == 'labels' else 'an annotation'} "
                                                    "that already has another value.")
    @run
    async def command(kind: str, name: str, namespace: str | None, server: str | None, overwrite: bool,
                      **items: tuple[str, ...]) -> None:
        await _set_metadata(field, done, kind, name, items[field], namespace, server, overwrite)

    return command


label = _metadata_command("labels", "labeled",
                          "Set or remove labels: `corral label pod web tier=front`, `corral label node n1 gpu-`.")
annotate = _metadata_command("annotations", "annotated", "Set or remove annotations: `corral annotate pod web "
                             "owner=ops`, `corral annotate pod web owner-`.")


def _run_editor(path: str) -> None:
    editor = os.environ.get("KUBE_EDITOR") or os.environ.get("EDITOR") or "vi"
    try:
        code = subprocess.call([*shlex.split(editor), path])
    except OSError as exc:
        raise CliError(f"cannot start the editor {editor!r}: {exc.strerror or exc}; set $EDITOR") from None
    if code != 0:
        raise CliError(f"the editor {editor!r} exited with {code}; nothing was changed")


@click.command()
@click.argument("kind")
@click.argument("name")
@namespace_option
@server_option
@run
async def edit(kind: str, name: str, namespace: str | None, server: str | None) -> None:
    """Edit an object in $KUBE_EDITOR or $EDITOR (as YAML), then replace it with what was saved.

    The replacement names the version that was read: if the object changed meanwhile, nothing is
    written and the edited copy is kept for you to apply again."""
    import yaml

    from corral.client.rest import ApiError

    resource = resolve_kind(kind)
    ns = (namespace or "default") if resource.namespaced else None
    async with make_client(server) as client:
        current = await client.get(resource, name, ns, raw=True)
        original = yaml.safe_dump(current, sort_keys=False, default_flow_style=False)
        fd, path = tempfile.mkstemp(prefix=f"corral-edit-{resource.singular}-{name}-", suffix=".yaml")
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write(original)
        _run_editor(path)
        with open(path, encoding="utf-8") as f:
            text = f.read()
        if text == original:
            os.unlink(path)
            click.echo("Edit cancelled, no changes made.")
            return
        try:
            edited: Any = yaml.safe_load(text)
        except yaml.YAMLError as exc:
            raise CliError(f"{path}: not valid YAML ({exc}); your edit is kept there") from None
        if not isinstance(edited, dict):
            raise CliError(f"{path}: the document must be one object; your edit is kept there")
        try:
            await client.update(edited, ns, raw=True)
        except ApiError as exc:
            raise CliError(f"{resource.plural} \"{name}\" was not changed: {exc.message}; your edit is kept in "
                           f"{path}") from None
        os.unlink(path)
    click.echo(f"{resource.singular}/{name} edited")
