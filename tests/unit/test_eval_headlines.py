"""`newsflow eval language --headlines`: the labelled short-title set and its scores (issue 11, item 10)."""

from __future__ import annotations

import gzip
import json
from pathlib import Path

from newsflow.cli.evaluation import language as ev
from newsflow.cli.evaluation.headlines import build_headline_set

DE_TITLE = "Stadtrat beschließt neuen Haushalt für die Schulen"
DE_LEAD = "Der Stadtrat hat am Dienstag nach langer Debatte den neuen Haushalt für die Schulen beschlossen."
JA_TITLE = "市議会、新年度予算案を可決"


def _shared(tmp: Path) -> tuple[Path, Path]:
    fundus = tmp / "fundus-news-pages"
    fundus.mkdir()
    rows = [
        {"id": "de/a", "html_lang": "de-DE", "expected": {"title": DE_TITLE}, "body_text": DE_LEAD},
        {"id": "xx/b", "html_lang": None, "expected": {"title": "No declared language"}, "body_text": ""},
    ]
    (fundus / "expected.jsonl").write_text("\n".join(json.dumps(r) for r in rows), encoding="utf-8")
    n4k = tmp / "newspaper4k-test-pages"
    (n4k / "metadata").mkdir(parents=True)
    (n4k / "txt").mkdir()
    (n4k / "metadata" / "ja.json").write_text(json.dumps({"title": JA_TITLE}), encoding="utf-8")
    (n4k / "txt" / "ja.txt").write_text("市議会は火曜日、新しい予算案を可決した。", encoding="utf-8")
    index = [
        {"id": "ja", "language": "ja", "metadata_file": "metadata/ja.json", "text_file": "txt/ja.txt"},
        {"id": "home", "language": None, "metadata_file": None},
    ]
    (n4k / "index.jsonl").write_text("\n".join(json.dumps(r) for r in index), encoding="utf-8")
    corpus = tmp / "headlines.jsonl.gz"
    with gzip.open(corpus, "wt", encoding="utf-8") as f:
        for title in ("Stacy weds techie beau", "The city council approved the new school budget on Tuesday"):
            f.write(json.dumps({"url": "https://x.example/", "title": title}) + "\n")
    return tmp, corpus


def test_headline_set_is_built_from_labelled_titles(tmp_path):
    shared, corpus = _shared(tmp_path)
    recs = build_headline_set(shared, corpus)
    assert [(r["source"], r["label"], r["title"]) for r in recs] == [
        ("fundus", "de", DE_TITLE),
        ("newspaper4k", "ja", JA_TITLE),
        ("aggregator", "en", "Stacy weds techie beau"),
        ("aggregator", "en", "The city council approved the new school budget on Tuesday"),
    ]
    assert recs[0]["lead"] == DE_LEAD and recs[2]["lead"] == ""


def test_eval_language_headlines_command(tmp_path, capsys, monkeypatch):
    shared, corpus = _shared(tmp_path)
    monkeypatch.setattr("newsflow.cli.evaluation.headlines.DEFAULT_CORPUS", corpus)
    assert ev.main(["--headlines", str(shared)]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["headlines"] == 4 and out["by_source"] == {"fundus": 1, "newspaper4k": 1, "aggregator": 2}
    # "Stacy weds techie beau" alone reads as Dutch and declares nothing: 3 of 4 right.
    assert out["headline"]["accuracy"] == 0.75
    assert out["headline_declared"]["by_source"] == {"aggregator": 0.5, "fundus": 1.0, "newspaper4k": 1.0}
    # A wrong declaration ("en") is overruled by the German headline + lead.
    assert out["headline_lead_wrong_declared"]["by_source"]["fundus"] == 1.0


def test_missing_shared_folder_is_a_clear_error(tmp_path, capsys):
    assert ev.main(["--headlines", str(tmp_path / "nope")]) == 2
    assert "fundus-news-pages/expected.jsonl" in capsys.readouterr().err


def test_no_option_is_a_clear_error(capsys):
    assert ev.main([]) == 2
    assert "--headlines" in capsys.readouterr().err
