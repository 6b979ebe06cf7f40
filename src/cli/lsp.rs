//! `ipub lsp`: the language server on stdin and stdout (see [`crate::lsp`]).

#[derive(Debug, clap::Args)]
pub struct LspArgs {
    /// Accepted for editors that pass it; stdio is the only transport.
    #[arg(long)]
    pub stdio: bool,
}

pub fn run(_args: &LspArgs) -> anyhow::Result<i32> {
    // Stdout is the protocol's channel: nothing else may be printed there.
    super::output::configure(
        super::output::Verbosity::Quiet,
        super::output::ColorWhen::Never,
    );
    crate::lsp::run_stdio()?;
    Ok(0)
}
