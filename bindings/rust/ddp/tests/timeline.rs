//! The timeline and the flight recorder on one process (the `self` backend):
//! the files exist and hold the calls, and bad paths are errors.
use std::path::PathBuf;

use ddp::{Backend, Comm, ErrorKind, InitOptions, Op};

fn folder(name: &str) -> PathBuf {
    let folder = std::env::temp_dir().join(format!("ddp-rust-{name}-{}", std::process::id()));
    std::fs::create_dir_all(&folder).unwrap();
    folder
}

// One test function: libddp has one live world per process.
#[test]
fn timeline_and_flight_recorder() {
    let comm = Comm::init_with(&InitOptions { backend: Backend::Self_, ..Default::default() }).unwrap();
    let dir = folder("timeline");

    let timeline = comm.timeline(dir.join("t.%r.json")).unwrap();
    comm.allreduce(&mut [&mut vec![1.0f32; 8]], Op::Sum).unwrap();
    let again = comm.timeline(dir.join("other.json")).unwrap_err();
    assert_eq!(again.kind(), ErrorKind::InvalidArgument);
    assert!(again.message().contains("already recording"), "{}", again.message());
    timeline.stop().unwrap();
    let trace = std::fs::read_to_string(dir.join("t.0.json")).unwrap();
    assert!(trace.contains("\"name\":\"allreduce\"") && trace.trim_end().ends_with("]}"), "{trace}");

    {
        let _dropped = comm.timeline(dir.join("d.json")).unwrap();
        comm.barrier().unwrap();
    } // stops here
    assert!(std::fs::read_to_string(dir.join("d.rank0.json")).unwrap().contains("\"name\":\"barrier\""));

    let bad = comm.timeline("/nonexistent-folder/t.json").unwrap_err();
    assert_eq!(bad.kind(), ErrorKind::InvalidArgument);
    assert!(bad.message().contains("/nonexistent-folder/t.rank0.json"), "{}", bad.message());

    comm.dump_flight_recorder(Some(&dir.join("fr.json"))).unwrap(); // the name as given
    let dump = std::fs::read_to_string(dir.join("fr.json")).unwrap();
    assert!(dump.contains("\"kind\":\"allreduce\"") && dump.contains("\"kind\":\"barrier\""), "{dump}");
    comm.dump_flight_recorder(Some(&dir.join("fr.%r.json"))).unwrap(); // %r: the rank
    assert!(dir.join("fr.0.json").exists());
    comm.dump_flight_recorder(None).unwrap(); // the automatic file, which the log names
    let unwritable = comm.dump_flight_recorder(Some("/nonexistent-folder/fr.json".as_ref())).unwrap_err();
    assert!(unwritable.message().contains("cannot write the flight recorder"), "{}", unwritable.message());
    std::fs::remove_dir_all(dir).unwrap();
}
