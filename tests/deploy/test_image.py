"""The image deploy/ runs is the one ``make image`` builds, and every secret and variable the
manifests use is created by a step in deploy/README.md.

No container engine runs here, so the Dockerfile is checked statically (pinned base, two
stages, unprivileged user, only the built package installed), the build context is assembled
from the repository with ``.dockerignore`` applied, and the manifests are built offline.
"""

from __future__ import annotations

import fnmatch
import re
import shlex
import subprocess
import tomllib
from pathlib import Path

import pytest

from tests.deploy.kustomize import build, containers

REPO = Path(__file__).resolve().parents[2]
DEPLOY = REPO / "deploy"
DOCKERFILE = REPO / "Dockerfile"
VERSION = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["version"]
INSTALLS = ("overlays/production", "overlays/embedded", "replay")


def _instructions() -> list[tuple[str, str]]:
    """(INSTRUCTION, arguments) of the Dockerfile, continuation lines joined, comments dropped."""
    text = re.sub(r"\\\n", " ", "\n".join(line for line in DOCKERFILE.read_text().splitlines()
                                          if not line.lstrip().startswith("#")))
    out = []
    for line in text.splitlines():
        if line.strip():
            word, _, rest = line.strip().partition(" ")
            out.append((word.upper(), rest.strip()))
    return out


def _stages() -> list[list[tuple[str, str]]]:
    stages: list[list[tuple[str, str]]] = []
    for ins in _instructions():
        if ins[0] == "FROM":
            stages.append([])
        if stages:
            stages[-1].append(ins)
    return stages


def _arg_defaults() -> dict[str, str]:
    out = {}
    for word, rest in _instructions():
        if word == "ARG" and "=" in rest:
            name, _, value = rest.partition("=")
            out[name] = value
    return out


def _base_image(from_args: str) -> str:
    image = from_args.split()[0]
    return re.sub(r"\$\{(\w+)\}", lambda m: _arg_defaults()[m.group(1)], image)


def test_the_image_is_built_in_two_stages_from_a_pinned_base() -> None:
    stages = _stages()
    assert len(stages) >= 2
    for stage in stages:
        image = _base_image(stage[0][1])
        name, _, tag = image.partition("@")[0].rpartition(":")
        pinned = "@sha256:" in image or re.fullmatch(r"\d+\.\d+\.\d+(-[a-z0-9-]+)?", tag) is not None
        assert name and pinned, f"FROM {image}: pin the base by digest or by an exact x.y.z tag"


def test_the_final_stage_installs_only_the_built_wheels_and_runs_unprivileged() -> None:
    final = _stages()[-1]
    copies = [rest for word, rest in final if word in ("COPY", "ADD")]
    assert copies and all(c.startswith("--from=") for c in copies), f"sources copied into the image: {copies}"
    installs = [rest for word, rest in final if word == "RUN" and "pip install" in rest]
    assert len(installs) == 1 and "--no-index" in installs[0] and " claimtrail" in installs[0]
    (user,) = [rest for word, rest in final if word == "USER"]
    uid = user.split(":")[0]
    assert uid.isdigit() and int(uid) != 0
    assert ("ENTRYPOINT", '["claimtrail"]') in final


def test_the_image_runs_as_the_user_the_manifests_expect() -> None:
    (user,) = [rest for word, rest in _stages()[-1] if word == "USER"]
    uid = int(user.split(":")[0])
    for entry in INSTALLS:
        for obj in build(DEPLOY / entry):
            if obj["kind"] in ("Deployment", "Job"):
                pod = obj["spec"]["template"]["spec"]
                run_as = (pod.get("securityContext") or {}).get("runAsUser")
                if any(c["image"].startswith("ghcr.io/claimtrail/") for c in containers(obj)) and run_as is not None:
                    assert run_as == uid, f"{entry}: {obj['metadata']['name']} runs as {run_as}, the image as {uid}"


def _context_files() -> list[str]:
    """The files `docker build .` sends: the repository's files minus what .dockerignore excludes
    (later patterns win, `!` re-includes, as Docker applies them)."""
    rules = [line.strip() for line in (REPO / ".dockerignore").read_text().splitlines()
             if line.strip() and not line.startswith("#")]
    tracked = subprocess.run(["git", "ls-files", "--cached", "--others", "--exclude-standard"], cwd=REPO,
                             capture_output=True, text=True, check=True).stdout.split()
    kept = []
    for path in tracked:
        included = True
        for rule in rules:
            negate, pattern = rule.startswith("!"), rule.lstrip("!").rstrip("/")
            pattern = pattern.replace("**/", "*/") if pattern.startswith("**/") else pattern
            hit = (fnmatch.fnmatch(path, pattern) or path.startswith(pattern + "/")
                   or (rule.lstrip("!").startswith("**/") and fnmatch.fnmatch(path.rsplit("/", 1)[-1], pattern[2:])))
            if hit:
                included = negate
        if included:
            kept.append(path)
    return kept


def test_the_build_context_holds_what_the_build_copies_and_no_tests_or_deploy_files() -> None:
    context = _context_files()
    tops = {p.split("/")[0] for p in context}
    assert tops == {"pyproject.toml", "README.md", "audit", "ingest", "dashboards"}
    for word, rest in _stages()[0]:
        if word == "COPY":
            *sources, _dest = shlex.split(rest)
            for src in sources:
                assert any(p == src or p.startswith(src + "/") for p in context), f"COPY {src}: not in the build context"


def test_the_package_built_from_the_context_has_every_module_the_manifests_run(tmp_path: Path) -> None:
    """setuptools' own discovery, configured as pyproject.toml does, over a copy of the context."""
    import shutil

    from setuptools import find_namespace_packages

    for rel in _context_files():
        (tmp_path / rel).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(REPO / rel, tmp_path / rel)
    config = tomllib.loads((tmp_path / "pyproject.toml").read_text())["tool"]["setuptools"]["packages"]["find"]
    packages = set(find_namespace_packages(where=str(tmp_path), include=config["include"]))
    # the dashboards' page scripts, the command line and the API's bundled OpenAPI page assets
    assert {"audit.cli", "audit.api", "dashboards", "dashboards.panels", "ingest.kube"} <= packages
    assert (tmp_path / "dashboards" / "app.py").exists()


def _make_default_image() -> str:
    out = subprocess.run(["make", "-n", "image"], cwd=REPO, capture_output=True, text=True, check=True).stdout
    (line,) = [w for w in out.splitlines() if " build " in w]
    return shlex.split(line)[shlex.split(line).index("--tag") + 1]


def test_every_manifest_runs_the_image_make_image_builds() -> None:
    image = _make_default_image()
    assert image == f"ghcr.io/claimtrail/claimtrail:{VERSION}"
    ours = [c["image"] for entry in INSTALLS for obj in build(DEPLOY / entry) for c in containers(obj)
            if "claimtrail/claimtrail" in c["image"]]
    assert ours and set(ours) == {image}


def _documented_secrets() -> dict[str, set[str]]:
    """Secret name -> keys, from every `kubectl … create secret generic` line in deploy/README.md."""
    secrets: dict[str, set[str]] = {}
    for block in re.findall(r"```sh\n(.*?)```", (DEPLOY / "README.md").read_text(), re.S):
        for line in block.splitlines():
            if line.lstrip().startswith("#") or "create secret generic" not in line:
                continue
            words = shlex.split(line.split(" #")[0], posix=True)
            name = words[words.index("generic") + 1]
            keys = secrets.setdefault(name, set())
            for w in words:
                if w.startswith("--from-literal="):
                    keys.add(w.removeprefix("--from-literal=").split("=", 1)[0])
                elif w.startswith("--from-file="):
                    spec = w.removeprefix("--from-file=")
                    keys.add(spec.split("=", 1)[0] if "=" in spec else Path(spec).name)
    return secrets


def _used_secrets() -> dict[str, set[str]]:
    """Secret name -> keys the built manifests read (env references and mounted files)."""
    used: dict[str, set[str]] = {}
    for entry in INSTALLS:
        for obj in build(DEPLOY / entry):
            if obj["kind"] not in ("Deployment", "Job"):
                continue
            pod = obj["spec"]["template"]["spec"]
            volumes = {v["name"]: v["secret"]["secretName"] for v in pod.get("volumes", []) if "secret" in v}
            for c in containers(obj):
                for e in c.get("env", []):
                    ref = (e.get("valueFrom") or {}).get("secretKeyRef")
                    if ref:
                        used.setdefault(ref["name"], set()).add(ref["key"])
                argv = " ".join(map(str, (c.get("command") or []) + (c.get("args") or [])))
                for m in c.get("volumeMounts", []):
                    if m["name"] in volumes:
                        # the files the container reads from that mount, named in its arguments
                        files = re.findall(re.escape(m["mountPath"].rstrip("/")) + r"/([\w.-]+)", argv)
                        assert files, f"{entry}: {c['name']} mounts secret {volumes[m['name']]} but reads no file of it"
                        used.setdefault(volumes[m["name"]], set()).update(files)
    return used


def test_every_secret_the_manifests_read_is_created_by_the_documented_steps() -> None:
    documented, used = _documented_secrets(), _used_secrets()
    assert set(used) == {"claimtrail-api-tokens", "claimtrail-clickhouse", "claimtrail-ingest-token",
                         "claimtrail-replay-token"}
    for name, keys in used.items():
        assert name in documented, f"secret {name}: no step in deploy/README.md creates it"
        assert keys <= documented[name], f"secret {name}: keys {sorted(keys - documented[name])} are never created"
    assert set(documented) == set(used), "deploy/README.md creates a secret nothing reads"


@pytest.mark.parametrize("entry", INSTALLS)
def test_every_variable_a_container_refers_to_is_defined_before_use(entry: str) -> None:
    for obj in build(DEPLOY / entry):
        for c in containers(obj):
            defined: set[str] = set()
            for e in c.get("env", []):
                for ref in re.findall(r"\$\((\w+)\)", str(e.get("value", ""))):
                    assert ref in defined, f"{entry}: {c['name']}: env {e['name']} uses $({ref}) before it is set"
                defined.add(e["name"])
            for arg in map(str, (c.get("command") or []) + (c.get("args") or [])):
                for ref in re.findall(r"\$\((\w+)\)", arg):
                    assert ref in defined, f"{entry}: {c['name']}: argument {arg} uses $({ref}), which is not set"


def test_the_dashboard_deployment_signs_in_per_visitor_and_the_docs_say_so() -> None:
    (dash,) = [o for o in build(DEPLOY / "overlays/production")
               if o["kind"] == "Deployment" and o["metadata"]["name"] == "claimtrail-dashboard"]
    env = {e["name"] for c in containers(dash) for e in c.get("env", [])}
    assert "CLAIMTRAIL_TOKEN" not in env
    assert re.search(r"signs in with\s+their own token", (DEPLOY / "README.md").read_text())
