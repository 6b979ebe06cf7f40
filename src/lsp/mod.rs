//! `ipub lsp`: a language server for projects and kernel sources.
//!
//! The server keeps one salsa database for the whole session, as `ipub
//! watch` does, reading files through an [`overlay::Overlay`] of the editors'
//! unsaved text over the disk. An edit refreshes one file's input, so what
//! the server recomputes is exactly what `watch` would after a save of the
//! same text: validation for a project edit, the assembly of the variants
//! built from a kernel source for a kernel edit.
//!
//! - **As you type** (`didOpen`, `didChange`): the diagnostics of every
//!   project an open file belongs to (errors and located warnings, at
//!   their files, includes too) and of open kernel sources (assembled
//!   with the defines of every variant the projects' programs run).
//! - **On save** (`didSave`): a build of the affected projects through the
//!   same phases as `ipub build` ([`crate::cli::build::build`]); the
//!   package is written when it changed, an `ipub/buildFinished`
//!   notification reports the result (package, estimated cycles, what was
//!   recomputed), and build errors (placement, kernels) become diagnostics.
//! - **Requests**: hover (tensors, ops with their chosen plan, repeats,
//!   includes, kernel symbols with their parameters and cost), go to
//!   definition (names, includes, an op's kernel source, labels), completion
//!   (keys, tables, op kinds, dtypes and other enumerations, tensor names)
//!   and document symbols.
//!
//! Layers: [`server`] is the protocol loop and the only part that owns the
//! database; [`diagnostics`], [`hover`], [`definition`], [`completion`],
//! [`symbols`] and [`kernel`] answer one kind of question each, the first
//! two through the database's queries, the rest mostly on text and the
//! project index; [`position`] and [`uri`] convert between the protocol's
//! coordinates and ipub's byte spans and paths; [`transport`] frames the
//! client's messages.
//!
//! Requests are answered on the server's one thread, in order: a rebuild
//! on save delays the requests that arrive during it.

pub(crate) mod completion;
pub(crate) mod definition;
pub(crate) mod diagnostics;
pub(crate) mod hover;
pub mod kernel;
pub(crate) mod overlay;
pub(crate) mod position;
pub(crate) mod server;
pub(crate) mod session;
pub(crate) mod symbols;
pub(crate) mod transport;
pub(crate) mod uri;

/// Why the server stopped other than by `exit` or the end of its input.
#[derive(Debug, thiserror::Error)]
pub(crate) enum LspError {
    #[error("the client went away")]
    Disconnected,
    #[error("{0}")]
    Io(#[from] std::io::Error),
}

/// `ipub lsp`'s arguments.
#[derive(Debug, clap::Args)]
pub struct LspArgs {
    /// Accepted for editors that pass it; stdio is the only transport.
    #[arg(long)]
    pub stdio: bool,
}

/// `ipub lsp`: the language server on stdin and stdout. Exits with 1
/// when `exit` came without `shutdown` before it, as the protocol asks.
pub fn run(_args: &LspArgs) -> anyhow::Result<i32> {
    // Stdout is the protocol's channel: nothing else may be printed there.
    crate::cli::output::configure(
        crate::cli::output::Verbosity::Quiet,
        crate::cli::output::ColorWhen::Never,
    );
    Ok(match run_stdio()? {
        server::Ending::Exit { shut_down: false } => 1,
        server::Ending::Exit { shut_down: true } | server::Ending::Closed => 0,
    })
}

/// Serves one client on stdin and stdout until it says `exit`.
///
/// A reader thread frames stdin's messages ([`transport`]) and a writer
/// thread writes the server's. A message that cannot be read (a bad
/// header, a body that is not JSON or not a message) is logged and
/// skipped, a request among them answered with an error: one bad message
/// from an editor must not end the session.
pub(crate) fn run_stdio() -> Result<server::Ending, LspError> {
    use lsp_server::Message;
    use transport::Incoming;
    let (incoming, from_client) = std::sync::mpsc::channel::<Incoming>();
    let reader = std::thread::spawn(move || -> std::io::Result<()> {
        let stdin = std::io::stdin();
        let mut framed = transport::Framed::new(stdin.lock());
        while let Some(value) = framed.next()? {
            let Some(message) = transport::classify(value) else {
                continue;
            };
            let exit = matches!(&message, Incoming::Message(Message::Notification(n)) if n.method == "exit");
            if incoming.send(message).is_err() || exit {
                return Ok(());
            }
        }
        Ok(())
    });
    let (outgoing, to_client) = std::sync::mpsc::channel::<transport::Outgoing>();
    let writer = std::thread::spawn(move || -> std::io::Result<()> {
        let stdout = std::io::stdout();
        let mut stdout = stdout.lock();
        for message in to_client {
            message.write(&mut stdout)?;
        }
        Ok(())
    });
    let served = server::serve(&from_client, &outgoing);
    // The writer finishes once the server's side of the channel is gone.
    drop(outgoing);
    let written = writer.join().unwrap_or(Ok(()));
    let ending = served?;
    written?;
    // The reader ends at `exit` or at the end of stdin; after a session
    // that ended otherwise it may still wait on stdin, and is left to the
    // process's end.
    if reader.is_finished() {
        reader.join().unwrap_or(Ok(()))?;
    }
    Ok(ending)
}
