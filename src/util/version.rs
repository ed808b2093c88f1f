//! The identity of this build, as `llmprobe_build_info` and bench manifests report it.

pub const BUILD_VERSION: &str = env!("CARGO_PKG_VERSION");
/// From `LLMPROBE_REVISION` at compile time (CI sets the git commit), else `unknown`.
pub const BUILD_REVISION: &str = match option_env!("LLMPROBE_REVISION") {
    Some(r) => r,
    None => "unknown",
};
