//! Standard output that a closed pipe cannot crash. Rust's `println!` panics when the reader has
//! gone (`indolm eval pll … | head -1`); [`outln!`](crate::outln) and [`out!`](crate::out) write
//! through [`print`] instead, which stops writing once the pipe is closed, so a one-shot command
//! ends quietly with exit 0 and a training run goes on to its next checkpoint.
use std::io::Write;
use std::sync::atomic::{AtomicBool, Ordering};

static CLOSED: AtomicBool = AtomicBool::new(false);

/// Writes to standard output; after a broken pipe, writes nothing more. Other write errors
/// (a full disk under a redirect) drop the text: printing never stops the work it reports on.
pub fn print(args: std::fmt::Arguments) {
    if CLOSED.load(Ordering::Relaxed) {
        return;
    }
    let mut out = std::io::stdout().lock();
    if let Err(e) = out.write_fmt(args).and_then(|_| out.flush()) {
        if e.kind() == std::io::ErrorKind::BrokenPipe {
            CLOSED.store(true, Ordering::Relaxed);
        }
    }
}

/// Whether standard output has been found closed.
pub fn closed() -> bool {
    CLOSED.load(Ordering::Relaxed)
}
