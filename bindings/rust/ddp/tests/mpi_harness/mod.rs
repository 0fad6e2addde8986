//! A test runner for programs under mpirun: every rank runs the same tests in
//! the same order on one communicator (libtest's threads would interleave
//! collectives), and prints libtest's lines, `test NAME ... ok|FAILED`, that
//! scripts/summarize-tests.py counts per rank.
use std::panic::{catch_unwind, AssertUnwindSafe};

/// Runs each named test on `context`, catching panics so later tests still
/// run on this rank; returns the exit status: 1 when any failed.
pub fn run<C>(context: &C, tests: &[(&str, fn(&C))]) -> i32 {
    let mut failed = 0;
    for (name, test) in tests {
        match catch_unwind(AssertUnwindSafe(|| test(context))) {
            Ok(()) => println!("test {name} ... ok"),
            Err(_) => {
                failed += 1;
                println!("test {name} ... FAILED");
            }
        }
    }
    let passed = tests.len() - failed;
    println!("\ntest result: {}. {passed} passed; {failed} failed", if failed == 0 { "ok" } else { "FAILED" });
    i32::from(failed > 0)
}
