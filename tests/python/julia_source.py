"""Reads Julia source with tree-sitter-julia for the static checks of the Julia
package (no Julia runtime is installed where the tests run): parse errors, the
definitions a file makes and whether each carries a docstring, exports, and calls
into the generated LibDDP layer with their argument counts."""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import tree_sitter
import tree_sitter_julia

PARSER = tree_sitter.Parser(tree_sitter.Language(tree_sitter_julia.language()))

PUNCTUATION = {"(", ")", ",", ";"}


def parse(source: bytes) -> tree_sitter.Node:
    return PARSER.parse(source).root_node


def walk(node: tree_sitter.Node):
    yield node
    for child in node.children:
        yield from walk(child)


def parse_errors(source: bytes) -> list[str]:
    """'line:column: text' of every ERROR or missing node."""
    return [f"{n.start_point[0] + 1}:{n.start_point[1] + 1}: {n.text[:60]!r}"
            for n in walk(parse(source)) if n.type == "ERROR" or n.is_missing]


def text(node: tree_sitter.Node) -> str:
    return node.text.decode()


def dotted_name(node: tree_sitter.Node) -> str | None:
    """'f' for an identifier, 'DDP.Init' for a field expression, else None."""
    if node.type == "identifier":
        return text(node)
    if node.type == "field_expression":
        parts = [dotted_name(child) for child in node.children if child.type != "."]
        return None if None in parts else ".".join(parts)
    return None


def positional_arguments(call: tree_sitter.Node) -> list[tree_sitter.Node]:
    """The arguments of a call before any `;` (keyword arguments after it)."""
    arguments = next(c for c in call.children if c.type == "argument_list")
    positional = []
    for child in arguments.children:
        if child.type == ";":
            break
        if child.type not in PUNCTUATION:
            positional.append(child)
    return positional


def first_call(node: tree_sitter.Node) -> tree_sitter.Node | None:
    """The call_expression of a signature (under `where` or a return type too)."""
    for candidate in walk(node):
        if candidate.type == "call_expression":
            return candidate
    return None


@dataclass(frozen=True)
class Definition:
    name: str            # as written: 'allreduce!', 'DDP.Init', 'Base.wait'
    kind: str            # 'function', 'struct', 'primitive', 'const'
    arity: int | None    # positional parameters of a function, fields of a struct
    documented: bool
    line: int


def definition_of(node: tree_sitter.Node) -> Definition | None:
    line = node.start_point[0] + 1
    if node.type == "function_definition":
        signature = next(c for c in node.children if c.type == "signature")
        call = first_call(signature)
        if call is None:  # `function f end`
            name = dotted_name(signature.children[0])
            return name and Definition(name, "function", None, False, line)
        name = dotted_name(call.children[0])
        return name and Definition(name, "function", len(positional_arguments(call)), False, line)
    if node.type == "assignment" and node.children[0].type == "call_expression":
        call = node.children[0]
        name = dotted_name(call.children[0])
        return name and Definition(name, "function", len(positional_arguments(call)), False, line)
    if node.type == "primitive_definition":
        head = next(c for c in node.children if c.type == "type_head")
        name = next(text(n) for n in walk(head) if n.type == "identifier")
        return Definition(name, "primitive", None, False, line)
    if node.type == "struct_definition":
        head = next(c for c in node.children if c.type == "type_head")
        name = next(text(n) for n in walk(head) if n.type == "identifier")
        fields = [c for c in node.children if c.type in ("identifier", "typed_expression")]
        return Definition(name, "struct", len(fields), False, line)
    if node.type == "const_statement":
        assignment = next(c for c in node.children if c.type == "assignment")
        return Definition(text(assignment.children[0]), "const", None, False, line)
    return None


def definitions(source: bytes) -> list[Definition]:
    """Top-level (module-level) definitions, documented when a string literal
    right before them is their docstring."""
    found = []
    for node in walk(parse(source)):
        definition = definition_of(node)
        if definition is None or node.parent.type not in ("source_file", "module_definition"):
            continue
        previous = node.prev_named_sibling
        documented = previous is not None and previous.type == "string_literal" and \
            previous.end_point[0] + 1 == node.start_point[0]
        found.append(Definition(definition.name, definition.kind, definition.arity,
                                documented, definition.line))
    return found


def doc_macro_targets(source: bytes) -> dict[str, str]:
    """Names documented by `@doc \"\"\"...\"\"\" name`, with their text."""
    documented = {}
    for node in walk(parse(source)):
        if node.type == "macrocall_expression" and text(node.children[0]) == "@doc":
            arguments = [c for c in node.children[1].children if c.is_named]
            if len(arguments) == 2 and arguments[0].type == "string_literal":
                documented[text(arguments[1])] = text(arguments[0])
    return documented


def docstrings(source: bytes) -> dict[str, str]:
    """The docstring text before each documented top-level definition, by name."""
    found = {}
    for node in walk(parse(source)):
        definition = definition_of(node)
        previous = node.prev_named_sibling
        if definition and previous is not None and previous.type == "string_literal":
            found[definition.name] = text(previous)
    return found


def exports(source: bytes) -> list[str]:
    return [text(c) for n in walk(parse(source)) if n.type == "export_statement"
            for c in n.children if c.type == "identifier"]


def identifiers(source: bytes) -> set[str]:
    return {text(n) for n in walk(parse(source)) if n.type == "identifier"}


@dataclass(frozen=True)
class Reference:
    """A use of `LibDDP.name`: called with `arity` positional arguments, or not called."""
    name: str
    arity: int | None
    line: int


def libddp_references(source: bytes) -> list[Reference]:
    found = []
    for node in walk(parse(source)):
        if node.type != "field_expression" or dotted_name(node.children[0]) != "LibDDP":
            continue
        name = text(node.children[-1])
        parent = node.parent
        called = parent.type == "call_expression" and parent.children[0] == node
        found.append(Reference(name, len(positional_arguments(parent)) if called else None,
                               node.start_point[0] + 1))
    return found


def enum_values(source: bytes) -> set[str]:
    """The names of the values of every `@enum` block."""
    values = set()
    for node in walk(parse(source)):
        if node.type == "macrocall_expression" and text(node.children[0]) == "@enum":
            values |= {text(n.children[0]) for n in walk(node) if n.type == "assignment"}
    return values


def using_targets(source: bytes) -> list[str]:
    """The first module name of every `using`/`import` statement: 'Libdl' for
    `using Libdl`, 'DDP' for `using DDP: DDP, LibDDP`, 'Functors' for `using Functors: Functors`."""
    found = []
    for node in walk(parse(source)):
        if node.type in ("using_statement", "import_statement"):
            first = next(n for n in walk(node) if n.type == "identifier")
            found.append(text(first))
    return found


def calls_to(source: bytes, callee: str) -> list[tree_sitter.Node]:
    """Every call of `callee` (as written: 'rand', 'Random.rand')."""
    return [n for n in walk(parse(source))
            if n.type == "call_expression" and dotted_name(n.children[0]) == callee]


def julia_files(root: Path) -> list[Path]:
    return sorted(root.rglob("*.jl"))


def qualified_references(source: bytes, module: str) -> list[tuple[str, int]]:
    """(name, line) of each `module.name` in the source."""
    return [(text(n.children[-1]), n.start_point[0] + 1) for n in walk(parse(source))
            if n.type == "field_expression" and dotted_name(n.children[0]) == module]
