"""The sources registry on a real Redis: seeding, idempotent import, pause/resume/remove as the crawl
frontier sees them, and the ``newsflow sources`` commands end to end."""

from __future__ import annotations

import csv
import io
import json
import os
from contextlib import redirect_stdout

import pytest

from newsflow.cli.main import main
from newsflow.core.outlets import outlet
from newsflow.core.source_files import read_opml
from newsflow.core.sources import DEFAULT_SOURCES_PATH, SourceTable
from newsflow.crawler.frontier import Frontier, task_id
from newsflow.storage.keys import Keys
from newsflow.storage.source_registry import FeedEntry, SourceRegistry

OPML = """<?xml version="1.0" encoding="UTF-8"?>
<opml version="2.0"><head><title>export</title></head><body>
  <outline text="News"><outline text="World">
    <outline type="rss" text="Reuters World" xmlUrl="https://www.reuters.com/world/rss"/>
    <outline type="rss" text="BBC World" xmlUrl="https://feeds.bbci.co.uk/news/world/rss.xml"/>
  </outline></outline>
  <outline text="Tech">
    <outline type="rss" text="Example" xmlUrl="https://example.com/feed" category="/gadgets"/>
  </outline>
  <outline type="rss" text="metadata" xmlUrl="http://169.254.169.254/latest/meta-data/"/>
  <outline type="rss" text="private" xmlUrl="http://10.0.0.7/rss"/>
  <outline type="rss" text="not http" xmlUrl="gopher://example.org/1"/>
  <outline type="rss" text="dup" xmlUrl="https://example.com/feed?utm_source=x"/>
</body></opml>
"""


@pytest.fixture
def redis_flushed(server):
    """The module's embedded Redis (conftest ``server``), emptied: ``(client, unix URL)``."""
    server.flushall()
    return server, f"unix://{server.socket_file}"


def dump(client, prefix: str) -> dict:
    """Every key under ``prefix`` with its type and full value."""
    out = {}
    for k in client.scan_iter(match=f"{prefix}:*"):
        t = client.type(k).decode()
        if t == "hash":
            v = client.hgetall(k)
        elif t == "set":
            v = sorted(client.smembers(k))
        elif t == "zset":
            v = client.zrange(k, 0, -1, withscores=True)
        elif t == "list":
            v = client.lrange(k, 0, -1)
        else:
            v = client.get(k)
        out[k] = (t, v)
    return out


@pytest.fixture
def registry(redis_flushed):
    client, _ = redis_flushed
    clock = [1_700_000_000.0]
    return SourceRegistry(client, Keys("t"), seed=SourceTable.load(), clock=lambda: clock[0])


def test_outlets_are_seeded_from_sources_csv_without_overwriting(registry):
    registry.register([("a", FeedEntry("https://www.reuters.com/world/rss"))])
    with open(DEFAULT_SOURCES_PATH, encoding="utf-8") as f:
        rows = {r["domain"]: r for r in csv.DictReader(f)}
    reuters = registry.outlet("reuters.com")
    assert reuters["tier"] == rows["reuters.com"]["tier"] and reuters["name"] == rows["reuters.com"]["name"]
    assert float(reuters["authority"]) == float(rows["reuters.com"]["authority"])
    assert reuters["authority_source"] == "seed"
    # a row that is a subdomain of another registrable domain does not become that domain's outlet
    assert "abcnews.go.com" in rows and outlet("abcnews.go.com") == "go.com"
    assert registry.outlet("go.com") == {}
    seeded = [d for d in rows if outlet(d) == d]
    assert all(registry.outlet(d) for d in seeded)
    # an edit survives seeding again
    registry.set_outlet("reuters.com", authority=0.5)
    assert registry.seed_outlets(SourceTable.load()) == 0
    assert float(registry.outlet("reuters.com")["authority"]) == 0.5


def test_register_is_idempotent_and_reports_each_entry(registry, redis_flushed):
    client, _ = redis_flushed
    report = registry.register(read_opml(io.BytesIO(OPML.encode())), origin="import:test")
    by = {o.ref: o for o in report.outcomes}
    assert report.counts() == {"added": 3, "error": 3, "unchanged": 1}
    assert by["outline 7"].detail.startswith("unsafe_url") and "169.254.169.254" in by["outline 7"].detail
    assert by["outline 8"].detail.startswith("unsafe_url")
    assert by["outline 9"].detail.startswith("bad_url")
    assert by["outline 10"].result == "unchanged" and "outline 6" in by["outline 10"].detail
    feeds = {f["url"]: f for f in registry.feeds()}
    assert feeds["https://www.reuters.com/world/rss"]["categories"] == ["News/World"]
    assert feeds["https://example.com/feed"]["categories"] == ["Tech", "gadgets"]
    assert feeds["https://example.com/feed"]["outlet"] == "example.com"
    assert feeds["https://feeds.bbci.co.uk/news/world/rss.xml"]["outlet"] == "bbci.co.uk"
    assert feeds["https://www.reuters.com/world/rss"]["id"] == task_id("feed", "https://www.reuters.com/world/rss")
    before = dump(client, "t")
    again = registry.register(read_opml(io.BytesIO(OPML.encode())), origin="import:test")
    assert again.counts() == {"error": 3, "unchanged": 4}
    assert dump(client, "t") == before


def test_pause_resume_remove_as_the_frontier_sees_them(registry, redis_flushed):
    client, _ = redis_flushed
    keys = Keys("t")
    frontier = Frontier(client, keys)
    a, b = "https://a.example.com/rss", "https://b.example.net/rss"
    registry.register([("1", FeedEntry(a)), ("2", FeedEntry(b))])
    now = 1_700_000_100.0
    assert frontier.apply_priorities(now) == 2  # the registrations become tasks
    assert {t.url for t in frontier.claim("w", now, 60, n=10)} == {a, b}
    # both leased; pause a while its fetch is in flight: completing it must not queue it again
    registry.set_status(a, "pause")
    leased = {task_id("feed", a), task_id("feed", b)}
    leases = [keys.crawl_leases(keys.crawl_bucket(h)) for h in ("a.example.com", "b.example.net")]
    assert {x.decode() for k in leases for x in client.zrange(k, 0, -1)} == leased
    for url in (a, b):
        assert frontier.complete(
            _task(client, keys, url), "w", now + 1, 0.0, next_due=now + 10, fields={"last_status": "200"}
        )
    later = now + 100
    assert [t.url for t in frontier.claim("w", later, 60, n=10)] == [b]
    # schedule state of the paused feed is kept
    assert client.hget(keys.crawl_task("a.example.com", task_id("feed", a)), "last_status") == b"200"
    assert {f["url"]: f["status"] for f in registry.feeds()} == {a: "paused", b: "active"}
    # resume: queued again by the next claim round
    registry.set_status(a, "resume")
    frontier.apply_priorities(later + 1)
    assert [t.url for t in frontier.claim("w", later + 1, 60, n=10)] == [a]
    # remove: never claimed, unlisted by default, the record kept
    assert frontier.complete(_task(client, keys, a), "w", later + 2, 0.0, next_due=later + 3)
    registry.set_status("example.com", "remove")  # an outlet: all its feeds
    assert a not in {t.url for t in frontier.claim("w", later + 1000, 60, n=10)}
    assert [f["url"] for f in registry.feeds()] == [b]
    [removed] = registry.feeds(["removed"])
    assert removed["url"] == a and removed["title"] == "" and removed["added"] == 1_700_000_000.0
    assert removed["removed"] == 1_700_000_000.0 and registry.feeds()[0]["removed"] is None
    # seeds added to the frontier directly (newsflow crawl --seeds) do not bring a removed feed back
    frontier.add(a, "feed", later + 2000)
    assert all(t.url != a for t in frontier.claim("w", later + 3000, 60, n=10))
    # registering it again restores it
    assert registry.register([("x", FeedEntry(a))]).counts() == {"restored": 1}
    frontier.apply_priorities(later + 4000)
    assert a in {t.url for t in frontier.claim("w2", later + 4000, 60, n=10)}


def _task(client, keys, url):
    from newsflow.crawler.frontier import Task, host_key

    tid = task_id("feed", url)
    h = {k.decode(): v.decode() for k, v in client.hgetall(keys.crawl_task(host_key(url), tid)).items()}
    return Task(tid, url, "feed", h["host"], "", 0, {}, h)


def cli(*argv) -> tuple[int, str]:
    out = io.StringIO()
    with redirect_stdout(out):
        rc = main(list(argv))
    return rc, out.getvalue()


CLEAN = """<opml version="1.0"><body>
<outline text="World"><outline text="AP" xmlUrl="https://apnews.com/world.rss"/>
<outline text="Example" xmlUrl="https://example.org/rss" htmlUrl="https://example.org/"/></outline>
<outline text="Sitemap" xmlUrl="https://example.net/news-sitemap.xml" nfKind="sitemap" category="/maps,/x/y"/>
</body></opml>"""


def test_sources_commands_end_to_end(redis_flushed, tmp_path):
    _, url = redis_flushed
    path = tmp_path / "feeds.opml"
    path.write_text(CLEAN, encoding="utf-8")
    common = ["--redis-url", url, "--key-prefix", "cli"]
    rc, out = cli("sources", "import", str(path), *common)
    assert rc == 0 and out.strip().endswith("3 added"), out
    rc, out = cli("sources", "import", str(path), *common)
    assert rc == 0 and out.strip().splitlines()[-1].endswith("3 unchanged"), out
    assert out.count("unchanged") == 4  # three entries and the summary
    rc, out = cli("sources", "list", "--json", *common)
    rows = [json.loads(line) for line in out.splitlines()]
    assert {r["url"]: (r["title"], r["categories"], r["kind"]) for r in rows} == {
        "https://apnews.com/world.rss": ("AP", ["World"], "feed"),
        "https://example.org/rss": ("Example", ["World"], "feed"),
        "https://example.net/news-sitemap.xml": ("Sitemap", ["maps", "x/y"], "sitemap"),
    }
    ap = next(r for r in rows if r["outlet"] == "apnews.com")
    assert ap["tier"] == "wire" and ap["authority"] == SourceTable.load().authority("apnews.com")
    # export, import into another namespace: the same feeds, titles and categories
    for fmt in ("opml", "csv"):
        rc, exported = cli("sources", "export", "--format", fmt, *common)
        assert rc == 0
        copy = tmp_path / f"copy.{fmt}"
        copy.write_text(exported, encoding="utf-8")
        assert cli("sources", "import", str(copy), "--redis-url", url, "--key-prefix", f"copy{fmt}")[0] == 0
        _, out2 = cli("sources", "list", "--json", "--redis-url", url, "--key-prefix", f"copy{fmt}")
        rows2 = [json.loads(line) for line in out2.splitlines()]
        key = ("id", "url", "kind", "title", "categories", "html_url", "status", "outlet")
        assert sorted(tuple(str(r[k]) for k in key) for r in rows2) == sorted(
            tuple(str(r[k]) for k in key) for r in rows
        )
    # pause / resume / remove
    rc, out = cli("sources", "pause", "https://example.org/rss", *common)
    assert rc == 0 and "paused https://example.org/rss" in out
    rc, out = cli("sources", "pause", "https://example.org/rss", *common)
    assert rc == 0 and "unchanged" in out
    rc, out = cli("sources", "list", "--json", "--status", "paused", *common)
    assert [json.loads(line)["url"] for line in out.splitlines()] == ["https://example.org/rss"]
    rc, out = cli("sources", "remove", "apnews.com", *common)
    assert rc == 0 and "removed https://apnews.com/world.rss" in out
    rc, out = cli("sources", "list", *common)
    assert "apnews.com/world.rss" not in out and out.strip().endswith("2 feeds")
    rc, out = cli("sources", "list", "--status", "removed", "--json", *common)
    assert [json.loads(line)["status"] for line in out.splitlines()] == ["removed"]
    rc, out = cli("sources", "resume", "nothing-registered.example.com", *common)
    assert rc == 1 and "not_found" in out


def test_import_of_a_bad_file_reports_each_entry_and_keeps_the_good_ones(redis_flushed, tmp_path):
    _, url = redis_flushed
    path = tmp_path / "mixed.opml"
    path.write_text(
        '<opml version="2.0"><body>\n'
        '<outline text="ok" xmlUrl="https://www.example.com/rss"/>\n'
        '<outline text="meta" xmlUrl="http://metadata.google.internal/computeMetadata/v1/"/>\n'
        '<outline text="loop" xmlUrl="http://127.1/feed"/>\n'
        '<outline text="ok2" xmlUrl="https://example.co.uk/rss"/>\n'
        '<outline text="broken" xmlUrl="https://x.example.com/f" <\n',
        encoding="utf-8",
    )
    rc, out = cli("sources", "import", str(path), "--redis-url", url, "--json")
    lines = [json.loads(x) for x in out.splitlines()]
    assert rc == 0  # imported; the refused entries are reported
    assert [(x["ref"], x["result"]) for x in lines[:-1]] == [
        ("outline 1", "added"),
        ("outline 2", "error"),
        ("outline 3", "error"),
        ("outline 4", "added"),
        ("line 6", "error"),
    ]
    assert "metadata" in lines[1]["detail"] and "127.0.0.1" in lines[2]["detail"]
    assert "invalid XML at line 6" in lines[4]["detail"]
    assert lines[-1] == {"summary": {"added": 2, "error": 3}}
    # again: the good entries are unchanged, exit 0; --strict fails on the refused ones
    rc, out = cli("sources", "import", str(path), "--redis-url", url)
    assert rc == 0 and out.strip().splitlines()[-1].endswith("3 error, 2 unchanged")
    assert cli("sources", "import", str(path), "--redis-url", url, "--strict")[0] == 1
    # a file nothing can be read from exits 1
    bomb = tmp_path / "bomb.opml"
    bomb.write_text(
        '<?xml version="1.0"?><!DOCTYPE opml [<!ENTITY a "aaaa"><!ENTITY b "&a;&a;&a;&a;">]>'
        '<opml><body><outline text="&b;" xmlUrl="https://example.com/x"/></body></opml>',
        encoding="utf-8",
    )
    rc, out = cli("sources", "import", str(bomb), "--redis-url", url)
    assert rc == 1 and "entity expansion is refused" in out
    rc, out = cli("sources", "import", os.fspath(tmp_path / "missing.opml"), "--redis-url", url)
    assert rc == 2


def test_authority_recomputed_from_near_duplicate_groups(redis_flushed, tmp_path):
    client, url = redis_flushed
    keys = Keys("auth")
    registry = SourceRegistry(client, keys, seed=SourceTable.load())
    registry.register(
        [
            ("1", FeedEntry("https://www.reuters.com/rss")),
            ("2", FeedEntry("https://example.com/rss")),
            ("3", FeedEntry("https://example.org/rss")),
        ]
    )
    registry.set_outlet("example.org", authority=0.8)
    # ten groups founded by reuters.com and copied by example.com (+ one single-outlet group and one
    # single-article group, which do not count), written in the near-duplicate key layout
    for g in range(12):
        cid = f"c{g}"
        members = [(f"r{g}", "uk.reuters.com", 100.0 + g), (f"e{g}", "www.example.com", 200.0 + g)]
        if g == 10:
            members = [(f"x{g}", "example.com", 1.0), (f"y{g}", "example.com", 2.0)]
        if g == 11:
            members = [(f"z{g}", "example.org", 1.0)]
        for aid, domain, t in members:
            client.hset(keys.article(aid), mapping={"source_domain": domain, "event_time": repr(t)})
            client.sadd(keys.cluster_articles(cid), aid)
        client.zadd(keys.clusters_by_size(keys.cluster_shard(cid)), {cid: len(members)})
    rc, out = cli("sources", "authority", "--redis-url", url, "--key-prefix", "auth")
    assert rc == 0 and json.loads(out) == {
        "groups": 11,
        "outlets_counted": 2,
        "outlets_written": len(registry.r.smembers(keys.source_outlets)) - 1,
    }
    reuters, example, override = (registry.outlet(o) for o in ("reuters.com", "example.com", "example.org"))
    # reuters: first 10, copies 0 -> originality (10 + 5) / 20 = 0.75; wire 0.95 + 0.2 * 0.25 -> clipped 1.0
    assert (reuters["first_reports"], reuters["copies"], float(reuters["authority"])) == ("10", "0", 1.0)
    # example.com: copies 10 -> originality 5 / 20 = 0.25; no tier 0.5 - 0.2 * 0.25 = 0.45
    assert (example["first_reports"], example["copies"]) == ("0", "10")
    assert float(example["authority"]) == pytest.approx(0.45)
    assert float(override["authority"]) == 0.8 and override["authority_source"] == "override"
    # an outlet seen in no group keeps its tier value
    assert float(registry.outlet("apnews.com")["authority"]) == 0.95
    # the registry's authorities as the sources table the enrichment step reads
    table = registry.source_table(SourceTable.load())
    assert table.authority("uk.reuters.com") == 1.0 and table.authority("www.example.com") == pytest.approx(0.45)
    assert table.authority("example.org") == 0.8
    assert table.authority("abcnews.go.com") == SourceTable.load().authority("abcnews.go.com")  # subdomain row kept
    out = tmp_path / "table.csv"
    rc, text = cli("sources", "authority", "--redis-url", url, "--key-prefix", "auth", "--table-out", str(out))
    assert rc == 0 and json.loads(text)["table_rows"] == len(table)
    assert SourceTable.load(str(out)).authority("www.example.com") == pytest.approx(0.45)


def test_sources_status_marks_held_feeds(redis_flushed):
    client, url = redis_flushed
    registry = SourceRegistry(client, Keys())
    registry.register([("1", FeedEntry("https://a.example.com/rss")), ("2", FeedEntry("https://b.example.net/rss"))])
    Frontier(client, Keys()).apply_priorities(1_700_000_000.0)
    registry.set_status("https://a.example.com/rss", "pause")
    rc, out = cli("sources", "status", "--json", "--redis-url", url)
    rows = {r["url"]: r for r in map(json.loads, out.splitlines())}
    assert rc == 0 and rows["https://a.example.com/rss"]["held"] is True
    assert rows["https://a.example.com/rss"]["next_due"] == "held"
    assert rows["https://b.example.net/rss"]["held"] is False
    assert rows["https://b.example.net/rss"]["next_due"] == "2023-11-14T22:13:20Z"


def test_registration_resolves_each_host_once_and_refuses_disguised_loopback(redis_flushed, tmp_path):
    """Hosts resolve through an injected map: a name whose every address is forbidden is refused, a name
    with one public address is kept (the fetch-time guard checks every address), a name that does not
    resolve is kept with a warning, a full-width loopback literal is refused without any lookup."""
    from newsflow.crawler.safety import AddressPolicy, RegistrationHostCheck

    client, url = redis_flushed
    dns = {"sneaky.example.com": ["127.0.0.1", "::1"], "mixed.example.com": ["10.0.0.2", "93.184.215.14"]}
    asked = []

    def resolve(host):
        asked.append(host)
        if host not in dns:
            raise OSError("Name or service not known")
        return dns[host]

    registry = SourceRegistry(client, Keys("nf"), seed=SourceTable({}))
    entries = [
        ("a", FeedEntry("https://sneaky.example.com/rss")),
        ("b", FeedEntry("https://sneaky.example.com/other.xml")),
        ("c", FeedEntry("https://mixed.example.com/rss")),
        ("d", FeedEntry("https://gone.example.org/rss")),
        ("e", FeedEntry("http://１２７.０.０.１/feed")),
    ]
    report = registry.register(entries, origin="test", host_check=RegistrationHostCheck(AddressPolicy(), resolve))
    got = {o.ref: (o.result, o.detail) for o in report.outcomes}
    assert got["a"][0] == got["b"][0] == "error" and "resolves only to forbidden addresses" in got["a"][1]
    assert got["a"][1].startswith("unsafe_address")
    assert got["c"] == ("added", "")
    assert got["d"][0] == "added" and got["d"][1].startswith("warning: gone.example.org did not resolve")
    assert got["e"][0] == "error" and "127.0.0.1" in got["e"][1]
    assert asked == ["sneaky.example.com", "mixed.example.com", "gone.example.org"]  # once per host
    # the allow-list exempts a host's addresses as it does at fetch time
    allowed = RegistrationHostCheck(AddressPolicy(["127.0.0.0/8", "::1"]), resolve)
    assert allowed("https://sneaky.example.com/rss") == (None, None)
    # through the command: --resolve maps the host, the refusal is reported and nothing is registered
    path = tmp_path / "one.opml"
    path.write_text(
        '<opml version="2.0"><body><outline text="s" xmlUrl="https://sneaky.example.net/rss"/></body></opml>'
    )
    rc, out = cli(
        "sources", "import", str(path), "--redis-url", url, "--json", "--resolve", "sneaky.example.net=127.0.0.1:80"
    )
    first = json.loads(out.splitlines()[0])
    assert rc == 1 and first["result"] == "error" and "forbidden addresses (127.0.0.1)" in first["detail"]


EXPORTED = (
    "\ufeff"
    '<?xml version="1.0" encoding="UTF-8"?>\n<opml version="1.0"><head><title>My feeds</title></head><body>\n'
    '<outline text="NASA Breaking News" type="rss" xmlUrl="https://www.nasa.gov/rss/breaking.rss"/>\n'
    '<outline text="Science"><outline text="Space">\n'
    '  <outline text="NASA Breaking News" type="rss" xmlUrl="https://www.nasa.gov/rss/breaking.rss"/>\n'
    "</outline></outline>\n"
    '<outline text="Local"><outline text="Food"><outline text="Bakeries">\n'
    '  <outline text="Smith & Daughters Bakery news" type="rss" xmlUrl="https://smithbakery.example.com/feed?a=1&b=2"/>\n'
    "</outline></outline></outline>\n"
    '<outline text="Pok&eacute;mon league results" type="rss" xmlUrl="https://league.example.org/rss"/>\n'
    "</body></opml>\n"
)


def test_opml_as_exporters_write_it(redis_flushed, tmp_path):
    """Issue 37 item 4: a BOM, a bare '&' in a title and in a query string, an HTML entity, a feed listed at the
    top level and again in Science/Space, folders three deep. Every feed is imported once, as meant, and the
    repairs are reported (2 bare '&', 1 &eacute;)."""
    client, url = redis_flushed
    path = tmp_path / "exported.opml"
    path.write_bytes(EXPORTED.encode("utf-8"))
    rc, out = cli("sources", "import", str(path), "--redis-url", url, "--json", "--resolve", "*=93.184.215.14:443")
    lines = [json.loads(x) for x in out.splitlines()]
    assert rc == 0
    assert [(x["ref"], x["result"]) for x in lines[:-1]] == [
        ("outline 1", "added"),
        ("outline 4", "unchanged"),
        ("outline 8", "added"),
        ("outline 9", "added"),
        ("file", "repaired"),
    ]
    assert lines[1]["detail"] == "same feed as outline 1; its categories added: Science/Space"
    assert lines[4]["detail"] == "repaired: 2 bare '&' read as '&amp;', 1 HTML entity &eacute; read as 'é'"
    assert lines[-1] == {"summary": {"added": 3, "repaired": 1, "unchanged": 1}}
    registry = SourceRegistry(client, Keys(), seed=SourceTable({}))
    feeds = {f["url"]: f for f in registry.iter_feeds()}
    assert set(feeds) == {
        "https://www.nasa.gov/rss/breaking.rss",
        "https://smithbakery.example.com/feed?a=1&b=2",
        "https://league.example.org/rss",
    }
    assert feeds["https://www.nasa.gov/rss/breaking.rss"]["categories"] == ["Science/Space"]
    bakery = feeds["https://smithbakery.example.com/feed?a=1&b=2"]
    assert (bakery["title"], bakery["categories"]) == ("Smith & Daughters Bakery news", ["Local/Food/Bakeries"])
    assert feeds["https://league.example.org/rss"]["title"] == "Pokémon league results"
