//! Embeds a fingerprint of the compiler's own sources, so results persisted
//! by one build of ipub are never reused by a build whose code differs (the
//! package version alone does not change between commits).

use std::hash::{DefaultHasher, Hasher};
use std::path::Path;

fn main() {
    println!("cargo:rerun-if-changed=src");
    println!("cargo:rerun-if-changed=Cargo.lock");
    let mut files = Vec::new();
    collect(Path::new("src"), &mut files);
    files.push(Path::new("Cargo.lock").to_path_buf());
    files.sort();
    let mut hasher = DefaultHasher::new();
    for file in files {
        hasher.write(file.to_string_lossy().as_bytes());
        if let Ok(bytes) = std::fs::read(&file) {
            hasher.write_usize(bytes.len());
            hasher.write(&bytes);
        }
    }
    println!(
        "cargo:rustc-env=IPUB_SOURCE_FINGERPRINT={:016x}",
        hasher.finish()
    );
}

fn collect(dir: &Path, out: &mut Vec<std::path::PathBuf>) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for entry in entries.flatten() {
        let path = entry.path();
        if path.is_dir() {
            collect(&path, out);
        } else {
            out.push(path);
        }
    }
}
