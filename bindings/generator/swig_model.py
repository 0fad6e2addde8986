"""Reads include/ddp/ddp.h through SWIG's XML parse tree into a small model.

SWIG's XML is an internal dump whose shape changes between SWIG versions, so
this module accepts exactly one SWIG version and refuses (GeneratorError) any
node, declaration or type it does not understand, rather than guessing. Only
semantic attributes (names, types, values) are read; SWIG's run-to-run noise
(node ids, heap addresses, absolute paths) never reaches the model.
"""
from __future__ import annotations

import ast
import re
import subprocess
import tempfile
import xml.etree.ElementTree as ET
from dataclasses import dataclass, field
from pathlib import Path

PINNED_SWIG_VERSION = "4.1.0"

# C types the header may use, besides its own enums, structs and handles.
BUILTIN_TYPES = ("void", "char", "int", "int32_t", "int64_t", "uint32_t", "uint64_t",
                 "size_t", "double")

# Macros the header defines that are not part of the API.
NON_API_MACROS = {"DDP_DDP_H", "DDP_API"}


class GeneratorError(Exception):
    """The header uses something the generator does not understand."""


@dataclass(frozen=True)
class CType:
    """A C type: a base name plus a number of pointer levels (const dropped)."""
    base: str
    pointers: int = 0


@dataclass(frozen=True)
class Param:
    name: str
    type: CType


@dataclass(frozen=True)
class Constant:
    name: str
    value: int


@dataclass(frozen=True)
class Enum:
    name: str
    items: tuple[tuple[str, int], ...]


@dataclass(frozen=True)
class Struct:
    name: str
    fields: tuple[Param, ...]


@dataclass(frozen=True)
class Opaque:
    """A handle type the header declares but never defines (ddp_comm)."""
    name: str


@dataclass(frozen=True)
class FunctionPointer:
    name: str
    result: CType
    params: tuple[Param, ...]


@dataclass(frozen=True)
class Function:
    name: str
    result: CType
    params: tuple[Param, ...]


@dataclass
class Header:
    """Every declaration of the header, in header order within each kind."""
    swig_version: str
    constants: list[Constant] = field(default_factory=list)
    enums: list[Enum] = field(default_factory=list)
    structs: list[Struct] = field(default_factory=list)
    opaques: list[Opaque] = field(default_factory=list)
    function_pointers: list[FunctionPointer] = field(default_factory=list)
    functions: list[Function] = field(default_factory=list)

    def type_names(self) -> set[str]:
        groups = (self.enums, self.structs, self.opaques, self.function_pointers)
        return {declaration.name for group in groups for declaration in group}


def swig_version() -> str:
    out = subprocess.run(["swig", "-version"], check=True, capture_output=True, text=True).stdout
    match = re.search(r"SWIG Version (\S+)", out)
    if not match:
        raise GeneratorError(f"cannot read the SWIG version from: {out!r}")
    return match.group(1)


def run_swig(header: Path) -> ET.Element:
    """SWIG's XML tree of the header, after checking SWIG is the pinned version."""
    version = swig_version()
    if version != PINNED_SWIG_VERSION:
        raise GeneratorError(f"SWIG {version} found, the generator is pinned to "
                             f"{PINNED_SWIG_VERSION} (Debian bookworm's `swig`): its XML "
                             "differs between versions")
    with tempfile.TemporaryDirectory() as tmp:
        interface = Path(tmp, "ddp.i")
        interface.write_text(f'%module ddp\n%include "{header.name}"\n')
        xml_path = Path(tmp, "ddp.xml")
        subprocess.run(["swig", "-xml", "-xmllite", f"-I{header.parent}", "-o", str(xml_path),
                        str(interface)], check=True, capture_output=True, text=True)
        return ET.parse(xml_path).getroot()


def attributes(node: ET.Element) -> dict[str, str]:
    attribute_list = node.find("attributelist")
    if attribute_list is None:
        return {}
    return {a.get("name"): a.get("value") for a in attribute_list.findall("attribute")}


def params_of(node: ET.Element) -> tuple[Param, ...]:
    attribute_list = node.find("attributelist")
    parm_list = attribute_list.find("parmlist") if attribute_list is not None else None
    if parm_list is None:
        return ()
    params = []
    for parm in parm_list.findall("parm"):
        a = attributes(parm)
        ctype = parse_type(a["type"])
        if ctype == CType("void") and "name" not in a:
            continue  # f(void)
        if "name" not in a:
            raise GeneratorError(f"unnamed parameter of type {a['type']} in "
                                 f"{attributes(node).get('name')}: name every parameter")
        params.append(Param(a["name"], ctype))
    return tuple(params)


def split_swig_type(text: str) -> list[str]:
    """'p.q(const).f(int,p.char).ddp_x' -> ['p', 'q(const)', 'f(int,p.char)', 'ddp_x']."""
    parts, depth, current = [], 0, ""
    for ch in text:
        if ch == "." and depth == 0:
            parts.append(current)
            current = ""
            continue
        depth += (ch == "(") - (ch == ")")
        current += ch
    if current:
        parts.append(current)
    return parts


def parse_type(text: str) -> CType:
    """A SWIG type string (no function part) as a CType."""
    parts = split_swig_type(text)
    *decorations, base = parts
    pointers = 0
    for decoration in decorations:
        if decoration == "p":
            pointers += 1
        elif decoration != "q(const)":
            raise GeneratorError(f"type {text!r}: the generator knows pointers and const, "
                                 f"not {decoration!r}")
    base = re.sub(r"^(struct|enum) ", "", base.replace("q(const).", ""))
    if base.startswith("q("):
        raise GeneratorError(f"type {text!r}: unknown qualifier")
    return CType(base, pointers)


def function_result(a: dict[str, str]) -> CType:
    """A function's result type: what follows f(...) in decl, then type."""
    parts = split_swig_type(a["decl"])
    if not parts or not parts[0].startswith("f("):
        raise GeneratorError(f"{a['name']}: expected a function declaration, got {a['decl']!r}")
    return parse_type(".".join(parts[1:] + [a["type"]]))


def integer_value(text: str, where: str) -> int:
    """Evaluates an integer literal expression such as '(0*10000+1*100+0)' or '0x0210'."""
    def evaluate(node: ast.AST) -> int:
        if isinstance(node, ast.Constant) and isinstance(node.value, int):
            return node.value
        if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub):
            return -evaluate(node.operand)
        if isinstance(node, ast.BinOp) and isinstance(node.op, (ast.Add, ast.Sub, ast.Mult)):
            left, right = evaluate(node.left), evaluate(node.right)
            return {ast.Add: left + right, ast.Sub: left - right,
                    ast.Mult: left * right}[type(node.op)]
        raise GeneratorError(f"{where}: {text!r} is not an integer expression")
    try:
        return evaluate(ast.parse(text.strip(), mode="eval").body)
    except SyntaxError as error:
        raise GeneratorError(f"{where}: {text!r} is not an integer expression") from error


def header_node(root: ET.Element, header: Path) -> ET.Element:
    for node in root.iter("include"):
        if Path(attributes(node).get("name", "")).name == header.name:
            return node
    raise GeneratorError(f"SWIG's tree has no include node for {header.name}")


def read_enum(node: ET.Element) -> Enum:
    name = attributes(node)["name"]
    items = []
    for item in node.findall("enumitem"):
        a = attributes(item)
        if "enumvalue" not in a:
            raise GeneratorError(f"enum {name}: {a['name']} needs an explicit value "
                                 "(the ABI conventions require it)")
        items.append((a["name"], integer_value(a["enumvalue"], a["name"])))
    return Enum(name, tuple(items))


def read_struct(node: ET.Element) -> Struct:
    a = attributes(node)
    if a.get("kind") != "struct":
        raise GeneratorError(f"{a.get('name')}: only structs are understood, not {a.get('kind')}")
    fields = []
    for child in node:
        if child.tag == "attributelist":
            continue
        f = attributes(child)
        if child.tag != "cdecl" or f.get("kind") != "variable":
            raise GeneratorError(f"struct {a['name']}: member {f.get('name')} is a "
                                 f"{child.tag}/{f.get('kind')}, only plain fields are understood")
        if f["decl"] and not f["decl"].endswith("."):
            raise GeneratorError(f"struct {a['name']}: field {f['name']} has the declarator "
                                 f"{f['decl']!r}; only plain and pointer fields are understood")
        fields.append(Param(f["name"], parse_type(f["decl"] + f["type"])))
    return Struct(a["name"], tuple(fields))


def read_typedef(node: ET.Element, header: Header) -> None:
    a = attributes(node)
    decl, target = a.get("decl", ""), a["type"]
    if decl.startswith("p.f("):
        inner = ".".join(split_swig_type(decl)[2:] + [target])
        header.function_pointers.append(FunctionPointer(a["name"], parse_type(inner),
                                                        params_of(node)))
    elif decl == "" and target == f"struct {a['name']}":
        if a["name"] not in {s.name for s in header.structs}:
            header.opaques.append(Opaque(a["name"]))
    elif decl == "" and target == f"enum {a['name']}":
        if a["name"] not in {e.name for e in header.enums}:
            raise GeneratorError(f"typedef {a['name']} names an enum the header does not define")
    else:
        raise GeneratorError(f"typedef {a['name']} ({decl!r} {target!r}): only "
                             "`typedef struct/enum X X` and function pointers are understood")


def declared_macros(header_text: str) -> set[str]:
    return set(re.findall(r"^\s*#\s*define\s+(DDP_\w+)", header_text, re.M)) - NON_API_MACROS


def declared_functions(header_text: str) -> set[str]:
    return set(re.findall(r"DDP_API\s+[^;(]*?\b(ddp_\w+)\s*\(", header_text))


def read_header(header: Path) -> Header:
    """The model of the header; raises GeneratorError on anything not understood."""
    root = run_swig(header)
    model = Header(swig_version=PINNED_SWIG_VERSION)
    for node in header_node(root, header):
        a = attributes(node)
        if node.tag == "attributelist":
            continue
        if node.tag == "constant":
            model.constants.append(Constant(a["name"], integer_value(a["value"], a["name"])))
        elif node.tag == "enum":
            model.enums.append(read_enum(node))
        elif node.tag == "class":
            model.structs.append(read_struct(node))
        elif node.tag == "cdecl" and a.get("kind") == "typedef":
            read_typedef(node, model)
        elif node.tag == "cdecl" and a.get("kind") == "function":
            model.functions.append(Function(a["name"], function_result(a), params_of(node)))
        else:
            raise GeneratorError(f"unknown construct <{node.tag}> kind={a.get('kind')!r} "
                                 f"name={a.get('name')!r} in {header.name}")
    check_complete(model, header.read_text())
    return model


def check_complete(model: Header, header_text: str) -> None:
    """SWIG silently skips macros it cannot evaluate: compare with the header's text."""
    missing = declared_macros(header_text) - {c.name for c in model.constants}
    if missing:
        raise GeneratorError(f"SWIG did not read the macro(s) {sorted(missing)}: write them as "
                             "plain integer expressions")
    missing = declared_functions(header_text) - {f.name for f in model.functions}
    if missing:
        raise GeneratorError(f"SWIG did not read the function(s) {sorted(missing)}")
    known = set(BUILTIN_TYPES) | model.type_names()
    used = [(s.name, p) for s in model.structs for p in s.fields]
    used += [(f.name, p) for f in model.functions + model.function_pointers for p in f.params]
    used += [(f.name, Param("result", f.result)) for f in model.functions + model.function_pointers]
    for owner, param in used:
        if param.type.base not in known:
            raise GeneratorError(f"{owner}: {param.name} has the unknown type {param.type.base}")
