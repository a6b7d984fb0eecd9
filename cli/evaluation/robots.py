"""``newsflow eval robots --cases FILE``: robots.txt conformance against google/robotstxt vectors.

Prints one JSON line ``{"cases": N, "passed": M, "failed": [...]}`` for the
``is_user_agent_allowed`` vectors of the robotstxt-conformance JSON format
(``{"is_user_agent_allowed": [{test, robots_txt, user_agent, url, expected_allowed}]}``).
Exit code 0 when every case passes, 1 when some case fails. Bad input (a missing or unreadable
file, not JSON, no ``is_user_agent_allowed`` list, a case without a required field or with a
field of the wrong type) prints ``error: <file>: <problem>`` to stderr and exits with code 2,
the convention of every ``newsflow eval`` command (:mod:`newsflow.cli.evaluation.inputs`).
"""

from __future__ import annotations

from newsflow.cli.evaluation.inputs import InputError, fail, read_json

COMMAND = "robots"
HELP = "robots.txt conformance: prints {cases, passed} for is_user_agent_allowed vectors"
CASE_FIELDS = (("robots_txt", str), ("user_agent", str), ("url", str), ("expected_allowed", bool))


def add_arguments(parser) -> None:
    """Adds ``--cases``."""
    parser.add_argument("--cases", required=True, help="robots_cases.json (robotstxt-conformance format)")


def evaluate(cases: list[dict]) -> dict:
    """Runs :func:`newsflow.crawler.robots.is_user_agent_allowed` on each case.

    Returns:
      ``{"cases": int, "passed": int, "failed": [test names of failing cases]}``.
    """
    from newsflow.crawler.robots import is_user_agent_allowed

    failed = []
    for case in cases:
        got = is_user_agent_allowed(case["robots_txt"], case["user_agent"], case["url"])
        if got != bool(case["expected_allowed"]):
            failed.append(case.get("test", "?"))
    return {"cases": len(cases), "passed": len(cases) - len(failed), "failed": failed}


def load_cases(path: str) -> list[dict]:
    """The ``is_user_agent_allowed`` cases of a robotstxt-conformance JSON file.

    Raises:
      InputError: the file is missing, unreadable or not JSON; it has no ``is_user_agent_allowed``
        list; or a case is not an object, lacks a field of :data:`CASE_FIELDS` or has one of the
        wrong type (the message names the case by index and ``test`` name).
    """
    data = read_json(path)
    cases = data.get("is_user_agent_allowed") if isinstance(data, dict) else None
    if not isinstance(cases, list):
        raise InputError(
            f"{path}: no 'is_user_agent_allowed' list (expected the robotstxt-conformance format "
            '{"is_user_agent_allowed": [{test, robots_txt, user_agent, url, expected_allowed}]})'
        )
    for i, case in enumerate(cases):
        if not isinstance(case, dict):
            raise InputError(f"{path}: case {i} is not an object")
        name = case.get("test", "?")
        for field, kind in CASE_FIELDS:
            if field not in case:
                raise InputError(f"{path}: case {i} ({name!r}) has no {field!r}")
            if not isinstance(case[field], kind):
                raise InputError(
                    f"{path}: case {i} ({name!r}): {field!r} must be {kind.__name__}, got {type(case[field]).__name__}"
                )
    return cases


def run(args) -> int:
    """Evaluates the cases file and prints the JSON summary; returns 0, 1 (a case failed) or 2 (bad input)."""
    import json

    try:
        cases = load_cases(args.cases)
    except InputError as e:
        return fail(e)
    result = evaluate(cases)
    print(json.dumps(result))
    return 0 if result["passed"] == result["cases"] else 1
