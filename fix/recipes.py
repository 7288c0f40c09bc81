"""The recipes that are mechanical enough to apply: for one finding's node, the edits, and
whether the fix is safe.

A fix is *safe* when, for every NumPy array the finding is about, the new code gives what the
old code gave (the same value, dtype and Python type, NaN included) wherever the old code
returns at all; it may turn an exception into a value.  Anything short of that is *unsafe*:
offered with --unsafe-fixes only, with the reason.  Where no edit can keep the meaning, there
is no fix, and the finding's recipe (`cpq rules CODE`) is left to the user.

R110 (a Python builtin over an array):
- `any(m)`, `all(m)` -> `bool(np.any(m))`, `bool(np.all(m))`; plain `np.any(m)` where only the
  truth of the value is used (an if/while/assert test, `not`, a comprehension's `if`).  Safe:
  over rows the builtin tests each row's truth, which NumPy gives only for rows of one element,
  and then reducing every element is the same; no axis, since `np.any(a, axis=0)` of a (0, k)
  array is k values where the builtin gives False.
- `sum(a)`, `max(a)`, `min(a)` -> `np.sum(a, axis=0)`, ...: the builtin goes along the first
  axis, adding or comparing rows (for a 1-D array, elements: axis=0 is then the whole array, the
  same scalar).  Unsafe: NumPy adds a 1-D float array pairwise where the builtin adds one element
  after another (the last bits differ), widens small integer types (the builtin's int8 sum wraps
  around), and sums an empty array to 0.0 or a row of zeros, not the int 0; with a NaN in the
  array the builtin's max/min depends on where the NaN is, NumPy's is NaN.
- `sorted`, `list`, `tuple`, `iter`, `reversed`, `x in a`: no fix (a list is not an array,
  nor an array a list).

R109 (order=):
- an `order=` equal to the function's default (`a.reshape(n, m, order="C")`,
  `np.zeros(n, order="C")`, `np.array(x, order="K")`) is dropped: safe, it changes nothing.
- another order on a function that only lays out a new array (np.zeros/ones/empty/full, np.array,
  np.asarray, np.copy, the *_like ones, a.copy, a.astype) is dropped as an unsafe fix: the values
  stay, the memory layout changes, and with it whether a copy is made at all (np.asarray,
  `copy=False`): a later write into the result may then write into the input.
- another order on reshape/ravel/flatten: no fix; it decides which element goes where.

R202 (x = x op y in a loop) -> `x op= y`: always unsafe.  In place, the array x names is
changed: the caller's array when x is a parameter, and every other name or view of it; and the
result keeps x's dtype and shape (an int x += a float y raises, a y that broadcasts x up fails).
cpq's facts hold no dtypes, shapes or aliases, so it proves neither; the fix is for a reader
who knows both.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from ast_grep_py import SgNode

from .edits import Edit
from .sites import FileNodes, Site, end, same, start

FIXABLE_CODES = ("R109", "R110", "R202")


@dataclass(frozen=True, slots=True)
class Fix:
    code: str
    file: str
    line: int
    edits: tuple[Edit, ...]
    safe: bool
    title: str  # what it does, in a few words: `sum(a) -> np.sum(a, axis=0)`
    note: str = ""  # why it is unsafe
    callee: str = ""  # what the call it writes must resolve to (numpy.sum), checked again


@dataclass(frozen=True, slots=True)
class ArrayModule:
    """A module-level `import numpy as np`: the name the fixes call NumPy by."""

    name: str
    module: str  # numpy or cupynumeric
    line: int


def array_module(root: SgNode) -> ArrayModule | None:
    for stmt in root.children():
        if stmt.kind() != "import_statement":
            continue
        for item in stmt.named_children():
            line = stmt.range().start.line + 1
            if item.kind() == "aliased_import":
                module, alias = item.field("name"), item.field("alias")
                if module is not None and alias is not None and module.text() in _ARRAY_MODULES:
                    return ArrayModule(alias.text(), module.text(), line)
            elif item.kind() == "dotted_name" and item.text() in _ARRAY_MODULES:
                return ArrayModule(item.text(), item.text(), line)
    return None


_ARRAY_MODULES = ("numpy", "cupynumeric")


def plan_fix(site: Site, nodes: FileNodes, local_id: int, module: ArrayModule | None) -> Fix | str:
    """The fix of one site, or why there is none."""
    if site.code == "R110":
        node = nodes.node(local_id, frozenset({"call", "comparison_operator"}))
        if node is None:
            return "its node was not found"
        return _builtin(site, node, module) if node.kind() == "call" else "`in` over an array has no fix"
    if site.code == "R109":
        node = nodes.node(local_id, frozenset({"call"}))
        return _order(site, node, nodes.text) if node is not None else "its node was not found"
    if site.code == "R202":
        node = nodes.node(local_id, frozenset({"assignment"}))
        return _in_place(site, node) if node is not None else "its node was not found"
    return f"{site.code} has no mechanical fix"


# -- R110 ------------------------------------------------------------------------------------

_REDUCTIONS = {"builtins.sum": "sum", "builtins.max": "max", "builtins.min": "min"}
_TRUTH_TESTS = {"builtins.any": "any", "builtins.all": "all"}
_UNSAFE_REDUCTION = {
    "sum": "NumPy adds a float array in another order, widens small integer types and sums an "
    "empty array to 0.0 (or zeros), where the builtin gives the int 0",
    "max": "with a NaN in the array the builtin's answer depends on where the NaN is; NumPy's is NaN",
    "min": "with a NaN in the array the builtin's answer depends on where the NaN is; NumPy's is NaN",
}


def _builtin(site: Site, call: SgNode, module: ArrayModule | None) -> Fix | str:
    name = _REDUCTIONS.get(site.callee) or _TRUTH_TESTS.get(site.callee)
    if name is None:
        return f"{site.callee.removeprefix('builtins.')}(...) has no NumPy equivalent of the same type"
    function, arguments = call.field("function"), call.field("arguments")
    if function is None or function.kind() != "identifier" or arguments is None:
        return "the builtin is not called by its plain name"
    args = [a for a in arguments.named_children() if a.kind() != "comment"]
    if arguments.kind() != "argument_list" or len(args) != 1 or args[0].kind() in _NOT_PLAIN:
        return "the call has arguments besides the array"
    if module is None or module.line >= site.line:
        return "the file has no module-level `import numpy` above the line"
    arg = args[0]
    np_name = f"{module.name}.{name}"
    callee = f"{module.module}.{name}"
    shown = _short(arg.text())
    rename = Edit(start(function), end(function), np_name)
    if name in _REDUCTIONS.values():
        edits = (rename, Edit(end(arg), end(arg), ", axis=0"))
        title = f"{name}({shown}) -> {np_name}({shown}, axis=0)"
        return Fix(site.code, site.file, site.line, edits, False, title, _UNSAFE_REDUCTION[name], callee)
    if _truth_tested(call):
        title = f"{name}({shown}) -> {np_name}({shown})"
        return Fix(site.code, site.file, site.line, (rename,), True, title, callee=callee)
    edits = (Edit(start(function), end(function), f"bool({np_name}"), Edit(end(call), end(call), ")"))
    title = f"{name}({shown}) -> bool({np_name}({shown}))"
    return Fix(site.code, site.file, site.line, edits, True, title, callee=callee)


_NOT_PLAIN = frozenset({"keyword_argument", "list_splat", "dictionary_splat", "generator_expression"})


def _truth_tested(node: SgNode) -> bool:
    """Whether only the truth of the node's value is used: a test of if, elif, while or assert,
    the operand of `not` or of a comprehension's `if`, or of `and`/`or` in such a place."""
    child = node
    parent = node.parent()
    while parent is not None:
        kind = parent.kind()
        if kind in ("parenthesized_expression", "boolean_operator"):
            child, parent = parent, parent.parent()
            continue
        if kind in ("not_operator", "if_clause"):
            return True
        if kind in ("if_statement", "elif_clause", "while_statement"):
            return same(parent.field("condition"), child)
        if kind == "conditional_expression":
            parts = parent.named_children()
            return len(parts) == 3 and same(parts[1], child)
        if kind == "assert_statement":
            parts = parent.named_children()
            return bool(parts) and same(parts[0], child)
        return False
    return False


# -- R109 ------------------------------------------------------------------------------------

# order='s default where NumPy's signatures give one: passing the default says nothing.
_API_DEFAULT = {
    "numpy.zeros": "C",
    "numpy.ones": "C",
    "numpy.empty": "C",
    "numpy.full": "C",
    "numpy.reshape": "C",
    "numpy.ravel": "C",
    "numpy.array": "K",
    "numpy.copy": "K",
    "numpy.zeros_like": "K",
    "numpy.ones_like": "K",
    "numpy.empty_like": "K",
    "numpy.full_like": "K",
}
_METHOD_DEFAULT = {"reshape": "C", "ravel": "C", "flatten": "C", "copy": "C", "astype": "K"}
# Where order= lays out a new array and nothing else: its values are the same whatever it says.
_LAYOUT_API = frozenset(
    {name for name in _API_DEFAULT if name not in ("numpy.reshape", "numpy.ravel")}
    | {"numpy.asarray", "numpy.asanyarray"}
)
_LAYOUT_METHODS = frozenset({"copy", "astype"})
_ORDER_LITERAL = re.compile(r"""(['"])([CFAK])\1""")
_LAYOUT_NOTE = (
    "the new array's memory layout changes, and with it whether a copy is made at all "
    "(np.asarray, copy=False): writes into the result may then reach the input; its values do not"
)


def _order(site: Site, call: SgNode, text: str) -> Fix | str:
    function, arguments = call.field("function"), call.field("arguments")
    if function is None or arguments is None or arguments.kind() != "argument_list":
        return "not a plain call"
    args = [a for a in arguments.named_children() if a.kind() != "comment"]
    keyword = next((a for a in args if a.kind() == "keyword_argument" and _name(a) == "order"), None)
    if keyword is None:
        return "no order= argument"
    what, default, layout_only = _order_default(site, function)
    if what is None:
        return "order= of this call is not one whose effect cpq knows"
    value = keyword.field("value")
    literal = _ORDER_LITERAL.fullmatch(value.text()) if value is not None else None
    given = literal.group(2) if literal is not None else None
    if given is not None and given == default:
        safe, note = True, ""
    elif layout_only:
        safe, note = False, _LAYOUT_NOTE
    else:
        return f"order= decides which element of {what} goes where"
    edit = _drop_argument(keyword, args, arguments, text)
    if edit is None:
        return "order= has a line of its own (or a comment beside it)"
    title = f"drop {keyword.text()} from {what}" + (" (the default)" if safe else "")
    return Fix(site.code, site.file, site.line, (edit,), safe, title, note)


def _name(keyword: SgNode) -> str:
    name = keyword.field("name")
    return name.text() if name is not None else ""


def _order_default(site: Site, function: SgNode) -> tuple[str | None, str | None, bool]:
    """(the call in words, order='s default, whether order= only lays out a new array)."""
    if site.callee in _API_DEFAULT or site.callee in _LAYOUT_API:
        short = "np." + site.callee.removeprefix("numpy.")
        return short, _API_DEFAULT.get(site.callee), site.callee in _LAYOUT_API
    attribute = function.field("attribute") if function.kind() == "attribute" else None
    if attribute is not None and site.array_receiver and attribute.text() in _METHOD_DEFAULT:
        method = attribute.text()
        return f"a.{method}", _METHOD_DEFAULT[method], method in _LAYOUT_METHODS
    return None, None, False


def _drop_argument(keyword: SgNode, args: list[SgNode], arguments: SgNode, text: str) -> Edit | None:
    """The edit that removes `keyword` from the call with its comma, on one line only."""
    index = next(i for i, a in enumerate(args) if same(a, keyword))
    if index > 0:  # `f(x, order="C")` -> `f(x)`, and `f(x, order="C",)` too
        after = keyword.next()
        last = index + 1 == len(args) and after is not None and after.kind() == ","
        edit = Edit(end(args[index - 1]), end(after) if last and after is not None else end(keyword), "")
    elif index + 1 < len(args):  # `f(order="C", x)` -> `f(x)`
        edit = Edit(start(keyword), start(args[index + 1]), "")
    else:  # `f(order="C",)` -> `f()`
        edit = Edit(start(arguments) + 1, end(arguments) - 1, "")
    removed = text[edit.start : edit.end]
    return None if "\n" in removed or "#" in removed.replace(keyword.text(), "") else edit


# -- R202 ------------------------------------------------------------------------------------

_IN_PLACE_OPS = frozenset({"+", "-", "*", "/", "//", "%", "**", "&", "|", "^", "<<", ">>"})
_IN_PLACE_NOTE = (
    "in place, the array {x} names changes (a caller's array when {x} is a parameter, and every other "
    "name or view of it) and keeps its dtype and shape; cpq proves neither that nothing else holds "
    "it nor that the result has {x}'s dtype and shape"
)


def _in_place(site: Site, assignment: SgNode) -> Fix | str:
    target, value = assignment.field("left"), assignment.field("right")
    if assignment.field("type") is not None or target is None or value is None:
        return "not a plain assignment"
    if target.kind() != "identifier" or value.kind() != "binary_operator":
        return "the value is not `x op y` with x a plain name"
    left, operator = value.field("left"), value.field("operator")
    if left is None or operator is None or left.kind() != "identifier" or left.text() != target.text():
        return "the left operand is not the name assigned"
    if operator.text() not in _IN_PLACE_OPS:
        return f"no in-place form of {operator.text()} keeps the meaning"
    name, op = target.text(), operator.text()
    if "\n" in assignment.text()[: end(operator) - start(assignment)]:
        return "the statement goes on over a line break before the operator"
    edit = Edit(start(assignment), end(operator), f"{name} {op}=")
    title = f"{name} = {name} {op} ... -> {name} {op}= ..."
    return Fix(site.code, site.file, site.line, (edit,), False, title, _IN_PLACE_NOTE.format(x=name))


def _short(text: str, width: int = 30) -> str:
    flat = " ".join(text.split())
    return flat if len(flat) <= width else flat[: width - 1] + "…"
