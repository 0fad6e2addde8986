"""Writes bindings/julia/src/LibDDP.jl from the header model, in the style of
Clang.jl's generator: isbits structs, opaque mutable structs for handles, and one
function per C function wrapping @ccall with exact types. It needs Base and the
standard library Libdl alone (no CEnum, no Preferences), so that `using DDP` works
on a machine with no package registry: C enums are Base `@enum`s."""
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
    libddp_handle()

The libddp every function below calls, opened when first called (never frozen at
precompile time), first match wins:

1. `ENV["DDP_LIBRARY"]`, a path or a name for the dynamic loader;
2. the preference `libddp_path` of the DDP package in LocalPreferences.toml
   (`DDP.set_libddp_path!` writes it; read here through Base, no Preferences.jl needed);
3. the system's `libddp.so.0` through the dynamic loader (`ldconfig`, `LD_LIBRARY_PATH`);
4. `libddp.so.0` in the `libdir` that `pkg-config --variable=libdir ddp` names.

A `DDP_LIBRARY` or preference that cannot be loaded is an error saying so, never a
fallback to another libddp. The handle is kept, so the lookup runs once per session.
"""
function libddp_handle()
    handle = LIBDDP_HANDLE[]
    handle == C_NULL || return handle
    preferred = preferred_path()
    found = if !isempty(get(ENV, "DDP_LIBRARY", ""))
        loadable(ENV["DDP_LIBRARY"], "the environment variable DDP_LIBRARY")
    elseif preferred !== nothing
        loadable(preferred, "the libddp_path preference of DDP in LocalPreferences.toml")
    else
        system_or_pkg_config_handle()
    end
    LIBDDP_HANDLE[] = found
    return found
end

const LIBDDP_HANDLE = Ref{Ptr{Cvoid}}(C_NULL)

"""The path of the libddp `libddp_handle()` opened: which library this session calls."""
libddp_path() = Libdl.dlpath(libddp_handle())
const SYSTEM_NAME = Sys.isapple() ? "libddp.0.dylib" : "libddp.so.0"

"""The `libddp_path` preference of the DDP package, or `nothing` (Julia < 1.6: none)."""
function preferred_path()
    isdefined(Base, :get_preferences) || return nothing
    package = Base.PkgId(parentmodule(@__MODULE__))
    package.uuid === nothing && return nothing
    path = get(Base.get_preferences(package.uuid), "libddp_path", nothing)
    return path isa AbstractString ? String(path) : nothing
end

"""The loader's handle of `path`, else an error naming where `path` came from."""
function loadable(path::AbstractString, source::AbstractString)
    handle = Libdl.dlopen(path; throw_error = false)
    handle === nothing && error("libddp: cannot load $(repr(path)), named by $source; " *
                                "point it at a libddp.so.0 that exists, or unset it")
    return handle
end

"""The system's libddp, else the one in pkg-config's libdir, else an error naming both."""
function system_or_pkg_config_handle()
    handle = Libdl.dlopen(SYSTEM_NAME; throw_error = false)
    handle === nothing || return handle
    pkg_config = Sys.which("pkg-config")
    libdir = pkg_config === nothing ? "" :
        strip(read(ignorestatus(`$pkg_config --variable=libdir ddp`), String))
    candidate = isempty(libdir) ? "" : joinpath(libdir, SYSTEM_NAME)
    handle = isempty(candidate) ? nothing : Libdl.dlopen(candidate; throw_error = false)
    handle === nothing || return handle
    error("libddp: $SYSTEM_NAME is not on the system loader's path and " *
          (isempty(libdir) ? "pkg-config knows no package ddp" : "not loadable from pkg-config's libdir $libdir") *
          "; install libddp (meson install, then ldconfig) or set DDP_LIBRARY to its path")
end

"""
    function_pointer(address, name)

The address of libddp's function `name`, kept in `address` (one per function, in
`ADDRESSES`) after the first call. Every call goes through such a pointer, not
`@ccall library.name(...)`: Julia 1.5 takes only a constant library there,
and the library here is found at run time.
"""
function function_pointer(address::Ref{Ptr{Cvoid}}, name::Symbol)
    pointer = address[]
    pointer == C_NULL || return pointer
    handle = libddp_handle()
    pointer = something(Libdl.dlsym(handle, name; throw_error = false), C_NULL)
    pointer == C_NULL && error("libddp: $(Libdl.dlpath(handle)) has no function $name; " *
                               "it is older than this package, point DDP_LIBRARY at a newer one")
    address[] = pointer
    return pointer
end

function __init__()
    # Looked up again in every session: a precompiled image holds no handle or address.
    LIBDDP_HANDLE[] = C_NULL
    for address in ADDRESSES
        address[] = C_NULL
    end
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
include/ddp/ddp.h under its C name, calling the library with `@ccall` through a
function pointer looked up once (`function_pointer`), each function
documented with the header's comment. Functions return the `ddp_status`; the DDP
module around this one turns it into exceptions.
"""
module LibDDP

using Libdl
''' + LIBRARY_LOOKUP]
    out += [f"const {c.name} = {c.value}" for c in header.constants]
    for e in header.enums:
        values = [value for _, value in e.items]
        if len(set(values)) != len(values):
            raise GeneratorError(f"{e.name}: two names share a value, which a Base @enum refuses")
        base = "Int32" if any(value < 0 for _, value in e.items) else "UInt32"
        out.append(f"\n@enum {e.name}::{base} begin")
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
    out.append("# Each function's address in libddp, filled by its first call (see function_pointer).")
    out.append("const ADDRESSES = (")
    out += [f"    {f.name} = Ref{{Ptr{{Cvoid}}}}(C_NULL)," for f in header.functions]
    out.append(")")
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
        out.append(f"    @ccall $(function_pointer(ADDRESSES.{f.name}, :{f.name}))"
                   f"({typed})::{julia_type(f.result)}")
        out.append("end")
    out.append("\nend # module")
    return "\n".join(out) + "\n"
