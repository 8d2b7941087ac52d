//! The build's commit: `LLM_LOADGEN_GIT_SHA` (the short revision, as the reference's
//! `git rev-parse --short=7 HEAD` gives it) when the crate is built from a git checkout with
//! `git` installed, and `LLM_LOADGEN_VERSION`, what `--version` prints, always. A tarball,
//! a machine without git or a failing git leaves the revision out and the build goes on.

use std::path::{Path, PathBuf};
use std::process::Command;

fn main() {
    println!("cargo:rerun-if-changed=build.rs");
    println!("cargo:rerun-if-env-changed=LLM_LOADGEN_GIT_SHA");
    let version = env!("CARGO_PKG_VERSION");
    // A packager may set the revision itself (a build from a tarball of a known commit).
    let sha = std::env::var("LLM_LOADGEN_GIT_SHA").ok().filter(|s| !s.is_empty()).or_else(git_sha);
    match &sha {
        Some(sha) => {
            println!("cargo:rustc-env=LLM_LOADGEN_GIT_SHA={sha}");
            println!("cargo:rustc-env=LLM_LOADGEN_VERSION={version} (commit {sha})");
        }
        None => println!("cargo:rustc-env=LLM_LOADGEN_VERSION={version} (commit unknown: not built from a git clone)"),
    }
    for path in watched_git_files() {
        println!("cargo:rerun-if-changed={}", path.display());
    }
}

/// `git` run in the crate's folder; `None` when it is missing, fails or prints nothing.
fn git(args: &[&str]) -> Option<String> {
    let dir = std::env::var_os("CARGO_MANIFEST_DIR")?;
    let out = Command::new("git").args(args).current_dir(dir).output().ok()?;
    let text = String::from_utf8(out.stdout).ok()?.trim().to_string();
    (out.status.success() && !text.is_empty()).then_some(text)
}

/// The short revision of HEAD, only when the crate's folder is the checkout's top (so a
/// tarball unpacked inside some other repository does not take that repository's commit).
fn git_sha() -> Option<String> {
    let top = PathBuf::from(git(&["rev-parse", "--show-toplevel"])?);
    let here = PathBuf::from(std::env::var_os("CARGO_MANIFEST_DIR")?);
    if top.canonicalize().ok()? != here.canonicalize().ok()? {
        return None;
    }
    git(&["rev-parse", "--short=7", "HEAD"])
}

/// The files whose change moves HEAD: `HEAD` itself, the branch it names and `packed-refs`
/// (only those that exist: cargo reruns a script on every build for a missing one).
fn watched_git_files() -> Vec<PathBuf> {
    let (Some(git_dir), Some(common)) =
        (git(&["rev-parse", "--absolute-git-dir"]), git(&["rev-parse", "--git-common-dir"]))
    else {
        return Vec::new();
    };
    let git_dir = PathBuf::from(git_dir);
    let common = absolute(&git_dir, Path::new(&common));
    let mut files = vec![git_dir.join("HEAD"), common.join("packed-refs")];
    if let Some(branch) = git(&["symbolic-ref", "-q", "HEAD"]) {
        files.push(common.join(branch));
    }
    files.retain(|p| p.exists());
    files
}

/// `path` made absolute: git prints the common dir relative to the crate's folder.
fn absolute(git_dir: &Path, path: &Path) -> PathBuf {
    if path.is_absolute() {
        return path.to_path_buf();
    }
    match std::env::var_os("CARGO_MANIFEST_DIR") {
        Some(dir) => PathBuf::from(dir).join(path),
        None => git_dir.join(path),
    }
}
