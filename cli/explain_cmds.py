"""`cpq why` and `cpq query`: question any finding, gate or verdict, or ask the relations directly.

    cpq why R104 solver.py:52 [PATH]        the proof of a finding
    cpq why verdict [PATH] / why gate N [PATH]
    cpq why not R104 solver.py:52 [PATH]    the first literal each R104 rule misses there
    cpq query 'finding(C, F, L, _), C = "R104"' [PATH]
    cpq query --relations

Both reuse the assessment (`assess_cached`), so a question costs a few queries, not a re-run:
the results `cpq assess` saved in PATH/.cpq, or in `--cache-dir DIR` (then nothing is written
into the tree); `--no-cache` evaluates in memory and writes nothing anywhere.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Callable
from enum import StrEnum
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, NamedTuple, NoReturn

import typer

from .options import (
    CacheDirOpt,
    CpuOnlyOpt,
    DoctorOpt,
    ElementsOpt,
    GpuOpt,
    GpusOpt,
    NoCacheOpt,
    NodesOpt,
    PatternOpt,
    ProfileOpt,
    RulesOpt,
    build_context,
    load_config,
    state,
    usage_error,
)

if TYPE_CHECKING:
    from ..config.context import Context
    from ..config.project import Config
    from ..engine import Database, DatalogError, Program
    from ..explain.targets import Target
    from ..pipeline.assessment import Assessment


class WhyFormat(StrEnum):
    text = "text"  # the summary in words (then the proof with --full)
    tree = "tree"  # the proof alone, as an indented tree
    json = "json"
    dot = "dot"


class QueryFormat(StrEnum):
    table = "table"
    json = "json"
    csv = "csv"


WHY_USAGE = "CODE FILE:LINE [PATH] | verdict [PATH] | gate N [PATH] | not CODE FILE:LINE [PATH]"
# What `--timeout` ends with: the status `timeout` gives a command it stops.
TIMEOUT_STATUS = 124

# Help texts are single paragraphs: typer keeps the line breaks of a docstring.
WHY_HELP = (
    "The derivation of a finding, the verdict or a gate, down to the lines of your code.\n\n"
    "It starts with a short summary in words: each step a source line and what it establishes. "
    "--full adds the whole proof (--format tree prints the proof alone): each tuple with the rule "
    "(its file:line and text) that produced it and the tuples it matched; extracted facts carry the "
    'source line they come from, negated atoms show as "absent: ...", aggregates with their value '
    "and just enough members; a subproof is shown once. Every step has a handle (#12): --expand 12 "
    "shows that step's whole proof, or, for an absent atom or a rule that did not apply, why not. "
    "`cpq why not CODE FILE:LINE` shows, for each rule deriving CODE, the first literal that "
    "nothing satisfies on that line. FILE is relative to PATH; in a notebook, FILE:LINE may be "
    "written as the reports do, nb.ipynb:cell 17:line 7. A suppressed finding, or a code "
    "[tool.cpq] turns off, is said to be so."
)
QUERY_HELP = (
    "Ask any question the relations can express.\n\n"
    "ATOMS is a rule body in Soufflé syntax over extracted and derived relations, with `_`, "
    "constants, comparisons and negation (`!r(X)`); its variables become the columns, e.g. "
    "cpq query 'finding(C, F, L, _), C = \"R104\"' src/. "
    "Before the body, the text may define relations of its own: `.decl` lines, rules and facts "
    "in Soufflé syntax, recursion included, which read the assessment's relations, e.g. "
    "cpq query '.decl reaches(f: number, g: number) "
    "reaches(F, G) :- calls_function(C, G), node(C, _, F, _, _). "
    "reaches(F, H) :- reaches(F, G), reaches(G, H). reaches(F, G)' src/ "
    "(which function reaches which through calls). "
    "--file Q.dl reads the text from a file: declarations and rules, then the body to answer "
    "last (a final '.' is allowed). They are evaluated over the saved results of the assessment, "
    "which is not run again for them; nothing is written. "
    "Rows come sorted by all columns (--sort picks the leading ones); --limit N shows the "
    "first N; --timeout stops a long query. "
    "`cpq query --relations [PATTERN]` lists the relations with their columns and docs. "
    "(--rules FILE, unlike --file, changes the rules the assessment runs.)"
)


def _assessment(
    path: Path, context: Context, config: Config, rules: Path | None, cache_dir: Path | None, no_cache: bool
) -> Assessment:
    """The assessment, as `cpq assess` with the same cache options would make it: reused from
    the results it saved when nothing changed.  Its report is not read back (findings,
    decision): `why` and `query` read what they need from the database."""
    from ..engine import DatalogError
    from ..pipeline.assessment import assess, assess_cached

    if not path.exists():
        usage_error(f"{path}: no such file or directory")
    if rules is not None and not rules.is_file():
        usage_error(f"{rules}: no such rules file")
    started = time.perf_counter()
    try:
        if no_cache:
            result = assess(path, context, rules, use_cache=False, config=config, report=False)
        else:
            result = assess_cached(path, context, rules, cache_dir=cache_dir, config=config, report=False)
    except DatalogError as exc:
        usage_error(str(exc))
    if state.verbose:
        seconds = time.perf_counter() - started
        typer.echo(f"cpq: assessment ready in {seconds:.2f}s ({result.how})", err=True)
    if result.db is None:  # the saved results were replaced while they were reopened
        usage_error("the assessment's results changed while they were reopened: run again")
    return result


# -- cpq why -----------------------------------------------------------------------------------


def _split_question(args: list[str]) -> tuple[str, list[str], Path]:
    """(kind, operands, PATH) from the positional words of `cpq why`."""
    if not args:
        usage_error(f"what should I explain? usage: cpq why {WHY_USAGE}")
    head = args[0].lower()
    if head == "verdict":
        kind, wanted = "verdict", 0
    elif head == "gate":
        kind, wanted = "gate", 1
    elif head == "not":
        kind, wanted = "not", 2
    else:
        kind, wanted = "finding", 2
    operands = args[1:] if kind != "finding" else args
    if len(operands) < wanted:
        usage_error(f"missing operands; usage: cpq why {WHY_USAGE}")
    if len(operands) > wanted + 1:
        usage_error(f"unexpected {operands[wanted + 1]!r}; usage: cpq why {WHY_USAGE}")
    path = Path(operands[wanted]) if len(operands) > wanted else Path(".")
    return kind, operands[:wanted], path


def why(
    words: Annotated[
        list[str] | None,
        typer.Argument(metavar=WHY_USAGE, help="What to explain, then the assessed PATH (default .)."),
    ] = None,
    elements: ElementsOpt = None,
    gpus: GpusOpt = None,
    nodes: NodesOpt = None,
    gpu: GpuOpt = None,
    cpu_only: CpuOnlyOpt = None,
    pattern: PatternOpt = None,
    profile: ProfileOpt = None,
    doctor: DoctorOpt = None,
    format: Annotated[WhyFormat, typer.Option("--format", "-f", help="Proof format.")] = WhyFormat.text,
    depth: Annotated[
        int | None, typer.Option("--depth", min=0, help="Cut proofs this many levels below the root.")
    ] = None,
    full: Annotated[bool, typer.Option("--full", help="Follow the summary with the whole proof.")] = False,
    expand: Annotated[
        str | None,
        typer.Option("--expand", metavar="H", help="Show the whole proof of the step with handle #H."),
    ] = None,
    rules: RulesOpt = None,
    no_cache: NoCacheOpt = False,
    cache_dir: CacheDirOpt = None,
) -> None:
    """See WHY_HELP."""
    from ..explain.targets import TargetError

    kind, operands, path = _split_question(list(words or []))
    if kind == "not" and format is WhyFormat.dot:
        usage_error("--format dot draws proofs; use text or json with `why not`")
    if kind == "gate" and not operands[0].isdigit():
        usage_error(f"expected a gate number, got {operands[0]!r}")
    target: Target | None = None
    if kind in ("finding", "not"):
        from ..explain.targets import parse_file_line

        try:
            target = parse_file_line(operands[1])
        except TargetError as exc:
            usage_error(str(exc))
    config = load_config(path, rules)
    context = build_context(config, elements, gpus, nodes, gpu, cpu_only, pattern, profile, doctor)
    result = _assessment(path, context, config, rules, cache_dir, no_cache)
    assert result.db is not None
    program = result.db.program  # the one evaluated: `_rule` indices refer to its rules
    started = time.perf_counter()
    try:
        if kind == "not":
            assert target is not None
            text = _why_not(result, program, operands[0], target, format, depth)
        else:
            shape = ProofShape(format, depth, full, expand)
            text = _why(result, program, kind, operands, target, shape)
    except TargetError as exc:
        usage_error(str(exc))
    sys.stdout.write(text)
    if state.verbose:
        typer.echo(f"cpq: answered in {time.perf_counter() - started:.3f}s", err=True)


class ProofShape(NamedTuple):
    format: WhyFormat
    depth: int | None
    full: bool
    expand: str | None


def _why(
    result: Assessment,
    program: Program,
    kind: str,
    operands: list[str],
    target: Target | None,
    shape: ProofShape,
) -> str:
    from ..explain import Prover, proof_to_json, render_dot, render_summary, render_text
    from ..explain.targets import (
        assessed_files,
        finding_tuples,
        gate_tuples,
        module_line,
        resolve_file,
        verdict_tuples,
    )

    db = result.db
    assert db is not None
    if kind == "verdict":
        relation, tuples = "verdict", verdict_tuples(db)
    elif kind == "gate":
        relation, tuples = "gate_status", gate_tuples(db, int(operands[0]))
    else:
        assert target is not None
        file = resolve_file(target.file, assessed_files(db))
        line = module_line(target, file, result.notebooks)
        relation, tuples = "finding", finding_tuples(db, operands[0], file, line)
    format = shape.format
    if shape.expand is not None:
        return _expanded(result, program, [(relation, tuple(values)) for values in tuples], shape)
    # The summary shows an aggregate's members one line each: they are proved only for a proof.
    summary_only = format is WhyFormat.text and not shape.full
    from ..explain.spans import AssessedSources

    # Columns and code text come from the text each file was assessed from (explain.spans).
    prover = Prover(
        db,
        program,
        max_depth=shape.depth,
        prove_members=not summary_only,
        sources=AssessedSources.of(result),
    )
    roots = [prover.prove(relation, values) for values in tuples]
    if relation == "finding":
        # What a profile or the Doctor says of the finding, with the runtime facts behind it.
        roots += [prover.prove(r, v) for r, v in _runtime_judgements(db, tuple(tuples[0][:3]))]
    # A suppressed finding is derived like any other: its proof is shown, after saying so.
    note = _suppression_note(result, *tuples[0][:3]) if relation == "finding" else ""
    if format is WhyFormat.json:
        import json

        payload: dict[str, Any] = {"question": " ".join([kind, *operands])}
        if note:
            payload["note"] = note
        payload["proofs"] = [proof_to_json(r) for r in roots]
        return json.dumps(payload, indent=2, ensure_ascii=False) + "\n"
    if note:  # on stderr for dot, whose output is a graph
        typer.echo(note, err=format is WhyFormat.dot)
    if format is WhyFormat.dot:
        return render_dot(roots)
    if format is WhyFormat.tree:
        return render_text(roots)
    question = " ".join(["cpq why", *([kind] if kind != "finding" else []), *operands])
    text = render_summary(roots, prover, _headline(result, kind, roots), question, shape.full)
    if shape.full:
        text += "\n" + render_text(roots)
    return text


# The runtime judgements of a finding `cpq why` proves after the finding itself, and their
# headlines (rules/runtime.dl).
RUNTIME_HEADLINES = {
    "finding_never_ran": "{0} at {1}:{2} never ran in the profiled run: it does not count for the verdict",
    "finding_measured_hot": "{0} at {1}:{2} is in code the profile measured hot",
    "doctor_confirms": "{0} at {1}:{2} was confirmed at runtime by the Doctor's {3} check",
}


def _runtime_judgements(db: Database, key: tuple) -> list[tuple[str, tuple]]:
    """The runtime judgements that hold of the finding `key` (code, file, line)."""
    out: list[tuple[str, tuple]] = []
    for relation in RUNTIME_HEADLINES:
        if relation not in db.program.relations:
            continue
        out += [(relation, row) for row in db.rows(relation) if tuple(row[:3]) == key]
    return out


def _headline(result: Assessment, kind: str, roots: list) -> list[str]:  # type: ignore[type-arg]
    """The first line of each proof's summary: the finding, the verdict or the gate in words."""
    from ..explain.targets import code_titles

    assert result.db is not None
    out = []
    for root in roots:
        values = root.values
        if root.relation in RUNTIME_HEADLINES:
            out.append(RUNTIME_HEADLINES[root.relation].format(*values))
        elif kind == "finding":
            code, file, line, function = values
            title, code_kind = code_titles(result.db).get(code, ("", ""))
            where = "" if function == "<module>" else f" in {function}"
            about = f": {title} ({code_kind})" if title else ""
            # As the reports write it: a notebook's cell and line, not the joined module's.
            location = result.where(file, line)
            out.append(f"{code} at {location}{where}{about}")
        elif kind == "verdict":
            verdict, rule = values
            out.append(f"Verdict {verdict}, decided by rule {rule}")
        else:
            number, name, status, reason = values
            out.append(f"Gate {number} {name}: {status} ({reason})")
    return out


def _expanded(
    result: Assessment, program: Program, questions: list[tuple[str, tuple]], shape: ProofShape
) -> str:
    """The whole proof of the step with handle shape.expand (why not, for an absent atom)."""
    from ..explain import proof_to_json, render_text, render_why_not
    from ..explain.expand import ExpandError, expand

    try:
        from ..explain.spans import AssessedSources

        sources = AssessedSources.of(result)
        expanded = expand(result.db, program, questions, shape.expand or "", result.source_line, sources)
    except ExpandError as exc:
        usage_error(str(exc))
    if shape.format is WhyFormat.json:
        import json

        from ..explain import why_not_to_json

        payload = (
            why_not_to_json(expanded)
            if not isinstance(expanded, list)
            else [proof_to_json(r) for r in expanded]
        )
        return json.dumps(payload, indent=2, ensure_ascii=False, default=str) + "\n"
    if isinstance(expanded, list):
        return render_text(expanded)
    return render_why_not(expanded)


def _suppression_note(result: Assessment, code: str, file: str, line: int) -> str:
    """One line when the finding is suppressed by a `# cpq: ignore` comment, else ''."""
    from ..config.suppress import find_suppression

    assert result.db is not None
    if (code, file, line) not in set(result.db.rows("suppressed")):
        return ""
    found = find_suppression((code, file, line), result.suppressions)
    how = f"`# {found.describe()}`" if found is not None else "a `# cpq: ignore` comment"
    reason = f" ({found.reason})" if found is not None and found.reason else ""
    return (
        f"{code} at {result.where(file, line)} is suppressed by {how}{reason}: it is left out of the report "
        "(--show-suppressed lists it) and of the verdict."
    )


def _why_not(
    result: Assessment, program: Program, code: str, target: Target, format: WhyFormat, depth: int | None
) -> str:
    from ..explain import render_why_not, why_not_to_json
    from ..explain.targets import (
        TargetError,
        assessed_files,
        check_line,
        known_codes,
        module_line,
        resolve_file,
    )
    from ..explain.whynot import WhyNotAnalyzer

    db = result.db
    assert db is not None
    file = resolve_file(target.file, assessed_files(db))
    line = module_line(target, file, result.notebooks)
    check_line(db, file, line)
    code = code.upper()
    codes = known_codes(db)
    if code not in codes:
        raise TargetError(f"unknown code {code!r}; known codes: {', '.join(codes)}")
    from ..explain.spans import AssessedSources

    analyzer = WhyNotAnalyzer(
        db,
        program,
        source_line=result.source_line,
        max_depth=3 if depth is None else depth,
        sources=AssessedSources.of(result),
    )
    answer = analyzer.finding(code, file, line)
    if format is WhyFormat.json:
        import json

        return json.dumps(why_not_to_json(answer), indent=2, ensure_ascii=False, default=str) + "\n"
    return render_why_not(answer)


# -- cpq query ---------------------------------------------------------------------------------


def query(
    atoms: Annotated[
        str | None,
        typer.Argument(
            metavar="'ATOMS'",
            help='A conjunctive query in Soufflé syntax: finding(C, F, L, _), C = "R104" '
            "(with --relations: a pattern the listed names contain, or a glob like 'finding*').",
        ),
    ] = None,
    path: Annotated[
        Path | None,
        typer.Argument(help="A Python file or a directory tree (default: .).", show_default=False),
    ] = None,
    query_file: Annotated[
        Path | None,
        typer.Option(
            "--file",
            metavar="Q.dl",
            help="Read the query from this file instead of ATOMS: .decl lines, rules and facts, "
            "then the body to answer, last.",
        ),
    ] = None,
    relations: Annotated[
        bool, typer.Option("--relations", help="List the relations (matching ATOMS), their columns and docs.")
    ] = False,
    format: Annotated[QueryFormat, typer.Option("--format", "-f", help="Output format.")] = (
        QueryFormat.table
    ),
    limit: Annotated[
        int | None, typer.Option("--limit", min=1, metavar="N", help="Show the first N rows (default: all).")
    ] = None,
    sort: Annotated[
        str | None,
        typer.Option(
            "--sort",
            metavar="COLS",
            help="Sort by these columns first (names or 1-based positions, comma-separated; "
            "-COL descending); the others follow. Default: all columns, left to right.",
        ),
    ] = None,
    timeout: Annotated[
        float | None,
        typer.Option("--timeout", min=0.001, metavar="SECONDS", help="Stop the query after this long."),
    ] = None,
    elements: ElementsOpt = None,
    gpus: GpusOpt = None,
    nodes: NodesOpt = None,
    gpu: GpuOpt = None,
    cpu_only: CpuOnlyOpt = None,
    pattern: PatternOpt = None,
    profile: ProfileOpt = None,
    doctor: DoctorOpt = None,
    rules: RulesOpt = None,
    no_cache: NoCacheOpt = False,
    cache_dir: CacheDirOpt = None,
) -> None:
    """See QUERY_HELP."""
    from ..engine import DatalogError, compile_query, parse_extension, query_warnings
    from ..rules.program import load_program

    try:
        program = load_program(rules)
    except (DatalogError, OSError) as exc:
        usage_error(str(exc))
    if relations:
        _print_relations(program, format, atoms)
        return
    text, source, path = _query_text(atoms, path, query_file)
    try:  # check the query before paying for the assessment
        extension = parse_extension(text, program, source)
        if extension is None:
            compiled = compile_query(text, program.relations, source, program.inline)
        else:
            own = extension.program
            compiled = compile_query(extension.body, own.relations, source, own.inline)
    except DatalogError as exc:
        _query_error(text, exc, program, query_file is None)
    _check_integers(text)
    warnings = query_warnings(text if extension is None else extension.body, source)
    if extension is not None:
        warnings = sorted([*warnings, *extension.warnings], key=lambda w: (w.line, w.column))
    for warning in warnings:
        typer.echo(f"cpq: warning: {warning}", err=True)
    sql = _sorted_sql(compiled.sql, compiled.columns, sort) if sort else compiled.sql
    config = load_config(path, rules)
    context = build_context(config, elements, gpus, nodes, gpu, cpu_only, pattern, profile, doctor)
    result = _assessment(path, context, config, rules, cache_dir, no_cache)
    db = result.db
    assert db is not None

    def evaluate_own_relations() -> None:
        """The query's own relations, in temporary tables beside the saved results."""
        if extension is None:
            return
        from ..engine import Database

        try:
            Database.beside(db, extension.program).evaluate()
        except DatalogError as exc:  # a rule that fails as it runs (an overflow, a bad regex)
            usage_error(str(exc))

    rows, more = _run_query(db.con, sql, limit, timeout, prepare=evaluate_own_relations)
    if not compiled.columns:  # a yes/no question: does any row hold?
        rows, more = ([()] if rows else []), 0
    sys.stdout.write(_format_rows(compiled.columns, rows, format))
    if more:
        # After a table, where the eye is; on stderr after json or csv, which programs read.
        typer.echo(
            f"… {more} more row{'s' if more != 1 else ''} (--limit {limit})",
            err=format is not QueryFormat.table,
        )
    if not state.quiet:
        total = len(rows) + more
        typer.echo(f"cpq: {total} row{'s' if total != 1 else ''}", err=True)


def _query_text(atoms: str | None, path: Path | None, query_file: Path | None) -> tuple[str, str, Path]:
    """(the query's text, its name in messages, the assessed PATH) from ATOMS or --file."""
    if query_file is None:
        if atoms is None or not atoms.strip():
            usage_error("give a query, e.g. cpq query 'finding(C, F, L, _)' PATH, or --relations")
        return atoms, "query", path or Path(".")
    if atoms is not None and path is not None:
        usage_error(f"unexpected {str(path)!r}: with --file, give only the PATH to assess")
    try:
        text = query_file.read_text(encoding="utf-8")
    except UnicodeDecodeError as exc:
        usage_error(f"{query_file}: not UTF-8 text ({exc.reason})")
    except OSError as exc:
        usage_error(f"{query_file}: {exc.strerror or exc}")
    if not text.strip():
        usage_error(f"{query_file}: empty; a query file ends with the body to answer: finding(C, F, L, _)")
    # With --file, the one word before the options is the PATH.
    return text, str(query_file), Path(atoms) if atoms is not None else Path(".")


def _check_integers(text: str) -> None:
    """A one-line error for an integer constant that no number column (64 bits) can hold,
    rather than DuckDB's conversion error when the query runs."""
    import re

    for match in re.finditer(r'"(?:[^"\\]|\\.)*"|(?<![\w.])\d+(?![\w.])', text):
        if not match.group().startswith('"') and int(match.group()) > 2**63 - 1:
            usage_error(f"the integer {match.group()} is beyond the range of a number (64 bits)")


def _sorted_sql(sql: str, columns: list[str], sort: str) -> str:
    """`sql` ordered by the columns `--sort` names first, then by all columns (a stable order)."""
    keys: list[str] = []
    for item in (part.strip() for part in sort.split(",")):
        name = item.removeprefix("-").strip()
        if name.isdigit() and 1 <= int(name) <= len(columns):
            position = int(name)
        elif name in columns:
            position = columns.index(name) + 1
        else:
            usage_error(f"--sort: no column {name!r}; the columns are {', '.join(columns) or 'none'}")
        keys.append(f"{position} DESC" if item.startswith("-") else str(position))
    keys += [str(i + 1) for i in range(len(columns))]
    return f"SELECT * FROM ({sql}) ORDER BY {', '.join(keys)}"


def _run_query(
    con: Any,
    sql: str,
    limit: int | None,
    timeout: float | None,
    prepare: Callable[[], None] | None = None,
) -> tuple[list[tuple], int]:
    """(the rows shown, how many more there are): a DuckDB error in one line (exit 2), a
    query past `timeout` interrupted (exit TIMEOUT_STATUS).  `prepare` runs first, within the
    same time (the evaluation of the query's own relations)."""
    import threading

    import duckdb

    timer = threading.Timer(timeout, con.interrupt) if timeout is not None else None
    if timer is not None:
        timer.daemon = True
        timer.start()
    try:
        if prepare is not None:
            prepare()
        con.execute(sql)
        if limit is None:
            return con.fetchall(), 0
        rows = con.fetchmany(limit)
        more = 0
        # Counted, not kept: the rows past the limit cost no memory.
        while chunk := con.fetchmany(10_000):
            more += len(chunk)
        return rows, more
    except duckdb.InterruptException:
        if timer is None:
            raise
        typer.echo(f"cpq: the query ran past --timeout {timeout:g}s and was stopped", err=True)
        raise typer.Exit(TIMEOUT_STATUS) from None
    except duckdb.Error as exc:
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        usage_error(f"the query failed in DuckDB: {first}")
    finally:
        if timer is not None:
            timer.cancel()


def _query_error(text: str, exc: DatalogError, program: Program, show_line: bool = True) -> NoReturn:
    """The message, then (`show_line`: a query on the command line, where no editor shows it)
    the query line with a caret under the offending token."""
    import difflib
    import re

    message = str(exc)
    unknown = re.search(r"undeclared relation '([^']+)'", exc.message)
    if unknown:
        close = difflib.get_close_matches(unknown.group(1), list(program.relations), n=3)
        if close:
            message += f"; did you mean {' or '.join(repr(c) for c in close)}?"
    typer.echo(f"cpq: {message}", err=True)
    lines = text.splitlines() or [""]
    if show_line and 1 <= exc.line <= len(lines):
        typer.echo(f"  {lines[exc.line - 1]}", err=True)
        typer.echo(f"  {' ' * max(exc.column - 1, 0)}^", err=True)
    raise typer.Exit(2)


def _format_rows(columns: list[str], rows: list[tuple], format: QueryFormat) -> str:
    if format is QueryFormat.json:
        import json

        payload: Any = bool(rows) if not columns else [dict(zip(columns, r, strict=True)) for r in rows]
        return json.dumps(payload, indent=2, ensure_ascii=False) + "\n"
    if format is QueryFormat.csv:
        import csv
        import io

        buffer = io.StringIO()
        writer = csv.writer(buffer, lineterminator="\n")
        if not columns:
            writer.writerows([["holds"], ["true" if rows else "false"]])
        else:
            writer.writerow(columns)
            writer.writerows(rows)
        return buffer.getvalue()
    if not columns:
        return ("yes: the query holds" if rows else "no: the query does not hold") + "\n"
    if not rows:
        return ""
    # Here, not at the top: importing tabulate takes some 45 ms, which only a table should pay.
    from tabulate import tabulate

    return tabulate(rows, headers=columns, disable_numparse=True) + "\n"


def _print_relations(program: Program, format: QueryFormat, pattern: str | None) -> None:
    """The relations whose name matches `pattern` (a glob, or a part of the name)."""
    from fnmatch import fnmatchcase

    from ..explain.terms import first_sentence

    rows = []
    wanted = (pattern or "").strip()
    glob = wanted if any(c in wanted for c in "*?[") else f"*{wanted}*"
    for rel in program.relations.values():
        if not fnmatchcase(rel.name, glob):
            continue
        kind = "input" if rel.is_input else "derived"
        cols = ", ".join(f"{name}: {typ}" for name, typ in rel.columns)
        rows.append((rel.name, kind, cols, first_sentence(rel.doc)))
    if not rows:
        usage_error(f"no relation matches {wanted!r}")
    if format is QueryFormat.table:
        from tabulate import tabulate  # some 45 ms: only for a table, as above

        sys.stdout.write(tabulate(rows, headers=["relation", "kind", "columns", "doc"]) + "\n")
        return
    sys.stdout.write(_format_rows(["relation", "kind", "columns", "doc"], rows, format))


def register(app: typer.Typer) -> None:
    app.command(name="why", help=WHY_HELP)(why)
    app.command(name="query", help=QUERY_HELP)(query)
