"""The thumbnail store: content-addressed picture files in a local directory or under ``gs://bucket/prefix``.

Layout: one file per thumbnail, ``<root>/<name>``, ``name`` as :data:`newsflow.core.images.THUMBNAIL_NAME_RE`
(SHA-256 of the bytes, then the size). A name fixes its bytes, so writes are idempotent (an existing name is not
written again) and readers may cache a file forever. Local writes go to a temporary name then ``os.replace``; a
``gs://`` object becomes visible only once its upload completes, so a reader never sees part of a file.

Files go through pyarrow's filesystems (:func:`newsflow.core.resources.filesystem_and_path`, which also reads the
models from ``gs://``), the same local-or-``gs://`` store the Parquet datasets use; the crawler (which writes
thumbnails) and the serving app (which reads them) may not import Beam, whose ``FileSystems`` the pipeline's
Parquet sinks use.

The crawler writes (``newsflow crawl --thumbnails DIR``), the serving app reads (``/img/<name>``); both default to
:func:`default_thumbnail_dir` (``$NEWSFLOW_THUMBNAILS`` or ``<data dir>/thumbnails``).
"""

from __future__ import annotations

import os
import uuid
from collections.abc import Mapping

import pyarrow.fs as pafs

from newsflow.core.images import thumbnail_size
from newsflow.core.resources import filesystem_and_path

ENV_THUMBNAILS = "NEWSFLOW_THUMBNAILS"


def default_thumbnail_dir(data_dir: str, environ: Mapping[str, str] | None = None) -> str:
    """``$NEWSFLOW_THUMBNAILS`` when set, else ``<data_dir>/thumbnails``."""
    env = os.environ if environ is None else environ
    return env.get(ENV_THUMBNAILS) or os.path.join(data_dir, "thumbnails")


class ThumbnailStore:
    """Thumbnail files under ``root`` (a local directory or ``gs://bucket/prefix``).

    Args:
      root: where the files live; a local directory (made absolute) is created on the first write.
    """

    def __init__(self, root: str):
        root = root.rstrip("/")
        self.root = root if "://" in root else os.path.abspath(root)
        self._fs, self._base = filesystem_and_path(self.root)
        self._local = isinstance(self._fs, pafs.LocalFileSystem)

    def _path(self, name: str) -> str:
        if thumbnail_size(name) is None:  # the name rule keeps every path inside root (no "/", no "..")
            raise ValueError(f"not a thumbnail name: {name[:100]!r}")
        return f"{self._base}/{name}"

    def exists(self, name: str) -> bool:
        """True when ``name`` is stored. Raises ``ValueError`` for a name that is not a thumbnail name."""
        return self._fs.get_file_info(self._path(name)).type == pafs.FileType.File

    def put(self, name: str, data: bytes) -> bool:
        """Stores ``data`` as ``name`` unless it is already there; True when it wrote.

        Raises:
          ValueError: ``name`` is not a thumbnail name.
          OSError: the store cannot be written (transient: the caller retries or gives up on the picture).
        """
        path = self._path(name)
        if self.exists(name):
            return False
        if self._local:
            os.makedirs(self._base, exist_ok=True)
            tmp = f"{self._base}/.{name}.{uuid.uuid4().hex}.tmp"
            with open(tmp, "wb") as f:
                f.write(data)
            os.replace(tmp, path)
        else:
            with self._fs.open_output_stream(path) as f:
                f.write(data)
        return True

    def get(self, name: str) -> bytes | None:
        """The bytes of ``name``; ``None`` when it is not a thumbnail name or not stored."""
        try:
            path = self._path(name)
        except ValueError:
            return None
        try:
            with self._fs.open_input_stream(path) as f:
                return f.read()
        except FileNotFoundError:
            return None
        except OSError as e:
            if self._fs.get_file_info(path).type == pafs.FileType.NotFound:
                return None
            raise OSError(f"thumbnail {name} cannot be read from {self.root}: {e}") from e
