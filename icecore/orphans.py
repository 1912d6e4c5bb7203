"""Which listed files are orphans, compared the way Iceberg's `DeleteOrphanFiles` does.

A listed file and a file the metadata references are the same file when their paths agree
(scheme and authority aside, duplicate slashes collapsed). Their schemes and authorities must
then agree too, after the declared equivalences (S3's spellings, `s3a` and `s3n`, are `s3` by
default, as in Iceberg; the other aliases of `icecore.io.locations.ALIASES` only when
declared); a component missing on either side (`/t/x` against `file:/t/x`) agrees with
anything. When the paths agree and a scheme or an authority does not, nobody can say whether
the listed file is the referenced one: that is a prefix mismatch, which is an error unless
the user chose to ignore such files or delete them.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import NamedTuple

from icecore.io.locations import ALIASES, SCHEMES, SplitLocation, Store, split_location

# Iceberg's default `equal_schemes`: `s3a,s3n => s3`.
DEFAULT_EQUAL_SCHEMES = {a: s for a, s in ALIASES.items() if SCHEMES[s] is Store.S3}


@dataclass(frozen=True)
class LocationMatcher:
    """Decides, for listed files, whether the metadata references them."""

    equal_schemes: Mapping[str, str] = field(default_factory=lambda: dict(DEFAULT_EQUAL_SCHEMES))
    equal_authorities: Mapping[str, str] = field(default_factory=dict)

    def scheme(self, scheme: str) -> str:
        lowered = {k.lower(): v.lower() for k, v in self.equal_schemes.items()}
        return lowered.get(scheme, scheme)

    def authority(self, authority: str) -> str:
        return self.equal_authorities.get(authority, authority)

    def agree(self, a: SplitLocation, b: SplitLocation) -> bool:
        """Same scheme and authority, after equivalences; a missing one agrees with any."""
        schemes = not a.scheme or not b.scheme or self.scheme(a.scheme) == self.scheme(b.scheme)
        authorities = (
            not a.authority
            or not b.authority
            or self.authority(a.authority) == self.authority(b.authority)
        )
        return schemes and authorities


def is_hidden(location: str, root: str) -> bool:
    """Whether `location`, below the directory `root`, is under a hidden name: a file or
    directory whose name starts with `.` or `_` (`.crc` checksums, `_SUCCESS` markers,
    `_temporary`), as Iceberg's orphan removal skips them. Partition directories
    (`_key=value`, a partition field may start with `_`) are not hidden."""
    path = split_location(location).path
    base = split_location(root).path.rstrip("/")
    relative = path[len(base) + 1 :] if path.startswith(base + "/") else path.lstrip("/")
    parts = relative.split("/")
    return any(
        part.startswith((".", "_")) and not (i < len(parts) - 1 and "=" in part)
        for i, part in enumerate(parts)
    )


class Classified(NamedTuple):
    orphans: list[str]
    mismatched: list[tuple[str, list[str]]]  # listed location, referenced spellings


def classify(
    listed: Iterable[str], referenced: Iterable[str], matcher: LocationMatcher
) -> Classified:
    """Split listed files into orphans (no referenced file has their path) and prefix
    mismatches (one has their path, none their scheme and authority). The rest are
    referenced."""
    by_path: dict[str, list[SplitLocation]] = {}
    spelled: dict[SplitLocation, str] = {}
    for location in referenced:
        split = split_location(location)
        by_path.setdefault(split.path, []).append(split)
        spelled[split] = location
    orphans: list[str] = []
    mismatched: list[tuple[str, list[str]]] = []
    for location in listed:
        split = split_location(location)
        candidates = by_path.get(split.path)
        if not candidates:
            orphans.append(location)
        elif not any(matcher.agree(split, c) for c in candidates):
            mismatched.append((location, sorted(spelled[c] for c in candidates)))
    return Classified(orphans, mismatched)
