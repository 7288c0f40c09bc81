"""The extracted relations: names, columns and which columns hold node ids.

`rules.dl` declares the same relations as `.input`; a test keeps the two in
step. Node ids are local to a file when the extractor emits them and are
shifted into one id space when the facts are loaded (see `facts.store`).
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Column:
    name: str
    type: str  # "symbol" | "number"
    is_node: bool = False  # holds a node id that the loader must shift


def _cols(spec: str) -> tuple[Column, ...]:
    """Parse "a:symbol, n:node" where `node` means a number that is a node id."""
    out = []
    for part in spec.split(","):
        name, typ = (s.strip() for s in part.split(":"))
        out.append(Column(name, "number" if typ == "node" else typ, typ == "node"))
    return tuple(out)


INPUT_RELATIONS: dict[str, tuple[Column, ...]] = {
    name: _cols(spec)
    for name, spec in {
        "source_file": "file:symbol, module:symbol, lines:number",
        "skipped_file": "file:symbol, reason:symbol",
        "partial_file": "file:symbol, reason:symbol",
        "scope": "s:node, kind:symbol, qualname:symbol, file:symbol, line:number, end_line:number",
        "scope_parent": "s:node, parent:node",
        "function_def": "f:node, name:symbol, qualified:symbol",
        "param": "f:node, index:number, name:symbol, annotation:symbol",
        "param_default": "f:node, name:symbol, e:node",
        "decorator": "f:node, e:node",
        "node": "n:node, kind:symbol, scope:node, line:number",
        "stmt_of": "e:node, s:node",
        "in_loop": "n:node, l:node",
        "loop": "l:node, kind:symbol, iter:node, target:node, end_line:number",
        "loop_parent": "l:node, outer:node",
        "name_load": "e:node, name:symbol",
        "name_store": "e:node, name:symbol",
        "attribute": "e:node, obj:node, attr:symbol",
        "qualified_ref": "e:node, qualified:symbol",
        "call": "c:node, func:node, callee:symbol",
        "method_call": "c:node, receiver:node, method:symbol",
        "call_arg": "c:node, index:number, e:node",
        "call_kwarg": "c:node, key:symbol, e:node",
        "subscript": "e:node, obj:node, parts:number",
        "subscript_index": "e:node, pos:number, ix:node",
        "slice": "sl:node, start:node, stop:node, step:node",
        "binop": "e:node, op:symbol, left:node, right:node",
        "unaryop": "e:node, op:symbol, operand:node",
        "boolop": "e:node, op:symbol, left:node, right:node",
        "compare": "e:node, op:symbol, left:node, right:node",
        "elem": "t:node, index:number, e:node",
        "int_value": "e:node, value:number",
        "str_value": "e:node, value:symbol",
        "assign": "s:node, target:node, value:node, op:symbol",
        "branch_test": "s:node, e:node, kind:symbol",
        "return_value": "s:node, e:node",
        "import_module": "file:symbol, module:symbol, line:number",
        "fstring_value": "e:node, inner:node",
        "reaching": "e:node, d:node",
        "free_ref": "e:node, s:node",
        "param_def": "p:node, f:node, index:number",
        "under_if": "s:node, test:node, branch:number",
    }.items()
}

NO_NODE = -1  # stands for an absent part (slice bound, while-loop target, ...)
