"""A manifest rewrite executed in the caller's own threads, without an engine: for tables whose
replaced manifests are small enough (the job's `--driver-max-bytes`) that their entries fit
in one process, where starting Spark would cost more than the whole rewrite.

One group at a time: its manifests are read on a thread pool (live entries, with every
metric), the entries sorted by clustering key and path, cut into the group's outputs and
those written on the same pool.
"""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor

from icecore.actions.manifest_output import ManifestOutput, even_slices, write_manifests
from icecore.actions.rewrite_manifests import ManifestGroup
from icecore.io import FileIO
from icecore.spec.manifest import ManifestEntry, read_manifest
from icecore.spec.manifest_list import ManifestFile

THREADS = 8  # reading and writing manifests mostly waits on storage


def rewrite_in_threads(
    io: FileIO, group: ManifestGroup, output: ManifestOutput, written: list[ManifestFile]
) -> None:
    """Write `group` as its new manifests, appending each to `written` (every one that was
    written, also when another failed: the caller deletes them after a failure)."""
    key, spec = group.sort_key(), group.form.spec

    def read(manifest: ManifestFile) -> list[tuple[bytes, ManifestEntry]]:
        entries = read_manifest(io, manifest, spec=spec, live_only=True)
        return [(key(e.data_file), e) for e in entries]

    with ThreadPoolExecutor(min(THREADS, len(group.manifests)), "icefloe-manifests") as pool:
        keyed = [item for part in pool.map(read, group.manifests) for item in part]
        keyed.sort(key=lambda item: item[0])
        entries = [e for _, e in keyed]
        del keyed
        runs = even_slices(len(entries), group.outputs)
        target = group.target_size_bytes
        futures = [pool.submit(write_manifests, io, output, entries[r], 1, target) for r in runs]
        failure: BaseException | None = None
        for future in futures:
            try:
                written.extend(future.result())
            except BaseException as exc:  # collect the others' files before raising
                failure = failure or exc
        if failure is not None:
            raise failure
