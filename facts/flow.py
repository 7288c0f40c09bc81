"""Reaching definitions: for each read of a name, the bindings of it that the read may see.

One `Flow` per scope (module, function, class body) follows the extractor through the scope's
statements in order.  Its state maps each name to the binding nodes (assignment targets,
parameters) that may hold its value at this point; branches are followed one by one and
their states merged; `return`, `raise`, `break` and `continue` end a path.  A loop is entered
with its entry state plus, for every name, a placeholder for what the loop's own bindings
carry back to its start (`_Back`); when the loop ends, each placeholder stands for the
bindings at the end of the body (and at each `continue`), so a read at the top of a body
sees the bindings of the previous iteration without visiting the body twice.  Names read
but not bound in the scope are left to the rules (free variables of closures and modules).
"""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass(frozen=True, slots=True)
class _Back:
    """What loop `loop` carries from the end of its body back to its start, for `name`."""

    loop: int
    name: str


_Item = int | _Back
_EMPTY: frozenset[_Item] = frozenset()


class _State:
    """The bindings that may reach this point.  Inside a loop, a name not bound since the
    loop's start reads what reached the loop, and what its previous iteration left."""

    __slots__ = ("defs", "loop", "entry")

    def __init__(
        self, defs: dict[str, frozenset[_Item]], loop: int | None = None, entry: _State | None = None
    ) -> None:
        self.defs = defs
        self.loop = loop
        self.entry = entry

    def lookup(self, name: str) -> frozenset[_Item]:
        found = self.defs.get(name)
        if found is not None:
            return found
        if self.loop is None or self.entry is None:
            return _EMPTY
        return self.entry.lookup(name) | {_Back(self.loop, name)}

    def copy(self) -> _State:
        return _State(dict(self.defs), self.loop, self.entry)


def _merged(states: list[_State | None]) -> _State | None:
    """The state where paths from `states` meet (None: no path reaches it)."""
    live = [s for s in states if s is not None]
    if not live:
        return None
    if len(live) == 1:
        return live[0].copy()
    first = live[0]
    names = set().union(*(s.defs for s in live))
    defs = {name: frozenset().union(*(s.lookup(name) for s in live)) for name in names}
    return _State(defs, first.loop, first.entry)


# What Flow.save() returns: the bindings at a point of the scope (None: no path reaches it).
FlowState = _State | None


def merged_states(*states: _State | None) -> _State | None:
    return _merged(list(states))


@dataclass
class _Loop:
    node: int
    entry: _State
    breaks: list[_State] = field(default_factory=list)
    continues: list[_State] = field(default_factory=list)


class Flow:
    """The reaching definitions of one scope; `reads()` gives (read node, binding node) pairs
    once the scope has been walked."""

    def __init__(self) -> None:
        self.state: _State | None = _State({})
        self._pending: list[tuple[str, int]] = []
        self._reads: list[tuple[int, frozenset[_Item]]] = []
        self._loops: list[_Loop] = []
        self._back_ends: dict[int, list[_State]] = {}  # loop -> states at the end of its body

    # -- bindings and reads ------------------------------------------------------------------

    def bind(self, name: str, node: int) -> None:
        """`node` binds `name` once the statement (or clause) at hand is done: `x = x + 1`
        reads the earlier `x`."""
        self._pending.append((name, node))

    def commit(self) -> None:
        if self.state is not None:
            for name, node in self._pending:
                self.state.defs[name] = frozenset((node,))
        self._pending.clear()

    def take_pending(self) -> list[tuple[str, int]]:
        """The bindings waiting for the statement at hand to end, taken away (to be put back
        with `put_pending`): a comprehension inside the statement commits its own."""
        pending, self._pending = self._pending, []
        return pending

    def put_pending(self, pending: list[tuple[str, int]]) -> None:
        self._pending = pending + self._pending

    def read(self, node: int, name: str) -> None:
        if self.state is not None:
            found = self.state.lookup(name)
            if found:
                self._reads.append((node, found))

    # -- control flow ------------------------------------------------------------------------

    def save(self) -> _State | None:
        return self.state.copy() if self.state is not None else None

    def restore(self, state: _State | None) -> None:
        self.state = state.copy() if state is not None else None

    def join(self, states: list[_State | None]) -> None:
        self.state = _merged(states)

    def end_path(self, how: str = "return") -> None:
        """A path ends here: return or raise, or it goes to the loop's exit (break) or start
        (continue)."""
        if self.state is not None and self._loops:
            if how == "break":
                self._loops[-1].breaks.append(self.state)
            elif how == "continue":
                self._loops[-1].continues.append(self.state)
        self.state = None

    def enter_loop(self, node: int) -> bool:
        """Start loop `node`'s body; False (and nothing to undo) when no path reaches it."""
        if self.state is None:
            return False
        entry = self.state
        self._loops.append(_Loop(node, entry))
        self.state = _State({}, node, entry)
        return True

    def exit_loop(self) -> None:
        """After the body of the innermost loop: the loop may run zero or more times."""
        loop = self._loops.pop()
        ends = [s for s in (self.state, *loop.continues) if s is not None]
        self._back_ends[loop.node] = ends
        names = set().union(*(s.defs for s in (*ends, *loop.breaks)))
        after = loop.entry.copy()
        for name in names:
            found = set(loop.entry.lookup(name))
            for s in (*ends, *loop.breaks):
                found |= s.lookup(name)
            found.discard(_Back(loop.node, name))
            after.defs[name] = frozenset(found)
        self.state = after

    # -- results ---------------------------------------------------------------------------

    def reads(self) -> list[tuple[int, int]]:
        """(read node, binding node) for every binding each read may see."""
        resolved: dict[_Back, frozenset[_Item]] = {}

        def back(item: _Back) -> frozenset[_Item]:
            if item not in resolved:
                resolved[item] = _EMPTY  # a cycle through it adds nothing
                found: set[_Item] = set()
                for s in self._back_ends.get(item.loop, ()):
                    found |= s.lookup(item.name)
                found.discard(item)
                resolved[item] = frozenset(found)
            return resolved[item]

        out: list[tuple[int, int]] = []
        for node, items in self._reads:
            if len(items) == 1:  # most reads see one binding, and few of those are a loop's
                (only,) = items
                if type(only) is int:
                    out.append((node, only))
                    continue
            seen: set[_Item] = set()
            todo = list(items)
            while todo:
                item = todo.pop()
                if item in seen:
                    continue
                seen.add(item)
                if isinstance(item, _Back):
                    todo.extend(back(item))
                else:
                    out.append((node, item))
        return out
