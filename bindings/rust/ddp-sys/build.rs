//! Finds libddp and generates its FFI from `ddp/ddp.h`.
//!
//! Where libddp is looked for, in order:
//!  1. `DDP_LIB_DIR` (the directory holding libddp.so) and `DDP_INCLUDE_DIR`
//!     (the directory holding `ddp/ddp.h`), both required together: a build
//!     tree, e.g. `DDP_LIB_DIR=build/src DDP_INCLUDE_DIR=include`.
//!  2. The build tree of the libddp checkout this crate lives in
//!     (`build/src` and `include` next to `bindings/`, as `scripts/build`
//!     makes it), so that a crate depending on `ddp` by path builds with no
//!     variable set.
//!  3. pkg-config's `ddp` (an installed libddp; `PKG_CONFIG_PATH` as usual).
//!
//! The library directory is passed on to dependents as `DEP_DDP_LIB_DIR`, so
//! that the `ddp` crate can give its binaries a run-time path to it, as this
//! crate gives its own tests.
use std::env;
use std::path::PathBuf;

fn main() {
    println!("cargo:rerun-if-env-changed=DDP_LIB_DIR");
    println!("cargo:rerun-if-env-changed=DDP_INCLUDE_DIR");
    let (lib_dirs, include_dirs) = match (env::var_os("DDP_LIB_DIR"), env::var_os("DDP_INCLUDE_DIR")) {
        (Some(lib), Some(include)) => link_build_tree(PathBuf::from(lib), PathBuf::from(include)),
        (None, None) => match checkout_build_tree() {
            Some((lib, include)) => link_build_tree(lib, include),
            None => match pkg_config::Config::new().atleast_version("1.0").probe("ddp") {
                Ok(library) => (library.link_paths, library.include_paths),
                Err(error) => panic!(
                    "libddp not found: no build tree at {} (run scripts/build build in the checkout), \
                     and not by pkg-config ({error}). Build it, install it (`meson install -C build`), \
                     or point DDP_LIB_DIR and DDP_INCLUDE_DIR at a build tree.",
                    checkout().join("build/src").display()
                ),
            },
        },
        _ => panic!("set both DDP_LIB_DIR and DDP_INCLUDE_DIR, or neither"),
    };
    if let Some(lib) = lib_dirs.first() {
        println!("cargo:lib_dir={}", lib.display());
        // This crate's own tests and doctests run from a build tree too.
        println!("cargo:rustc-link-arg=-Wl,-rpath,{}", lib.display());
    }
    let header = include_dirs
        .iter()
        .map(|dir| dir.join("ddp/ddp.h"))
        .find(|path| path.exists())
        .unwrap_or_else(|| panic!("ddp/ddp.h is in none of {include_dirs:?}"));
    println!("cargo:rerun-if-changed={}", header.display());

    let bindings = bindgen::Builder::default()
        .header(header.to_string_lossy())
        // The reducer and ddp_comm_abort are behind this macro in C; the safe
        // crate wraps them.
        .clang_arg("-DDDP_EXPERIMENTAL_API")
        .clang_args(include_dirs.iter().map(|dir| format!("-I{}", dir.display())))
        .allowlist_function("ddp_.*")
        .allowlist_type("ddp_.*")
        .allowlist_var("DDP_.*")
        // A status a newer library returns must still be a valid value.
        .newtype_enum("ddp_status")
        .constified_enum_module("ddp_(dtype|device_type|op|backend|log_level|shard_strategy)")
        .prepend_enum_name(false)
        // DDP_NO_MPI_COMM is stored in an int64_t field.
        .parse_callbacks(Box::new(MacroTypes))
        .generate()
        .expect("bindgen could not read ddp/ddp.h");
    let out = PathBuf::from(env::var("OUT_DIR").unwrap()).join("bindings.rs");
    bindings.write_to_file(out).expect("could not write bindings.rs");
}

/// The libddp checkout holding this crate (`bindings/rust/ddp-sys/../../..`).
fn checkout() -> PathBuf {
    PathBuf::from(env::var_os("CARGO_MANIFEST_DIR").unwrap()).join("../../..")
}

/// The checkout's `build/src` and `include` when libddp has been built there.
fn checkout_build_tree() -> Option<(PathBuf, PathBuf)> {
    let root = checkout().canonicalize().ok()?;
    let (lib, include) = (root.join("build/src"), root.join("include"));
    let found = lib.join("libddp.so").exists() && include.join("ddp/ddp.h").exists();
    // Look again once it is built (a missing path would rerun every build).
    let watched = if found { lib.join("libddp.so") } else { root.join("build") };
    if watched.exists() {
        println!("cargo:rerun-if-changed={}", watched.display());
    }
    found.then_some((lib, include))
}

/// Links the libddp in `lib`, with its header in `include`.
fn link_build_tree(lib: PathBuf, include: PathBuf) -> (Vec<PathBuf>, Vec<PathBuf>) {
    println!("cargo:rustc-link-search=native={}", lib.display());
    println!("cargo:rustc-link-lib=dylib=ddp");
    (vec![lib], vec![include])
}

/// Gives integer macros the type of the field that holds them.
#[derive(Debug)]
struct MacroTypes;

impl bindgen::callbacks::ParseCallbacks for MacroTypes {
    fn int_macro(&self, name: &str, _value: i64) -> Option<bindgen::callbacks::IntKind> {
        match name {
            "DDP_NO_MPI_COMM" | "DDP_SHARD_SHUFFLE_MAX_ITEMS" => Some(bindgen::callbacks::IntKind::I64),
            "DDP_VERSION_MAJOR" | "DDP_VERSION_MINOR" | "DDP_VERSION_PATCH" | "DDP_VERSION_NUMBER" => {
                Some(bindgen::callbacks::IntKind::U32)
            }
            _ => None,
        }
    }
}
