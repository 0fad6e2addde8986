"""The generated layers match the header and the built library exactly."""
import ctypes
import enum
import re
import subprocess
import sys

import pytest

from conftest import ROOT

sys.path.insert(0, str(ROOT / "bindings" / "generator"))
import swig_model  # noqa: E402
from ddp import _ffi  # noqa: E402

PYTHON_LAYER = ROOT / "bindings/python/ddp/_ffi.py"
JULIA_LAYER = ROOT / "bindings/julia/src/LibDDP.jl"


def exported_symbols():
    out = subprocess.run(["nm", "-D", "--defined-only", _ffi._lib._name], check=True,
                         capture_output=True, text=True).stdout
    return {line.split()[-1] for line in out.splitlines() if " T " in line}


def test_committed_files_equal_what_the_header_generates():
    result = subprocess.run([sys.executable, str(ROOT / "bindings/generate"), "--check"],
                            capture_output=True, text=True)
    assert result.returncode == 0, result.stdout + result.stderr


@pytest.mark.parametrize("layer, pattern", [
    (PYTHON_LAYER, r"^(ddp_\w+) = _lib\.\1$"),
    (JULIA_LAYER, r"@ccall \$\(function_pointer\(ADDRESSES\.(ddp_\w+), :\1\)\)\("),
])
def test_every_exported_symbol_has_a_binding_and_no_binding_is_missing(layer, pattern):
    bound = set(re.findall(pattern, layer.read_text(), re.M))
    exported = exported_symbols()
    assert exported, "nm -D found no ddp_ symbols"
    assert exported - bound == set(), f"exported but not bound in {layer.name}"
    assert bound - exported == set(), f"bound in {layer.name} but not exported"


def ctypes_structs():
    return [value for value in vars(_ffi).values() if isinstance(value, type)
            and issubclass(value, ctypes.Structure) and hasattr(value, "_fields_")]


def ctypes_enums():
    return [value for value in vars(_ffi).values() if isinstance(value, type)
            and issubclass(value, enum.IntEnum)]


def test_struct_layouts_and_enum_values_equal_the_compilers(tmp_path):
    """A C program prints sizeof/offsetof of every struct and every enum value."""
    lines = ['#include <stddef.h>', '#include <stdio.h>', '#include "ddp/ddp.h"',
             'int main(void) {']
    for struct in ctypes_structs():
        lines.append(f'printf("{struct.__name__} %zu\\n", sizeof({struct.__name__}));')
        for name, _ in struct._fields_:
            lines.append(f'printf("{struct.__name__}.{name} %zu\\n", '
                         f'offsetof({struct.__name__}, {name}));')
    for enum_type in ctypes_enums():
        lines.append(f'printf("sizeof {enum_type.__name__} %zu\\n", sizeof({enum_type.__name__}));')
        for member in enum_type:
            lines.append(f'printf("{member.name} %lld\\n", (long long){member.name});')
    lines.append("return 0; }")
    source = tmp_path / "layout.c"
    source.write_text("\n".join(lines))
    subprocess.run(["cc", "-std=c99", "-Wall", "-Werror", f"-I{ROOT / 'include'}", str(source),
                    "-o", str(tmp_path / "layout")], check=True)
    compiler = dict(line.rsplit(" ", 1) for line in subprocess.run(
        [str(tmp_path / "layout")], check=True, capture_output=True, text=True).stdout.splitlines())
    expected = {}
    for struct in ctypes_structs():
        expected[struct.__name__] = str(ctypes.sizeof(struct))
        for name, _ in struct._fields_:
            expected[f"{struct.__name__}.{name}"] = str(getattr(struct, name).offset)
    for enum_type in ctypes_enums():
        expected[f"sizeof {enum_type.__name__}"] = str(ctypes.sizeof(ctypes.c_int))
        for member in enum_type:
            expected[member.name] = str(member.value)
    assert compiler == expected
    assert len(ctypes_structs()) == 5 and len(ctypes_enums()) == 7


def test_julia_layer_parses_as_julia():
    import tree_sitter
    import tree_sitter_julia
    parser = tree_sitter.Parser(tree_sitter.Language(tree_sitter_julia.language()))
    tree = parser.parse(JULIA_LAYER.read_bytes())
    errors = [node for node in walk(tree.root_node) if node.type == "ERROR" or node.is_missing]
    assert not errors, [(e.start_point, e.text[:60]) for e in errors]


def test_julia_generator_refuses_enum_values_a_base_enum_cannot_hold(tmp_path):
    import emit_julia
    header = tmp_path / "ddp.h"
    text = (ROOT / "include/ddp/ddp.h").read_text()
    header.write_text(text.replace("#ifdef __cplusplus\n}",
                                   "typedef enum e { E_A = 1, E_B = 1 } e;\n#ifdef __cplusplus\n}"))
    with pytest.raises(swig_model.GeneratorError, match="share a value"):
        emit_julia.emit(swig_model.read_header(header))


def walk(node):
    yield node
    for child in node.children:
        yield from walk(child)


@pytest.mark.parametrize("declaration, complaint", [
    ("typedef union u { int a; double b; } u;", "only structs"),
    ("typedef struct s { int a[4]; } s;", "not 'a\\(4\\)'"),
    ("#define DDP_ODD_MACRO ((int64_t)-1)", "DDP_ODD_MACRO"),
    ("DDP_API long double ddp_odd(void);", "unknown type"),
    ("typedef enum e { E_A, E_B = 2 } e;", "explicit value"),
])
def test_generator_refuses_what_it_does_not_understand(tmp_path, declaration, complaint):
    header = tmp_path / "ddp.h"
    text = (ROOT / "include/ddp/ddp.h").read_text()
    header.write_text(text.replace("#ifdef __cplusplus\n}", f"{declaration}\n#ifdef __cplusplus\n}}"))
    with pytest.raises(swig_model.GeneratorError, match=complaint):
        swig_model.read_header(header)


def test_generator_is_pinned_to_one_swig_version():
    assert swig_model.swig_version() == swig_model.PINNED_SWIG_VERSION, \
        "bindings/generate reads SWIG's internal XML and is pinned to one SWIG version"
