"""The input relations: names, columns, which columns hold node ids, and what each holds.

This is the one place the inputs are declared: `rules/schema.dl`, their `.decl`/`.input`
block, is generated from it by `python3 -m cpq.rules.write_schema` (a test checks the committed file
is what this module writes). Node ids are local to a file when the extractor emits them and
are shifted into one id space when the facts are loaded (see `facts.packing`).
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Column:
    name: str
    type: str  # "symbol" | "number"
    is_node: bool = False  # holds a node id that the loader must shift


NODE_TYPE = "Node"  # the Datalog type of node-id columns: `.type Node <: number`
NODE_DOC = (
    "The id of a statement or expression node. A number: rules compare node ids with numbers\n"
    "and keep them in number columns of derived relations; -1 stands for an absent part."
)

# name -> (columns, doc); a column is "name:type" with type symbol, number or node.
_EXTRACTED: dict[str, tuple[str, str]] = {
    "source_file": (
        "file:symbol, module:symbol, lines:number",
        "A Python file that was parsed: its path relative to PATH, module name, line count.",
    ),
    "skipped_file": (
        "file:symbol, reason:symbol",
        "A file that was found but not assessed, with the reason.",
    ),
    "partial_file": (
        "file:symbol, reason:symbol",
        "A file with syntax errors of which only the intact statements were extracted.",
    ),
    "scope": (
        "s:node, kind:symbol, qualname:symbol, file:symbol, line:number, end_line:number",
        'A scope: the module, a function or a class (qualname "Class.method", "<module>").',
    ),
    "scope_parent": ("s:node, parent:node", "Lexical nesting of scopes."),
    "function_def": (
        "f:node, name:symbol, qualified:symbol",
        "A function definition and the qualified name calls resolve to (module.qualname).",
    ),
    "param": (
        "f:node, index:number, name:symbol, annotation:symbol",
        'A parameter of a function; annotation resolved through imports ("numpy.ndarray") or its text.',
    ),
    "param_default": ("f:node, name:symbol, e:node", "The default value expression of a parameter."),
    "decorator": ("f:node, e:node", "A decorator expression on a function or class."),
    "node": (
        "n:node, kind:symbol, scope:node, line:number, stmt:node",
        "Every statement and expression node: its kind, enclosing scope and line, and the\n"
        "statement an expression belongs to (-1 for a statement, and for a decorator or default\n"
        "value outside any statement; rules read it as stmt_of).",
    ),
    "innermost_loop": (
        "n:node, l:node",
        "The innermost loop of the same scope whose body holds node n.",
    ),
    "loop": (
        "l:node, kind:symbol, iter:node, target:node, end_line:number",
        "A loop: for, while or a comprehension clause; its iterable (the test for while) and target.",
    ),
    "loop_parent": ("l:node, outer:node", "A loop directly inside another loop of the same scope."),
    "name_load": ("e:node, name:symbol", "A name read."),
    "name_store": ("e:node, name:symbol", "A name bound (assignment, loop or with target)."),
    "attribute": ("e:node, obj:node, attr:symbol", "An attribute access obj.attr."),
    "qualified_ref": (
        "e:node, qualified:symbol",
        "A name or attribute chain that resolves through imports/definitions: np.zeros -> numpy.zeros.",
    ),
    "call": (
        "c:node, func:node, callee:symbol",
        'A call; callee is the resolved qualified name ("numpy.zeros", "builtins.float", "pkg.mod.f") or "".',
    ),
    "method_call": (
        "c:node, receiver:node, method:symbol",
        "A method call receiver.method(...) whose receiver is a value, not a module.",
    ),
    "call_arg": ("c:node, index:number, e:node", "A positional argument of a call."),
    "call_kwarg": ("c:node, key:symbol, e:node", "A keyword argument of a call."),
    "subscript": ("e:node, obj:node, parts:number", "A subscript obj[...] with the number of index parts."),
    "subscript_index": (
        "e:node, pos:number, ix:node",
        "One index part of a subscript (an expression or a slice node).",
    ),
    "slice": ("sl:node, start:node, stop:node, step:node", "A slice start:stop:step (each -1 when omitted)."),
    "binop": (
        "e:node, op:symbol, left:node, right:node",
        "A binary operator (+, -, *, /, //, %, **, @, &, |, ^, <<, >>).",
    ),
    "unaryop": ("e:node, op:symbol, operand:node", "A unary operator (-, +, ~, not)."),
    "boolop": ("e:node, op:symbol, left:node, right:node", "A boolean operator (and, or)."),
    "compare": (
        "e:node, op:symbol, left:node, right:node",
        "A comparison (chained comparisons give one row per adjacent pair).",
    ),
    "elem": (
        "t:node, index:number, e:node",
        "An element of a tuple/list/set display or of a target pattern.",
    ),
    "int_value": (
        "e:node, value:number",
        "An integer literal, or an expression of integer literals folded to its value.",
    ),
    "str_value": ("e:node, value:symbol", "A plain string literal (up to 120 characters)."),
    "assign": (
        "s:node, target:node, value:node, op:symbol",
        'An assignment in statement s: op is "=", "+=", ..., "with" or ":="; value -1 when absent.',
    ),
    "branch_test": (
        "s:node, e:node, kind:symbol",
        "A condition that decides control flow: if, elif, while, assert, ifexp, comp_if.",
    ),
    "return_value": ("s:node, e:node", "The value of a return statement."),
    "import_module": (
        "file:symbol, module:symbol, line:number",
        "A module imported by a file (import x / from x import y gives x and x.y).",
    ),
    "fstring_value": ("e:node, inner:node", "An expression formatted inside an f-string."),
    "reaching": (
        "e:node, d:node",
        "A binding of a name that a read of it may see (flow-sensitive, per scope): an assignment,\n"
        "loop or with target, or a parameter (param_def). Reads of names the scope does not bind\n"
        "are in free_ref.",
    ),
    "free_ref": (
        "e:node, s:node",
        "A read of a name the scope does not bind, and the enclosing scope (a function around a\n"
        "closure, or the module) whose binding it reads.",
    ),
    "param_def": (
        "p:node, f:node, index:number",
        "A parameter as a binding: its node, its function and its position.",
    ),
    "under_if": (
        "s:node, test:node, branch:number",
        "A statement in a branch of an `if` of the same scope (the innermost): 0 the body, k the\n"
        "k-th elif, -1 the else.",
    ),
}

# Inputs cpq loads besides the extracted facts: the context, suppressions, the configuration,
# the runtime evidence (a profile, a Doctor report) and the API manifest.
_LOADED: dict[str, tuple[str, str]] = {
    "context_number": (
        "key:symbol, value:number",
        "The assessment context as numbers: elements_min/max, elements_given, gpus_min/max, nodes,\n"
        "compute_capability (x10), cpu_only — from the command line or the defaults.",
    ),
    "context_symbol": (
        "key:symbol, value:symbol",
        "The assessment context as words: the --pattern override.",
    ),
    "suppressed": (
        "code:symbol, file:symbol, line:number",
        "A finding silenced in place: `# cpq: ignore[R104]` (or a bare `# cpq: ignore`) on its line.",
    ),
    "disabled": (
        "code:symbol, file:symbol",
        "A code turned off for a file by configuration ([tool.cpq] select / ignore / per-file-ignores).",
    ),
    "profile_run": (
        "kind:symbol, unit:symbol, total:number",
        "A profile of a run (--profile): cprofile (deterministic, by function) or speedscope\n"
        "(sampled, by line), the unit of its times (us, or samples) and the whole run's time.",
    ),
    "profile_function": (
        "path:symbol, line:number, name:symbol, calls:number, own:number, cum:number",
        "A function in the profile: its file as the profile names it, its first line (the first\n"
        'decorator\'s for a decorated function), name, calls, own and cumulative time ("~", 0 for\n'
        "built-ins).",
    ),
    "profile_call": (
        "path:symbol, line:number, name:symbol, caller_path:symbol, caller_line:number, "
        "caller_name:symbol, calls:number, own:number, cum:number",
        "Who called a profiled function (cProfile): the caller as profile_function names it, the\n"
        "calls from it and the callee's own and cumulative time in those calls.",
    ),
    "profile_line": (
        "path:symbol, line:number, own:number, cum:number",
        "A line in a sampled profile: the time spent on it (own) and under it (cum).",
    ),
    "doctor_run": (
        "diagnostics:number",
        "A cuPyNumeric Doctor report was given (--doctor), with this many diagnostics.",
    ),
    "doctor_diagnostic": (
        "path:symbol, line:number, check:symbol, description:symbol",
        "A diagnostic of the cuPyNumeric Doctor: where (the user frame), which check (from its\n"
        "description: array-gather, nonzero, iter, ...; unknown for a newer one) and its words.",
    ),
    "api_support": (
        "api:symbol, level:symbol, glyph:symbol, note:symbol",
        "The API-support manifest: level is multi, single, partial or none (decision.md).",
    ),
    "api_alias": (
        "name:symbol, canonical:symbol",
        "NumPy's aliases (numpy.abs -> numpy.absolute), and each listed name to itself.",
    ),
}


def _cols(spec: str) -> tuple[Column, ...]:
    """Parse "a:symbol, n:node" where `node` means a number that is a node id."""
    out = []
    for part in spec.split(","):
        name, typ = (s.strip() for s in part.split(":"))
        out.append(Column(name, "number" if typ == "node" else typ, typ == "node"))
    return tuple(out)


# The relations the extractor writes.
INPUT_RELATIONS: dict[str, tuple[Column, ...]] = {name: _cols(spec) for name, (spec, _) in _EXTRACTED.items()}
# Every `.input` relation of the rules: the extracted ones, then those cpq loads itself.
ALL_INPUTS: dict[str, tuple[Column, ...]] = {
    **INPUT_RELATIONS,
    **{name: _cols(spec) for name, (spec, _) in _LOADED.items()},
}
INPUT_DOCS: dict[str, str] = {name: doc for name, (_, doc) in (*_EXTRACTED.items(), *_LOADED.items())}

NO_NODE = -1  # stands for an absent part (slice bound, while-loop target, ...)

SCHEMA_DL = "rules/schema.dl"  # relative to the package


def schema_dl() -> str:
    """The text of rules/schema.dl."""
    out = [
        "// " + "=" * 76,
        "// Extracted facts (input relations)",
        "// " + "=" * 76,
        "//",
        "// Generated from facts/schema.py by `python3 -m cpq.rules.write_schema`; do not edit.",
        "",
        *_comment(NODE_DOC),
        f".type {NODE_TYPE} <: number",
        "",
    ]
    for name in _EXTRACTED:
        out += _declaration(name)
    out += [
        "",
        "// The inputs cpq loads besides the extracted facts: the context, suppressions, the",
        "// configuration, the runtime evidence and the API manifest.",
        "",
    ]
    for name in _LOADED:
        out += _declaration(name)
    return "\n".join(out) + "\n"


def _declaration(name: str) -> list[str]:
    columns = ", ".join(f"{c.name}: {NODE_TYPE if c.is_node else c.type}" for c in ALL_INPUTS[name])
    return [*_comment(INPUT_DOCS[name]), f".decl {name}({columns})", f".input {name}"]


def _comment(doc: str) -> list[str]:
    return ["// " + line for line in doc.split("\n")]
