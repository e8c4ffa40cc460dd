"""Readers for the files in deploy/: the Dockerfile's instructions, .dockerignore matching, YAML documents.

No Docker engine or cluster is needed: the tests check what these files say against the gateway's own
config loader, and the Kubernetes manifests against the schemas kubernetes-validate ships.
"""

from __future__ import annotations

import re
import shlex
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

ROOT = Path(__file__).resolve().parents[2]
DEPLOY = ROOT / "deploy"


@dataclass(frozen=True)
class Instruction:
    keyword: str  # upper case: FROM, RUN, ENV, ...
    args: str


def dockerfile(path: Path = DEPLOY / "Dockerfile") -> list[Instruction]:
    """Instructions in order, continuation lines joined, comments and the parser directive left out."""
    lines = [ln for ln in path.read_text().splitlines() if not ln.lstrip().startswith("#")]
    text = re.sub(r"\\\n\s*", " ", "\n".join(lines))
    out = []
    for line in text.splitlines():
        if line.strip():
            keyword, _, args = line.strip().partition(" ")
            out.append(Instruction(keyword.upper(), args.strip()))
    return out


def final_stage(instructions: list[Instruction]) -> list[Instruction]:
    starts = [i for i, ins in enumerate(instructions) if ins.keyword == "FROM"]
    return instructions[starts[-1]:]


def env_of(instructions: list[Instruction]) -> dict[str, str]:
    env: dict[str, str] = {}
    for ins in instructions:
        if ins.keyword == "ENV":
            for word in shlex.split(ins.args):
                name, _, value = word.partition("=")
                env[name] = value
    return env


def docker_ignored(path: str, ignore_file: Path = ROOT / ".dockerignore") -> bool:
    """Whether the build context leaves `path` out: Docker's rules, the last matching pattern winning,
    a pattern that matches a folder covering everything under it, `!` putting a path back."""
    ignored = False
    for raw in ignore_file.read_text().splitlines():
        pattern = raw.strip()
        if not pattern or pattern.startswith("#"):
            continue
        keep = pattern.startswith("!")
        pattern = pattern.lstrip("!").strip("/")
        regex = re.compile(_glob(pattern))
        parts = path.split("/")
        if any(regex.fullmatch("/".join(parts[: n + 1])) for n in range(len(parts))):
            ignored = not keep
    return ignored


def _glob(pattern: str) -> str:
    out, i = "", 0
    while i < len(pattern):
        if pattern.startswith("**/", i):
            out, i = out + "(?:.*/)?", i + 3
        elif pattern.startswith("**", i):
            out, i = out + ".*", i + 2
        elif pattern[i] == "*":
            out, i = out + "[^/]*", i + 1
        elif pattern[i] == "?":
            out, i = out + "[^/]", i + 1
        else:
            out, i = out + re.escape(pattern[i]), i + 1
    return out


def documents(path: Path) -> list[dict[str, Any]]:
    return [doc for doc in yaml.safe_load_all(path.read_text()) if doc is not None]


def mebibytes(quantity: str) -> float:
    """A Kubernetes memory quantity (512Mi, 1Gi, 268435456) in MiB."""
    units = {"Ki": 1 / 1024, "Mi": 1, "Gi": 1024, "K": 1e3 / 2**20, "M": 1e6 / 2**20, "G": 1e9 / 2**20}
    for unit, scale in units.items():
        if quantity.endswith(unit):
            return float(quantity[: -len(unit)]) * scale
    return float(quantity) / 2**20
