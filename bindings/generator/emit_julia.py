"""Writes bindings/julia/src/LibDDP.jl from the header model, in the style of
Clang.jl's generator: @cenum enums, isbits structs, opaque mutable structs for
handles, and one function per C function wrapping @ccall with exact types."""
from __future__ import annotations

from swig_model import CType, GeneratorError, Header, generated_notice

JULIA_TYPE_OF = {"void": "Cvoid", "char": "Cchar", "int": "Cint", "int32_t": "Int32",
                 "int64_t": "Int64", "uint32_t": "UInt32", "uint64_t": "UInt64",
                 "size_t": "Csize_t", "double": "Cdouble"}

JULIA_KEYWORDS = {"baremodule", "begin", "break", "catch", "const", "continue", "do", "else",
                  "elseif", "end", "export", "false", "finally", "for", "function", "global",
                  "if", "import", "let", "local", "macro", "module", "quote", "return",
                  "struct", "true", "try", "using", "while", "type", "abstract", "mutable"}


def julia_type(t: CType) -> str:
    """Julia's name for a C type; function pointer typedefs are Ptr{Cvoid} aliases."""
    inner = JULIA_TYPE_OF.get(t.base, t.base)
    for _ in range(t.pointers):
        inner = f"Ptr{{{inner}}}"
    return inner


def parameter_name(name: str, owner: str) -> str:
    if name in JULIA_KEYWORDS:
        raise GeneratorError(f"{owner}: the parameter name {name!r} is a Julia keyword")
    return name


def emit(header: Header) -> str:
    out = [generated_notice(header) + '''"""
The raw layer of libddp: every constant, enum, struct, handle and function of
include/ddp/ddp.h under its C name, calling the library with `@ccall`. Functions
return the `ddp_status`; the Julia package's API turns it into exceptions.
"""
module LibDDP

using CEnum

"""libddp's path: `ENV["DDP_LIBRARY"]` when set at load time, else the system's `libddp`."""
const libddp = get(ENV, "DDP_LIBRARY", "libddp")
''']
    out += [f"const {c.name} = {c.value}" for c in header.constants]
    for e in header.enums:
        base = "Int32" if any(value < 0 for _, value in e.items) else "UInt32"
        out.append(f"\n@cenum {e.name}::{base} begin")
        out += [f"    {name} = {value}" for name, value in e.items]
        out.append("end")
    for o in header.opaques:
        out.append(f"\nmutable struct {o.name} end")
    for s in header.structs:
        out.append(f"\nstruct {s.name}")
        out += [f"    {f.name}::{julia_type(f.type)}" for f in s.fields]
        out.append("end")
    out.append("")
    for p in header.function_pointers:
        out.append(f"# {julia_type(p.result)} (*{p.name})("
                   + ", ".join(julia_type(a.type) for a in p.params) + ")")
        out.append(f"const {p.name} = Ptr{{Cvoid}}")
    for f in header.functions:
        names = [parameter_name(p.name, f.name) for p in f.params]
        typed = ", ".join(f"{n}::{julia_type(p.type)}" for n, p in zip(names, f.params))
        out.append(f"\nfunction {f.name}({', '.join(names)})")
        out.append(f"    @ccall libddp.{f.name}({typed})::{julia_type(f.result)}")
        out.append("end")
    out.append("\nend # module")
    return "\n".join(out) + "\n"
