"""Static checks of the Julia package bindings/julia (DDP.jl) and the Julia example,
for what running it on Julia 1.5.3 (scripts/run-julia-tests) cannot show: the
extensions, which need Julia 1.9 and registry packages, and the package's rules.
Each check reads the source with tree-sitter-julia; the `*_catches_*` tests show that
each checker finds what it looks for in a deliberately broken source."""
import re
import tomllib
import uuid

import pytest

import julia_source as js
from conftest import ROOT

PACKAGE = ROOT / "bindings/julia"
EXAMPLES = ROOT / "examples/julia"
GENERATED = PACKAGE / "src/LibDDP.jl"
HEADER = ROOT / "include/ddp/ddp.h"
HAND_WRITTEN = [p for p in js.julia_files(PACKAGE) if p != GENERATED]
SOURCES = [p for p in HAND_WRITTEN if p.parent.name in ("src", "ext")]
# Public but not exported, as FluxMPI's `FluxMPI.Init()`: called qualified.
QUALIFIED_API = ["Init", "Initialized", "Finalize", "world", "set_libddp_path!", "isdone",
                 "device", "node_local_rank", "node_local_size", "BFloat16", "split", "split_node",
                 "Reducer", "Gradient", "gradients", "mark_ready!"]
# What the core package may load: Base's standard libraries, no registry package.
STANDARD_LIBRARIES = {"Libdl", "Base", "Core"}


@pytest.mark.parametrize("path", js.julia_files(PACKAGE) + js.julia_files(EXAMPLES),
                         ids=lambda p: str(p.relative_to(ROOT)))
def test_every_julia_file_parses_without_error_nodes(path):
    assert js.parse_errors(path.read_bytes()) == []


def test_parse_check_catches_a_syntax_error():
    assert js.parse_errors(b"function f(x\n    x +\nend\n")


def generated_layer():
    """Name -> arity (None for constants and enum values) of everything LibDDP defines."""
    source = GENERATED.read_bytes()
    defined = {d.name: d.arity for d in js.definitions(source)}
    defined.update({name: None for name in js.enum_values(source)})
    defined.update({name: None for name in js.doc_macro_targets(source)})  # the enum types
    return defined


def libddp_problems(source: bytes, defined: dict) -> list[str]:
    """Each `LibDDP.x` use that names nothing in the layer or passes the wrong count."""
    problems = []
    for ref in js.libddp_references(source):
        if ref.name not in defined:
            problems.append(f"line {ref.line}: LibDDP.{ref.name} is not in the generated layer")
        elif ref.arity is not None and defined[ref.name] is not None and \
                ref.arity != defined[ref.name]:
            problems.append(f"line {ref.line}: LibDDP.{ref.name} called with {ref.arity} "
                            f"arguments, defined with {defined[ref.name]}")
    return problems


def test_every_libddp_call_exists_in_the_generated_layer_with_that_argument_count():
    defined = generated_layer()
    problems, calls = [], set()
    for path in HAND_WRITTEN:
        source = path.read_bytes()
        problems += [f"{path.relative_to(PACKAGE)} {p}" for p in libddp_problems(source, defined)]
        calls |= {r.name for r in js.libddp_references(source)
                  if r.arity is not None and r.name.startswith("ddp_")}
    assert problems == []
    # The API reaches every C function but the version queries, the log callback
    # (a Julia callback is left out; see the README), the async allgather,
    # reduce_scatter and alltoall and two of the experimental tier (ddp_comm_abort,
    # ddp_request_stream_wait), which the package does not wrap yet.
    header_functions = set(re.findall(r"DDP_API\s+[^;(]*?\b(ddp_\w+)\s*\(", HEADER.read_text()))
    assert header_functions - calls == {"ddp_version", "ddp_version_string", "ddp_backend_name",
                                        "ddp_set_log_callback", "ddp_comm_abort", "ddp_request_stream_wait",
                                        "ddp_allgather_tensor_list_async",
                                        "ddp_reduce_scatter_tensor_list_async",
                                        "ddp_alltoall_tensor_list_async"}


def test_libddp_call_check_catches_wrong_counts_and_unknown_names():
    defined = generated_layer()
    broken = b"""
function f(comm)
    LibDDP.ddp_barrier(comm)
    LibDDP.ddp_tensor(C_NULL, 0, 1, 1, 0)
    LibDDP.ddp_allreduce(comm)
    LibDDP.DDP_OP_MEAN
end
"""
    problems = libddp_problems(broken, defined)
    assert len(problems) == 4, problems
    assert "ddp_barrier called with 1 arguments, defined with 2" in problems[0]
    assert "ddp_tensor called with 5 arguments, defined with 6" in problems[1]


def test_no_ccall_outside_the_generated_layer():
    for path in SOURCES:
        assert "ccall" not in js.identifiers(path.read_bytes()) and b"@ccall" not in path.read_bytes(), path


def export_problems(module_sources: list[bytes], names: list[str]) -> list[str]:
    """Names that no source defines, or that no definition or @doc documents."""
    definitions = [d for source in module_sources for d in js.definitions(source)]
    problems = []
    for name in names:
        found = [d for d in definitions if d.name in (name, f"DDP.{name}")]
        if not found:
            problems.append(f"{name} is not defined")
        elif not any(d.documented for d in found):
            problems.append(f"{name} has no docstring")
    return problems


def test_every_exported_and_public_name_is_defined_and_documented():
    module = (PACKAGE / "src/DDP.jl").read_bytes()
    exported = js.exports(module)
    assert len(exported) == 24
    sources = [p.read_bytes() for p in SOURCES]
    assert export_problems(sources, exported + QUALIFIED_API) == []


def test_export_check_catches_undefined_and_undocumented_names():
    source = b'"""f doc"""\nf(x) = x\ng(x) = x\n'
    assert export_problems([source], ["f", "g", "h"]) == ["g has no docstring", "h is not defined"]


def undefined_ddp_references(source: bytes, defined: set) -> list[str]:
    return [f"line {line}: DDP.{name}" for name, line in js.qualified_references(source, "DDP")
            if name not in defined]


def test_extensions_and_tests_use_only_names_the_module_defines():
    defined = {d.name.removeprefix("DDP.") for p in SOURCES for d in js.definitions(p.read_bytes())}
    defined |= {"LibDDP"}  # the generated submodule
    problems = {str(p.relative_to(PACKAGE)): undefined_ddp_references(p.read_bytes(), defined)
                for p in HAND_WRITTEN if p.parent.name != "src"}
    assert {k: v for k, v in problems.items() if v} == {}
    assert undefined_ddp_references(b"DDP.allreduce!(v); DDP.alreduce!(v)\n", defined) == \
        ["line 1: DDP.alreduce!"]


def test_every_source_file_is_included_from_the_module():
    included = set(re.findall(r'^include\("(\w+\.jl)"\)', (PACKAGE / "src/DDP.jl").read_text(), re.M))
    on_disk = {p.name for p in (PACKAGE / "src").glob("*.jl")} - {"DDP.jl"}
    assert included == on_disk


def header_doc_comments():
    """Function name -> the first line of its /** */ comment, read straight from the header."""
    pattern = re.compile(r"/\*\*((?:(?!\*/).)*)\*/\s*DDP_API[^;(]*?\b(ddp_\w+)\s*\(", re.S)
    comments = {}
    for body, name in pattern.findall(HEADER.read_text()):
        lines = [re.sub(r"^\s*\*?\s*", "", line) for line in body.splitlines()]
        comments[name] = next(line for line in lines if line)
    return comments


def functions_without_their_header_comment(layer: bytes) -> list[str]:
    docs = js.docstrings(layer)
    return [name for name, line in header_doc_comments().items()
            if name not in docs or " ".join(line.split()) not in " ".join(docs[name].split())]


def test_generated_functions_carry_the_headers_doc_comments():
    functions = set(re.findall(r"DDP_API\s+[^;(]*?\b(ddp_\w+)\s*\(", HEADER.read_text()))
    assert set(header_doc_comments()) == functions, "every function in ddp.h has a /** */ comment"
    assert functions_without_their_header_comment(GENERATED.read_bytes()) == []


def test_doc_comment_check_catches_a_missing_docstring():
    layer = GENERATED.read_text()
    start = layer.index('"""\n    ddp_barrier(')
    stripped = layer[:start] + layer[layer.index("function ddp_barrier(", start):]
    assert functions_without_their_header_comment(stripped.encode()) == ["ddp_barrier"]


def generated_calls(source: str) -> dict[str, list[tuple[str, str]]]:
    """Each generated `function ddp_x(` -> the (address, symbol) pairs its `@ccall`s go through."""
    bodies = re.split(r"^function (ddp_\w+)\(", source, flags=re.M)[1:]
    return {name: re.findall(r"@ccall \$\(function_pointer\(ADDRESSES\.(\w+), :(\w+)\)\)\(",
                             body[:body.index("\nend\n")])
            for name, body in zip(bodies[::2], bodies[1::2])}


def test_generated_layer_looks_the_library_up_at_run_time():
    source = GENERATED.read_text()
    calls = generated_calls(source)
    assert calls and all(pairs == [(name, name)] for name, pairs in calls.items()), \
        "every function calls its own symbol through its own cached address"
    assert len(re.findall(r"^\s*@ccall ", source, re.M)) == len(calls), "no @ccall other than those"
    addresses = source[source.index("const ADDRESSES = ("):]
    assert re.findall(r"^    (\w+) = Ref\{Ptr\{Cvoid\}\}\(C_NULL\),$",
                      addresses[:addresses.index("\n)\n")], re.M) == list(calls), \
        "one address per function, empty until its first call"
    reset = source[source.index("function __init__()"):]
    assert re.search(r"LIBDDP_HANDLE\[\] = C_NULL\n\s+for address in ADDRESSES\n\s+address\[\] = C_NULL",
                     reset[:reset.index("\nend\n")]), "a new session opens the library and looks up again"
    assert not re.search(r"^const libddp\b", source, re.M), "no path frozen at precompile time"
    lookup = source[source.index("function libddp_handle()"):source.index("const LIBDDP_HANDLE")]
    order = [lookup.index(s) for s in ('"DDP_LIBRARY"', 'loadable(preferred', 'system_or_pkg_config_handle()')]
    assert order == sorted(order), "DDP_LIBRARY, then the preference, then the system and pkg-config"
    fallback = source[source.index("function system_or_pkg_config_handle()"):]
    order = [fallback.index(s) for s in ("Libdl.dlopen(SYSTEM_NAME", "--variable=libdir ddp", "error(")]
    assert order == sorted(order), "the system loader, then pkg-config's libdir, then an error"
    assert "Base.get_preferences" in source and \
        js.qualified_references(source.encode(), "Preferences") == [], \
        "the preference is read through Base, not Preferences.jl"


def test_project_toml_is_a_registrable_package_with_its_extensions():
    project = tomllib.loads((PACKAGE / "Project.toml").read_text())
    assert project["name"] == "DDP"
    uuid.UUID(project["uuid"])
    dependencies = {**project["deps"], **project["weakdeps"]}
    assert set(dependencies) - {"Libdl"} <= set(project["compat"]), "compat for every dependency"
    assert "julia" in project["compat"]
    assert set(project["weakdeps"]) <= set(project["extras"]), \
        "weak dependencies also in [extras]: Pkg before 1.9 refuses compat for packages it cannot see"
    for extension, triggers in project["extensions"].items():
        triggers = [triggers] if isinstance(triggers, str) else triggers
        assert set(triggers) <= set(project["weakdeps"]), extension
        source = (PACKAGE / "ext" / f"{extension}.jl").read_text()
        assert re.search(rf"^module {extension}$", source, re.M), extension
    assert {p.stem for p in (PACKAGE / "ext").glob("*.jl")} == set(project["extensions"])
    assert set(project["targets"]["test"]) <= set(project["extras"])
    module = (PACKAGE / "src/DDP.jl").read_text()
    assert re.search(r"^module DDP$", module, re.M)
    used = set(re.findall(r"^(?:using|import) (\w+)", module + (PACKAGE / "src/LibDDP.jl").read_text(), re.M))
    assert used <= set(project["deps"]), "src/ loads only hard dependencies"


def registry_packages_loaded(sources: list[bytes]) -> set[str]:
    """Modules that `using`/`import` statements load other than DDP's own and Base's libraries."""
    return {name for source in sources for name in js.using_targets(source)} - \
        STANDARD_LIBRARIES - {"DDP", "LibDDP"}


def test_the_core_package_loads_with_base_and_standard_libraries_alone():
    project = tomllib.loads((PACKAGE / "Project.toml").read_text())
    assert set(project["deps"]) <= STANDARD_LIBRARIES, "hard dependencies: standard libraries only"
    src = [p.read_bytes() for p in (PACKAGE / "src").glob("*.jl")]
    assert registry_packages_loaded(src) == set()
    assert registry_packages_loaded([b"using CEnum\nusing Libdl\nimport Preferences\n"]) == \
        {"CEnum", "Preferences"}
    for extension, trigger in project["extensions"].items():
        source = (PACKAGE / "ext" / f"{extension}.jl").read_bytes()
        assert registry_packages_loaded([source]) == {trigger}, extension


def test_runtests_has_tests_for_every_extension_run_only_where_its_package_loads():
    project = tomllib.loads((PACKAGE / "Project.toml").read_text())
    tests = (PACKAGE / "test/runtests.jl").read_text()
    listed = re.search(r"^const EXTENSIONS = \[([^\]]*)\]", tests, re.M)[1]
    assert {name.strip().lstrip(":") for name in listed.split(",")} == \
        set(project["weakdeps"]) - {"Preferences"}  # Preferences: tested by the core set
    for name in set(project["weakdeps"]) - {"Preferences"}:
        assert re.search(rf'^testset\("{name} extension: .*runs = LOADED\[:{name}\]', tests, re.M), name
    assert registry_packages_loaded([tests.encode()]) == {"Test"}, "by name: Test and Libdl alone"


def unseeded_random_calls(source: bytes) -> list[str]:
    """rand/randn calls whose first argument is not a random number generator."""
    rng = re.compile(r"^(Random\.)?(Xoshiro|MersenneTwister|default_rng)\(|^rng\b")
    found = []
    for callee in ("rand", "randn", "Random.rand", "Random.randn"):
        for call in js.calls_to(source, callee):
            arguments = js.positional_arguments(call)
            if not arguments or not rng.match(js.text(arguments[0])):
                found.append(js.text(call))
    return found


def julia_blocks(markdown: str) -> bytes:
    return "\n".join(re.findall(r"```julia\n(.*?)```", markdown, re.S)).encode()


def test_documented_training_loops_seed_their_data_so_every_rank_shards_one_data_set():
    for path in (PACKAGE / "README.md", ROOT / "docs/julia.md"):
        blocks = julia_blocks(path.read_text())
        assert blocks, path
        assert unseeded_random_calls(blocks) == [], path
    for path in js.julia_files(EXAMPLES):
        assert unseeded_random_calls(path.read_bytes()) == [], path
    assert unseeded_random_calls(b"x = rand(Float32, 1, 4096)\ny = rand(Xoshiro(1), 3)\n") == \
        ["rand(Float32, 1, 4096)"]


def test_runtests_uses_every_exported_and_public_name():
    tests = (PACKAGE / "test/runtests.jl").read_bytes()
    used = js.identifiers(tests)
    exported = js.exports((PACKAGE / "src/DDP.jl").read_bytes())
    assert [name for name in exported + QUALIFIED_API if name not in used] == []
    assert b"DDP.Init()" in tests and b"Optimisers.update!" in tests
