"""Job options declared once: a dataclass field per option, its kind, its words.

    @dataclass(frozen=True)
    class RewriteDataFilesOptions(JobOptions):
        target_file_size_bytes: int | None = option(
            None, SIZE, "size of the files written", procedure="target-file-size-bytes")

From such a class come the job's argparse (`icecore.jobs.argv`), the Airflow form and the
operator's flags (`icefloe_airflow.forms`), the README's option tables
(`icecore.jobs.docs`), and the Python API itself: constructing the class checks every
value with the same grammar (`icecore.jobs.grammar`) and names the flag when one is
wrong. So an option is added in one place, and a value that the job would refuse is refused
by the form and the operator too, before any Spark application starts.

Values may be given typed (`target_file_size_bytes=134217728`) or as the text a person typed
(`"128MB"`); fields always hold the typed value afterwards. Instants (`--older-than 3d`)
stay text, checked but resolved against the clock when the job runs.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, ClassVar

from icecore.jobs import grammar

_MISSING = dataclasses.MISSING


class OptionError(ValueError):
    """A value an option cannot take; the message names the option's flag (a form names its
    title, `in_words`). `force`: the job's switch that would let a harmful value through,
    and `force_why` when to use it; each caller says how to set it (`--force` on a command
    line, the form's "Force" switch)."""

    def __init__(
        self,
        option: Option,
        problem: str,
        *,
        force: Option | None = None,
        force_why: str = "to do it anyway",
    ) -> None:
        self.option = option
        self.problem = problem
        self.force = force
        self.force_why = force_why
        super().__init__(f"{option.flag}: {self.in_words(f'pass {force.flag}' if force else '')}")

    def in_words(self, set_force: str) -> str:
        """The problem, and how to force it through in the caller's words (`set_force`: `pass
        --force`, `switch on "Force"`)."""
        if self.force is None:
            return self.problem
        return f"{self.problem}; {set_force} {self.force_why}"


@dataclass(frozen=True)
class Kind:
    """What values an option takes: how text is parsed, what the form and the docs say."""

    name: str
    expected: str  # words for "expected ...", and the form's hint
    parse: Callable[[Any], Any]
    render: Callable[[Any], str] = str  # a typed value back as command-line text
    repeated: bool = False  # the flag may be given several times (a list value)
    choices: tuple[str, ...] = ()  # the closed set of values, for choice kinds
    multiline: bool = False  # typed one item per line in a form
    lines: Callable[[Any], list[str]] = lambda value: [str(value)]  # a typed value, by line


def _items(value: Any) -> list[str]:
    """Items of a repeatable option: a list (repeated flags), or text with one per line (a
    form's multiline field)."""
    if isinstance(value, str):
        return [line.strip() for line in value.splitlines() if line.strip()]
    return [str(item).strip() for item in value or () if str(item).strip()]


def _pairs(value: Any) -> dict[str, str]:
    if isinstance(value, Mapping):
        return {str(k): str(v) for k, v in value.items()}
    items = _items(value)
    out: dict[str, str] = {}
    for item in items:
        key, sep, text = str(item).partition("=")
        if not sep or not key.strip():
            raise ValueError(f"expected key=value, got {item!r}")
        out[key.strip()] = text
    return out


def _names(value: Any) -> list[str]:
    items = value.split(",") if isinstance(value, str) else [str(v) for v in value or ()]
    return [item.strip() for item in items if item.strip()]


def _ids(value: Any) -> list[int]:
    if isinstance(value, str):
        value = value.split(",")
    out = []
    for item in value or ():
        for part in str(item).split(","):
            if part.strip():
                out.append(grammar.parse_integer(part))
    return out


def _text(value: Any) -> str:
    text = str(value).strip()
    if not text:
        raise ValueError("expected a value, got an empty one")
    return text


SIZE = Kind(
    "size", f"a size such as {grammar.SIZE_EXAMPLE}", grammar.parse_size, grammar.format_size
)


def _positive_size(value: Any) -> int:
    size = grammar.parse_size(value)
    if size <= 0:
        raise ValueError(f"expected a size above 0, such as {grammar.SIZE_EXAMPLE}, got {value!r}")
    return size


POSITIVE_SIZE = Kind(
    "size", f"a size above 0 such as {grammar.SIZE_EXAMPLE}", _positive_size, grammar.format_size
)
DURATION = Kind(
    "duration",
    f"a duration such as {grammar.DURATION_EXAMPLE}",
    grammar.parse_duration_ms,
    grammar.format_duration_ms,
)
INSTANT = Kind("instant", grammar.INSTANT_EXAMPLE, grammar.check_instant)
BOOLEAN = Kind("boolean", "true or false", grammar.parse_boolean)
TEXT = Kind("text", "text", _text)
FILTER = Kind("filter", "a filter such as ts >= '2024-01-01' and id > 10", _text)
SORT_ORDER = Kind("sort order", "a sort order such as 'ts, id desc nulls last'", _text)
PARTITION_SPEC = Kind("partition spec", "a partition spec such as 'day(ts), bucket(16, id)'", _text)
COLUMNS = Kind("columns", "column names separated by commas", _names, ",".join)
PAIRS = Kind(
    "pairs",
    "key=value",
    _pairs,
    repeated=True,
    multiline=True,
    lines=lambda pairs: [f"{k}={v}" for k, v in pairs.items()],
)
LOCATIONS = Kind("locations", "a location", _items, repeated=True, multiline=True, lines=list)
IDS = Kind(
    "ids", "ids separated by commas", _ids, lambda ids: ",".join(map(str, ids)), repeated=True
)


def integer(minimum: int | None = None, maximum: int | None = None) -> Kind:
    bounds = []
    if minimum is not None:
        bounds.append(f"at least {minimum}")
    if maximum is not None:
        bounds.append(f"at most {maximum}")
    return Kind(
        "integer",
        "a whole number" + (f" ({', '.join(bounds)})" if bounds else ""),
        lambda v: grammar.parse_integer(v, minimum=minimum, maximum=maximum),
    )


def ratio(minimum: float = 0.0, maximum: float = 1.0) -> Kind:
    return Kind(
        "ratio",
        f"a fraction from {minimum:g} to {maximum:g}, such as 0.3 or 30%",
        lambda v: grammar.parse_ratio(v, minimum=minimum, maximum=maximum),
        lambda v: f"{v:g}",
    )


def choice(*values: str) -> Kind:
    def parse(value: Any) -> str:
        text = str(value).strip()
        if text not in values:
            raise ValueError(f"expected one of {', '.join(values)}, got {value!r}")
        return text

    return Kind("choice", f"one of {', '.join(values)}", parse, choices=tuple(values))


@dataclass(frozen=True)
class Guard:
    """A value that works but may harm the table; refused unless the job's `force` is set."""

    applies: Callable[[Any], bool]
    reason: str


@dataclass(frozen=True)
class Option:
    """One option of a job (see the module doc); `name` is the dataclass field."""

    name: str
    kind: Kind
    help: str
    title: str
    flag: str
    aliases: tuple[str, ...] = ()
    procedure: str | None = None  # the option's name in Iceberg's Spark procedure, if any
    secret: bool = False  # never on a command line, in a form default or a log
    form: bool = True  # offered on the Airflow trigger form
    default_words: str | None = None  # the default in words, when None means "it depends"
    required: bool = False  # no default: the options class cannot be built without it
    cli_required: bool = False  # the command line and the form need it (Python may not)
    choices: tuple[str, ...] = ()
    guards: tuple[Guard, ...] = ()
    default: Any = None

    def parse(self, value: Any) -> Any:
        """The typed value of `value` (typed already, or text), or OptionError."""
        if value is None:
            if self.required:
                raise OptionError(self, "required")
            return None
        try:
            if self.kind.repeated or self.kind.name in ("columns", "ids"):
                return self.kind.parse(value)
            if isinstance(value, list | tuple | dict | set):
                raise ValueError(f"expected {self.kind.expected}, got {value!r}")
            return self.kind.parse(value)
        except ValueError as exc:
            raise OptionError(self, str(exc)) from None

    def show(self, value: Any) -> str:
        """A typed value as text a person would type (`134217728` -> `128MB`)."""
        if self.kind is BOOLEAN:
            return "true" if value else "false"
        if self.kind.multiline:
            return ", ".join(self.kind.lines(value))
        return self.kind.render(value)

    def render(self, value: Any) -> list[str]:
        """Command-line arguments for a typed value (none for None and unset switches)."""
        if value is None:
            return []
        if self.kind is BOOLEAN:
            if value == bool(self.default):
                return []
            return [self.flag] if value else [self.flag, "false"]
        if self.kind.multiline:
            return [arg for line in self.kind.lines(value) for arg in (self.flag, line)]
        if isinstance(value, list) and not value:
            return []
        return [self.flag, self.kind.render(value)]


def option(
    default: Any,
    kind: Kind,
    help: str,
    *,
    title: str | None = None,
    flag: str | None = None,
    aliases: Sequence[str] = (),
    procedure: str | None = None,
    secret: bool = False,
    form: bool = True,
    guards: Iterable[Guard] = (),
    cli_required: bool = False,
    default_words: str | None = None,
) -> Any:
    """A dataclass field declaring an option; the name, flag and title default from the
    field's name (`target_file_size_bytes`: `--target-file-size-bytes`, "Target file size
    bytes")."""
    spec = {
        "kind": kind,
        "help": help,
        "title": title,
        "flag": flag,
        "aliases": tuple(aliases),
        "procedure": procedure,
        "secret": secret,
        "form": form,
        "guards": tuple(guards),
        "cli_required": cli_required,
        "default_words": default_words,
    }
    if isinstance(default, list | dict):
        factory = list if isinstance(default, list) else dict
        return field(default_factory=factory, metadata={"icefloe": spec})
    return field(default=default, metadata={"icefloe": spec})


def required(kind: Kind, help: str, **extra: Any) -> Any:
    """A field with no default: the job cannot run without it."""
    return field(metadata={"icefloe": {"kind": kind, "help": help, "required": True, **extra}})


def _option_of(f: dataclasses.Field[Any]) -> Option | None:
    spec = f.metadata.get("icefloe")
    if spec is None:
        return None
    default = f.default
    if default is _MISSING and f.default_factory is not _MISSING:
        default = f.default_factory()
    if default is _MISSING:
        default = None
    name = f.name
    return Option(
        name=name,
        kind=spec["kind"],
        help=spec["help"],
        title=spec.get("title") or name.replace("_", " ").capitalize(),
        flag=spec.get("flag") or "--" + name.replace("_", "-"),
        aliases=spec.get("aliases", ()),
        procedure=spec.get("procedure"),
        secret=spec.get("secret", False),
        form=spec.get("form", True),
        required=spec.get("required", False),
        cli_required=spec.get("required", False) or spec.get("cli_required", False),
        default_words=spec.get("default_words"),
        guards=spec.get("guards", ()),
        default=default,
    )


@dataclass(frozen=True)
class JobOptions:
    """Base of every job's options class: checks and types every field on construction."""

    force_option: ClassVar[str | None] = None  # the field that lifts guards, if any

    def __post_init__(self) -> None:
        for opt in self.options():
            value = getattr(self, opt.name)
            typed = opt.parse(value)
            if typed is not value:
                object.__setattr__(self, opt.name, typed)
        force = self.option_named(self.force_option) if self.force_option else None
        forced = bool(getattr(self, force.name)) if force else False
        for opt in self.options():
            value = getattr(self, opt.name)
            for guard in opt.guards:
                if value is not None and guard.applies(value) and not forced:
                    raise OptionError(opt, guard.reason, force=force)
        self.check()

    def check(self) -> None:
        """Rules across options (subclasses); raise OptionError naming the option."""

    @classmethod
    def options(cls) -> list[Option]:
        """The declared options, in field order."""
        return [o for f in dataclasses.fields(cls) if (o := _option_of(f)) is not None]

    @classmethod
    def option_named(cls, name: str) -> Option:
        """The option of a field name, flag or alias (`target_file_size_bytes`,
        `--target-file-size-bytes`, `target-file-size-bytes`); KeyError otherwise."""
        wanted = name.removeprefix("--").replace("_", "-")
        for opt in cls.options():
            spellings = {opt.name.replace("_", "-"), opt.flag[2:], *(a[2:] for a in opt.aliases)}
            if wanted in spellings:
                return opt
        raise KeyError(name)

    def to_argv(self) -> list[str]:
        """The command line giving exactly these values (defaults left out)."""
        args: list[str] = []
        for opt in self.options():
            value = getattr(self, opt.name)
            if opt.kind is not BOOLEAN and value == opt.default:
                continue
            args.extend(opt.render(value))
        return args


@dataclass(frozen=True)
class JobSpec:
    """A job: its name (the `spark_jobs/<name>.py` entry point), its words and options."""

    name: str
    summary: str
    options: type[JobOptions]
    maintenance: bool = True  # holds the table's maintenance lock
    procedure: str | None = None  # Iceberg's Spark procedure it stands in for
