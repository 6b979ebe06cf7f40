//! `ipub inspect`: what a package holds, as stable text.

use crate::package::{inspect, read};
use camino::Utf8PathBuf;

#[derive(Debug, clap::Args)]
pub struct InspectArgs {
    /// A package written by `ipub build` (`*.ipuexe`).
    pub package: Utf8PathBuf,
}

pub fn run(args: &InspectArgs) -> anyhow::Result<i32> {
    let package = read(&args.package)?;
    super::output::print(format_args!("{}", inspect::render(&package)));
    Ok(0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn inspects_a_written_package_and_refuses_a_corrupt_one() {
        let dir = tempfile::tempdir().expect("tempdir");
        let root = Utf8PathBuf::from_path_buf(dir.path().to_path_buf()).expect("utf-8");
        let path = root.join("sample.ipuexe");
        crate::package::write(&path, &crate::package::tests::sample()).expect("write");
        let args = InspectArgs {
            package: path.clone(),
        };
        assert_eq!(run(&args).expect("inspect"), 0);

        let mut bytes = std::fs::read(&path).expect("read");
        let last = bytes.len() - 1;
        bytes[last] ^= 0x40;
        std::fs::write(&path, bytes).expect("corrupt");
        let error = run(&args).expect_err("corrupt package");
        assert_eq!(
            error.to_string(),
            "checksum of part `profile` does not match: the package is corrupt"
        );
    }
}
