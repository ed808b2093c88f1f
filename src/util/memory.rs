//! Memory the process no longer uses, handed back to the system.

/// Asks the allocator to return freed memory to the system. glibc keeps freed memory in its
/// arenas: after a reload from thousands of targets to a few, RSS would otherwise stay at its
/// peak. Elsewhere it does nothing.
pub fn give_back() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    // SAFETY: malloc_trim only walks the allocator's own free lists; any pad value is valid.
    unsafe {
        libc::malloc_trim(0);
    }
}
