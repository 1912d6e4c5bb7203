"""What pyarrow cannot do on S3: bulk deletes, and finding and aborting multipart uploads,
through boto3.

`pyarrow.fs` deletes one key per request (and then recreates the parent "directory" as an
empty marker object), and its output stream completes, never aborts, an upload it is asked to
close. The client here is built from the same Iceberg properties as the pyarrow filesystem, so
the endpoint, credentials and addressing style are the same for both.

boto3 is imported on first use: icecore works without it on every other store, and on S3
falls back to one request per key (see `FileIO.delete_many`).
"""

from __future__ import annotations

import importlib.util
import threading
import time
from collections.abc import Iterable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from icecore.io.properties import (
    S3_ACCESS_KEY_ID,
    S3_CONNECT_TIMEOUT,
    S3_ENDPOINT,
    S3_PATH_STYLE_ACCESS,
    S3_REGION,
    S3_REQUEST_TIMEOUT,
    S3_SECRET_ACCESS_KEY,
    S3_SESSION_TOKEN,
    flag,
    seconds,
)
from icecore.io.retry import RetryPolicy, is_transient, logger

DELETE_BATCH = 1000  # the most keys one DeleteObjects request may carry
# The largest object one CopyObject may copy; larger ones are copied in parts.
COPY_LIMIT = 5 * 1024**3
_COPY_PART = 512 * 1024**2
_CONCURRENT_BATCHES = 4


def available() -> bool:
    return importlib.util.find_spec("boto3") is not None


class S3Client:
    """A boto3 S3 client configured from Iceberg properties; thread-safe, built lazily."""

    def __init__(self, properties: Mapping[str, str], policy: RetryPolicy) -> None:
        self._properties = dict(properties)
        self._policy = policy
        self._client: Any = None
        self._lock = threading.Lock()

    def __repr__(self) -> str:
        return "S3Client()"  # never the properties: they hold the secret key

    @property
    def client(self) -> Any:
        with self._lock:
            if self._client is None:
                self._client = self._build()
            return self._client

    def _build(self) -> Any:
        import boto3  # noqa: PLC0415 (optional: only S3 needs it)
        from botocore.config import Config  # noqa: PLC0415

        p = self._properties
        path_style = flag(p, S3_PATH_STYLE_ACCESS)
        if path_style is None:
            # pyarrow's rule: path-style when an endpoint is given (MinIO, moto), else virtual.
            path_style = S3_ENDPOINT in p
        config = Config(
            retries={"mode": "standard", "max_attempts": self._policy.sdk_attempts},
            s3={"addressing_style": "path" if path_style else "virtual"},
            connect_timeout=seconds(p, S3_CONNECT_TIMEOUT) or 60,
            read_timeout=seconds(p, S3_REQUEST_TIMEOUT) or 60,
            # Moves copy one object per thread (`FileIO.move_many`, 16 by default).
            max_pool_connections=32,
        )
        session = boto3.session.Session(
            aws_access_key_id=p.get(S3_ACCESS_KEY_ID),
            aws_secret_access_key=p.get(S3_SECRET_ACCESS_KEY),
            aws_session_token=p.get(S3_SESSION_TOKEN),
            region_name=p.get(S3_REGION),
        )
        return session.client("s3", endpoint_url=p.get(S3_ENDPOINT), config=config)

    def delete_keys(self, bucket: str, keys: Sequence[str]) -> dict[str, str]:
        """Delete `keys` from `bucket` in `DeleteObjects` batches of at most 1,000; returns
        key -> error for the keys that are not gone. S3 reports a missing key as deleted.

        A batch the service refuses whole (no such bucket, access denied) fails every key in
        it; per-key errors that say the store was busy are retried with backoff, the others
        reported as S3 worded them."""
        batches = [keys[i : i + DELETE_BATCH] for i in range(0, len(keys), DELETE_BATCH)]
        failed: dict[str, str] = {}
        with ThreadPoolExecutor(max_workers=min(_CONCURRENT_BATCHES, len(batches) or 1)) as pool:
            for result in pool.map(lambda batch: self._delete_batch(bucket, batch), batches):
                failed.update(result)
        return failed

    def _delete_batch(self, bucket: str, keys: Sequence[str]) -> dict[str, str]:
        pending = list(keys)
        failed: dict[str, str] = {}
        for attempt in range(1, self._policy.max_attempts + 1):
            last = attempt == self._policy.max_attempts
            try:
                answer = self.client.delete_objects(
                    Bucket=bucket,
                    Delete={"Objects": [{"Key": k} for k in pending], "Quiet": True},
                )
            except Exception as exc:  # botocore raises ClientError and transport errors
                message = _describe(exc)
                if not last and is_transient(message):
                    self._pause(attempt, f"DeleteObjects on bucket {bucket}", message)
                    continue
                failed.update(dict.fromkeys(pending, message))
                return failed
            errors = {}
            for error in answer.get("Errors", []):
                code, text = error.get("Code", "?"), error.get("Message", "")
                errors[error["Key"]] = f"{code}: {text}" if text else code
            pending = [k for k, why in errors.items() if is_transient(why)]
            if last or not pending:
                failed.update(errors)
                return failed
            failed.update({k: why for k, why in errors.items() if not is_transient(why)})
            self._pause(attempt, f"DeleteObjects on bucket {bucket}", f"{len(pending)} keys busy")
        return failed

    def _pause(self, attempt: int, what: str, why: str) -> None:
        pause = self._policy.delay(attempt)
        logger.warning("%s failed (attempt %d), retrying in %.2fs: %s", what, attempt, pause, why)
        time.sleep(pause)

    def copy(self, bucket: str, key: str, target_bucket: str, target_key: str) -> None:
        """Copy an object inside S3, server-side (no byte passes through this process): one
        `CopyObject`, atomic, for up to 5 GB; larger objects as a multipart upload of
        `UploadPartCopy` parts, visible only once complete. Throttling is retried by botocore."""
        source = {"Bucket": bucket, "Key": key}
        try:
            self.client.copy_object(CopySource=source, Bucket=target_bucket, Key=target_key)
            return
        except Exception as exc:
            if "copy source is larger than the maximum" not in _describe(exc):
                raise
        from boto3.s3.transfer import TransferConfig  # noqa: PLC0415 (optional, as above)

        config = TransferConfig(multipart_threshold=COPY_LIMIT, multipart_chunksize=_COPY_PART)
        self.client.copy(source, target_bucket, target_key, Config=config)

    def abort_uploads(self, bucket: str, key: str) -> int:
        """Abort every multipart upload in progress for exactly `key`; returns how many.

        pyarrow does not tell the upload id, so uploads are found by key. Iceberg never has
        two writers on one key (file names are unique per attempt), so only ours are there."""
        aborted = 0
        for upload in self._uploads(bucket, key):
            self.client.abort_multipart_upload(Bucket=bucket, Key=key, UploadId=upload["UploadId"])
            aborted += 1
        return aborted

    def _uploads(self, bucket: str, key: str) -> Iterable[dict[str, Any]]:
        yield from (u for u in self._uploads_under(bucket, key) if u["Key"] == key)

    def _uploads_under(self, bucket: str, prefix: str) -> Iterable[dict[str, Any]]:
        paginator = self.client.get_paginator("list_multipart_uploads")
        for page in paginator.paginate(Bucket=bucket, Prefix=prefix):
            yield from page.get("Uploads", [])

    def uploads_under(self, bucket: str, prefix: str) -> list[tuple[str, str, int | None]]:
        """(key, upload id, initiated in ms since the epoch) of every multipart upload in
        progress whose key starts with `prefix`, all pages (botocore retries throttling)."""
        return [
            (u["Key"], u["UploadId"], _epoch_ms(u.get("Initiated")))
            for u in self._uploads_under(bucket, prefix)
        ]

    def abort_upload(self, bucket: str, key: str, upload_id: str) -> None:
        """Abort one upload; one already gone (aborted or completed meanwhile) is no error."""
        try:
            self.client.abort_multipart_upload(Bucket=bucket, Key=key, UploadId=upload_id)
        except Exception as exc:
            if "NoSuchUpload" not in _describe(exc):
                raise


def _epoch_ms(instant: Any) -> int | None:
    """botocore answers timestamps as aware datetimes."""
    return None if instant is None else int(instant.timestamp() * 1000)


def _describe(exc: BaseException) -> str:
    response = getattr(exc, "response", None)
    if isinstance(response, dict) and "Error" in response:
        error = response["Error"]
        status = response.get("ResponseMetadata", {}).get("HTTPStatusCode")
        code, text = error.get("Code", "?"), error.get("Message", "")
        return f"{code} (HTTP status {status}): {text}" if status else f"{code}: {text}"
    return f"{type(exc).__name__}: {exc}"
