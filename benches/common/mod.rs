//! What several benches share: a copy of the checkout's projects and
//! kernels to edit and build in a temporary directory.

use camino::{Utf8Path, Utf8PathBuf};

/// Copies the directory `from` to `to`, recursively.
pub fn copy_dir(from: &Utf8Path, to: &Utf8Path) {
    std::fs::create_dir_all(to).expect("create");
    for entry in std::fs::read_dir(from).expect("read dir") {
        let entry = entry.expect("entry");
        let path = Utf8PathBuf::from_path_buf(entry.path()).expect("utf-8");
        let target = to.join(path.file_name().expect("name"));
        if path.is_dir() {
            copy_dir(&path, &target);
        } else {
            std::fs::copy(&path, &target).expect("copy");
        }
    }
}
