"""A job's command line, derived from its options class.

    spark-submit spark_jobs/<job>.py --warehouse /data/wh --table db.events [job options]

The catalog options every job shares come first (`CatalogArgs`); then the job's own, one flag
per option of its `JobOptions` class (booleans take an optional `true`/`false`, so
`--rewrite-all` and `--partial-progress.enabled false` both work; repeatable kinds append).
argparse only collects text: values are checked and typed by the options class, so the
command line, the Airflow form and the Python API refuse a value in the same words.
"""

from __future__ import annotations

import argparse
import difflib
import json
import os
import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, NoReturn

from icecore.jobs.options import BOOLEAN, JobOptions, JobSpec, Option, OptionError

CATALOG_URI_ENV = "ICEFLOE_CATALOG_URI"
# A REST catalog's secrets, never flags: OAuth2 client credentials as `client_id:client_secret`
# (Iceberg's `credential` property) and a static bearer token (`token`).
CATALOG_CREDENTIAL_ENV = "ICEFLOE_CATALOG_CREDENTIAL"
CATALOG_TOKEN_ENV = "ICEFLOE_CATALOG_TOKEN"
# Catalog properties as a JSON object, merged under the --catalog-property flags: how a runner
# hands a job credentials (s3.secret-access-key, adls.sas-token, ...) without putting them on
# a command line, which process listings and logs show.
CATALOG_PROPERTIES_ENV = "ICEFLOE_CATALOG_PROPERTIES"
# Where a runner (the Airflow operator) wants the job's outcome as JSON, besides the output:
# {"result": {...}} or {"cause": "Type: message"}; read back whatever the job printed.
RESULT_FILE_ENV = "ICEFLOE_RESULT_FILE"
# PySpark's own variable naming a Spark Connect server (`sc://host:15002`): a job run with it
# set (or with `--remote`) runs its Spark work there (spark_jobs.common.cli).
REMOTE_ENV = "SPARK_REMOTE"


def checked_remote(url: str) -> str:
    """A `--remote` flag's Spark Connect URL, checked for its form (sc://host[:port][/;param=
    value...]) before anything runs; ValueError in one line otherwise, and for a URL carrying
    a token, which belongs in `SPARK_REMOTE` (a command line shows in process listings)."""
    if not url.startswith("sc://") or len(url) <= len("sc://"):
        raise ValueError(f"--remote: {url!r} is not a Spark Connect URL (sc://host:port)")
    if "token=" in url:
        raise ValueError(
            f"--remote with a token would show a secret in process listings and logs; set "
            f"${REMOTE_ENV} instead"
        )
    return url


@dataclass(frozen=True)
class CatalogArgs:
    """Where the table is: the catalog options every job shares."""

    uri: str | None = None
    type: str | None = None
    name: str = "default"
    warehouse: str | None = None
    properties: dict[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class JobArgs:
    catalog: CatalogArgs
    options: JobOptions


_SECRET_FLAGS = {"credential": CATALOG_CREDENTIAL_ENV, "token": CATALOG_TOKEN_ENV}


def catalog_settings(args: CatalogArgs) -> dict[str, Any]:
    """`icecore.catalog.catalog_from_settings` keyword arguments for the shared catalog flags,
    secrets only from the environment (the jobs and the `icefloe` command read them alike);
    ValueError, in one line, for what cannot be used."""
    uri = args.uri or os.environ.get(CATALOG_URI_ENV) or None
    if not uri and not args.warehouse:
        raise ValueError(
            f"give --warehouse (SQLite catalog in it), --catalog-uri or ${CATALOG_URI_ENV}"
        )
    on_argv = sorted(k for k in args.properties if k in _SECRET_FLAGS)
    if on_argv:
        raise ValueError(
            f"--catalog-property {on_argv[0]}=... would show a secret in process listings and "
            f"logs; set ${_SECRET_FLAGS[on_argv[0]]} instead"
        )
    properties = {**_environment_properties(), **args.properties}
    for key, env in _SECRET_FLAGS.items():
        if os.environ.get(env):
            properties[key] = os.environ[env]
    return {
        "uri": uri,
        "name": args.name,
        "warehouse": args.warehouse,
        "properties": properties,
        "catalog_type": args.type,
    }


def _environment_properties() -> dict[str, str]:
    raw = os.environ.get(CATALOG_PROPERTIES_ENV)
    if not raw:
        return {}
    try:
        properties = json.loads(raw)
    except json.JSONDecodeError as exc:
        raise ValueError(f"${CATALOG_PROPERTIES_ENV} is not a JSON object: {exc}") from None
    if not isinstance(properties, dict):
        raise ValueError(f"${CATALOG_PROPERTIES_ENV} is not a JSON object")
    return {str(k): str(v) for k, v in properties.items()}


def _property(text: str) -> tuple[str, str]:
    key, sep, value = text.partition("=")
    if not sep or not key.strip():
        raise argparse.ArgumentTypeError(f"expected K=V, got {text!r}")
    return key.strip(), value


def add_catalog_options(parser: argparse.ArgumentParser) -> None:
    """The shared catalog flags (also the `icefloe` command's, so its flags match the jobs')."""
    group = parser.add_argument_group("catalog (shared by every job)")
    group.add_argument(
        "--catalog-uri",
        metavar="URI",
        help="SQLAlchemy URL of a SQL catalog's database, or a REST catalog's http(s):// URI "
        f"(default: ${CATALOG_URI_ENV}, else the SQLite file catalog.db in the warehouse)",
    )
    group.add_argument(
        "--catalog-type",
        choices=("sql", "rest"),
        help="catalog type (default: rest for an http(s):// URI, else sql); a REST catalog's "
        f"credential comes from ${CATALOG_CREDENTIAL_ENV} (client_id:client_secret) or "
        f"${CATALOG_TOKEN_ENV}, never from a flag",
    )
    group.add_argument(
        "--catalog-property",
        metavar="K=V",
        action="append",
        default=[],
        type=_property,
        help="catalog property, e.g. s3.endpoint=http://minio:9000 (repeatable)",
    )
    group.add_argument(
        "--catalog-name", metavar="NAME", default="default", help="catalog name (default: default)"
    )
    group.add_argument("--warehouse", metavar="PATH_OR_URI", help="where new tables go")


class OneLineParser(argparse.ArgumentParser):
    """A parser whose mistakes are one line (no usage dump): an unknown flag with the closest
    known one, a missing value named with its flag. Raises SystemExit with the line as its
    code, so a runner can record it as the cause (a job's `main`) or print it (`icefloe`);
    `--help` prints the whole usage as usual."""

    def error(self, message: str) -> NoReturn:
        raise SystemExit(f"{self.prog}: {self.in_words(message)}")

    def in_words(self, message: str) -> str:
        """argparse's message, an unrecognized flag with a suggestion (`--target-size`: did
        you mean `--target-file-size-bytes`?)."""
        prefix = "unrecognized arguments: "
        if message.startswith(prefix):
            return unknown_flag(message.removeprefix(prefix).split(), self.known_flags())
        choice = re.search(r"invalid choice: '([^']*)' \(choose from (.*)\)$", message)
        if choice:
            given, known = choice.group(1), re.findall(r"[\w.-]+", choice.group(2))
            close = difflib.get_close_matches(given, known, n=1, cutoff=0.5)
            if close:
                return f"{message}; did you mean {close[0]}?"
        return message

    def known_flags(self) -> list[str]:
        return [flag for flag in self._option_string_actions if flag.startswith("--")]


def unknown_flag(arguments: Sequence[str], known: Sequence[str]) -> str:
    """One line for arguments no flag takes: the first unknown flag and the closest known one,
    or the stray value."""
    flags = [a for a in arguments if a.startswith("-")]
    if not flags:
        return f"unexpected argument {arguments[0]!r} (a value without its flag?)"
    flag = flags[0].split("=", 1)[0]
    close = difflib.get_close_matches(flag, known, n=1, cutoff=0.5)
    hint = f"; did you mean {close[0]}?" if close else " (--help lists the flags)"
    return f"unknown flag {flag}{hint}"


def _metavar(option: Option) -> str:
    return option.kind.name.upper().replace(" ", "_")


def _help(option: Option) -> str:
    default = option.default
    shown = "" if default in (None, [], {}, False) else f" (default {option.show(default)})"
    return f"{option.help}{shown}".replace("%", "%%")


def build_parser(spec: JobSpec) -> argparse.ArgumentParser:
    """The job's parser; options not given stay out of the namespace, so the options
    class's defaults apply."""
    parser = OneLineParser(prog=spec.name, description=f"{spec.summary}.")
    add_catalog_options(parser)
    group = parser.add_argument_group(spec.name)
    for option in spec.options.options():
        kwargs: dict[str, object] = {
            "dest": option.name,
            "default": argparse.SUPPRESS,
            "help": _help(option),
        }
        if option.kind is BOOLEAN:
            kwargs.update(nargs="?", const="true", metavar="BOOL")
        else:
            kwargs["metavar"] = _metavar(option)
        if option.kind.repeated:
            kwargs["action"] = "append"
        group.add_argument(option.flag, *option.aliases, **kwargs)  # type: ignore[arg-type]
    return parser


def pop_catalog_args(namespace: dict[str, Any]) -> CatalogArgs:
    """Take the shared catalog flags (`add_catalog_options`) out of parsed arguments."""
    return CatalogArgs(
        uri=namespace.pop("catalog_uri"),
        type=namespace.pop("catalog_type"),
        name=namespace.pop("catalog_name"),
        warehouse=namespace.pop("warehouse"),
        properties=dict(namespace.pop("catalog_property")),
    )


def parse_job_args(spec: JobSpec, argv: Sequence[str] | None) -> JobArgs:
    """The catalog and the checked options; SystemExit with one line (`OneLineParser`) for a
    malformed command line, OptionError for a value the job cannot take."""
    namespace = vars(build_parser(spec).parse_args(argv))
    catalog = pop_catalog_args(namespace)
    for option in spec.options.options():
        if option.cli_required and namespace.get(option.name) is None:
            raise OptionError(option, "required")
    return JobArgs(catalog, spec.options(**namespace))
