"""Retrying whole storage operations that failed for a reason that passes.

The SDKs under `pyarrow.fs` retry single requests, but not everything: a throttled ranged GET
whose error body overflows the read buffer fails with "Failed to flush response stream", AWS's
standard retry mode stops retrying once its retry quota is spent under sustained throttling,
and per-key errors inside a 200 `DeleteObjects` answer are not retried by anybody. So icecore
retries each whole operation (read a file, list a directory, delete a key) once more on top,
with exponential backoff and full jitter, and only for errors that say the store was busy or
the connection broke: never for "not found", "access denied" or a bad request.

Retrying must not duplicate or lose a file; that is up to the operation (see `FileIO`): reads
and lists are idempotent, deletes treat "already gone" as done, and writes verify what an
earlier attempt may have committed before refusing to overwrite it.
"""

from __future__ import annotations

import logging
import random
import re
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import TypeVar

from icecore.errors import FileError

T = TypeVar("T")
logger = logging.getLogger("icecore.io")

# What pyarrow's S3, GCS and Azure errors, botocore and the OS say about a busy store or a
# broken connection. HTTP 500/502/503/504 and 429, S3's SlowDown and its per-key codes, the AWS
# SDK's error names, google-cloud-cpp's status codes, and socket-level failures.
_TRANSIENT = re.compile(
    r"HTTP status (?:429|500|502|503|504)\b"
    r"|\b(?:status code|StatusCode)[:= ]+(?:429|500|502|503|504)\b"
    r"|SLOW_DOWN|SlowDown|Throttl|THROTTLING|TooManyRequests|RequestLimitExceeded"
    r"|SERVICE_UNAVAILABLE|ServiceUnavailable|InternalError|INTERNAL_FAILURE"
    r"|NETWORK_CONNECTION|REQUEST_TIMEOUT|RequestTimeout"
    r"|Failed to flush response stream|Connection reset|connection was reset|Broken pipe"
    r"|Could not connect to server|Fail to get a new connection|Couldn't connect"
    r"|timed out|Timeout was reached|UNAVAILABLE|DEADLINE_EXCEEDED|ServerBusy",
    re.IGNORECASE,
)
_NOT_TRANSIENT = re.compile(r"NoSuchBucket|NoSuchKey|AccessDenied|InvalidAccessKeyId|Forbidden")


def is_transient(error: BaseException | str) -> bool:
    """Whether `error` may pass if the same operation is tried again shortly."""
    if isinstance(error, ConnectionError | TimeoutError):
        return True
    text = error if isinstance(error, str) else f"{type(error).__name__}: {error}"
    return bool(_TRANSIENT.search(text)) and not _NOT_TRANSIENT.search(text)


@dataclass(frozen=True)
class RetryPolicy:
    """How hard to try. `max_attempts` counts the first try; the n-th retry waits a random
    time up to `base_delay * 2**(n-1)`, capped at `max_delay` ("full jitter", so that many
    workers throttled together do not come back together).

    `sdk_max_attempts` is what the SDK underneath may spend on each request (pyarrow's S3
    `retry_strategy`, botocore's `max_attempts`) before icecore sees a failure; None: the same.
    """

    max_attempts: int = 5
    base_delay: float = 0.2
    max_delay: float = 10.0
    sdk_max_attempts: int | None = None

    @property
    def sdk_attempts(self) -> int:
        return self.max_attempts if self.sdk_max_attempts is None else self.sdk_max_attempts

    def delay(self, retry: int) -> float:
        return random.uniform(0, min(self.max_delay, self.base_delay * 2 ** (retry - 1)))

    def call(
        self,
        operation: Callable[[], T],
        describe: Callable[[BaseException], str],
        what: str,
        retryable: Callable[[BaseException], bool] = is_transient,
    ) -> T:
        """`operation()`, tried again while it raises a retryable OSError or FileError.

        `describe` renders an error for the log (redacted: it may hold an SDK's request URL);
        `what` names the operation and location. The last error propagates unchanged.
        """
        attempt = 1
        while True:
            try:
                return operation()
            except (OSError, FileError) as exc:
                if attempt >= self.max_attempts or not retryable(exc):
                    raise
                pause = self.delay(attempt)
                logger.warning(
                    "%s failed (attempt %d of %d), retrying in %.2fs: %s",
                    what,
                    attempt,
                    self.max_attempts,
                    pause,
                    describe(exc),
                )
                time.sleep(pause)
                attempt += 1
