"""Commands refuse impossible numbers with exit 2 and a message, before starting anything."""

import pytest

from newsflow.cli.main import main


@pytest.mark.parametrize(
    "argv",
    [
        ["serve", "--port", "99999"],
        ["serve", "--port", "-1"],
        ["serve", "--refresh-feeds", "nan"],
        ["serve", "--refresh-feeds", "-5"],
        ["retention", "--days", "inf"],
    ],
)
def test_impossible_numbers_exit_2(argv, tmp_path, capsys):
    assert main([*argv, "--data-dir", str(tmp_path)]) == 2
    out, err = capsys.readouterr()
    assert "error:" in err and "error:" not in out  # the message goes to stderr
