"""Where newsflow finds its shipped data and trained models, in a checkout or in an installed package.

Shipped data (the sources table ``sources.csv`` and the topic/embedding training sets ``topics/``) sits
in ``data/`` beside the packages in a checkout. ``setup.py`` packages the same files as
``newsflow/_data/`` and, when the models have been built (``make models``), the trained models of
``var/models/`` as ``newsflow/_models/``; that is what ``--setup_file`` ships to Dataflow workers and
what a wheel installs. Paths here are relative to this installed package, never to a working directory:

=====================  ====================================  ==========================================
what                   installed package                     checkout (editable install)
=====================  ====================================  ==========================================
:func:`data_path`      ``<site-packages>/newsflow/_data/``   ``<repo>/data/``
models (default)       ``<site-packages>/newsflow/_models/``  ``<repo>/var/models/``
                       (else ``<data dir>/models``)
=====================  ====================================  ==========================================

A model directory may also be remote (``gs://bucket/models``): fastText and numpy read local files, so
:func:`local_model_file` copies a remote model file (and its companions) once per process into a local
cache and returns the local path.
"""

from __future__ import annotations

import hashlib
import os
import tempfile
import threading
import uuid
from collections.abc import Sequence
from urllib.parse import urlsplit

import pyarrow.fs as pafs

PACKAGE_DIR = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))  # the newsflow package
INSTALLED_DATA_DIR = os.path.join(PACKAGE_DIR, "_data")
CHECKOUT_DATA_DIR = os.path.join(os.path.dirname(PACKAGE_DIR), "data")
INSTALLED_MODEL_DIR = os.path.join(PACKAGE_DIR, "_models")
CHECKOUT_MODEL_DIR = os.path.join(os.path.dirname(PACKAGE_DIR), "var", "models")

_LOCK = threading.Lock()


def data_path(*parts: str) -> str:
    """Path of a shipped data file: under ``newsflow/_data`` when installed, else ``<repo>/data``."""
    base = INSTALLED_DATA_DIR if os.path.isdir(INSTALLED_DATA_DIR) else CHECKOUT_DATA_DIR
    return os.path.join(base, *parts)


def is_installed() -> bool:
    """Whether this ``newsflow`` is an installed package (its data packaged), not a checkout."""
    return os.path.isdir(INSTALLED_DATA_DIR)


def default_model_dir(data_dir: str | None = None) -> str:
    """The default model directory: the models packaged with an installed ``newsflow``; in a checkout
    ``<repo>/var/models``; an installed package without models uses ``<data_dir>/models`` (built there
    from the packaged training data when missing)."""
    if os.path.isdir(INSTALLED_MODEL_DIR):
        return INSTALLED_MODEL_DIR
    if not is_installed():
        return CHECKOUT_MODEL_DIR
    return os.path.join(os.path.abspath(data_dir or "var"), "models")


def configured_model_dir() -> str:
    """The model directory a run without explicit settings uses, read at call time: ``$NEWSFLOW_MODEL_DIR``, else
    :func:`default_model_dir` of ``$NEWSFLOW_DATA_DIR`` (default ``./var``); local paths made absolute. The same
    rule as the runtime settings resolve without overrides."""
    model_dir = os.environ.get("NEWSFLOW_MODEL_DIR") or default_model_dir(
        os.path.abspath(os.environ.get("NEWSFLOW_DATA_DIR") or "var")
    )
    return model_dir if "://" in model_dir else os.path.abspath(model_dir)


def is_remote(path: str) -> bool:
    """Whether ``path`` is a URI (``gs://...``) rather than a local path."""
    return "://" in (path or "")


def local_model_file(path: str, companion_suffixes: Sequence[str] = (), cache_dir: str | None = None) -> str:
    """A local path for the model file ``path``: ``path`` itself when local, else a cached local copy.

    Remote files (``path`` and ``path + suffix`` for each companion suffix, e.g. a calibration file) are
    copied once into ``<cache_dir>/newsflow-models/<key>/`` (default cache: the system temp dir),
    atomically, so concurrent workers of one machine share the copy. ``key`` hashes the remote directory,
    the file name and each remote file's size and modification time, so a model replaced in the bucket
    (a retrained ``gs://.../topics-v1.bin``) is fetched anew instead of served from a stale copy; older
    copies stay in the cache until the temp dir is cleaned.

    Raises:
      FileNotFoundError: a remote file does not exist or cannot be read (the message names it).
    """
    if not is_remote(path):
        return path

    remote_dir, name = path.rsplit("/", 1)
    version = [remote_dir, name]
    for suffix in ("", *companion_suffixes):
        try:
            fs, remote = filesystem_and_path(path + suffix)
            info = fs.get_file_info(remote)
        except (OSError, ValueError) as e:
            raise FileNotFoundError(f"model file {path + suffix} cannot be read: {e}") from None
        if info.type != pafs.FileType.File:
            raise FileNotFoundError(f"model file {path + suffix} cannot be read: not found")
        version.append(f"{suffix}:{info.size}:{info.mtime_ns}")
    cache = os.path.join(
        cache_dir or tempfile.gettempdir(),
        "newsflow-models",
        hashlib.sha256("\n".join(version).encode()).hexdigest()[:16],
    )
    os.makedirs(cache, exist_ok=True)
    with _LOCK:
        for suffix in ("", *companion_suffixes):
            local = os.path.join(cache, name + suffix)
            if os.path.exists(local):
                continue
            fs, remote = filesystem_and_path(path + suffix)
            tmp = f"{local}.{os.getpid()}.{uuid.uuid4().hex}.tmp"
            try:
                with fs.open_input_stream(remote) as src, open(tmp, "wb") as dst:
                    while chunk := src.read(1 << 20):
                        dst.write(chunk)
            except (OSError, ValueError) as e:
                if os.path.exists(tmp):
                    os.remove(tmp)
                raise FileNotFoundError(f"model file {path + suffix} cannot be read: {e}") from None
            os.replace(tmp, local)
    return os.path.join(cache, name)


def filesystem_and_path(uri: str) -> tuple[pafs.FileSystem, str]:
    """pyarrow filesystem + path for a local path or URI.

    ``gs://`` honours ``STORAGE_EMULATOR_HOST`` (``http://host:port``, as google-cloud-storage
    does) by connecting anonymously to that endpoint; otherwise default GCP credentials apply.
    """
    if uri.startswith("gs://"):
        emulator = os.environ.get("STORAGE_EMULATOR_HOST")
        if emulator:
            parts = urlsplit(emulator if "://" in emulator else f"http://{emulator}")
            fs = pafs.GcsFileSystem(anonymous=True, endpoint_override=parts.netloc, scheme=parts.scheme or "http")
            return fs, uri[len("gs://") :]
    if "://" in uri:
        return pafs.FileSystem.from_uri(uri)
    return pafs.LocalFileSystem(), uri
