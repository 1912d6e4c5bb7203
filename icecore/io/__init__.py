"""File access for every storage an Iceberg table may live on, through `pyarrow.fs`.

- `fileio`: `FileIO`, the one way icecore and the jobs read, write, list and delete files;
- `locations`: the one location parser: a location's store and path, listed paths spelled
  back the way the caller spelled the location, the scheme aliases, and comparison keys;
- `filesystems`: S3, GCS, Azure and HDFS filesystems built from Iceberg catalog properties;
- `properties`: those property names, and hiding the secret ones;
- `retry`: which errors pass, and backoff with jitter;
- `output`: output files that become visible only when closed;
- `s3client`: bulk deletes, server-side copies and upload aborts on S3, which pyarrow lacks;
- `local`: local disks' moves that never replace a file, and the directories they empty.
"""

from icecore.io.fileio import FileIO, ListedFile, PendingUpload
from icecore.io.properties import (
    ADLS_ACCOUNT_KEY,
    ADLS_ACCOUNT_NAME,
    ADLS_BLOB_STORAGE_AUTHORITY,
    ADLS_BLOB_STORAGE_SCHEME,
    ADLS_DFS_STORAGE_AUTHORITY,
    ADLS_DFS_STORAGE_SCHEME,
    ADLS_SAS_TOKEN,
    GCS_NO_AUTH,
    GCS_OAUTH2_TOKEN,
    GCS_OAUTH2_TOKEN_EXPIRES_AT,
    GCS_PROJECT_ID,
    GCS_SERVICE_HOST,
    HDFS_USER,
    S3_ACCESS_KEY_ID,
    S3_CONNECT_TIMEOUT,
    S3_ENDPOINT,
    S3_PATH_STYLE_ACCESS,
    S3_REGION,
    S3_REQUEST_TIMEOUT,
    S3_SECRET_ACCESS_KEY,
    S3_SESSION_TOKEN,
)
from icecore.io.retry import RetryPolicy

__all__ = [
    "ADLS_ACCOUNT_KEY",
    "ADLS_ACCOUNT_NAME",
    "ADLS_BLOB_STORAGE_AUTHORITY",
    "ADLS_BLOB_STORAGE_SCHEME",
    "ADLS_DFS_STORAGE_AUTHORITY",
    "ADLS_DFS_STORAGE_SCHEME",
    "ADLS_SAS_TOKEN",
    "GCS_NO_AUTH",
    "GCS_OAUTH2_TOKEN",
    "GCS_OAUTH2_TOKEN_EXPIRES_AT",
    "GCS_PROJECT_ID",
    "GCS_SERVICE_HOST",
    "HDFS_USER",
    "S3_ACCESS_KEY_ID",
    "S3_CONNECT_TIMEOUT",
    "S3_ENDPOINT",
    "S3_PATH_STYLE_ACCESS",
    "S3_REGION",
    "S3_REQUEST_TIMEOUT",
    "S3_SECRET_ACCESS_KEY",
    "S3_SESSION_TOKEN",
    "FileIO",
    "ListedFile",
    "PendingUpload",
    "RetryPolicy",
]
