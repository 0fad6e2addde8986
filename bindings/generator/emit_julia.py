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


LIBRARY_LOOKUP = '''
"""
    libddp_path()

The libddp every function below calls, looked up when first called (never frozen at
precompile time), in the order JLL packages use for overrides:

1. the Preferences.jl setting `libddp_path` of the DDP package
   (`DDP.set_libddp_path!(path)` writes it to LocalPreferences.toml);
2. `ENV["DDP_LIBRARY"]`;
3. the system's `libddp.so.0` through the dynamic loader (`ldconfig`, `LD_LIBRARY_PATH`).

A `libddp_jll` would come between 2 and 3, its `libddp_path` taking the place of the
system library. `ccall` caches the result per call site, so the lookup runs once.
"""
function libddp_path()
    path = LIBDDP_PATH[]
    path === nothing || return path
    preferred = Preferences.load_preference(parentmodule(@__MODULE__), "libddp_path", nothing)
    found = if preferred !== nothing
        loadable(preferred, "the Preferences.jl setting libddp_path")
    elseif !isempty(get(ENV, "DDP_LIBRARY", ""))
        loadable(ENV["DDP_LIBRARY"], "DDP_LIBRARY")
    else
        loadable(Sys.isapple() ? "libddp.0.dylib" : "libddp.so.0", "the system loader")
    end
    LIBDDP_PATH[] = found
    return found
end

const LIBDDP_PATH = Ref{Union{Nothing, String}}(nothing)

"""The path when the loader can open it, else an error saying where it came from."""
function loadable(path::AbstractString, source::AbstractString)
    handle = Libdl.dlopen(path; throw_error = false)
    handle === nothing && error("libddp: cannot load $(repr(path)) (from $source); install " *
                                "libddp or point DDP_LIBRARY or the libddp_path preference at it")
    return String(path)
end

function __init__()
    LIBDDP_PATH[] = nothing  # looked up again in every session
end
'''


def docstring(text: str, signature: str | None = None) -> str:
    """A Julia docstring from a header comment: `$` and backslashes escaped."""
    body = text.replace("\\", "\\\\").replace("$", "\\$").replace('"""', '\\"""')
    if signature:
        body = f"    {signature}\n\n{body}"
    return f'"""\n{body}\n"""'


def emit(header: Header) -> str:
    out = [generated_notice(header) + '''"""
The raw layer of libddp: every constant, enum, struct, handle and function of
include/ddp/ddp.h under its C name, calling the library with `@ccall`, each function
documented with the header's comment. Functions return the `ddp_status`; the DDP
module around this one turns it into exceptions.
"""
module LibDDP

using CEnum
using Libdl
using Preferences
''' + LIBRARY_LOOKUP]
    out += [f"const {c.name} = {c.value}" for c in header.constants]
    for e in header.enums:
        base = "Int32" if any(value < 0 for _, value in e.items) else "UInt32"
        out.append(f"\n@cenum {e.name}::{base} begin")
        out += [f"    {name} = {value}" for name, value in e.items]
        out.append("end")
        if e.name in header.docs:
            out.append(f"@doc {docstring(header.docs[e.name])} {e.name}")
    for o in header.opaques:
        out.append("")
        if o.name in header.docs:
            out.append(docstring(header.docs[o.name]))
        out.append(f"mutable struct {o.name} end")
    for s in header.structs:
        out.append("")
        if s.name in header.docs:
            out.append(docstring(header.docs[s.name]))
        out.append(f"struct {s.name}")
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
        out.append("")
        if f.name in header.docs:
            out.append(docstring(header.docs[f.name], f"{f.name}({', '.join(names)})"))
        out.append(f"function {f.name}({', '.join(names)})")
        out.append(f"    @ccall libddp_path().{f.name}({typed})::{julia_type(f.result)}")
        out.append("end")
    out.append("\nend # module")
    return "\n".join(out) + "\n"
