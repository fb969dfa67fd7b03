"""``deploy/build-check`` (which builds and runs the image for real, outside the suite) kept in step
with the Dockerfile, and what its real builds showed kept fixed.

The script itself takes minutes and root (docs/deploy.md); these checks are static.
"""

from __future__ import annotations

import os
import re
import shlex
import shutil
import subprocess

import pytest

from tests.test_deploy import DEPLOY, DOCKERFILE, runtime_stage

BUILD_CHECK = DEPLOY / "build-check"

# The python3 of each Debian release the script's debootstrap base may be made from.
DEBIAN_PYTHON = {"bookworm": "3.11", "trixie": "3.13"}


def script_setting(name: str) -> str:
    [value] = re.findall(rf"^{name}=(\S+)", BUILD_CHECK.read_text(), re.M)
    return value


def test_the_local_base_has_the_debian_release_and_python_of_the_dockerfiles_default_base() -> None:
    [default] = re.findall(r"^ARG PYTHON_IMAGE=(\S+)$", DOCKERFILE.read_text(), re.M)
    match = re.fullmatch(r"python:(3\.\d+)-slim-(\w+)", default)
    assert match, f"{default}: name the Debian release, so the local base can be the same one"
    python, release = match.groups()
    suite = script_setting("SUITE")
    assert suite == release, "deploy/build-check's debootstrap base must be the official image's release"
    assert DEBIAN_PYTHON[suite] == python, f"Debian {suite}'s python3 is {DEBIAN_PYTHON[suite]}, not {python}"
    packages = script_setting("BASE_PACKAGES").split(",")
    assert {"python3", "python3-pip", "python-is-python3"} <= set(packages), (
        "the Dockerfile runs pip and python"
    )


def test_build_check_is_an_executable_strict_bash_script() -> None:
    assert os.access(BUILD_CHECK, os.X_OK)
    text = BUILD_CHECK.read_text()
    assert text.startswith("#!/usr/bin/env bash\n") and "\nset -euo pipefail\n" in text
    done = subprocess.run(["bash", "-n", str(BUILD_CHECK)], capture_output=True, text=True, check=False)
    assert done.returncode == 0, done.stderr


@pytest.mark.skipif(shutil.which("shellcheck") is None, reason="shellcheck is not installed")
def test_build_check_passes_shellcheck() -> None:
    done = subprocess.run(["shellcheck", str(BUILD_CHECK)], capture_output=True, text=True, check=False)
    assert done.returncode == 0, done.stdout


def test_the_image_user_is_made_without_useradds_system_uid_warning() -> None:
    # The real build printed "useradd warning: slackask's uid 10001 is greater than SYS_UID_MAX 999"
    # for `useradd --system --uid 10001`: a system account's uid is below 1000.
    runs = " ".join(run.args for run in runtime_stage().all("RUN"))
    [command] = [c for c in re.split(r"&&|;", runs) if c.split() and c.split()[0] == "useradd"]
    words = shlex.split(command.replace("\\", " "))
    uid = int(words[words.index("--uid") + 1])
    assert uid >= 1000, "a high uid, clear of the base image's own accounts"
    assert not {"--system", "-r"} & set(words), command
