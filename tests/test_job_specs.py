"""The jobs' option declarations: one grammar, one check, derived command lines."""

from __future__ import annotations

import pytest

from icecore.jobs import JOBS, OptionError
from icecore.jobs.argv import build_parser, parse_job_args
from icecore.jobs.docs import options_section
from icecore.jobs.grammar import (
    format_duration_ms,
    format_size,
    parse_duration_ms,
    parse_instant_ms,
    parse_ratio,
    parse_size,
)
from icecore.jobs.jobs import (
    ExpireSnapshotsOptions,
    IngestOptions,
    RemoveOrphanFilesOptions,
    RewriteDataFilesOptions,
)

MIB = 1024**2


@pytest.mark.parametrize(
    ("text", "size"),
    [
        ("128MB", 128 * MIB),
        ("512 MiB", 512 * MIB),
        ("1.5GB", 1536 * MIB),
        ("64k", 65536),
        ("134217728", 134217728),
        ("10b", 10),
        (" 2 tb ", 2 * 1024**4),
        (4096, 4096),
    ],
)
def test_sizes(text: str | int, size: int) -> None:
    assert parse_size(text) == size


@pytest.mark.parametrize("text", ["128 parsecs", "MB", "", "1.0000001KB", "-5MB", "12 MB MB"])
def test_sizes_refused(text: str) -> None:
    with pytest.raises(ValueError, match=r"size|whole number"):
        parse_size(text)


def test_sizes_format_back_exactly() -> None:
    for size in (128 * MIB, 1000, 3 * 1024**3, 1536 * MIB):
        assert parse_size(format_size(size)) == size
    assert format_size(128 * MIB) == "128MB"


@pytest.mark.parametrize(
    ("text", "ms"),
    [("7d", 7 * 86_400_000), ("36h", 36 * 3_600_000), ("1d12h", 36 * 3_600_000),
     ("90m", 5_400_000), ("1.5h", 5_400_000), ("0s", 0), ("250ms", 250), ("2w", 14 * 86_400_000)],
)  # fmt: skip
def test_durations(text: str, ms: int) -> None:
    assert parse_duration_ms(text) == ms
    assert parse_duration_ms(format_duration_ms(ms)) == ms


@pytest.mark.parametrize("text", ["7", "7 days", "yesterday", "", "1d 2x", "3600000"])
def test_durations_refused_in_words(text: str) -> None:
    with pytest.raises(ValueError, match=r"expected a duration such as 7d"):
        parse_duration_ms(text)


def test_instants_are_ages_or_timestamps() -> None:
    now = 1_700_000_000_000
    assert parse_instant_ms("3d", now_ms=now) == now - 3 * 86_400_000
    assert parse_instant_ms("2024-01-07", now_ms=now) == 1_704_585_600_000
    assert parse_instant_ms("2024-01-07T00:00:00Z", now_ms=now) == 1_704_585_600_000
    with pytest.raises(ValueError, match="ISO timestamp"):
        parse_instant_ms("yesterday-ish", now_ms=now)


def test_ratios_keep_their_decimals_and_range() -> None:
    assert parse_ratio("0.15") == 0.15
    assert parse_ratio("15%") == 0.15
    with pytest.raises(ValueError, match="from 0 to 1"):
        parse_ratio("1.5")


def test_options_accept_typed_values_or_text_and_name_the_flag() -> None:
    typed = RewriteDataFilesOptions("db.t", target_file_size_bytes=128 * MIB)
    text = RewriteDataFilesOptions("db.t", target_file_size_bytes="128MB")  # type: ignore[arg-type]
    assert typed == text
    with pytest.raises(OptionError, match="--delete-ratio-threshold: expected a fraction"):
        RewriteDataFilesOptions("db.t", delete_ratio_threshold="1.5")  # type: ignore[arg-type]
    with pytest.raises(OptionError, match=r"--table: expected NAMESPACE\.NAME"):
        RewriteDataFilesOptions("events")


def test_harmful_values_need_force() -> None:
    with pytest.raises(OptionError, match=r"--target-file-size-bytes: files under 1MB .* --force"):
        RewriteDataFilesOptions("db.t", target_file_size_bytes=64)
    assert RewriteDataFilesOptions("db.t", target_file_size_bytes=64, force=True).force
    with pytest.raises(OptionError, match="--retain-last: expected a whole number of at least 1"):
        ExpireSnapshotsOptions("db.t", retain_last=0)
    with pytest.raises(OptionError, match="--older-than: 12h is later than 1d ago"):
        RemoveOrphanFilesOptions("db.t", older_than="12h")
    assert RemoveOrphanFilesOptions("db.t", older_than="12h", dry_run=True).dry_run


def test_command_line_round_trips_through_the_declaration() -> None:
    for spec in JOBS.values():
        parser = build_parser(spec)
        flags = {a for action in parser._actions for a in action.option_strings}
        for option in spec.options.options():
            assert option.flag in flags, (spec.name, option.flag)
    parsed = parse_job_args(
        JOBS["rewrite_data_files"],
        ["--table", "db.t", "--target-file-size-bytes", "128MB",
         "--partial-progress.enabled", "--use-starting-sequence-number", "false",
         "--where", "id > 3", "--delete-ratio-threshold", "0.15"],
    )  # fmt: skip
    options = parsed.options
    assert isinstance(options, RewriteDataFilesOptions)
    assert options.target_file_size_bytes == 128 * MIB
    assert options.partial_progress_enabled is True
    assert options.use_starting_sequence_number is False
    assert options.delete_ratio_threshold == 0.15
    again = parse_job_args(JOBS["rewrite_data_files"], options.to_argv()).options
    assert again == options


def test_repeated_and_list_options() -> None:
    options = parse_job_args(
        JOBS["ingest"],
        ["--table", "db.t", "--source", "/in", "--property", "a=1", "--property", "b=x=y",
         "--key", "id, ts", "--source-option", "header=true"],
    ).options  # fmt: skip
    assert isinstance(options, IngestOptions)
    assert options.properties == {"a": "1", "b": "x=y"}
    assert options.key == ["id", "ts"]
    assert options.source_options == {"header": "true"}
    assert parse_job_args(JOBS["ingest"], options.to_argv()).options == options
    expire = parse_job_args(
        JOBS["expire_snapshots"],
        ["--table", "db.t", "--snapshot-ids", "1,2", "--snapshot-ids", "3"],
    ).options
    assert isinstance(expire, ExpireSnapshotsOptions)
    assert expire.snapshot_ids == [1, 2, 3]


def test_a_required_option_missing_is_named() -> None:
    with pytest.raises(OptionError, match="--source: required"):
        parse_job_args(JOBS["ingest"], ["--table", "db.t"])
    with pytest.raises(OptionError, match="--table: required"):
        parse_job_args(JOBS["ingest"], ["--source", "/in"])


def test_the_declarations_import_only_the_standard_library() -> None:
    import ast  # noqa: PLC0415
    import sys  # noqa: PLC0415
    from pathlib import Path  # noqa: PLC0415

    from tests.test_layering import STANDARD_LIBRARY_ONLY  # noqa: PLC0415

    root = Path(__file__).resolve().parents[1] / "spark_jobs" / "specs"
    for path in root.glob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            names = []
            if isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom) and node.module:
                names = [node.module]
            for name in names:
                top = name.split(".")[0]
                assert (
                    top in sys.stdlib_module_names
                    or name.startswith("icecore.jobs")
                    or name in STANDARD_LIBRARY_ONLY
                ), (
                    path.name,
                    name,
                )


def test_docs_tables_list_every_option() -> None:
    section = options_section()
    for spec in JOBS.values():
        for option in spec.options.options():
            assert f"`{option.flag}`" in section


def test_the_readme_shows_the_declarations() -> None:
    """The README's option tables are the generated ones: an option documented by hand and
    declared differently fails here (regenerate with `python -m icecore.jobs.docs`)."""
    from pathlib import Path  # noqa: PLC0415

    readme = (Path(__file__).resolve().parents[1] / "README.md").read_text()
    assert options_section() in readme
