"""Readers for docker-compose.yaml, Dockerfiles, .dockerignore files and requirements.txt,
each following the rules of the tool that reads the file (Compose's interpolation and volume
syntax, Docker's line continuations and ignore patterns, pip's pins), for tests that check the
container stack against the repository without a Docker engine.
"""

from __future__ import annotations

import fnmatch
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import yaml
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

_VARIABLE = re.compile(r"\$(?:(?P<escaped>\$)|\{(?P<braced>[^}]*)\}|(?P<named>[A-Za-z_]\w*))")
_BRACED = re.compile(r"^(?P<name>[A-Za-z_]\w*)(?:(?P<op>:?[-?+])(?P<arg>.*))?$", re.DOTALL)


def interpolate(value: str, env: Mapping[str, str]) -> str:
    """Compose's variable interpolation of one string, with `env` as the shell environment.

    A variable with no value and no default is an error here (Compose only warns and uses ""):
    the stack must start with no `.env` file.
    """

    def replace(match: re.Match[str]) -> str:
        if match["escaped"]:
            return "$"
        expression = match["braced"] if match["braced"] is not None else match["named"]
        parsed = _BRACED.match(expression)
        if parsed is None or "$" in (parsed["arg"] or ""):
            raise ValueError(f"unsupported interpolation ${{{expression}}} in {value!r}")
        name, op, arg = parsed["name"], parsed["op"] or "", parsed["arg"]
        current = env.get(name)
        # `:-`, `:?`, `:+` treat an empty value as unset; `-`, `?`, `+` only a missing one.
        unset = current is None or (op.startswith(":") and current == "")
        if op.endswith("-"):
            return arg if unset else str(current)
        if op.endswith("+"):
            return "" if unset else arg
        if unset:
            raise ValueError(f"variable {name} has no default in {value!r}")
        return str(current)

    return _VARIABLE.sub(replace, value)


def interpolate_tree(node: Any, env: Mapping[str, str]) -> Any:
    if isinstance(node, str):
        return interpolate(node, env)
    if isinstance(node, list):
        return [interpolate_tree(item, env) for item in node]
    if isinstance(node, dict):
        return {key: interpolate_tree(item, env) for key, item in node.items()}
    return node


def load_compose(path: Path) -> dict[str, Any]:
    """The compose document as `docker compose` sees it with an empty environment."""
    raw = yaml.safe_load(path.read_text())
    assert isinstance(raw, dict), f"{path.name}: top level must be a mapping"
    return interpolate_tree(raw, {})


def requirement_pins(path: Path) -> dict[str, str]:
    """requirements.txt's `name==version` pins, by canonical name."""
    pins: dict[str, str] = {}
    for raw in path.read_text().splitlines():
        line = raw.split("#", 1)[0].strip()
        if not line or line.startswith("-"):
            continue
        req = Requirement(line)
        specs = list(req.specifier)
        if len(specs) == 1 and specs[0].operator == "==":
            pins[canonicalize_name(req.name)] = specs[0].version
    return pins


def dockerfile_instructions(path: Path) -> list[tuple[str, str]]:
    """(INSTRUCTION, arguments) pairs, continuation lines joined and comments dropped."""
    instructions: list[tuple[str, str]] = []
    pending = ""
    for line in path.read_text().splitlines():
        stripped = line.strip()
        if not stripped or stripped.startswith("#"):
            continue
        if stripped.endswith("\\"):
            pending += stripped[:-1] + " "
            continue
        keyword, _, arguments = (pending + stripped).partition(" ")
        instructions.append((keyword.upper(), arguments.strip()))
        pending = ""
    assert not pending, f"{path}: dangling line continuation"
    return instructions


def dockerfile_args(path: Path) -> dict[str, str]:
    """ARG defaults (`ARG NAME=value`, quotes removed)."""
    args: dict[str, str] = {}
    for keyword, arguments in dockerfile_instructions(path):
        if keyword == "ARG" and "=" in arguments:
            name, _, value = arguments.partition("=")
            args[name] = value.strip().strip('"')
    return args


def base_image(path: Path) -> tuple[str, str]:
    """(repository, tag) of the Dockerfile's single FROM."""
    froms = [args for keyword, args in dockerfile_instructions(path) if keyword == "FROM"]
    assert len(froms) == 1, f"{path}: expected one FROM, found {froms}"
    reference = froms[0].split()[0]
    repository, _, tag = reference.rpartition(":")
    assert repository and "/" not in tag, f"{path}: FROM {reference} has no tag"
    return repository, tag


def image_tag(image: str) -> str:
    repository, _, tag = image.rpartition(":")
    assert repository and "/" not in tag, f"image {image!r} has no tag"
    return tag


def environment(service: Mapping[str, Any]) -> dict[str, str]:
    """A service's environment in mapping form, whichever syntax the file uses."""
    env = service.get("environment") or {}
    if isinstance(env, list):
        env = dict(item.split("=", 1) if "=" in item else (item, "") for item in env)
    return {str(key): "" if value is None else str(value) for key, value in env.items()}


def mounts(service: Mapping[str, Any]) -> list[tuple[str, str]]:
    """(source, target) of each volume entry, short or long syntax."""
    result = []
    for entry in service.get("volumes") or []:
        if isinstance(entry, str):
            source, target = entry.split(":")[:2]
        else:
            source, target = entry.get("source", ""), entry["target"]
        result.append((source, target))
    return result


def is_bind(source: str) -> bool:
    return source.startswith((".", "/", "~"))


def command_list(service: Mapping[str, Any]) -> list[str]:
    command = service.get("command") or []
    return command.split() if isinstance(command, str) else [str(part) for part in command]


def depends_on(service: Mapping[str, Any]) -> dict[str, str]:
    """Dependency -> condition (the short list syntax means service_started)."""
    deps = service.get("depends_on") or {}
    if isinstance(deps, list):
        return dict.fromkeys(deps, "service_started")
    return {name: (spec or {}).get("condition", "service_started") for name, spec in deps.items()}


def copies(path: Path) -> list[tuple[list[str], str]]:
    """(sources, destination) of each COPY, flags dropped."""
    result = []
    for keyword, arguments in dockerfile_instructions(path):
        if keyword == "COPY":
            parts = [p for p in arguments.split() if not p.startswith("--")]
            result.append((parts[:-1], parts[-1]))
    return result


def ignored(path: str, patterns: list[str]) -> bool:
    """Whether a .dockerignore excludes `path` (last matching pattern wins; a pattern that
    matches a parent directory matches everything under it)."""
    candidates = [str(Path(*Path(path).parts[: i + 1])) for i in range(len(Path(path).parts))]
    excluded = False
    for pattern in patterns:
        negated = pattern.startswith("!")
        cleaned = pattern.lstrip("!").strip("/")
        if any(fnmatch.fnmatchcase(c, cleaned) for c in candidates):
            excluded = not negated
    return excluded
