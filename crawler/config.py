"""Crawler configuration: one frozen dataclass with every limit, timeout and politeness setting."""

from __future__ import annotations

from dataclasses import dataclass, field

DEFAULT_CONTACT_URL = "https://github.com/newsflow/newsflow#crawler"
DEFAULT_USER_AGENT = f"newsflow-crawler/0.1 (+{DEFAULT_CONTACT_URL})"


@dataclass(frozen=True)
class CrawlerConfig:
    """Settings of a crawl worker. Times are seconds, sizes bytes.

    Attributes:
      user_agent: sent on every request; names the crawler and a contact URL.
      robots_agent: product token matched against robots.txt groups.
      connect_timeout_s / read_timeout_s: per-operation timeouts.
      total_timeout_s: hard deadline for a whole fetch incl. redirects and body (cuts endlessly slow responses).
      max_body_bytes: responses larger than this (after content decoding) are cut off and refused.
      max_redirects: redirect hops followed before giving up.
      min_host_delay_s: minimum gap between two requests to one host (robots Crawl-delay may raise it).
      max_host_delay_s: upper bound applied to a robots Crawl-delay.
      lease_s: how long a claimed task stays leased; must exceed ``total_timeout_s`` plus processing.
      concurrency: fetch coroutines per worker process.
      seen_ttl_s: how long a canonical article URL stays in the seen set (not fetched again).
      alias_ttl_s: how long an alias URL of a landed article (feed link, pre-redirect URL, AMP or
        mobile copy; :mod:`newsflow.storage.aliases`) keeps resolving to the article's id.
      follow_links: crawl depth below an article page (0 = shallow: feeds and article pages only;
        1 = also same-site links found on an article, one level deep).
      max_links_per_page: cap on links followed from one page.
      page_attempts: fetch attempts for an article page before landing it feed-only / dead-lettering it.
      allow_hosts: hosts/IPs/networks exempt from the private-address guard (e.g. ``("127.0.0.1",)``).
      resolve: ``{"*": "127.0.0.1:8080"}`` or per-host overrides: connect there instead of DNS (replay/tests).
      dns_cache_s: how long a host's address check (DNS answer and safety verdict) is reused, seconds
        (:mod:`newsflow.crawler.fetch`); the peer address of every connection is still checked.
    """

    user_agent: str = DEFAULT_USER_AGENT
    robots_agent: str = "newsflow-crawler"
    connect_timeout_s: float = 5.0
    read_timeout_s: float = 10.0
    total_timeout_s: float = 30.0
    max_body_bytes: int = 5 * 1024 * 1024
    max_redirects: int = 5
    min_host_delay_s: float = 1.0
    max_host_delay_s: float = 120.0
    lease_s: float = 90.0
    concurrency: int = 16
    seen_ttl_s: float = 7 * 86400.0
    alias_ttl_s: float = 30 * 86400.0
    follow_links: int = 0
    max_links_per_page: int = 20
    page_attempts: int = 3
    allow_hosts: tuple[str, ...] = ()
    resolve: dict = field(default_factory=dict)
    dns_cache_s: float = 60.0

    def __post_init__(self):
        if self.lease_s <= self.total_timeout_s:
            raise ValueError(f"lease_s ({self.lease_s}) must exceed total_timeout_s ({self.total_timeout_s})")
        if self.max_body_bytes <= 0 or self.max_redirects < 0 or self.concurrency < 1:
            raise ValueError("max_body_bytes must be > 0, max_redirects >= 0, concurrency >= 1")
        if self.dns_cache_s < 0:
            raise ValueError(f"dns_cache_s must be >= 0, got {self.dns_cache_s}")
        if self.follow_links not in (0, 1):
            raise ValueError(f"follow_links must be 0 or 1, got {self.follow_links}")
