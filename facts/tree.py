"""Parse Python source with ast-grep-py (tree-sitter) into a light Python tree.

Crossing into the native parser costs a call per method, so the tree is read
once into `PNode`s and every later pass walks plain Python objects.
"""

from __future__ import annotations

from collections.abc import Sequence

from ast_grep_py import SgNode, SgRoot

# Leaves whose text the extractor needs; every other node keeps only its kind.
_TEXT_KINDS = frozenset(
    {
        "true",
        "false",
        "none",
        "identifier",
        "integer",
        "float",
        "string_content",
        "escape_sequence",
        "dotted_name",
        "relative_import",
        "import_prefix",
        "comment",
        "type",
    }
)


class PNode:
    __slots__ = ("kind", "line", "end_line", "children", "text", "named", "_named")

    def __init__(self, kind: str, line: int, end_line: int, named: bool, text: str | None) -> None:
        self.kind = kind
        self.line = line
        self.end_line = end_line
        self.named = named
        self.text = text
        self.children: Sequence[PNode] = []
        self._named: Sequence[PNode] | None = None

    def named_children(self) -> Sequence[PNode]:
        """The named children, comments left out (computed once: the tree is read-only)."""
        named = self._named
        if named is None:
            named = self._named = [c for c in self.children if c.named and c.kind != "comment"]
        return named

    def child_of_kind(self, kind: str) -> PNode | None:
        for c in self.children:
            if c.kind == kind:
                return c
        return None

    def __repr__(self) -> str:  # pragma: no cover - debugging aid
        return f"PNode({self.kind}@{self.line})"


class ParseResult:
    __slots__ = ("root", "errors", "python2_line", "tree", "binding_lines")

    def __init__(
        self,
        root: PNode,
        errors: list[tuple[int, int]],
        python2_line: int | None,
        tree: SgNode | None = None,
        binding_lines: set[int] | None = None,
    ) -> None:
        self.root = root
        self.tree = tree  # the parser's own tree, kept only when asked (facts.spans reads it)
        # Where an expression may bind a name (see EXPRESSION_BINDINGS): None, anywhere.
        self.binding_lines = binding_lines
        self.errors = sorted(errors)  # (first line, last line) of each syntax error
        self.python2_line = python2_line  # a Python 2 print/exec statement, if any

    @property
    def error_line(self) -> int | None:
        """The first line of a syntax error (a Python 2 statement counts), if any."""
        lines = [start for start, _ in self.errors]
        if self.python2_line is not None:
            lines.append(self.python2_line)
        return min(lines) if lines else None

    def error_lines(self) -> int:
        """How many lines syntax errors cover."""
        covered: set[int] = set()
        for start, end in self.errors:
            covered.update(range(start, end + 1))
        return len(covered)


def parse(source: str, keep_tree: bool = False) -> ParseResult:
    root = SgRoot(source, "python").root()
    errors: list[tuple[int, int]] = []
    python2: list[int] = []
    binding_lines: set[int] = set()
    proot = _convert(root, errors, python2, binding_lines)
    python2_line = min(python2) if python2 else None
    return ParseResult(proot, errors, python2_line, root if keep_tree else None, binding_lines)


# Unnamed tokens the extractor reads (operators, `=`, slice colons); other punctuation and
# keywords are dropped, which saves a Python object per token.
_KEPT_TOKENS = frozenset(
    """+ - * / // % ** @ & | ^ << >> ~ < > <= >= == != <> = : in is and or not
    not_in is_not += -= *= /= //= %= **= @= &= |= ^= <<= >>=""".split()
) | {"not in", "is not"}
# Read as a whole (text), never descended into.
_LEAF_KINDS = frozenset({"string_content", "not in", "is not", "import_prefix", "comment"})
_PYTHON2_KINDS = frozenset({"print_statement", "exec_statement"})
# Named tokens that never span lines nor have children (their text is kept).
_ONE_LINE_LEAVES = frozenset({"identifier", "integer", "float", "true", "false", "none"})
# Kinds that the grammar gives only to anonymous tokens (punctuation, operators, keywords), and
# only to named nodes: for these, whether a node is named is known from its kind, without the
# native call that asks (one per node read: about 2 % of an extraction's instructions).  A kind
# in neither set is asked: `await`, `lambda`, `yield` and `type` are both a keyword and a named
# node, and a later grammar may bring kinds of its own (tests/test_extractor.py checks both sets
# against the parser).
_ANONYMOUS_KINDS = frozenset(
    """!= % %= & &= ( ) * ** **= *= + += , - -= -> . / // //= /= : := ; < << <<= <= <> = == >
    >= >> >>= @ @= [ ] ^ ^= _ __future__ and as assert async break case class continue def del
    elif else except exec finally for from global if import in is match nonlocal not or pass
    print raise return try while with { | |= } ~""".split()
) | {"is not", "not in"}
_NAMED_KINDS = frozenset(
    """aliased_import argument_list as_pattern as_pattern_target assert_statement assignment
    attribute augmented_assignment binary_operator block boolean_operator break_statement call
    case_clause case_pattern class_definition class_pattern comment comparison_operator
    concatenated_string conditional_expression continue_statement decorated_definition decorator
    default_parameter delete_statement dictionary dictionary_comprehension dictionary_splat
    dictionary_splat_pattern dotted_name elif_clause ellipsis else_clause escape_interpolation
    escape_sequence except_clause expression_list expression_statement false finally_clause float
    for_in_clause for_statement format_expression format_specifier function_definition
    future_import_statement generator_expression generic_type global_statement identifier
    if_clause if_statement import_from_statement import_prefix import_statement integer
    interpolation keyword_argument keyword_separator lambda_parameters line_continuation list
    list_comprehension list_pattern list_splat list_splat_pattern match_statement module
    named_expression none nonlocal_statement not_operator pair parameters parenthesized_expression
    pass_statement pattern_list positional_separator raise_statement relative_import
    return_statement set set_comprehension slice splat_pattern string string_content string_end
    string_start subscript true try_statement tuple tuple_pattern type_conversion type_parameter
    typed_default_parameter typed_parameter unary_operator union_pattern union_type
    while_statement wildcard_import with_clause with_item with_statement""".split()
)
# A string literal without interpolation is read as one leaf (its text), which saves visiting
# its start, content and end tokens: the literal's prefix says whether it can interpolate.
_PLAIN_STRING_PREFIX = frozenset("rRbBuU")


def _plain_string_quote(text: str) -> str | None:
    """The quote of a literal that cannot interpolate (a single or a tripled quote), else None."""
    for i, ch in enumerate(text):
        if ch == '"' or ch == "'":
            triple = ch * 3
            return triple if text.startswith(triple, i) else ch
        if ch not in _PLAIN_STRING_PREFIX:
            return None
    return None


def string_body(text: str) -> str:
    """What lies between the quotes of a plain literal's source text (escapes left as written)."""
    quote = _plain_string_quote(text)
    if quote is None:
        return ""
    start = text.index(quote[0]) + len(quote)
    end = len(text) - len(quote) if text.endswith(quote) and len(text) >= start + len(quote) else len(text)
    return text[start:end]


def _chevron_print(kind: str, sg: SgNode) -> bool:
    """`print >> f, x`: tree-sitter reads a Python 2 print statement, but it is valid Python 3
    too (a tuple whose first item is `print >> f`), so it is not evidence of Python 2."""
    return kind == "print_statement" and any(c.kind() == "chevron" for c in sg.children())


# The nodes by which an expression binds a name (a walrus, a comprehension's variables, an
# `as`), and an ERROR, under which anything may be: the first line of each is noted, so that
# the binding collector can pass over an expression that holds none of them.
EXPRESSION_BINDINGS = frozenset({"named_expression", "for_in_clause", "as_pattern", "ERROR"})


# The children of a leaf: one empty sequence for all of them (a third of all nodes are leaves).
_NO_NODES: tuple[PNode, ...] = ()


def _convert(sg: SgNode, errors: list[tuple[int, int]], python2: list[int], binding_lines: set[int]) -> PNode:
    # Iterative, so a pathologically nested expression cannot exhaust the stack.
    rng = sg.range()
    top = PNode(sg.kind(), rng.start.line + 1, rng.end.line + 1, True, None)
    stack: list[tuple[SgNode, PNode, list[PNode]]] = [(sg, top, [])]
    text_kinds = _TEXT_KINDS
    kept = _KEPT_TOKENS
    leaf_kinds = _LEAF_KINDS
    one_line_leaves = _ONE_LINE_LEAVES
    expression_bindings = EXPRESSION_BINDINGS
    anonymous = _ANONYMOUS_KINDS
    named_kinds = _NAMED_KINDS
    # The nodes made most often (names, numbers, operators, the nodes descended into) are made
    # without PNode's __init__: a Python call per node, some 3 % of parsing and converting.
    new = object.__new__
    no_nodes = _NO_NODES
    while stack:
        node, pnode, out = stack.pop()
        pnode.children = out
        # The named children, listed as they are made: nearly every node read is asked for them.
        named_out: list[PNode] = []
        pnode._named = named_out
        parent_line = pnode.line
        # The children of a node on one line are on that line: their ranges, a native call
        # each (most nodes are in one-line expressions), are not read.
        one_line = parent_line == pnode.end_line
        children = node.children()
        if not children and pnode.kind != "block" and pnode.kind != "module" and not node.text():
            errors.append((pnode.line, pnode.line))  # zero-width: a MISSING node
        for child in children:
            kind = child.kind()
            if kind in one_line_leaves:
                # Names and numbers, a third of all nodes: read with one or two calls each.
                text = child.text()
                line = end_line = parent_line if one_line else child.range().start.line + 1
                if not text:  # zero-width: tree-sitter put in a MISSING name
                    errors.append((line, line))
                named = True
                descend = False
            elif kind in anonymous or (kind not in named_kinds and not child.is_named()):
                # tree-sitter recovers from a syntax error with zero-width MISSING tokens.
                if not child.text():
                    line = child.range().start.line + 1
                    errors.append((line, line))
                if kind not in kept:
                    continue
                text = None
                line = end_line = parent_line
                named = False
                descend = False
            else:
                if one_line:
                    line = end_line = parent_line
                else:
                    crng = child.range()
                    line = crng.start.line + 1
                    end_line = crng.end.line + 1
                if kind == "string":
                    text = child.text()
                    quote = _plain_string_quote(text)
                    if quote is not None:
                        pchild = PNode("string", line, end_line, True, text)
                        out.append(pchild)
                        named_out.append(pchild)
                        if not text.endswith(quote) or len(text) < text.index(quote[0]) + 2 * len(quote):
                            errors.append((end_line, end_line))  # unterminated
                        continue
                    text = None
                elif kind in leaf_kinds:  # none of them binds a name or is a Python 2 statement
                    kept_text = child.text()
                    pchild = PNode(kind, line, end_line, True, kept_text)
                    out.append(pchild)
                    if kind != "comment":
                        named_out.append(pchild)
                    if kept_text == "":
                        errors.append((line, line))  # zero-width: a MISSING node
                    continue
                else:
                    if kind in expression_bindings:
                        binding_lines.add(line)
                        if kind == "ERROR":
                            errors.append((line, end_line))
                    elif kind in _PYTHON2_KINDS and not _chevron_print(kind, child):
                        python2.append(line)
                    text = child.text() if kind in text_kinds else None
                named = True
                # Whether it has children is learnt when it is visited (asking costs a call,
                # and most nodes here have some).
                descend = True
            # Made without PNode's __init__ (see above).
            pchild = new(PNode)
            pchild.kind = kind
            pchild.line = line
            pchild.end_line = end_line
            pchild.named = named
            pchild.text = text
            out.append(pchild)
            if named:
                named_out.append(pchild)
            if descend:
                stack.append((child, pchild, []))
            else:
                pchild.children = pchild._named = no_nodes
    return top
