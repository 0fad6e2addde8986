//! Gives this crate's test, example and bench binaries a run-time path to the
//! libddp that ddp-sys linked (`DEP_DDP_LIB_DIR`), so that they run from a
//! build tree without LD_LIBRARY_PATH.
fn main() {
    println!("cargo:rerun-if-env-changed=DEP_DDP_LIB_DIR");
    if let Ok(dir) = std::env::var("DEP_DDP_LIB_DIR") {
        println!("cargo:rustc-link-arg=-Wl,-rpath,{dir}");
    }
}
