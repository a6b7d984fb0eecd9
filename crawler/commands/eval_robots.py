"""``newsflow eval robots --cases FILE``: robots.txt conformance against google/robotstxt vectors.

Prints one JSON line ``{"cases": N, "passed": M, "failed": [...]}`` for the
``is_user_agent_allowed`` vectors of the robotstxt-conformance JSON format
(``{"is_user_agent_allowed": [{test, robots_txt, user_agent, url, expected_allowed}]}``).
Exit code 0 when every case passes, 1 otherwise, 2 when the file cannot be read.
"""

from __future__ import annotations

import json
import sys

COMMAND = "robots"
HELP = "robots.txt conformance: prints {cases, passed} for is_user_agent_allowed vectors"


def add_arguments(parser) -> None:
    """Adds ``--cases``."""
    parser.add_argument("--cases", required=True, help="robots_cases.json (robotstxt-conformance format)")


def evaluate(cases: list[dict]) -> dict:
    """Runs :func:`crawler.robots.is_user_agent_allowed` on each case.

    Returns:
      ``{"cases": int, "passed": int, "failed": [test names of failing cases]}``.
    """
    from crawler.robots import is_user_agent_allowed

    failed = []
    for case in cases:
        got = is_user_agent_allowed(case["robots_txt"], case["user_agent"], case["url"])
        if got != bool(case["expected_allowed"]):
            failed.append(case.get("test", "?"))
    return {"cases": len(cases), "passed": len(cases) - len(failed), "failed": failed}


def run(args) -> int:
    """Evaluates the cases file and prints the JSON summary."""
    try:
        with open(args.cases, encoding="utf-8") as f:
            data = json.load(f)
        cases = data["is_user_agent_allowed"]
    except (OSError, ValueError, KeyError, TypeError) as e:
        print(f"cannot read robots cases from {args.cases!r}: {e}", file=sys.stderr)
        return 2
    result = evaluate(cases)
    print(json.dumps(result))
    return 0 if result["passed"] == result["cases"] else 1
