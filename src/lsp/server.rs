//! The protocol loop and the session's state: the database, the open
//! documents, the projects they belong to and what was last published.

use super::session::{is_project_file, is_root, Session};
use super::transport::{Incoming, Outgoing};
use super::{diagnostics, uri, LspError};
use crate::cli::build::{build, Outcome};
use crate::cli::stamp::{package_path, DEFAULT_OUT};
use crate::cli::watch::keep_package_at;
use crate::diagnostic::Diagnostic;
use camino::{Utf8Path, Utf8PathBuf};
use lsp_server::{ErrorCode, Message, Notification, Request, Response};
use lsp_types::notification::{self as n, Notification as _};
use lsp_types::request::{self as r, Request as _};
use lsp_types::InitializeParams;
use serde_json::{json, Value};
use std::collections::{BTreeMap, BTreeSet};
use std::sync::mpsc::{Receiver, Sender};
use std::sync::Arc;
use std::time::Instant;

/// The custom notification sent after every rebuild on save.
pub(super) const BUILD_FINISHED: &str = "ipub/buildFinished";

/// How a session ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Ending {
    /// At `exit`; `shut_down` when `shutdown` came before it.
    Exit { shut_down: bool },
    /// At the end of the client's messages.
    Closed,
}

/// Runs the server on the client's messages until `exit`.
///
/// Before `initialize`, requests get `ServerNotInitialized` and
/// notifications are dropped; after `shutdown` the protocol allows only
/// `exit`: requests get an error rather than ending the session, and
/// notifications are dropped.
pub(super) fn serve(
    incoming: &Receiver<Incoming>,
    outgoing: &Sender<Outgoing>,
) -> Result<Ending, LspError> {
    let mut session: Option<Session> = None;
    let mut shut_down = false;
    let mut ending = Ending::Closed;
    for message in incoming {
        let message = match message {
            Incoming::Refused(response) => Message::Response(response),
            Incoming::RefusedWithoutId(error) => {
                send_out(outgoing, Outgoing::NullIdError(error))?;
                continue;
            }
            Incoming::Message(Message::Request(request)) => {
                Message::Response(answer(&mut session, &mut shut_down, request))
            }
            Incoming::Message(Message::Notification(notification)) => {
                if notification.method == n::Exit::METHOD {
                    ending = Ending::Exit { shut_down };
                    break;
                }
                if let (Some(session), false) = (&mut session, shut_down) {
                    for out in session.notification(notification) {
                        send(outgoing, Message::Notification(out))?;
                    }
                }
                continue;
            }
            Incoming::Message(Message::Response(_)) => continue,
        };
        send(outgoing, message)?;
    }
    if let Some(store) = session.as_ref().and_then(|s| s.db.store()) {
        store.flush();
    }
    Ok(ending)
}

/// The response to a request, in the session's stage: `initialize` starts
/// the session, `shutdown` ends it.
fn answer(session: &mut Option<Session>, shut_down: &mut bool, request: Request) -> Response {
    let id = request.id.clone();
    let refuse =
        |code: ErrorCode, why: &str| Response::new_err(id.clone(), code as i32, why.to_string());
    match (session.as_mut(), request.method.as_str()) {
        (None, r::Initialize::METHOD) => {
            let params: InitializeParams =
                serde_json::from_value(request.params).unwrap_or_default();
            *session = Some(Session::new(workspace_of(&params)));
            Response::new_ok(request.id, initialize_result())
        }
        (None, _) => refuse(
            ErrorCode::ServerNotInitialized,
            "the server is not initialized yet",
        ),
        (Some(_), r::Initialize::METHOD) => refuse(
            ErrorCode::InvalidRequest,
            "the server is already initialized",
        ),
        (Some(_), _) if *shut_down => {
            refuse(ErrorCode::InvalidRequest, "the server is shutting down")
        }
        (Some(_), r::Shutdown::METHOD) => {
            *shut_down = true;
            Response::new_ok(request.id, Value::Null)
        }
        (Some(session), _) => session.request(request),
    }
}

fn send(outgoing: &Sender<Outgoing>, message: Message) -> Result<(), LspError> {
    send_out(outgoing, Outgoing::Message(message))
}

fn send_out(outgoing: &Sender<Outgoing>, message: Outgoing) -> Result<(), LspError> {
    outgoing.send(message).map_err(|_| LspError::Disconnected)
}

/// The messages of a build's errors, for `ipub/buildFinished`: the
/// project's own (shown as diagnostics as they are typed, not kept with
/// the build's) or the build's diagnostics.
fn build_errors(outcome: &Outcome, diagnostics: &[Diagnostic]) -> Vec<String> {
    let project = match &outcome.error {
        Some(crate::pipeline::BuildError::Project(errors)) => errors.as_slice(),
        _ => &[],
    };
    project
        .iter()
        .filter(|d| d.is_error())
        .chain(diagnostics)
        .map(|d| d.message.clone())
        .collect()
}

/// What the server can do: full-text sync, saves without text, hover,
/// definition, completion and document symbols.
fn initialize_result() -> Value {
    json!({
        "capabilities": {
            "textDocumentSync": {
                "openClose": true,
                "change": 1,
                "save": { "includeText": false }
            },
            "hoverProvider": true,
            "definitionProvider": true,
            "completionProvider": { "triggerCharacters": ["\"", "[", "="] },
            "documentSymbolProvider": true
        },
        "serverInfo": { "name": "ipub", "version": env!("CARGO_PKG_VERSION") }
    })
}

/// The workspace's directory: the first workspace folder, else the root
/// URI.
fn workspace_of(params: &InitializeParams) -> Option<Utf8PathBuf> {
    if let Some(folder) = params.workspace_folders.as_ref().and_then(|f| f.first()) {
        return uri::path_of(&folder.uri);
    }
    #[allow(deprecated)]
    params.root_uri.as_ref().and_then(uri::path_of)
}

impl Session {
    fn request(&mut self, request: Request) -> Response {
        let id = request.id.clone();
        let result = match request.method.as_str() {
            r::HoverRequest::METHOD => self.params(request).map(|p| {
                let p: lsp_types::HoverParams = p;
                let at = p.text_document_position_params;
                json!(super::hover::hover(
                    self,
                    &at.text_document.uri,
                    at.position
                ))
            }),
            r::GotoDefinition::METHOD => self.params(request).map(|p| {
                let p: lsp_types::GotoDefinitionParams = p;
                let at = p.text_document_position_params;
                json!(super::definition::definition(
                    self,
                    &at.text_document.uri,
                    at.position
                ))
            }),
            r::Completion::METHOD => self.params(request).map(|p| {
                let p: lsp_types::CompletionParams = p;
                let at = p.text_document_position;
                json!(super::completion::completion(
                    self,
                    &at.text_document.uri,
                    at.position
                ))
            }),
            r::DocumentSymbolRequest::METHOD => self.params(request).map(|p| {
                let p: lsp_types::DocumentSymbolParams = p;
                json!(super::symbols::document_symbols(self, &p.text_document.uri))
            }),
            other => Err((
                ErrorCode::MethodNotFound,
                format!("ipub does not handle `{other}`"),
            )),
        };
        match result {
            Ok(value) => Response::new_ok(id, value),
            Err((code, message)) => Response::new_err(id, code as i32, message),
        }
    }

    fn params<T: serde::de::DeserializeOwned>(
        &self,
        request: Request,
    ) -> Result<T, (ErrorCode, String)> {
        serde_json::from_value(request.params)
            .map_err(|error| (ErrorCode::InvalidParams, error.to_string()))
    }

    /// Handles a notification; returns the notifications to send back.
    fn notification(&mut self, notification: Notification) -> Vec<Notification> {
        let method = notification.method.clone();
        let params = notification.params;
        match method.as_str() {
            n::DidOpenTextDocument::METHOD => {
                let Ok(p) = serde_json::from_value::<lsp_types::DidOpenTextDocumentParams>(params)
                else {
                    return Vec::new();
                };
                let Some(path) = uri::path_of(&p.text_document.uri) else {
                    return Vec::new();
                };
                self.versions.insert(path.clone(), p.text_document.version);
                self.edited(&path, &p.text_document.text);
                self.publish()
            }
            n::DidChangeTextDocument::METHOD => {
                let Ok(p) =
                    serde_json::from_value::<lsp_types::DidChangeTextDocumentParams>(params)
                else {
                    return Vec::new();
                };
                let Some(path) = uri::path_of(&p.text_document.uri) else {
                    return Vec::new();
                };
                // Full-text sync: the last change holds the whole text.
                let Some(change) = p.content_changes.last() else {
                    return Vec::new();
                };
                self.versions.insert(path.clone(), p.text_document.version);
                self.edited(&path, &change.text);
                self.publish()
            }
            n::DidSaveTextDocument::METHOD => {
                let Ok(p) = serde_json::from_value::<lsp_types::DidSaveTextDocumentParams>(params)
                else {
                    return Vec::new();
                };
                let Some(path) = uri::path_of(&p.text_document.uri) else {
                    return Vec::new();
                };
                let mut out = self.saved(&path);
                out.extend(self.publish());
                out
            }
            n::DidCloseTextDocument::METHOD => {
                let Ok(p) = serde_json::from_value::<lsp_types::DidCloseTextDocumentParams>(params)
                else {
                    return Vec::new();
                };
                let Some(path) = uri::path_of(&p.text_document.uri) else {
                    return Vec::new();
                };
                self.versions.remove(&path);
                self.overlay.remove(&path);
                self.db.refresh_file(&path);
                self.publish()
            }
            _ => Vec::new(),
        }
    }

    /// New editor text for `path`.
    fn edited(&mut self, path: &Utf8Path, text: &str) {
        self.overlay.set(path, text);
        // The input exists once a query has read it; until then the
        // overlay is where its first read will look.
        self.db.refresh_file(path);
        if is_root(path, text) {
            self.roots.insert(path.to_owned());
        }
    }

    /// A save: files changed on disk behind the editor's back are picked
    /// up, then every project the file belongs to is rebuilt (for a kernel
    /// source, every open project that uses it: `Session::open_roots_of`).
    fn saved(&mut self, path: &Utf8Path) -> Vec<Notification> {
        for known in self.db.known_files() {
            if !self.overlay.is_open(&known) {
                self.db.refresh_file(&known);
            }
        }
        let roots = self.open_roots_of(path);
        roots.iter().map(|root| self.rebuild(root)).collect()
    }

    /// Builds a project through every phase, writes its package when it
    /// changed, and says what happened.
    fn rebuild(&mut self, root: &Utf8Path) -> Notification {
        let started = Instant::now();
        let file = self.file(root);
        let outcome = build(&self.db, file, false);
        if let Some(store) = self.db.store() {
            store.flush();
        }
        let mut build_diagnostics = match &outcome.error {
            // Project errors are shown as they are typed already.
            Some(crate::pipeline::BuildError::Project(_)) => Vec::new(),
            // What the build found in the tensor files' values, which
            // nothing converts as the project is typed.
            None => crate::project::value_warnings(&self.db, file),
            Some(error) => crate::cli::located::build_error_diagnostics(&self.db, file, error),
        };
        let (package, written) = self.write_package(root, &outcome, &mut build_diagnostics);
        let built = build_diagnostics
            .iter()
            .map(|d| (d.clone(), self.located_text(d)))
            .collect();
        self.build_diagnostics.insert(root.to_owned(), built);
        let mut computed: BTreeMap<&str, usize> = BTreeMap::new();
        for (phase, _) in &outcome.computed {
            *computed.entry(phase).or_default() += 1;
        }
        let params = json!({
            "project": uri::uri_of(root),
            "success": outcome.ok && package.is_some(),
            "package": package,
            "written": written,
            "tiles": outcome.tiles,
            "estimatedCycles": outcome.estimated_cycles,
            "recomputed": outcome.recomputed,
            "computed": computed,
            "phases": outcome.phases,
            "errors": build_errors(&outcome, &build_diagnostics),
            "elapsedMs": started.elapsed().as_secs_f64() * 1000.0,
        });
        Notification::new(BUILD_FINISHED.to_string(), params)
    }

    /// The current text of the file a diagnostic is located in (`None`
    /// for one without a location or an unreadable file).
    fn located_text(&self, diagnostic: &Diagnostic) -> Option<Arc<str>> {
        let location = diagnostic.location.as_ref()?;
        self.text(&location.file)
    }

    /// Writes a good build's package when its bytes changed, with the
    /// build stamp `ipub build` in the workspace's directory looks for;
    /// returns its path and whether it was written.
    fn write_package(
        &mut self,
        root: &Utf8Path,
        outcome: &Outcome,
        diagnostics: &mut Vec<Diagnostic>,
    ) -> (Option<Utf8PathBuf>, bool) {
        let Some(bytes) = outcome.package.clone().filter(|_| outcome.ok) else {
            return (None, false);
        };
        let base = self
            .workspace
            .clone()
            .or_else(|| root.parent().map(Utf8Path::to_owned))
            .unwrap_or_default();
        let path = base.join(package_path(None, &outcome.name));
        let out = base.join(DEFAULT_OUT);
        match keep_package_at(&self.db, root, &out, &path, outcome, self.written.get(root)) {
            Ok(wrote) => {
                if wrote {
                    self.written.insert(root.to_owned(), bytes);
                }
                (Some(path), wrote)
            }
            Err(error) => {
                diagnostics.push(Diagnostic::error(format!(
                    "cannot write the package {path}: {error}"
                )));
                (None, false)
            }
        }
    }

    /// Publishes the diagnostics of every active project and open file,
    /// and clears files that no longer have any.
    fn publish(&mut self) -> Vec<Notification> {
        let mut by_file: BTreeMap<Utf8PathBuf, Vec<Diagnostic>> = BTreeMap::new();
        let mut add = |fallback: &Utf8Path, diagnostic: Diagnostic| {
            let file = diagnostic
                .location
                .as_ref()
                .map_or_else(|| fallback.to_owned(), |l| l.file.clone());
            let list = by_file.entry(file).or_default();
            if !list.contains(&diagnostic) {
                list.push(diagnostic);
            }
        };
        let active = self.active_roots();
        for root in &active {
            let (files, parsed) = self.current_files(root);
            if parsed {
                self.last_files.insert(root.clone(), files);
            }
        }
        for root in &active {
            let file = self.file(root);
            for diagnostic in crate::project::project_diagnostics(&self.db, file) {
                add(root, diagnostic);
            }
            for (diagnostic, text) in self.build_diagnostics.get(root).into_iter().flatten() {
                // Positions in a text since edited would point at
                // unrelated text: shown again once they are current (an
                // undo, or the next save's build).
                if self.located_text(diagnostic) == *text {
                    add(root, diagnostic.clone());
                }
            }
        }
        for path in self.overlay.open_paths() {
            if path.extension() == Some("toml") {
                let text = self.text(&path).unwrap_or_default();
                if self.roots_of(&path).is_empty() && is_project_file(&path, &text) {
                    // An included file no project includes: its own
                    // syntax. Other TOML files (`Cargo.toml`,
                    // `.taplo.toml`) are not ipub's to check.
                    for diagnostic in diagnostics::orphan_diagnostics(&self.db, &path) {
                        add(&path, diagnostic);
                    }
                }
            } else {
                let roots = self.open_roots_of(&path);
                for diagnostic in super::kernel::diagnostics(self, &roots, &path) {
                    add(&path, diagnostic);
                }
            }
        }
        let mut files: BTreeSet<Utf8PathBuf> = by_file.keys().cloned().collect();
        files.extend(self.published.iter().cloned());
        files.extend(self.overlay.open_paths());
        let mut out = Vec::new();
        let mut published = BTreeSet::new();
        for file in files {
            let list = by_file.remove(&file).unwrap_or_default();
            if !list.is_empty() {
                published.insert(file.clone());
            }
            let text = self.text(&file);
            let params = lsp_types::PublishDiagnosticsParams {
                uri: uri::uri_of(&file),
                diagnostics: list
                    .iter()
                    .map(|d| diagnostics::to_lsp(d, text.as_deref().unwrap_or("")))
                    .collect(),
                version: self.versions.get(&file).copied(),
            };
            out.push(Notification::new(
                n::PublishDiagnostics::METHOD.to_string(),
                params,
            ));
        }
        self.published = published;
        out
    }
}
