"""Custom checks and queries that extend the rules: `#include <cpq>` in a --rules file, a team's
own code reported by `assess` (Markdown, JSON, SARIF), gates and `why` like a built-in code, the
cache keyed on what the rules file includes, and `cpq query` texts and files that define
relations of their own over the saved results."""

from __future__ import annotations

import json
import textwrap
from pathlib import Path

import pytest
from typer.testing import CliRunner

from cpq.cli.app import app
from cpq.engine import Database, DatalogError, Library, parse_extension, parse_program
from cpq.rules.program import load_program

runner = CliRunner()

HOT_INV = textwrap.dedent(
    """\
    import numpy as np


    def step(A, b, n):
        x = np.zeros(n)
        for _ in range(n):
            x = np.linalg.inv(A) @ b
        return x
    """
)
INV_LINE = 7

TEAM = textwrap.dedent(
    """\
    #include <cpq>
    // T001 np.linalg.inv in a hot loop: solve instead.
    code_info("T001", "BLOCKS", "np.linalg.inv in a hot loop", "use np.linalg.solve").
    site("T001", C) :- call(C, _, "numpy.linalg.inv"), hot(C).
    """
)
TEAM_SITE_LINE = 4

CALLS = textwrap.dedent(
    """\
    import numpy as np


    def leaf(a):
        return np.sum(a)


    def middle(a):
        return leaf(a) + 1


    def top(a):
        for _ in range(3):
            middle(a)
        return a
    """
)

# Which function reaches which through calls: a recursive definition over the saved results.
REACHES = (
    ".decl reaches(g: number, f: number)\n"
    "reaches(G, F) :- calls_function(C, F), node(C, _, G, _, _).\n"
    "reaches(G, H) :- reaches(G, F), calls_function(C, H), node(C, _, F, _, _).\n"
    ".decl reaches_name(caller: symbol, callee: symbol)\n"
    "reaches_name(A, B) :- reaches(G, H), scope(G, _, A, _, _, _), scope(H, _, B, _, _, _).\n"
    "reaches_name(From, To)"
)
REACHED = [("middle", "leaf"), ("top", "leaf"), ("top", "middle")]


def _project(tmp_path: Path, source: str = HOT_INV, name: str = "hot.py") -> Path:
    root = tmp_path / "src"
    root.mkdir()
    (root / name).write_text(source)
    return root


def _team(tmp_path: Path, text: str = TEAM) -> Path:
    path = tmp_path / "team.dl"
    path.write_text(text)
    return path


def _invoke(args: list[str]):  # type: ignore[no-untyped-def]
    return runner.invoke(app, args)


def _files(folder: Path) -> dict[str, tuple[int, int]]:
    """Every file under `folder` with its size and modification time."""
    return {
        str(p.relative_to(folder)): (p.stat().st_size, p.stat().st_mtime_ns)
        for p in sorted(folder.rglob("*"))
        if p.is_file()
    }


# -- #include <cpq> ----------------------------------------------------------------------------


def test_include_cpq_brings_the_shipped_rules_once_and_names_their_files(tmp_path: Path) -> None:
    (tmp_path / "checks").mkdir()
    (tmp_path / "checks" / "t002.dl").write_text(
        '#include <cpq>\ncode_info("T002", "INFO", "np.linalg.pinv", "").\n'
        'site("T002", C) :- call(C, _, "numpy.linalg.pinv").\n'
    )
    team = _team(tmp_path, TEAM + '#include "checks/t002.dl"\n')
    program = load_program(team)
    shipped = load_program()
    assert set(shipped.relations) <= set(program.relations)
    assert len(program.rules) == len(shipped.rules) + 2  # <cpq> once, though included twice
    site_rules = {rule.where for rule in program.rules_for("site") if not rule.file.startswith("<cpq>/")}
    assert site_rules == {f"team.dl:{TEAM_SITE_LINE}", "checks/t002.dl:3"}
    finding = program.rules_for("finding")[0]
    assert finding.file == "<cpq>/rules/findings.dl"
    assert Path(program.path(finding.file)).read_text(encoding="utf-8").splitlines()[finding.line - 1].strip()
    assert program.relations["finding"].doc == shipped.relations["finding"].doc


@pytest.mark.parametrize(
    ("files", "message"),
    [
        (
            {"team.dl": "#include <x>\n"},
            r"team\.dl:1:1: #include <x>: no such library \(the only one known is <cpq>\)",
        ),
        (
            {"team.dl": '#include <cpq>\n#include "a.dl"\n', "a.dl": '#include "team.dl"\n'},
            r"a\.dl:1:1: #include cycle: team\.dl -> a\.dl -> team\.dl",
        ),
        (
            {"team.dl": '#include "<cpq>/rules.dl"\n'},
            r"a library is included by its name alone, #include <cpq>",
        ),
    ],
)
def test_include_errors_are_one_line_at_the_include(
    tmp_path: Path, files: dict[str, str], message: str
) -> None:
    for name, text in files.items():
        (tmp_path / name).write_text(text)
    with pytest.raises(DatalogError, match=message):
        load_program(tmp_path / "team.dl")
    out = _invoke(["assess", str(_project(tmp_path)), "--rules", str(tmp_path / "team.dl"), "--no-cache"])
    assert out.exit_code == 2 and out.stderr.count("\n") == 1, out.output


def test_a_library_stays_in_its_folder() -> None:
    lib_files = {"main.dl": '#include "../outside.dl"\n'}
    library = Library("lib", "main.dl", lib_files.__getitem__, lambda _folder: [], "/lib")
    with pytest.raises(DatalogError, match=r"#include '\.\./outside\.dl' leaves the folder of <lib>"):
        parse_program("#include <lib>\n", source="user.dl", read={}.__getitem__, libraries=[library])


def test_the_export_of_a_rules_file_with_include_cpq_is_one_file(tmp_path: Path) -> None:
    team = _team(tmp_path)
    out = _invoke(["rules", "--rules", str(team), "--export", "-"])
    assert out.exit_code == 0, out.output
    assert "#include" not in out.stdout and "// ---- from <cpq>/rules/findings.dl" in out.stdout
    exported = parse_program(out.stdout, source="all.dl")
    assert len(exported.rules) == len(load_program(team).rules)
    shown = _invoke(["rules", "T001", "--rules", str(team)])
    assert shown.exit_code == 0, shown.output
    assert shown.stdout.startswith("T001 [BLOCKS] np.linalg.inv in a hot loop — recipe use np.linalg.solve")
    assert f"team.dl:{TEAM_SITE_LINE}:" in shown.stdout


# -- a team's own code, reported like a built-in one -------------------------------------------------


def test_a_team_code_is_reported_in_markdown_json_and_sarif_and_counts(tmp_path: Path) -> None:
    root, team = _project(tmp_path), _team(tmp_path)
    shipped = _invoke(["assess", str(root), "--no-cache", "-f", "json"])
    assert json.loads(shipped.stdout)["verdict"] == "READY"

    markdown = _invoke(["assess", str(root), "--rules", str(team), "--no-cache", "-f", "md"])
    assert markdown.exit_code == 0, markdown.output
    seen = "np.linalg.inv in a hot loop: `x = np.linalg.inv(A) @ b`"
    row = f"| hot.py:{INV_LINE} | T001 | step | {seen} | use np.linalg.solve |"
    assert row in markdown.stdout
    assert "**LIGHT REFACTOR** — Rule 6" in markdown.stdout
    assert "| 3. Workload shape | uncertain | 1 BLOCKS site(s): recipe-fixable |" in markdown.stdout
    assert (
        f"1. T001 (np.linalg.inv in a hot loop) → use np.linalg.solve: hot.py:{INV_LINE}." in markdown.stdout
    )

    report = json.loads(
        _invoke(["assess", str(root), "--rules", str(team), "--no-cache", "-f", "json"]).stdout
    )
    (t001,) = [f for f in report["findings"] if f["code"] == "T001"]
    assert t001["kind"] == "BLOCKS" and t001["line"] == INV_LINE and t001["counts_for_verdict"]
    assert (
        t001["message"].startswith("np.linalg.inv in a hot loop") and t001["recipe"] == "use np.linalg.solve"
    )
    assert report["verdict"] == "LIGHT REFACTOR"

    sarif = json.loads(
        _invoke(["assess", str(root), "--rules", str(team), "--no-cache", "-f", "sarif"]).stdout
    )
    run = sarif["runs"][0]
    rules = run["tool"]["driver"]["rules"]
    index = [rule["id"] for rule in rules].index("T001")
    assert rules[index]["shortDescription"]["text"] == "np.linalg.inv in a hot loop"
    assert rules[index]["defaultConfiguration"]["level"] == "error"
    assert "use np.linalg.solve" in rules[index]["help"]["text"]
    (result,) = [r for r in run["results"] if r["ruleId"] == "T001"]
    assert result["ruleIndex"] == index and result["level"] == "error"
    assert result["locations"][0]["physicalLocation"]["region"]["startLine"] == INV_LINE


@pytest.mark.parametrize(
    ("comment", "config"),
    [
        ("  # cpq: ignore", ""),
        ("  # cpq: ignore[T001]", ""),
        ("", '[tool.cpq]\nignore = ["T001"]\n'),
        ("", '[tool.cpq]\nper-file-ignores = {"hot.py" = ["T"]}\n'),
    ],
    ids=["bare ignore", "ignore[T001]", "config ignore", "per-file prefix"],
)
def test_a_team_code_is_silenced_like_a_built_in_one(tmp_path: Path, comment: str, config: str) -> None:
    lines = HOT_INV.splitlines()
    lines[INV_LINE - 1] += comment
    root, team = _project(tmp_path, "\n".join(lines) + "\n"), _team(tmp_path)
    if config:
        (root / "pyproject.toml").write_text(config)
    out = _invoke(["assess", str(root), "--rules", str(team), "--no-cache", "-f", "json"])
    assert out.exit_code == 0, out.output
    report = json.loads(out.stdout)
    t001 = [f for f in report["findings"] if f["code"] == "T001"]
    if comment:  # suppressed: listed as such, never counted
        assert [(f["suppressed"], f["counts_for_verdict"]) for f in t001] == [(True, False)]
    else:  # turned off: not a finding at all
        assert t001 == []
    assert report["verdict"] == "READY"


def test_a_team_code_in_the_configuration_needs_its_rules_file(tmp_path: Path) -> None:
    root, team = _project(tmp_path), _team(tmp_path)
    (root / "pyproject.toml").write_text('[tool.cpq]\nignore = ["T001"]\n')
    out = _invoke(["assess", str(root), "--no-cache"])
    assert out.exit_code == 2 and "ignore: unknown code 'T001'" in out.stderr, out.output
    assert _invoke(["assess", str(root), "--rules", str(team), "--no-cache"]).exit_code == 0


def test_why_a_team_code_cites_the_team_file(tmp_path: Path) -> None:
    root, team, cache = _project(tmp_path), _team(tmp_path), tmp_path / "cache"
    assert _invoke(["assess", str(root), "--rules", str(team), "--cache-dir", str(cache)]).exit_code == 0
    why = _invoke(
        [
            "-v",
            "why",
            "T001",
            f"hot.py:{INV_LINE}",
            str(root),
            "--rules",
            str(team),
            "--cache-dir",
            str(cache),
            "--full",
        ]
    )
    assert why.exit_code == 0, why.output
    assert "(saved results reused)" in why.stderr
    assert why.stdout.startswith(f"T001 at hot.py:{INV_LINE} in step: np.linalg.inv in a hot loop (BLOCKS)")
    assert f'finding("T001", "hot.py", {INV_LINE}, "step")' in why.stdout
    assert f'[team.dl:{TEAM_SITE_LINE}] site("T001", C) :-' in why.stdout
    assert "[fact, team.dl:3]" in why.stdout
    assert "[<cpq>/rules/findings.dl:" in why.stdout
    assert not (root / ".cpq").exists()


def test_editing_the_rules_file_or_what_it_includes_evaluates_again(tmp_path: Path) -> None:
    root, cache = _project(tmp_path), tmp_path / "cache"
    (tmp_path / "checks").mkdir()
    included = tmp_path / "checks" / "t001.dl"
    included.write_text(TEAM.replace("#include <cpq>\n", ""))
    team = _team(tmp_path, '#include <cpq>\n#include "checks/t001.dl"\n')
    args = ["-v", "assess", str(root), "--rules", str(team), "--cache-dir", str(cache), "-f", "json"]

    def kinds() -> tuple[list[tuple[str, str]], str]:
        done = _invoke(args)
        assert done.exit_code == 0, done.output
        found = [(f["code"], f["kind"]) for f in json.loads(done.stdout)["findings"] if f["code"][0] == "T"]
        return found, done.stderr

    assert kinds()[0] == [("T001", "BLOCKS")]
    assert "saved results reused" in kinds()[1]
    included.write_text(included.read_text().replace('"BLOCKS"', '"REFACTOR"'))
    found, stderr = kinds()
    assert found == [("T001", "REFACTOR")] and "saved results reused" not in stderr
    team.write_text(
        '#include <cpq>\n#include "checks/t001.dl"\nsite("T001", C) :- call(C, _, "numpy.zeros").\n'
    )
    assert sorted(kinds()[0]) == [("T001", "REFACTOR"), ("T001", "REFACTOR")]


# -- queries that define relations ----------------------------------------------------------------


def test_a_query_defines_relations_recursively_over_the_saved_results(tmp_path: Path) -> None:
    root, cache = _project(tmp_path, CALLS, "calls.py"), tmp_path / "cache"
    assert _invoke(["assess", str(root), "--cache-dir", str(cache)]).exit_code == 0
    saved = _files(cache)
    out = _invoke(["-v", "query", REACHES, str(root), "--cache-dir", str(cache), "-f", "json"])
    assert out.exit_code == 0, out.output
    assert "(saved results reused)" in out.stderr
    assert [(row["From"], row["To"]) for row in json.loads(out.stdout)] == REACHED
    # evaluated beside the saved results: nothing written into the tree or the cache
    assert sorted(p.name for p in root.iterdir()) == ["calls.py"]
    assert _files(cache) == saved
    again = _invoke(["query", REACHES, str(root), "--cache-dir", str(cache), "--sort", "-To", "--limit", "1"])
    assert again.exit_code == 0, again.output
    assert again.stdout.splitlines()[2].split() == ["top", "middle"]
    assert "… 2 more rows (--limit 1)" in again.stdout


def test_a_query_file_holds_definitions_then_the_body(tmp_path: Path) -> None:
    root = _project(tmp_path, CALLS, "calls.py")
    query = tmp_path / "q.dl"
    query.write_text(
        "// Functions of the tree, and whether a loop calls them.\n"
        ".decl fn(name: symbol)\n"
        'fn(Q) :- scope(_, "function", Q, _, _, _).\n'
        ".decl called_in_loop(name: symbol)\n"
        "called_in_loop(Q) :- calls_function(C, F), hot(C), scope(F, _, Q, _, _, _).\n"
        "\n"
        "fn(Name), !called_in_loop(Name).  // the answer\n"
    )
    out = _invoke(["query", "--file", str(query), str(root), "--no-cache", "-f", "csv"])
    assert out.exit_code == 0, out.output
    assert out.stdout.splitlines() == ["Name", "top"]  # leaf is called from middle, called in a loop
    both = _invoke(["query", "fn(X)", str(root), "--file", str(query)])
    assert both.exit_code == 2 and "with --file, give only the PATH" in both.stderr


@pytest.mark.parametrize(
    ("text", "message"),
    [
        (
            ".decl r(x: number)\nr(X) :- nodes(X, _, _, _).\nr(X)\n",
            "q.dl:2:9: undeclared relation 'nodes'; did you mean 'node'",
        ),
        (
            ".decl finding(x: number)\nfinding(1).\nfinding(X)\n",
            "q.dl:1:7: relation 'finding' is already declared: it is a relation of the rules (rules/",
        ),
        (
            'finding("T", "f.py", 1, "g") :- node(_, _, _, _, _).\nfinding(C, F, L, _)\n',
            "q.dl:1:1: 'finding' is a relation of the rules (rules/findings.dl:",
        ),
        (
            ".decl r(x: number)\nr(X) :- node(X, _, _, _, _), !r(X).\nr(X)\n",
            "q.dl:2:31: recursion through negation: 'r' depends on 'r' through negation",
        ),
        (
            ".decl r(x: number)\nr(X) :- node(X, _, _).\nr(X)\n",
            "q.dl:2:9: arity mismatch: 'node' has 5 column(s)",
        ),
        (
            ".decl r(x: number)\nr(X) :- node(X, _, _, _, _)\nr(X)\n",
            "q.dl:2:27: unexpected end of input; expected '.'",
        ),
        (
            ".decl reaches(g: number, f: number)\n"
            "reaches(G, F) :- calls_function(C, F), node(C, _, G, _, _).\n",
            "q.dl:2:60: no body to answer after the definitions: end the query with one, e.g. reaches(G, F)",
        ),
    ],
)
def test_query_definition_errors_are_one_line_with_the_place(tmp_path: Path, text: str, message: str) -> None:
    root = _project(tmp_path, CALLS, "calls.py")
    query = tmp_path / "q.dl"
    query.write_text(text)
    out = _invoke(["query", "--file", str(query), str(root), "--no-cache"])
    assert out.exit_code == 2
    assert out.stderr.startswith(f"cpq: {tmp_path / message}") and out.stderr.count("\n") == 1, out.stderr
    assert sorted(p.name for p in root.iterdir()) == ["calls.py"]  # refused before any assessment


def test_query_definitions_on_the_command_line_show_the_error_under_the_line(tmp_path: Path) -> None:
    root = _project(tmp_path, CALLS, "calls.py")
    out = _invoke(["query", ".decl finding(a: number) finding(X)", str(root), "--no-cache"])
    assert out.exit_code == 2
    first, shown, caret = out.stderr.splitlines()
    assert first.startswith("cpq: query:1:7: relation 'finding' is already declared")
    assert caret.index("^") == shown.index("finding")


def test_query_definitions_warn_of_variables_used_once(tmp_path: Path) -> None:
    root = _project(tmp_path, CALLS, "calls.py")
    text = ".decl r(x: number) r(X) :- node(X, Kind, _, _, _). r(X), X = R104"
    out = _invoke(["-q", "query", text, str(root), "--no-cache"])
    assert out.exit_code == 0, out.output
    assert out.stderr == (
        "cpq: warning: query:1:36: variable 'Kind' is used only once in this clause; write _\n"
        'cpq: warning: query:1:62: R104 is a variable here (it matches anything); write "R104" for the code\n'
    )


def test_a_timeout_stops_the_evaluation_of_a_query_s_own_relations(tmp_path: Path) -> None:
    root = _project(tmp_path, "".join(f"x{i} = {i}\n" for i in range(300)), "many.py")
    text = (
        ".decl big(a: number, b: number, c: number, d: number)\n"
        "big(A, B, C, D) :- loc(A, _, _, _), loc(B, _, _, _), loc(C, _, _, _), loc(D, _, _, _).\n"
        "big(A, _, _, _)"
    )
    out = _invoke(["query", text, str(root), "--no-cache", "--timeout", "0.5"])
    assert out.exit_code == 124, out.output
    assert out.stderr == "cpq: the query ran past --timeout 0.5s and was stopped\n"


def test_relations_beside_a_database_are_temporary_and_read_its_tables() -> None:
    base = parse_program(
        ".decl edge(x: number, y: number)\nedge(1, 2). edge(2, 3). edge(3, 4).\n", source="base.dl"
    )
    db = Database(base)
    db.evaluate()
    extension = parse_extension(
        ".decl path(x: number, y: number)\npath(X, Y) :- edge(X, Y).\n"
        "path(X, Z) :- path(X, Y), edge(Y, Z).\npath(1, Y).",
        base,
        "q.dl",
    )
    assert extension is not None and extension.own == ["path"]
    assert parse_extension("edge(X, Y), X > 1.5.", base) is None  # a body alone
    with Database.beside(db, extension.program) as own:
        own.evaluate()
        assert own.query(extension.body) == (["Y"], [(2,), (3,), (4,)])
        assert [rule.where for rule in extension.program.rules] == ["q.dl:2", "q.dl:3"]
    tables = db.con.execute("SELECT table_name, temporary FROM duckdb_tables()").fetchall()
    assert tables == [("edge", False)]
    db.close()
