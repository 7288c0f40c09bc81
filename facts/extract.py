"""The extractor: one Python file's tree → rows of the relations in `facts.schema`.

It records what the code says — scopes, statements, loops, calls with their
resolved callee, assignments, subscripts and slice parts, constants — and
makes no judgement: whether a value is an array, a loop hot, a line a
finding, is decided by `rules.dl`.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable, Sequence

from .flow import Flow, FlowState, merged_states
from .schema import NO_NODE
from .scopes import Resolver, Scope, module_scope_of
from .tree import PNode, string_body

# A fact's values: numbers (node ids among them) and symbols, as the relation's columns say.
Row = tuple[int | str, ...]
Rows = dict[str, list[Row]]

_MAX_STR = 120
MAX_EXPR_DEPTH = 64
_MAX_INT = 1 << 62

_COMPREHENSIONS = frozenset(
    {"list_comprehension", "set_comprehension", "dictionary_comprehension", "generator_expression"}
)
_SEQUENCES = frozenset(
    {"tuple", "list", "set", "expression_list", "pattern_list", "tuple_pattern", "list_pattern"}
)
_COMPOUND_STATEMENTS = frozenset(
    {
        "function_definition",
        "class_definition",
        "decorated_definition",
        "for_statement",
        "while_statement",
        "if_statement",
        "with_statement",
        "try_statement",
        "match_statement",
    }
)
_PATTERN_SEQUENCES = frozenset({"pattern_list", "tuple_pattern", "list_pattern"})
_SIMPLE_STMT_KINDS = {
    "return_statement": "return",
    "import_statement": "import",
    "import_from_statement": "import",
    "future_import_statement": "import",
    "raise_statement": "raise",
    "assert_statement": "assert",
    "delete_statement": "del",
    "pass_statement": "pass",
    "break_statement": "break",
    "continue_statement": "continue",
    "global_statement": "global",
    "nonlocal_statement": "nonlocal",
    "print_statement": "print",
    "exec_statement": "exec",
    "type_alias_statement": "type_alias",
}
# Statements after which their path goes no further, and where it goes.
_PATH_ENDS = {
    "return_statement": "return",
    "raise_statement": "raise",
    "break_statement": "break",
    "continue_statement": "continue",
}
_FOLD: dict[str, Callable[[int, int], int | None]] = {
    "+": lambda a, b: a + b,
    "-": lambda a, b: a - b,
    "*": lambda a, b: a * b,
    "//": lambda a, b: a // b if b else None,
    "%": lambda a, b: a % b if b else None,
    "<<": lambda a, b: a << b if 0 <= b < 63 else None,
    ">>": lambda a, b: a >> b if 0 <= b < 63 else None,
    "**": lambda a, b: a**b if 0 <= b < 63 and abs(a) < 1 << 20 else None,
}


def parse_int(text: str) -> int | None:
    t = text.replace("_", "").rstrip("lL")
    try:
        return int(t, 0)
    except ValueError:
        # Python 2 octal ("0777") or a complex literal ("3j"): not an integer here.
        return None


def module_name_for(relpath: str) -> str:
    parts = relpath.replace("\\", "/").split("/")
    last = parts[-1]
    for suffix in (".py", ".pyi", ".ipynb"):
        if last.endswith(suffix):
            last = last[: -len(suffix)]
            break
    parts[-1] = last
    if parts[-1] == "__init__" and len(parts) > 1:
        parts.pop()
    return ".".join(p for p in parts if p)


# ---------------------------------------------------------------------------
# Pass 1: scopes and bindings
# ---------------------------------------------------------------------------


# Node kinds the binding collector acts on; it walks through every other kind.
_BINDING_KINDS = frozenset(
    {
        "function_definition",
        "class_definition",
        "decorated_definition",
        "import_statement",
        "import_from_statement",
        "global_statement",
        "assignment",
        "augmented_assignment",
        "for_statement",
        "for_in_clause",
        "as_pattern",
        "named_expression",
        "lambda",
    }
)


# Expressions: where they hold no line of `ParseResult.binding_lines`, they bind no name (a
# statement that binds is never inside one), and the binding collector passes over them.
_EXPRESSION_KINDS = _COMPREHENSIONS | frozenset(
    {
        "argument_list",
        "attribute",
        "await",
        "binary_operator",
        "boolean_operator",
        "call",
        "comparison_operator",
        "concatenated_string",
        "conditional_expression",
        "dictionary",
        "dictionary_splat",
        "expression_list",
        "interpolation",
        "keyword_argument",
        "list",
        "list_splat",
        "not_operator",
        "pair",
        "parenthesized_expression",
        "set",
        "slice",
        "string",
        "subscript",
        "tuple",
        "unary_operator",
    }
)


class _BindingCollector:
    """Builds the scope tree and each scope's bindings (see `facts.scopes`)."""

    def __init__(self, module: str, is_package: bool, binding_lines: set[int] | None = None) -> None:
        self.module = module
        self.is_package = is_package
        self.scope_of_def: dict[int, Scope] = {}
        self.binding_lines = binding_lines

    def collect(self, root: PNode) -> Scope:
        top = Scope("module", "<module>", "<module>", None, root)
        self._block(root.children, top)
        return top

    def qualified(self, scope: Scope, name: str) -> str:
        q = name if scope.kind == "module" else f"{scope.qualname}.{name}"
        return f"{self.module}.{q}" if self.module else q

    def _block(self, nodes: Sequence[PNode], scope: Scope) -> None:
        # An explicit stack rather than recursion: statement nesting can be deep.
        stack = list(reversed(nodes))
        binding_kinds = _BINDING_KINDS
        expression_kinds = _EXPRESSION_KINDS
        marks = self.binding_lines
        while stack:
            node = stack.pop()
            kind = node.kind
            if kind not in binding_kinds:
                if (
                    marks is not None
                    and kind in expression_kinds
                    and node.line not in marks
                    and (node.line == node.end_line or marks.isdisjoint(range(node.line, node.end_line + 1)))
                ):
                    continue
                # Leaves bind nothing: only subtrees go on the stack.
                stack.extend([c for c in reversed(node.children) if c.children])
                continue
            if kind == "function_definition" or kind == "class_definition":
                self._definition(node, scope)
                continue
            if kind == "decorated_definition":
                for child in node.children:
                    if child.kind in ("function_definition", "class_definition"):
                        self._definition(child, scope)
                continue
            if kind in ("import_statement", "import_from_statement"):
                self._import(node, scope)
                continue
            if kind == "global_statement":
                for child in node.named_children():
                    if child.kind == "identifier" and child.text:
                        scope.global_names.add(child.text)
                continue
            if kind == "assignment":
                self._assignment(node, scope)
            elif kind in ("augmented_assignment",):
                self._bind_target(node.children[0], scope, None)
            elif kind in ("for_statement", "for_in_clause"):
                named = node.named_children()
                if named:
                    self._bind_target(named[0], scope, None)
            elif kind == "as_pattern":
                target = node.child_of_kind("as_pattern_target")
                if target is not None:
                    for c in target.named_children():
                        self._bind_target(c, scope, None)
            elif kind == "named_expression":
                named = node.named_children()
                if named:
                    self._bind_target(named[0], scope, None)
            elif kind == "lambda":
                continue  # its parameters are local to the lambda
            stack.extend([c for c in reversed(node.children) if c.children])

    def _assignment(self, node: PNode, scope: Scope) -> None:
        named = node.named_children()
        if not named:
            return
        target = named[0]
        value = named[-1] if len(named) >= 2 and node.child_of_kind("=") is not None else None
        if value is not None and value.kind == "assignment":
            value = None  # chained: `a = b = c`; the inner assignment binds b
        self._bind_target(target, scope, value)

    def _bind_target(self, target: PNode, scope: Scope, value: PNode | None) -> None:
        if target.kind == "identifier" and target.text:
            scope.bind_local(target.text, value)
        elif target.kind in _SEQUENCES or target.kind in ("parenthesized_expression",):
            for c in target.named_children():
                self._bind_target(c, scope, None)
        elif target.kind in ("list_splat_pattern", "list_splat"):
            for c in target.named_children():
                self._bind_target(c, scope, None)

    def _definition(self, node: PNode, scope: Scope) -> None:
        name_node = node.child_of_kind("identifier")
        name = name_node.text if name_node and name_node.text else "<anonymous>"
        kind = "function" if node.kind == "function_definition" else "class"
        qualname = name if scope.kind == "module" else f"{scope.qualname}.{name}"
        scope.bind(name, self.qualified(scope, name))
        inner = Scope(kind, name, qualname, scope, node)
        self.scope_of_def[id(node)] = inner
        if kind == "function":
            params = node.child_of_kind("parameters")
            first = True
            for p in params.named_children() if params else []:
                pname = _param_name(p)
                if pname is None:
                    continue
                inner.bind_local(pname)
                if first and scope.kind == "class":
                    inner.first_param = pname
                first = False
        body = node.child_of_kind("block")
        if body is not None:
            self._block(body.children, inner)

    def _import(self, node: PNode, scope: Scope) -> None:
        if node.kind == "import_statement":
            for item in node.named_children():
                if item.kind == "dotted_name":
                    dotted = _dotted(item)
                    head = dotted.split(".")[0]
                    scope.bind(head, head)
                elif item.kind == "aliased_import":
                    parts = item.named_children()
                    if len(parts) == 2:
                        scope.bind(parts[1].text or "", _dotted(parts[0]))
            return
        # from X import a, b as c
        named = node.named_children()
        if not named:
            return
        source = self._from_module(named[0])
        for item in named[1:]:
            if item.kind == "dotted_name":
                name = _dotted(item)
                scope.bind(name, f"{source}.{name}" if source else name)
            elif item.kind == "aliased_import":
                parts = item.named_children()
                if len(parts) == 2:
                    name = _dotted(parts[0])
                    scope.bind(parts[1].text or "", f"{source}.{name}" if source else name)

    def _from_module(self, node: PNode) -> str:
        if node.kind == "dotted_name":
            return _dotted(node)
        if node.kind == "relative_import":
            prefix = node.child_of_kind("import_prefix")
            dots = (prefix.text or ".").count(".") if prefix is not None else 1
            rest = node.child_of_kind("dotted_name")
            package = self.module.split(".") if self.module else []
            if not self.is_package and package:
                package = package[:-1]
            if dots > 1:
                package = package[: max(0, len(package) - (dots - 1))]
            tail = _dotted(rest) if rest is not None else ""
            return ".".join([*package, tail] if tail else package)
        return ""


def _dotted(node: PNode) -> str:
    if node.kind == "identifier":
        return node.text or ""
    return ".".join(c.text or "" for c in node.children if c.kind == "identifier")


def _param_name(p: PNode) -> str | None:
    if p.kind == "identifier":
        return p.text
    if p.kind in (
        "typed_parameter",
        "default_parameter",
        "typed_default_parameter",
        "list_splat_pattern",
        "dictionary_splat_pattern",
    ):
        ident = p.child_of_kind("identifier")
        if ident is None:
            for c in p.named_children():
                ident = c.child_of_kind("identifier")
                if ident is not None:
                    break
        return ident.text if ident is not None else None
    return None


# ---------------------------------------------------------------------------
# Pass 2: facts
# ---------------------------------------------------------------------------


class _Ctx:
    __slots__ = ("scope", "stmt", "loop", "guard")

    def __init__(self, scope: Scope, stmt: int, loop: int, guard: tuple[int, int] | None = None) -> None:
        self.scope = scope
        self.stmt = stmt
        self.loop = loop
        # The innermost `if` of the scope whose branch holds this code, and which branch.
        self.guard = guard


class FileExtractor:
    def __init__(self, file: str, module: str, is_package: bool = False) -> None:
        self.file = file
        self.module = module
        self.is_package = is_package
        self.rows: Rows = defaultdict(list)
        self.resolver = Resolver()
        self._next_id = 0
        self._ints: dict[int, int] = {}
        self._errors: list[tuple[int, int]] = []
        self._depth = 0
        self.intact_statements = 0
        self.dropped_statements = 0
        self._scopes: dict[int, Scope] = {}
        self._attr_obj: dict[int, int] = {}
        # What each name and attribute node denotes (None: nothing known), as the resolver
        # said: `a.b.c` is resolved from what `a.b` was, not from `a` again.
        self._resolved: dict[int, str | None] = {}
        self._node_rows = self.rows["node"]
        self._innermost_loop_rows = self.rows["innermost_loop"]

    def new_id(self) -> int:
        nid = self._next_id
        self._next_id += 1
        return nid

    def _new_node(self, node: PNode, kind: str, scope: int) -> int:
        """The id of a statement, definition or parameter, with its `node` row.  Every node id
        is given here or in `_node`, each with the PNode it stands for: a span-recording
        extractor (facts.spans) overrides the two to learn where each id is in the text."""
        nid = self._next_id
        self._next_id = nid + 1
        self._node_rows.append((nid, kind, scope, node.line, NO_NODE))
        return nid

    @property
    def node_count(self) -> int:
        return self._next_id

    def extract(
        self,
        root: PNode,
        lines: int,
        errors: list[tuple[int, int]] | None = None,
        binding_lines: set[int] | None = None,
    ) -> Rows:
        """The facts of a parsed file. Statements that overlap a syntax error (`errors`, line
        ranges) are left out; the rest of the file is still extracted.  `binding_lines`: see
        ParseResult (None: an expression anywhere may bind a name)."""
        self._errors = errors or []
        collector = _BindingCollector(self.module, self.is_package, binding_lines)
        top = collector.collect(root)
        self._scopes = collector.scope_of_def
        top.nid = self.new_id()
        top.flow = Flow()
        self.rows["source_file"].append((self.file, self.module, lines))
        self.rows["scope"].append((top.nid, "module", "<module>", self.file, 1, max(lines, 1)))
        self._statements(root.children, _Ctx(top, NO_NODE, NO_NODE))
        self._reads(top)
        return self.rows

    def _reads(self, scope: Scope) -> None:
        """The reaching definitions of a scope walked to its end."""
        self.rows["reaching"].extend(scope.flow.reads())

    # -- statements ---------------------------------------------------------

    def _statements(self, nodes: Sequence[PNode], ctx: _Ctx) -> None:
        for node in nodes:
            if not node.named or node.kind == "comment":
                continue
            if self._errors and self._broken(node):
                self.dropped_statements += 1
                continue
            self.intact_statements += 1
            self._statement(node, ctx)

    def _broken(self, node: PNode) -> bool:
        """A statement to leave out: an ERROR node, a simple statement overlapping a syntax
        error, or a compound statement whose header line has one (its body is still visited)."""
        if node.kind == "ERROR":
            return True
        overlapping = [s for s, e in self._errors if s <= node.end_line and e >= node.line]
        if not overlapping:
            return False
        if node.kind in _COMPOUND_STATEMENTS:
            return any(s <= node.line for s in overlapping)
        return True

    def _stmt_node(self, node: PNode, kind: str, ctx: _Ctx) -> _Ctx:
        sid = self._new_node(node, kind, ctx.scope.nid)
        if ctx.loop != NO_NODE:
            self.rows["innermost_loop"].append((sid, ctx.loop))
        if ctx.guard is not None:
            self.rows["under_if"].append((sid, *ctx.guard))
        return _Ctx(ctx.scope, sid, ctx.loop, ctx.guard)

    def _statement(self, node: PNode, ctx: _Ctx) -> None:
        self._statement_kind(node, ctx)
        flow = ctx.scope.flow
        flow.commit()
        if node.kind in _PATH_ENDS:
            flow.end_path(_PATH_ENDS[node.kind])

    def _statement_kind(self, node: PNode, ctx: _Ctx) -> None:
        kind = node.kind
        if kind == "expression_statement":
            self._expression_statement(node, ctx)
        elif kind == "for_statement":
            self._for(node, ctx)
        elif kind == "while_statement":
            self._while(node, ctx)
        elif kind == "if_statement":
            self._if(node, ctx)
        elif kind in ("function_definition", "class_definition"):
            self._definition(node, ctx, [])
        elif kind == "decorated_definition":
            decorators = [c for c in node.children if c.kind == "decorator"]
            for child in node.children:
                if child.kind in ("function_definition", "class_definition"):
                    self._definition(child, ctx, decorators)
        elif kind in ("import_statement", "import_from_statement", "future_import_statement"):
            self._import(node, ctx)
        elif kind == "return_statement":
            sctx = self._stmt_node(node, "return", ctx)
            values = node.named_children()
            if values:
                self.rows["return_value"].append((sctx.stmt, self._expr(values[0], sctx)))
        elif kind == "with_statement":
            self._with(node, ctx)
        elif kind == "try_statement":
            self._try(node, ctx)
        elif kind == "match_statement":
            sctx = self._stmt_node(node, "match", ctx)
            named = node.named_children()
            if named and named[0].kind != "block":
                self._expr(named[0], sctx)
            flow = ctx.scope.flow
            entry = flow.save()
            ends = [entry]  # no case may match
            for block in (c for c in node.children if c.kind == "block"):
                for case in block.named_children():
                    body = case.child_of_kind("block")
                    if body is not None:
                        flow.restore(entry)
                        self._statements(body.children, ctx)
                        ends.append(flow.save())
            flow.join(ends)
        elif kind == "assert_statement":
            sctx = self._stmt_node(node, "assert", ctx)
            named = node.named_children()
            for i, child in enumerate(named):
                e = self._expr(child, sctx)
                if i == 0:
                    self.rows["branch_test"].append((sctx.stmt, e, "assert"))
        elif kind in _SIMPLE_STMT_KINDS:
            sctx = self._stmt_node(node, _SIMPLE_STMT_KINDS[kind], ctx)
            if kind not in ("global_statement", "nonlocal_statement", "type_alias_statement"):
                for child in node.named_children():
                    self._expr(child, sctx)
        elif kind == "block":
            self._statements(node.children, ctx)
        elif kind == "ERROR":
            return
        else:
            sctx = self._stmt_node(node, kind, ctx)
            for child in node.named_children():
                if child.kind == "block":
                    self._statements(child.children, ctx)
                else:
                    self._expr(child, sctx)

    def _expression_statement(self, node: PNode, ctx: _Ctx) -> None:
        named = node.named_children()
        if not named:
            return
        first = named[0]
        if first.kind == "assignment":
            sctx = self._stmt_node(node, "assign", ctx)
            self._assignment(first, sctx)
        elif first.kind == "augmented_assignment":
            sctx = self._stmt_node(node, "augassign", ctx)
            parts = first.children
            target, value = parts[0], parts[-1]
            op = parts[1].kind if len(parts) >= 3 else "?="
            t = self._target(target, sctx)
            if target.kind == "identifier":
                # `x += y` reads x as it was: the bindings that reach its target.
                self._read(t, target.text or "", sctx.scope)
            v = self._expr(value, sctx)
            self.rows["assign"].append((sctx.stmt, t, v, op))
        else:
            sctx = self._stmt_node(node, "expr", ctx)
            for child in named:
                self._expr(child, sctx)

    def _assignment(self, node: PNode, sctx: _Ctx) -> int:
        named = node.named_children()
        target = named[0]
        has_value = node.child_of_kind("=") is not None
        value_node = named[-1] if has_value and len(named) >= 2 else None
        if value_node is not None and value_node.kind == "assignment":
            inner_value = self._assignment(value_node, sctx)
            t = self._target(target, sctx)
            self.rows["assign"].append((sctx.stmt, t, inner_value, "="))
            return inner_value
        t = self._target(target, sctx)
        v = self._expr(value_node, sctx) if value_node is not None else NO_NODE
        self.rows["assign"].append((sctx.stmt, t, v, "="))
        return v

    def _target(self, node: PNode, ctx: _Ctx) -> int:
        if node.kind == "identifier":
            nid = self._node(node, "identifier", ctx)
            name = node.text or ""
            self.rows["name_store"].append((nid, name))
            if name not in ctx.scope.global_names:
                ctx.scope.flow.bind(name, nid)
            return nid
        if node.kind in _SEQUENCES:
            nid = self._node(node, node.kind, ctx)
            for i, child in enumerate(node.named_children()):
                cid = self._target(child, ctx)
                self.rows["elem"].append((nid, i, cid))
            return nid
        if node.kind == "parenthesized_expression":
            inner = node.named_children()
            if len(inner) == 1:
                return self._target(inner[0], ctx)
        if node.kind in ("list_splat_pattern", "list_splat"):
            inner = node.named_children()
            if inner:
                return self._target(inner[0], ctx)
        # subscripts and attributes as targets: their object and indices are reads
        return self._expr(node, ctx)

    def _for(self, node: PNode, ctx: _Ctx) -> None:
        lctx = self._stmt_node(node, "for", ctx)
        loop_id = lctx.stmt
        named = node.named_children()
        target_node = named[0] if named else None
        iter_node = named[1] if len(named) > 1 and named[1].kind != "block" else None
        # The iterable is evaluated once, before the loop: outside its body.
        outer = _Ctx(ctx.scope, loop_id, ctx.loop, ctx.guard)
        it = self._expr(iter_node, outer) if iter_node is not None else NO_NODE
        flow = ctx.scope.flow
        entered = flow.enter_loop(loop_id)
        inner = _Ctx(ctx.scope, loop_id, loop_id, ctx.guard)
        tgt = self._target(target_node, inner) if target_node is not None else NO_NODE
        flow.commit()
        self._loop_fact(loop_id, "for", it, tgt, node.end_line, ctx)
        self._loop_body(node, inner, ctx, entered)

    def _while(self, node: PNode, ctx: _Ctx) -> None:
        lctx = self._stmt_node(node, "while", ctx)
        loop_id = lctx.stmt
        flow = ctx.scope.flow
        entered = flow.enter_loop(loop_id)
        inner = _Ctx(ctx.scope, loop_id, loop_id, ctx.guard)
        named = node.named_children()
        test = self._expr(named[0], inner) if named and named[0].kind != "block" else NO_NODE
        flow.commit()
        self._loop_fact(loop_id, "while", test, NO_NODE, node.end_line, ctx)
        if test != NO_NODE:
            self.rows["branch_test"].append((loop_id, test, "while"))
        self._loop_body(node, inner, ctx, entered)

    def _loop_body(self, node: PNode, inner: _Ctx, ctx: _Ctx, entered: bool) -> None:
        """Walk a loop's body (in the loop, `inner`), leave the loop's flow (when `entered`), then
        walk its else block (after the loop, `ctx`)."""
        for child in node.children:
            if child.kind == "block":
                self._statements(child.children, inner)
        if entered:
            ctx.scope.flow.exit_loop()
        for child in node.children:
            if child.kind == "else_clause":
                body = child.child_of_kind("block")
                if body is not None:
                    self._statements(body.children, ctx)

    def _loop_fact(self, loop_id: int, kind: str, it: int, tgt: int, end_line: int, outer: _Ctx) -> None:
        self.rows["loop"].append((loop_id, kind, it, tgt, end_line))
        if outer.loop != NO_NODE:
            self.rows["loop_parent"].append((loop_id, outer.loop))

    def _if(self, node: PNode, ctx: _Ctx) -> None:
        sctx = self._stmt_node(node, "if", ctx)
        if_id = sctx.stmt
        named = node.named_children()
        if named and named[0].kind != "block":
            e = self._expr(named[0], sctx)
            self.rows["branch_test"].append((if_id, e, "if"))
        flow = ctx.scope.flow
        flow.commit()  # a walrus in the test
        entry = flow.save()
        ends = []
        has_else = False
        branch = 0
        for child in node.children:
            if child.kind == "block":
                flow.restore(entry)
                self._statements(child.children, _Ctx(ctx.scope, ctx.stmt, ctx.loop, (if_id, 0)))
                ends.append(flow.save())
            elif child.kind == "elif_clause":
                branch += 1
                flow.restore(entry)
                ectx = self._stmt_node(child, "elif", ctx)
                cnamed = child.named_children()
                if cnamed and cnamed[0].kind != "block":
                    e = self._expr(cnamed[0], ectx)
                    self.rows["branch_test"].append((ectx.stmt, e, "elif"))
                flow.commit()
                entry = flow.save()
                body = child.child_of_kind("block")
                if body is not None:
                    self._statements(body.children, _Ctx(ctx.scope, ctx.stmt, ctx.loop, (if_id, branch)))
                ends.append(flow.save())
            elif child.kind == "else_clause":
                has_else = True
                self._branch(child, _Ctx(ctx.scope, ctx.stmt, ctx.loop, (if_id, -1)), entry, ends)
        if not has_else:
            ends.append(entry)
        flow.join(ends)

    def _branch(self, clause: PNode, ctx: _Ctx, start: FlowState, ends: list[FlowState]) -> None:
        """Walk the block of `clause` (an else) from the flow state `start`; its end state
        joins `ends`."""
        flow = ctx.scope.flow
        flow.restore(start)
        body = clause.child_of_kind("block")
        if body is not None:
            self._statements(body.children, ctx)
        ends.append(flow.save())

    def _with(self, node: PNode, ctx: _Ctx) -> None:
        sctx = self._stmt_node(node, "with", ctx)
        clause = node.child_of_kind("with_clause")
        for item in clause.named_children() if clause is not None else []:
            for part in item.named_children():
                if part.kind == "as_pattern":
                    pieces = part.named_children()
                    value = self._expr(pieces[0], sctx) if pieces else NO_NODE
                    target = part.child_of_kind("as_pattern_target")
                    for t in target.named_children() if target is not None else []:
                        tid = self._target(t, sctx)
                        self.rows["assign"].append((sctx.stmt, tid, value, "with"))
                else:
                    self._expr(part, sctx)
        ctx.scope.flow.commit()
        body = node.child_of_kind("block")
        if body is not None:
            self._statements(body.children, ctx)

    def _try(self, node: PNode, ctx: _Ctx) -> None:
        self._stmt_node(node, "try", ctx)
        flow = ctx.scope.flow
        entry = flow.save()
        body_end = entry
        handlers_start = entry
        ends = []
        has_else = False
        for child in node.children:
            if child.kind == "block":
                self._statements(child.children, ctx)
                body_end = flow.save()
                # An exception may be raised anywhere in the body: before or after its bindings.
                handlers_start = merged_states(entry, body_end)
            elif child.kind in ("except_clause", "except_group_clause"):
                flow.restore(handlers_start)
                cctx = self._stmt_node(child, "except", ctx)
                for part in child.named_children():
                    if part.kind == "block":
                        self._statements(part.children, ctx)
                    elif part.kind == "as_pattern":
                        pieces = part.named_children()
                        if pieces:
                            self._expr(pieces[0], cctx)
                    else:
                        self._expr(part, cctx)
                ends.append(flow.save())
            elif child.kind == "else_clause":
                has_else = True
                self._branch(child, ctx, body_end, ends)
            elif child.kind == "finally_clause":
                flow.join([*ends, *([] if has_else else [body_end])])
                ends = []
                body = child.child_of_kind("block")
                if body is not None:
                    self._statements(body.children, ctx)
                ends.append(flow.save())
                has_else = True
        flow.join([*ends, *([] if has_else else [body_end])])

    def _import(self, node: PNode, ctx: _Ctx) -> None:
        self._stmt_node(node, "import", ctx)
        named = node.named_children()
        modules: list[str] = []
        if node.kind == "import_statement":
            for item in named:
                target = item.named_children()[0] if item.kind == "aliased_import" else item
                modules.append(_dotted(target))
        elif node.kind == "future_import_statement":
            modules.append("__future__")
        elif named:
            source = _BindingCollector(self.module, self.is_package)._from_module(named[0])
            modules.append(source)
            for item in named[1:]:
                target = item.named_children()[0] if item.kind == "aliased_import" else item
                if item.kind in ("dotted_name", "aliased_import"):
                    modules.append(f"{source}.{_dotted(target)}" if source else _dotted(target))
        # `import a.b, a.b`, or a name listed twice, would repeat a fact: the loader counts on
        # a file's facts being distinct.
        for module in dict.fromkeys(modules):
            if module:
                self.rows["import_module"].append((self.file, module, node.line))

    def _definition(self, node: PNode, ctx: _Ctx, decorators: list[PNode]) -> None:
        scope = self._scopes.get(id(node))
        if scope is None:
            return
        kind = scope.kind
        # The def statement itself lives in the enclosing scope (and loop, if any).
        scope.nid = self._new_node(node, "def" if kind == "function" else "class", ctx.scope.nid)
        scope.flow = Flow()
        sid = scope.nid
        self.rows["scope"].append((sid, kind, scope.qualname, self.file, node.line, node.end_line))
        self.rows["scope_parent"].append((sid, ctx.scope.nid))
        if ctx.loop != NO_NODE:
            self.rows["innermost_loop"].append((sid, ctx.loop))
        if ctx.guard is not None:
            self.rows["under_if"].append((sid, *ctx.guard))
        outer = _Ctx(ctx.scope, sid, ctx.loop)
        for dec in decorators:
            inner = dec.named_children()
            if inner:
                self.rows["decorator"].append((sid, self._expr(inner[0], outer)))
        if kind == "function":
            self.rows["function_def"].append(
                (sid, scope.name, f"{self.module}.{scope.qualname}" if self.module else scope.qualname)
            )
            self._params(node, scope, outer)
        else:
            bases = node.child_of_kind("argument_list")
            for base in bases.named_children() if bases is not None else []:
                self._expr(base, outer)
        body = node.child_of_kind("block")
        if body is not None:
            self._statements(body.children, _Ctx(scope, NO_NODE, NO_NODE))
        self._reads(scope)

    def _params(self, node: PNode, scope: Scope, outer: _Ctx) -> None:
        params = node.child_of_kind("parameters")
        index = 0
        for p in params.named_children() if params is not None else []:
            name = _param_name(p)
            if name is None:
                continue
            annotation = ""
            ann = p.child_of_kind("type")
            if ann is not None:
                annotation = self._annotation(ann, outer.scope)
            if p.kind == "list_splat_pattern":
                annotation = annotation or "*"
            elif p.kind == "dictionary_splat_pattern":
                annotation = annotation or "**"
            self.rows["param"].append((scope.nid, index, name, annotation))
            # The parameter as a binding of its name (what reads of it in the body may see).
            pid = self._new_node(p, "param", scope.nid)
            self.rows["param_def"].append((pid, scope.nid, index))
            scope.flow.bind(name, pid)
            if p.kind in ("default_parameter", "typed_default_parameter"):
                default = p.named_children()[-1]
                self.rows["param_default"].append((scope.nid, name, self._expr(default, outer)))
            index += 1
        scope.flow.commit()

    def _annotation(self, ann: PNode, scope: Scope) -> str:
        inner = ann.named_children()
        head = inner[0] if inner else None
        if head is not None and head.kind in ("generic_type", "subscript"):
            head = head.named_children()[0] if head.named_children() else None
        if head is not None and head.kind in ("identifier", "attribute"):
            resolved = self.resolver.resolve(head, scope)
            if resolved:
                return resolved
        return (ann.text or "")[:_MAX_STR]

    # -- expressions --------------------------------------------------------

    def _node(self, node: PNode, kind: str, ctx: _Ctx) -> int:
        # Called for every node of the tree: the row lists are bound once, in __init__.
        nid = self._next_id
        self._next_id = nid + 1
        # The statement is a column of `node` rather than a relation of its own: as many rows
        # as `node`, they were a tenth of the extraction's time and of the facts loaded.
        self._node_rows.append((nid, kind, ctx.scope.nid, node.line, ctx.stmt))
        if ctx.loop != NO_NODE:
            self._innermost_loop_rows.append((nid, ctx.loop))
        return nid

    def _read(self, nid: int, name: str, scope: Scope) -> None:
        """A read of `name`: the bindings of the scope's own that reach it, or the enclosing
        scope (a closure's function, the module) whose binding of it it reads."""
        if name in scope.global_names:
            self.rows["free_ref"].append((nid, module_scope_of(scope).nid))
            return
        if name in scope.bindings:
            scope.flow.read(nid, name)
            return
        outer = scope.parent
        while outer is not None:
            # Class bodies are not enclosing scopes for the functions inside them.
            if outer.kind != "class" and name in outer.bindings:
                self.rows["free_ref"].append((nid, outer.nid))
                return
            outer = outer.parent

    def _child(self, node: PNode, ctx: _Ctx) -> int:
        if self._depth >= MAX_EXPR_DEPTH:
            # Generated code can nest thousands of operators (a+b+c+...); beyond this depth
            # the subtree is recorded as one opaque node, which keeps every rule's
            # recursion over expressions short.
            cid = self._node(node, "deep_expression", ctx)
        else:
            self._depth += 1
            try:
                cid = self._expr(node, ctx)
            finally:
                self._depth -= 1
        return cid

    def _expr(self, node: PNode, ctx: _Ctx) -> int:
        kind = node.kind
        while kind == "parenthesized_expression":
            inner = node.named_children()
            if len(inner) != 1:
                break
            node = inner[0]
            kind = node.kind
        rows = self.rows
        if kind == "identifier":
            nid = self._node(node, kind, ctx)
            name = node.text or ""
            rows["name_load"].append((nid, name))
            resolved = self._resolved[nid] = self.resolver.lookup(name, ctx.scope)
            if resolved:
                rows["qualified_ref"].append((nid, resolved))
            self._read(nid, name, ctx.scope)
            return nid
        nid = self._node(node, kind, ctx)
        # The commonest kinds first.
        if kind == "call":
            self._call(node, nid, ctx)
        elif kind == "attribute":
            named = node.named_children()
            if len(named) == 2:
                obj_node, attr_node = named
                obj = self._child(obj_node, ctx)
                self._attr_obj[nid] = obj
                rows["attribute"].append((nid, obj, attr_node.text or ""))
                if obj in self._resolved:
                    base = self._resolved[obj]
                    resolved = self.resolver.attribute(obj_node, attr_node.text, base, ctx.scope)
                else:  # neither a name nor an attribute (a call's result), or too deep
                    resolved = self.resolver.resolve(node, ctx.scope)
                self._resolved[nid] = resolved
                if resolved:
                    rows["qualified_ref"].append((nid, resolved))
        elif kind == "integer":
            self._int(nid, parse_int(node.text or ""))
        elif kind == "string":
            self._string(node, nid, ctx)
        elif kind == "subscript":
            self._subscript(node, nid, ctx)
        elif kind == "binary_operator":
            parts = node.children
            if len(parts) == 3:
                left = self._child(parts[0], ctx)
                right = self._child(parts[2], ctx)
                op = parts[1].kind
                rows["binop"].append((nid, op, left, right))
                a, b = self._ints.get(left), self._ints.get(right)
                if a is not None and b is not None and op in _FOLD:
                    self._int(nid, _FOLD[op](a, b))
        elif kind == "unary_operator":
            parts = node.children
            if len(parts) == 2:
                operand = self._child(parts[1], ctx)
                op = parts[0].kind
                rows["unaryop"].append((nid, op, operand))
                value = self._ints.get(operand)
                if value is not None and op in ("-", "+"):
                    self._int(nid, -value if op == "-" else value)
        elif kind == "not_operator":
            named = node.named_children()
            if named:
                rows["unaryop"].append((nid, "not", self._child(named[0], ctx)))
        elif kind == "boolean_operator":
            parts = node.children
            if len(parts) == 3:
                left = self._child(parts[0], ctx)
                right = self._child(parts[2], ctx)
                rows["boolop"].append((nid, parts[1].kind, left, right))
        elif kind == "comparison_operator":
            operands: list[int] = []
            ops: list[str] = []
            for part in node.children:
                if part.named and part.kind != "comment":
                    operands.append(self._child(part, ctx))
                elif part.kind != "comment":
                    ops.append(part.kind)
            for i, op in enumerate(ops):
                if i + 1 < len(operands):
                    rows["compare"].append((nid, op, operands[i], operands[i + 1]))
        elif kind in _SEQUENCES:
            for i, child in enumerate(node.named_children()):
                rows["elem"].append((nid, i, self._child(child, ctx)))
        elif kind == "concatenated_string":
            for child in node.named_children():
                self._child(child, ctx)
        elif kind in _COMPREHENSIONS:
            self._comprehension(node, nid, ctx)
        elif kind == "conditional_expression":
            named = node.named_children()
            ids = [self._child(c, ctx) for c in named]
            if len(ids) == 3 and ctx.stmt != NO_NODE:
                rows["branch_test"].append((ctx.stmt, ids[1], "ifexp"))
        elif kind == "named_expression":
            named = node.named_children()
            if len(named) == 2:
                t = self._target(named[0], ctx)
                v = self._child(named[1], ctx)
                ctx.scope.flow.commit()
                if ctx.stmt != NO_NODE:
                    rows["assign"].append((ctx.stmt, t, v, ":="))
        elif kind == "lambda":
            flow = ctx.scope.flow
            saved = flow.save()
            params = node.child_of_kind("lambda_parameters")
            for p in params.named_children() if params is not None else []:
                pname = _param_name(p)
                if pname and flow.state is not None:
                    flow.state.defs[pname] = frozenset()  # its own parameter, not the scope's name
            body = [c for c in node.named_children() if c.kind != "lambda_parameters"]
            for child in body:
                self._child(child, ctx)
            flow.restore(saved)
        elif kind in (
            "keyword_argument",
            "pair",
            "list_splat",
            "dictionary_splat",
            "await",
            "yield",
            "dictionary",
            "slice",
            "expression_list",
            "starred_expression",
        ):
            for child in node.named_children():
                if child.kind != "identifier" or kind != "keyword_argument":
                    self._child(child, ctx)
        else:
            for child in node.named_children():
                if child.kind not in ("comment", "type"):
                    self._child(child, ctx)
        return nid

    def _int(self, nid: int, value: int | None) -> None:
        if value is not None and -_MAX_INT < value < _MAX_INT:
            self._ints[nid] = value
            self.rows["int_value"].append((nid, value))

    def _string(self, node: PNode, nid: int, ctx: _Ctx) -> None:
        interpolations = [c for c in node.children if c.kind == "interpolation"]
        if interpolations:
            for interp in interpolations:
                inner = [
                    c
                    for c in interp.named_children()
                    if c.kind not in ("format_specifier", "type_conversion")
                ]
                if inner:
                    eid = self._child(inner[0], ctx)
                    self.rows["fstring_value"].append((nid, eid))
            return
        if node.text is not None:  # a plain literal, read whole by the parser
            text = string_body(node.text)
        else:
            text = "".join(
                c.text or "" for c in node.children if c.kind in ("string_content", "escape_sequence")
            )
        if len(text) <= _MAX_STR:
            self.rows["str_value"].append((nid, text))

    def _call(self, node: PNode, nid: int, ctx: _Ctx) -> None:
        named = node.named_children()
        if not named:
            return
        func_node = named[0]
        while func_node.kind == "parenthesized_expression" and len(func_node.named_children()) == 1:
            func_node = func_node.named_children()[0]
        func = self._child(func_node, ctx)
        callee = ""
        if func_node.kind in ("identifier", "attribute"):
            if func in self._resolved:
                callee = self._resolved[func] or ""
            else:  # too deep to have been resolved on the way
                callee = self.resolver.resolve(func_node, ctx.scope) or ""
        self.rows["call"].append((nid, func, callee))
        if not callee and func_node.kind == "attribute":
            parts = func_node.named_children()
            if len(parts) == 2:
                receiver = self._attr_obj.get(func, NO_NODE)
                self.rows["method_call"].append((nid, receiver, parts[1].text or ""))
        if len(named) < 2:
            return
        args = named[1]
        if args.kind == "generator_expression":
            self.rows["call_arg"].append((nid, 0, self._child(args, ctx)))
            return
        index = 0
        for arg in args.named_children():
            if arg.kind == "keyword_argument":
                parts = arg.named_children()
                if len(parts) == 2:
                    value = self._child(parts[1], ctx)
                    self.rows["call_kwarg"].append((nid, parts[0].text or "", value))
            elif arg.kind in ("list_splat", "dictionary_splat"):
                self._child(arg, ctx)
            elif arg.kind != "comment":
                self.rows["call_arg"].append((nid, index, self._child(arg, ctx)))
                index += 1

    def _subscript(self, node: PNode, nid: int, ctx: _Ctx) -> None:
        named = node.named_children()
        if not named:
            return
        obj = self._child(named[0], ctx)
        indices = named[1:]
        if len(indices) == 1 and indices[0].kind in ("expression_list", "tuple"):
            # `a[i, j]` parses as one expression list; `a[(i, j)]` means the same
            indices = indices[0].named_children()
        self.rows["subscript"].append((nid, obj, len(indices)))
        for pos, ix in enumerate(indices):
            if ix.kind == "slice":
                sid = self._node(ix, "slice", ctx)
                bounds = [NO_NODE, NO_NODE, NO_NODE]
                part = 0
                for piece in ix.children:
                    if piece.kind == ":":
                        part += 1
                    elif piece.named and part < 3 and piece.kind != "comment":
                        bounds[part] = self._child(piece, ctx)
                self.rows["slice"].append((sid, bounds[0], bounds[1], bounds[2]))
                self.rows["subscript_index"].append((nid, pos, sid))
            else:
                self.rows["subscript_index"].append((nid, pos, self._child(ix, ctx)))

    def _comprehension(self, node: PNode, nid: int, ctx: _Ctx) -> None:
        flow = ctx.scope.flow
        # `s = [i for i in p]`: the binding of s waits for the statement's end, past the
        # comprehension's own (committed, then dropped: its variables do not outlive it).
        pending = flow.take_pending()
        saved = flow.save()
        self._comprehension_clauses(node, nid, ctx)
        flow.restore(saved)
        flow.put_pending(pending)

    def _comprehension_clauses(self, node: PNode, nid: int, ctx: _Ctx) -> None:
        named = node.named_children()
        body = [c for c in named if c.kind not in ("for_in_clause", "if_clause")]
        current = ctx
        first = True
        for clause in named:
            if clause.kind == "for_in_clause":
                parts = clause.named_children()
                loop_id = self._node(clause, "comprehension", current)
                # The first iterable is evaluated in the enclosing context.
                iter_ctx = ctx if first else current
                it = self._child(parts[-1], iter_ctx) if len(parts) >= 2 else NO_NODE
                inner = _Ctx(ctx.scope, current.stmt, loop_id)
                tgt = self._target(parts[0], inner) if parts else NO_NODE
                ctx.scope.flow.commit()
                self._loop_fact(loop_id, "comprehension", it, tgt, clause.end_line, current)
                current = inner
                first = False
            elif clause.kind == "if_clause":
                cond = clause.named_children()
                if cond:
                    e = self._child(cond[0], current)
                    self.rows["branch_test"].append((current.loop, e, "comp_if"))
        for child in body:
            self._child(child, current)
