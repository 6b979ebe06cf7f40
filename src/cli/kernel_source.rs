//! What `ipub kernel` subcommands share about a kernel named on the
//! command line: its `-D` defines and how its assembler errors are shown.

use crate::kernels::Variant;

/// Prints assembler errors as diagnostics (coloured on a terminal).
pub(super) fn print_asm_errors(source: &camino::Utf8Path, errors: &[crate::asm::AsmError]) {
    let diagnostics: Vec<crate::diagnostic::Diagnostic> = errors
        .iter()
        .map(crate::asm::AsmError::to_diagnostic)
        .collect();
    crate::cli::output::diagnostics_with(
        &|path| std::fs::read_to_string(path).ok(),
        source,
        &diagnostics,
    );
}

/// Adds `-D NAME=VALUE` (or `-D NAME`, meaning 1) arguments to a variant.
pub(super) fn add_defines(variant: &mut Variant, defines: &[String]) -> anyhow::Result<()> {
    for define in defines {
        let (key, value) = define.split_once('=').unwrap_or((define, "1"));
        if key.is_empty() {
            anyhow::bail!("`-D {define}`: expected NAME=VALUE");
        }
        variant.defines.insert(key.to_string(), value.to_string());
    }
    Ok(())
}

/// `--target NAME`: one of the machines this ipub knows.
pub(super) fn parse_target(name: &str) -> Result<crate::target::TargetId, String> {
    crate::target::TargetId::from_name(name).ok_or_else(|| {
        let known: Vec<&str> = crate::target::TargetId::ALL.map(|t| t.name()).to_vec();
        format!("unknown target `{name}` (known: {})", known.join(", "))
    })
}
