"""`ragtrace --help` names every subcommand of each command group, as its own `--help` lists them:
`store` is not only `migrate`, `labels import` reads more than TREC qrels."""

from __future__ import annotations

import re

import pytest

from ragtrace_cli.main import main


@pytest.mark.parametrize("group", ["store", "reviewers", "review"])
def test_the_summary_names_every_subcommand(group: str, capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exc:
        main([group, "--help"])
    assert exc.value.code == 0
    choices = re.search(r"\{([a-z,]+)\}", capsys.readouterr().out)
    assert choices, "the group's help lists its subcommands as {a,b,...}"
    assert main(["--help"]) == 0
    summary = next(line for line in capsys.readouterr().out.splitlines() if line.split()[:1] == [group])
    missing = [name for name in choices.group(1).split(",") if name not in summary]
    assert not missing, (summary, missing)


def test_the_labels_summary_names_every_kind(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        main(["labels", "import", "--help"])
    kinds = re.search(r"--kind \{([a-z,]+)\}", capsys.readouterr().out)
    assert kinds and set(kinds.group(1).split(",")) == {"auto", "qrels", "references", "spans"}
    assert main(["--help"]) == 0
    summary = next(line for line in capsys.readouterr().out.splitlines() if line.split()[:1] == ["labels"])
    assert all(word in summary for word in ("qrels", "evidence spans", "reference answers")), summary
