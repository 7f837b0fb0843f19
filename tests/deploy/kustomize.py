"""An offline subset of kustomize, enough to build deploy/ and check what it would produce.

Supported (anything else in a kustomization is an error, so the manifests cannot silently use
a feature this check does not understand): ``resources`` (files inside the kustomization root,
or directories holding a kustomization — kustomize's default load restrictions), ``namespace``,
``labels`` (pairs), ``images`` (newTag/newName), ``configMapGenerator`` (files, literals) with
``generatorOptions.labels``, and ``patches`` with a ``target`` and an inline JSON6902 list. Name
suffix hashes of generated ConfigMaps are not modelled. Namespaced vs cluster-scoped comes from
the kubernetes client: a kind is namespaced if its API class has ``create_namespaced_<kind>``.
"""

from __future__ import annotations

import copy
import re
from pathlib import Path
from typing import Any

import yaml
from kubernetes import client

KUSTOMIZATION_FIELDS = {
    "apiVersion", "kind", "namespace", "resources", "labels", "images", "configMapGenerator",
    "generatorOptions", "patches",
}

# API group -> the kubernetes client API class prefix
GROUP_API = {
    "": "Core",
    "apps": "Apps",
    "batch": "Batch",
    "policy": "Policy",
    "rbac.authorization.k8s.io": "RbacAuthorization",
    "resource.k8s.io": "Resource",
    "coordination.k8s.io": "Coordination",
}

# Custom resources the install relies on (their operators bring the CRDs); all are namespaced.
LISTED_CRDS = {
    ("clickhouse.altinity.com/v1", "ClickHouseInstallation"),
    ("clickhouse-keeper.altinity.com/v1", "ClickHouseKeeperInstallation"),
}


class BuildError(Exception):
    pass


def snake(kind: str) -> str:
    return re.sub(r"(?<!^)(?=[A-Z])", "_", kind).lower()


def api_class(api_version: str, kind: str) -> type | None:
    group, _, version = api_version.rpartition("/")
    prefix = GROUP_API.get(group)
    if prefix is None:
        return None
    return getattr(client, f"{prefix}{version.capitalize()}Api", None)


def is_known(api_version: str, kind: str) -> bool:
    if (api_version, kind) in LISTED_CRDS:
        return True
    api = api_class(api_version, kind)
    return api is not None and (
        hasattr(api, f"create_namespaced_{snake(kind)}") or hasattr(api, f"create_{snake(kind)}")
    )


def is_namespaced(api_version: str, kind: str) -> bool:
    if (api_version, kind) in LISTED_CRDS:
        return True
    api = api_class(api_version, kind)
    return api is not None and hasattr(api, f"create_namespaced_{snake(kind)}")


def model_name(api_version: str, kind: str) -> str:
    """The client's model class for a built-in kind (e.g. apps/v1 Deployment -> V1Deployment)."""
    version = api_version.rpartition("/")[2]
    return f"{version.capitalize()}{kind}"


def _load_yaml_docs(path: Path) -> list[dict[str, Any]]:
    with open(path) as fh:
        return [d for d in yaml.safe_load_all(fh) if d is not None]


def _inside(root: Path, path: Path) -> bool:
    try:
        path.resolve().relative_to(root.resolve())
        return True
    except ValueError:
        return False


def build(directory: Path) -> list[dict[str, Any]]:
    kfile = next((directory / n for n in ("kustomization.yaml", "kustomization.yml", "Kustomization") if (directory / n).exists()), None)
    if kfile is None:
        raise BuildError(f"{directory}: no kustomization file")
    (spec,) = _load_yaml_docs(kfile)
    unknown = sorted(set(spec) - KUSTOMIZATION_FIELDS)
    if unknown:
        raise BuildError(f"{kfile}: unsupported field(s) {unknown}")
    objects: list[dict[str, Any]] = []
    for entry in spec.get("resources") or []:
        target = directory / entry
        if target.is_dir():
            objects += build(target)
        elif target.is_file():
            if not _inside(directory, target):
                raise BuildError(f"{kfile}: resource {entry} is outside the kustomization root")
            objects += [copy.deepcopy(d) for d in _load_yaml_docs(target)]
        else:
            raise BuildError(f"{kfile}: resource {entry} does not exist")
    options = spec.get("generatorOptions") or {}
    for gen in spec.get("configMapGenerator") or []:
        data: dict[str, str] = {}
        for item in gen.get("files") or []:
            key, _, rel = item.rpartition("=") if "=" in item else ("", "", item)
            path = directory / rel
            if not path.is_file():
                raise BuildError(f"{kfile}: configMapGenerator {gen['name']}: file {rel} does not exist")
            if not _inside(directory, path):
                raise BuildError(f"{kfile}: configMapGenerator {gen['name']}: {rel} is outside the root")
            data[key or path.name] = path.read_text()
        for lit in gen.get("literals") or []:
            k, _, v = lit.partition("=")
            data[k] = v
        objects.append({
            "apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": gen["name"], "labels": dict(options.get("labels") or {})}, "data": data,
        })
    for patch in spec.get("patches") or []:
        _apply_patch(kfile, objects, patch)
    for obj in objects:
        if "namespace" in spec and is_namespaced(obj.get("apiVersion", ""), obj.get("kind", "")):
            obj.setdefault("metadata", {})["namespace"] = spec["namespace"]
        for group in spec.get("labels") or []:
            obj.setdefault("metadata", {}).setdefault("labels", {}).update(group.get("pairs") or {})
        for image in spec.get("images") or []:
            _set_image(obj, image)
    seen: set[tuple[str, str, str, str]] = set()
    for obj in objects:
        meta = obj.get("metadata") or {}
        key = (obj.get("apiVersion", "").rpartition("/")[0], obj.get("kind", ""), meta.get("namespace", ""), meta.get("name", ""))
        if key in seen:
            raise BuildError(f"{kfile}: duplicate resource {key}")
        seen.add(key)
    return objects


def containers(obj: dict[str, Any]) -> list[dict[str, Any]]:
    """Every container and init container of a workload or of a ClickHouse pod template."""
    out: list[dict[str, Any]] = []
    specs: list[dict[str, Any]] = []
    spec = obj.get("spec") or {}
    if "template" in spec:
        specs.append((spec["template"] or {}).get("spec") or {})
    for tmpl in ((spec.get("templates") or {}).get("podTemplates") or []):
        specs.append(tmpl.get("spec") or {})
    for s in specs:
        out += list(s.get("initContainers") or []) + list(s.get("containers") or [])
    return out


def _set_image(obj: dict[str, Any], image: dict[str, Any]) -> None:
    for c in containers(obj):
        name, _, _ = str(c.get("image", "")).partition(":")
        if name == image["name"]:
            c["image"] = f"{image.get('newName', name)}:{image.get('newTag', str(c['image']).partition(':')[2])}"


def _apply_patch(kfile: Path, objects: list[dict[str, Any]], patch: dict[str, Any]) -> None:
    target = patch.get("target") or {}
    ops = yaml.safe_load(patch["patch"]) if "patch" in patch else None
    if not isinstance(ops, list):
        raise BuildError(f"{kfile}: only inline JSON6902 patches are supported")
    matched = [
        o for o in objects
        if all((o.get("kind") if k == "kind" else (o.get("metadata") or {}).get(k)) == v for k, v in target.items())
    ]
    if not matched:
        raise BuildError(f"{kfile}: patch target {target} matches nothing")
    for obj in matched:
        for op in ops:
            _json_patch(kfile, obj, op)


def _json_patch(kfile: Path, obj: dict[str, Any], op: dict[str, Any]) -> None:
    parts = [p.replace("~1", "/").replace("~0", "~") for p in op["path"].lstrip("/").split("/")]
    parent: Any = obj
    for p in parts[:-1]:
        parent = parent[int(p)] if isinstance(parent, list) else parent.get(p)
        if parent is None:
            raise BuildError(f"{kfile}: patch path {op['path']} does not exist")
    last = parts[-1]
    if isinstance(parent, list):
        index = len(parent) if last == "-" else int(last)
        if op["op"] == "remove":
            parent.pop(index)
        elif op["op"] == "add":
            parent.insert(index, op["value"])
        else:
            parent[index] = op["value"]
        return
    if op["op"] in ("replace", "remove") and last not in parent:
        raise BuildError(f"{kfile}: patch path {op['path']} does not exist")
    if op["op"] == "remove":
        del parent[last]
    else:
        parent[last] = op["value"]
