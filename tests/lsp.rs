//! Drives `ipub lsp` as an editor would, over JSON-RPC on its stdin and
//! stdout: initialize, open a project (diagnostics with a located
//! warning), type an error and fix it, hover on a tensor, an op (its plan)
//! and a kernel entry (its parameters and cost), go to definitions,
//! complete keys, op kinds and tensor names, list symbols, save (a rebuild
//! that writes the package and reports it), save a project that does not
//! fit (a diagnostic at `tiles`), type an error into a kernel source, and
//! shut down.

#[path = "common/npy.rs"]
mod npy;
use serde_json::{json, Value};
use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::mpsc::{self, Receiver};
use std::time::Duration;

const ROOT: &str = r#"include = ["layer.toml"]

[project]
name = "small"
target = "ipu21"
tiles = 4
seed = 1

[[tensor]]
name = "x"
shape = [32, 64]
dtype = "f16"
role = "input"

[[tensor]]
name = "spare"
shape = [4]
dtype = "f16"
role = "weight"

[[op]]
name = "y"
op = "gelu"
inputs = ["h"]
dtype = "f16"

[check]
reference_precision = "device"
min_cosine_similarity = 0.99
max_abs_error = 0.1
outputs = ["y"]
"#;

const LAYER: &str = r#"[[tensor]]
name = "w"
shape = [64, 32]
dtype = "f16"
role = "weight"

[[op]]
name = "h"
op = "matmul"
inputs = ["x", "w"]
dtype = "f16"
"#;

struct Client {
    child: Child,
    stdin: ChildStdin,
    messages: Receiver<Value>,
    next_id: i64,
    /// Notifications read while waiting for something else.
    pending: Vec<Value>,
}

impl Client {
    fn start(dir: &Path) -> Client {
        Client::start_with(dir, &[])
    }

    /// The server with global options before `lsp` (`--log-file F`).
    fn start_with(dir: &Path, options: &[&str]) -> Client {
        let mut child = Command::new(env!("CARGO_BIN_EXE_ipub"))
            .args(options)
            .arg("lsp")
            .current_dir(dir)
            .env("IPUB_CACHE_DIR", dir.join(".cache"))
            .env_remove("RUST_LOG")
            .env_remove("IPUB_LOG")
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .expect("start ipub lsp");
        let stdin = child.stdin.take().expect("stdin");
        let stdout = child.stdout.take().expect("stdout");
        let (sender, messages) = mpsc::channel();
        std::thread::spawn(move || {
            let mut reader = BufReader::new(stdout);
            while let Some(message) = read_message(&mut reader) {
                if sender.send(message).is_err() {
                    break;
                }
            }
        });
        Client {
            child,
            stdin,
            messages,
            next_id: 1,
            pending: Vec::new(),
        }
    }

    fn send(&mut self, message: Value) {
        let body = message.to_string();
        write!(self.stdin, "Content-Length: {}\r\n\r\n{body}", body.len()).expect("write");
        self.stdin.flush().expect("flush");
    }

    /// A frame with any body, well-formed or not.
    fn send_raw(&mut self, body: &str) {
        write!(self.stdin, "Content-Length: {}\r\n\r\n{body}", body.len()).expect("write");
        self.stdin.flush().expect("flush");
    }

    /// Bytes as they are, framing included.
    fn send_bytes(&mut self, bytes: &[u8]) {
        self.stdin.write_all(bytes).expect("write");
        self.stdin.flush().expect("flush");
    }

    /// The server, initialized with `dir` as its workspace.
    fn initialized(dir: &Path) -> Client {
        let mut client = Client::start(dir);
        client.request(
            "initialize",
            json!({ "processId": null, "rootUri": uri(dir), "capabilities": {} }),
        );
        client.notify("initialized", json!({}));
        client
    }

    /// The notifications the server sends before answering a request
    /// sent now: everything it did for the messages sent before, as it
    /// answers in order.
    fn notifications_so_far(&mut self) -> Vec<Value> {
        self.pending.clear();
        self.send_request("ipub/nothing", Value::Null);
        std::mem::take(&mut self.pending)
    }

    /// Opens `path` with `text`.
    fn open(&mut self, path: &Path, text: &str) {
        self.notify(
            "textDocument/didOpen",
            json!({ "textDocument": { "uri": uri(path), "languageId": "toml", "version": 1, "text": text } }),
        );
    }

    fn save(&mut self, path: &Path) {
        self.notify(
            "textDocument/didSave",
            json!({ "textDocument": { "uri": uri(path) } }),
        );
    }

    /// `shutdown`, `exit`, and the exit status.
    fn shut_down(mut self) -> std::process::ExitStatus {
        self.request("shutdown", Value::Null);
        self.notify("exit", Value::Null);
        self.child.wait().expect("ipub lsp exits")
    }

    fn notify(&mut self, method: &str, params: Value) {
        self.send(json!({ "jsonrpc": "2.0", "method": method, "params": params }));
    }

    /// A request's whole response, error or not.
    fn send_request(&mut self, method: &str, params: Value) -> Value {
        let id = self.next_id;
        self.next_id += 1;
        self.send(json!({ "jsonrpc": "2.0", "id": id, "method": method, "params": params }));
        loop {
            let message = self.receive(method);
            if message["id"] == json!(id) {
                return message;
            }
            self.pending.push(message);
        }
    }

    fn request(&mut self, method: &str, params: Value) -> Value {
        let message = self.send_request(method, params);
        assert!(message.get("error").is_none(), "{message}");
        message["result"].clone()
    }

    fn receive(&mut self, waiting_for: &str) -> Value {
        self.messages
            .recv_timeout(Duration::from_secs(120))
            .unwrap_or_else(|_| panic!("no answer from ipub lsp while waiting for {waiting_for}"))
    }

    /// The next notification `method` for which `matches` holds (earlier
    /// ones are dropped).
    fn wait_for(&mut self, method: &str, matches: impl Fn(&Value) -> bool) -> Value {
        if let Some(i) = self
            .pending
            .iter()
            .position(|m| m["method"] == method && matches(&m["params"]))
        {
            let found = self.pending.remove(i);
            self.pending.drain(..i);
            return found["params"].clone();
        }
        self.pending.clear();
        loop {
            let message = self.receive(method);
            if message["method"] == method && matches(&message["params"]) {
                return message["params"].clone();
            }
        }
    }

    /// The diagnostics published for `uri` next.
    fn diagnostics(&mut self, uri: &str) -> Vec<Value> {
        let params = self.wait_for("textDocument/publishDiagnostics", |p| p["uri"] == uri);
        params["diagnostics"]
            .as_array()
            .cloned()
            .unwrap_or_default()
    }
}

fn read_message(reader: &mut impl BufRead) -> Option<Value> {
    let mut length = None;
    loop {
        let mut line = String::new();
        if reader.read_line(&mut line).ok()? == 0 {
            return None;
        }
        let line = line.trim_end();
        if line.is_empty() {
            break;
        }
        if let Some(value) = line.strip_prefix("Content-Length: ") {
            length = value.parse::<usize>().ok();
        }
    }
    let mut body = vec![0; length?];
    reader.read_exact(&mut body).ok()?;
    serde_json::from_slice(&body).ok()
}

fn uri(path: &Path) -> String {
    format!("file://{}", path.display())
}

/// The position of the `nth` (0-based) occurrence of `needle` in `text`,
/// plus `shift` columns.
fn position(text: &str, needle: &str, nth: usize, shift: usize) -> Value {
    let offset = text
        .match_indices(needle)
        .nth(nth)
        .unwrap_or_else(|| panic!("`{needle}` in the text"))
        .0
        + shift;
    let line = text[..offset].matches('\n').count();
    let column = offset - text[..offset].rfind('\n').map_or(0, |i| i + 1);
    json!({ "line": line, "character": column })
}

fn at(uri: &str, position: Value) -> Value {
    json!({ "textDocument": { "uri": uri }, "position": position })
}

fn hover_text(result: &Value) -> String {
    result["contents"]["value"]
        .as_str()
        .unwrap_or_else(|| panic!("hover markup: {result}"))
        .to_string()
}

fn labels(result: &Value) -> Vec<String> {
    result
        .as_array()
        .expect("completion items")
        .iter()
        .map(|i| i["label"].as_str().unwrap_or_default().to_string())
        .collect()
}

fn change(client: &mut Client, uri: &str, version: i32, text: &str) {
    client.notify(
        "textDocument/didChange",
        json!({
            "textDocument": { "uri": uri, "version": version },
            "contentChanges": [{ "text": text }]
        }),
    );
}

fn copy_dir(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).expect("mkdir");
    for entry in std::fs::read_dir(from).expect("read dir") {
        let entry = entry.expect("entry");
        let target = to.join(entry.file_name());
        if entry.file_type().expect("type").is_dir() {
            copy_dir(&entry.path(), &target);
        } else {
            std::fs::copy(entry.path(), target).expect("copy");
        }
    }
}

#[test]
fn an_editor_session_from_first_keystroke_to_rebuild_on_save() {
    let dir = tempfile::tempdir().expect("temporary directory");
    let dir = dir.path().canonicalize().expect("canonical");
    copy_dir(
        &Path::new(env!("CARGO_MANIFEST_DIR")).join("device"),
        &dir.join("device"),
    );
    let projects = dir.join("proj");
    std::fs::create_dir_all(&projects).expect("mkdir");
    let root: PathBuf = projects.join("small.toml");
    let layer = projects.join("layer.toml");
    std::fs::write(&root, ROOT).expect("write root");
    std::fs::write(&layer, LAYER).expect("write layer");
    let (root_uri, layer_uri) = (uri(&root), uri(&layer));

    let mut client = Client::start(&dir);
    let init = client.request(
        "initialize",
        json!({ "processId": null, "rootUri": uri(&dir), "capabilities": {} }),
    );
    assert_eq!(init["capabilities"]["hoverProvider"], json!(true), "{init}");
    assert_eq!(init["serverInfo"]["name"], json!("ipub"));
    client.notify("initialized", json!({}));

    // Opening the project: its warning, located.
    client.notify(
        "textDocument/didOpen",
        json!({ "textDocument": { "uri": root_uri, "languageId": "toml", "version": 1, "text": ROOT } }),
    );
    let diagnostics = client.diagnostics(&root_uri);
    assert_eq!(diagnostics.len(), 1, "{diagnostics:?}");
    assert_eq!(diagnostics[0]["severity"], json!(2));
    assert_eq!(diagnostics[0]["code"], json!("unused-tensor"));
    assert_eq!(
        diagnostics[0]["range"]["start"],
        position(ROOT, "\"spare\"", 0, 0)
    );

    // Typing a mistake, as you type: the error where it is, with a
    // suggestion.
    let broken = ROOT.replace("inputs = [\"h\"]", "inputs = [\"hh\"]");
    change(&mut client, &root_uri, 2, &broken);
    let diagnostics = client.diagnostics(&root_uri);
    let error = diagnostics
        .iter()
        .find(|d| d["severity"] == json!(1))
        .unwrap_or_else(|| panic!("an error: {diagnostics:?}"));
    assert!(
        error["message"]
            .as_str()
            .unwrap()
            .starts_with("unknown tensor `hh`"),
        "{error}"
    );
    assert!(
        error["message"].as_str().unwrap().contains("`h`"),
        "{error}"
    );
    assert_eq!(error["range"]["start"], position(&broken, "\"hh\"", 0, 0));
    change(&mut client, &root_uri, 3, ROOT);
    let diagnostics = client.diagnostics(&root_uri);
    assert!(diagnostics.iter().all(|d| d["severity"] == json!(2)));

    // The included file, opened too.
    client.notify(
        "textDocument/didOpen",
        json!({ "textDocument": { "uri": layer_uri, "languageId": "toml", "version": 1, "text": LAYER } }),
    );
    assert!(client.diagnostics(&layer_uri).is_empty());

    // Hover: a tensor, and an op with its plan.
    let hover = client.request(
        "textDocument/hover",
        at(&root_uri, position(ROOT, "\"x\"", 0, 1)),
    );
    let text = hover_text(&hover);
    assert!(
        text.contains("f16[32, 64]") && text.contains("input"),
        "{text}"
    );
    let hover = client.request(
        "textDocument/hover",
        at(&layer_uri, position(LAYER, "\"h\"", 0, 1)),
    );
    let text = hover_text(&hover);
    // `h` runs fused with the operation after it, and its hover shows
    // the fused operation's plan.
    for needle in [
        "op `matmul`",
        "fused into `h+",
        "**plan**",
        "tiles",
        "estimated",
        "memory per tile",
        "gemm_f16_amp.S",
    ] {
        assert!(text.contains(needle), "{needle} in {text}");
    }

    // Go to definition: a reference in the include to the root's tensor,
    // an include to its file, an op kind to its kernel source.
    let found = client.request(
        "textDocument/definition",
        at(&layer_uri, position(LAYER, "\"x\"", 0, 1)),
    );
    assert_eq!(found["uri"], json!(root_uri));
    assert_eq!(found["range"]["start"], position(ROOT, "\"x\"", 0, 0));
    let found = client.request(
        "textDocument/definition",
        at(&root_uri, position(ROOT, "layer.toml", 0, 2)),
    );
    assert_eq!(found["uri"], json!(layer_uri));
    let found = client.request(
        "textDocument/definition",
        at(&layer_uri, position(LAYER, "\"matmul\"", 0, 2)),
    );
    assert_eq!(found["uri"], json!(uri(&dir.join("device/gemm_f16_amp.S"))));

    // Completion: op kinds, tensor names, keys, dtypes.
    let typing = format!("{ROOT}\n[[op]]\nname = \"z\"\nop = \"\ninputs = [\"\n\ndtype = \"");
    change(&mut client, &root_uri, 4, &typing);
    let op_kinds = client.request(
        "textDocument/completion",
        at(&root_uri, position(&typing, "op = \"", 1, 6)),
    );
    assert!(
        labels(&op_kinds).contains(&"matmul".to_string()),
        "{op_kinds}"
    );
    let names = labels(&client.request(
        "textDocument/completion",
        at(&root_uri, position(&typing, "inputs = [\"", 1, 11)),
    ));
    for name in ["x", "spare", "y", "w", "h"] {
        assert!(names.contains(&name.to_string()), "{name} in {names:?}");
    }
    let keys = labels(&client.request(
        "textDocument/completion",
        at(&root_uri, position(&typing, "\n\ndtype", 0, 1)),
    ));
    assert!(keys.contains(&"transpose_rhs".to_string()), "{keys:?}");
    let dtypes = labels(&client.request(
        "textDocument/completion",
        at(&root_uri, position(&typing, "dtype = \"", 2, 9)),
    ));
    assert_eq!(dtypes, ["f32", "f16", "f143", "f152"]);
    change(&mut client, &root_uri, 5, ROOT);

    // Document symbols.
    let symbols = client.request(
        "textDocument/documentSymbol",
        json!({ "textDocument": { "uri": root_uri } }),
    );
    let names: Vec<&str> = symbols
        .as_array()
        .expect("symbols")
        .iter()
        .map(|s| s["name"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["x", "spare", "y"]);

    // Saving rebuilds: the package is written and the result reported.
    client.notify(
        "textDocument/didSave",
        json!({ "textDocument": { "uri": root_uri } }),
    );
    let built = client.wait_for("ipub/buildFinished", |_| true);
    assert_eq!(built["success"], json!(true), "{built}");
    assert_eq!(built["written"], json!(true), "{built}");
    assert!(
        built["estimatedCycles"].as_u64().unwrap_or(0) > 0,
        "{built}"
    );
    assert!(built["recomputed"].as_u64().unwrap_or(0) > 0, "{built}");
    // Planning ran for the hover already; the rebuild reused it.
    assert!(built["computed"]["emit"].as_u64().is_some(), "{built}");
    assert!(built["computed"].get("plan").is_none(), "{built}");
    let package = built["package"].as_str().expect("package path");
    assert!(Path::new(package).exists(), "{package}");
    assert!(package.starts_with(dir.to_str().unwrap()), "{package}");
    // The editor's build left its stamp: `ipub build` in the workspace's
    // directory finds the package up to date instead of building again.
    let fresh = Command::new(env!("CARGO_BIN_EXE_ipub"))
        .args(["build", "proj/small.toml"])
        .current_dir(&dir)
        .env("IPUB_CACHE_DIR", dir.join(".cache"))
        .output()
        .expect("run ipub build");
    let stdout = String::from_utf8_lossy(&fresh.stdout);
    assert!(fresh.status.success(), "{stdout}");
    assert!(stdout.contains("is up to date"), "{stdout}");

    // A save that does not fit: the placement error at `tiles`.
    let big = ROOT
        .replace("tiles = 4", "tiles = 1")
        .replace("shape = [32, 64]", "shape = [256, 512]");
    // Each tensor fits the tile's memory (validation refuses one that does
    // not); all of them together do not.
    let big_layer = LAYER.replace("shape = [64, 32]", "shape = [512, 256]");
    std::fs::write(&layer, &big_layer).expect("write layer");
    change(&mut client, &layer_uri, 2, &big_layer);
    std::fs::write(&root, &big).expect("write root");
    change(&mut client, &root_uri, 6, &big);
    client.notify(
        "textDocument/didSave",
        json!({ "textDocument": { "uri": root_uri } }),
    );
    let built = client.wait_for("ipub/buildFinished", |_| true);
    assert_eq!(built["success"], json!(false), "{built}");
    let diagnostics = client.diagnostics(&root_uri);
    let placement = diagnostics
        .iter()
        .find(|d| d["code"] == json!("placement"))
        .unwrap_or_else(|| panic!("a placement error: {diagnostics:?}"));
    assert_eq!(placement["range"]["start"], position(&big, "1\n", 0, 0));
    assert!(
        placement["message"]
            .as_str()
            .unwrap()
            .contains("try more tiles"),
        "{placement}"
    );

    // A kernel source: an error as you type, and an entry's hover.
    let gelu = dir.join("device/gelu_f16.S");
    let gelu_uri = uri(&gelu);
    let source = std::fs::read_to_string(&gelu).expect("kernel source");
    let typo = source.replacen("gelu_f16:\n", "gelu_f16:\n        bogus_op $m0\n", 1);
    client.notify(
        "textDocument/didOpen",
        json!({ "textDocument": { "uri": gelu_uri, "languageId": "asm", "version": 1, "text": typo } }),
    );
    let diagnostics = client.diagnostics(&gelu_uri);
    assert_eq!(diagnostics.len(), 1, "{diagnostics:?}");
    assert_eq!(
        diagnostics[0]["range"]["start"],
        position(&typo, "bogus_op", 0, 0)
    );
    let hover = client.request(
        "textDocument/hover",
        at(&gelu_uri, position(&typo, "gelu_f16:", 0, 2)),
    );
    let text = hover_text(&hover);
    for needle in ["kernel entry", "`row_length`", "u32", "cost:"] {
        assert!(text.contains(needle), "{needle} in {text}");
    }
    // The unsaved text never reached the disk.
    assert_eq!(std::fs::read_to_string(&gelu).expect("source"), source);

    client.request("shutdown", Value::Null);
    client.notify("exit", Value::Null);
    let status = client.child.wait().expect("ipub lsp exits");
    assert!(status.success(), "{status:?}");
}

/// Opening or saving a kernel source plans no project that merely shares
/// its directory (at full chip that took the server away for tens of
/// seconds); the source is assembled alone until a project that uses it
/// is open, and then for that project's variants.
#[test]
fn a_kernel_source_alone_plans_no_project() {
    let dir = tempfile::tempdir().expect("temporary directory");
    let dir = dir.path().canonicalize().expect("canonical");
    let manifest = Path::new(env!("CARGO_MANIFEST_DIR"));
    copy_dir(&manifest.join("device"), &dir.join("device"));
    copy_dir(&manifest.join("projects"), &dir.join("projects"));
    let log = dir.join("lsp.log");
    let mut client = Client::start_with(&dir, &["--log-file", log.to_str().expect("utf-8")]);
    client.request(
        "initialize",
        json!({ "processId": null, "rootUri": uri(&dir), "capabilities": {} }),
    );
    client.notify("initialized", json!({}));
    let gelu = dir.join("device/gelu_f16.S");
    let gelu_uri = uri(&gelu);
    let source = std::fs::read_to_string(&gelu).expect("kernel source");
    client.notify(
        "textDocument/didOpen",
        json!({ "textDocument": { "uri": gelu_uri, "languageId": "asm", "version": 1, "text": source } }),
    );
    assert_eq!(client.diagnostics(&gelu_uri), Vec::<Value>::new());
    client.notify(
        "textDocument/didSave",
        json!({ "textDocument": { "uri": gelu_uri } }),
    );
    let hover = client.request(
        "textDocument/hover",
        at(&gelu_uri, position(&source, "gelu_f16:", 0, 2)),
    );
    assert!(hover_text(&hover).contains("kernel entry"), "{hover}");
    let planned = |log: &Path| {
        std::fs::read_to_string(log)
            .unwrap_or_default()
            .contains("selected physically scheduled operator-plan finalist")
    };
    assert!(
        !planned(&log),
        "a project was planned for a kernel source alone"
    );

    // With a project that uses it open, its variants are assembled.
    let mlp = dir.join("projects/mlp-f16.toml");
    let text = std::fs::read_to_string(&mlp).expect("project");
    client.notify(
        "textDocument/didOpen",
        json!({ "textDocument": { "uri": uri(&mlp), "languageId": "toml", "version": 1, "text": text } }),
    );
    client.request(
        "textDocument/hover",
        at(&gelu_uri, position(&source, "gelu_f16:", 0, 2)),
    );
    client.request("shutdown", Value::Null);
    client.notify("exit", Value::Null);
    let status = client.child.wait().expect("ipub lsp exits");
    assert!(status.success(), "{status:?}");
    assert!(planned(&log), "the open project was not planned");
}

/// Malformed messages are skipped and the session goes on; a request
/// after `shutdown` gets an error, a second `initialize` too, and `exit`
/// ends the server cleanly.
#[test]
fn malformed_messages_do_not_end_the_session() {
    let dir = tempfile::tempdir().expect("temporary directory");
    let dir = dir.path().canonicalize().expect("canonical");
    let mut client = Client::start(&dir);
    client.request(
        "initialize",
        json!({ "processId": null, "rootUri": uri(&dir), "capabilities": {} }),
    );
    client.notify("initialized", json!({}));
    for body in [
        "not json",
        "[1, 2, 3]",
        "{}",
        "{\"jsonrpc\": \"2.0\", \"id\": true}",
    ] {
        client.send_raw(body);
    }
    let path = dir.join("p.toml");
    let text = "[project]\nname = \"p\"\ntarget = \"ipu21\"\ntiles = 4\nseed = 1\n";
    std::fs::write(&path, text).expect("write");
    client.notify(
        "textDocument/didOpen",
        json!({ "textDocument": { "uri": uri(&path), "languageId": "toml", "version": 1, "text": text } }),
    );
    let symbols = client.request(
        "textDocument/documentSymbol",
        json!({ "textDocument": { "uri": uri(&path) } }),
    );
    assert!(symbols.is_array(), "{symbols}");
    let again = client.send_request("initialize", json!({ "capabilities": {} }));
    assert_eq!(again["error"]["code"], json!(-32600), "{again}");
    client.request("shutdown", Value::Null);
    let late = client.send_request(
        "textDocument/documentSymbol",
        json!({ "textDocument": { "uri": uri(&path) } }),
    );
    assert_eq!(late["error"]["code"], json!(-32600), "{late}");
    client.notify("exit", Value::Null);
    let status = client.child.wait().expect("ipub lsp exits");
    assert!(status.success(), "{status:?}");
}

/// A `Content-Length` far beyond any message is refused by its size: the
/// body is never allocated (10^14 bytes aborted the process), and the
/// messages after it are still answered (it used to swallow them all).
#[test]
fn a_huge_content_length_is_skipped_without_allocating_it() {
    let dir = tempfile::tempdir().expect("temporary directory");
    let dir = dir.path().canonicalize().expect("canonical");
    for length in ["99999999999999", "18446744073709551615", "3000000000"] {
        let mut client = Client::initialized(&dir);
        client.send_bytes(format!("Content-Length: {length}\r\n\r\n{{}}").as_bytes());
        // The request after it is answered (an error reply fails here).
        let result = client.request("shutdown", Value::Null);
        assert_eq!(result, Value::Null, "{length}");
        client.notify("exit", Value::Null);
        let status = client.child.wait().expect("ipub lsp exits");
        assert_eq!(status.code(), Some(0), "{length}: {status:?}");
    }
}

/// After a header without `Content-Length`, with LF line endings, or with
/// a length longer than its body, the messages that follow are read.
#[test]
fn the_reader_resynchronises_after_a_bad_header() {
    let dir = tempfile::tempdir().expect("temporary directory");
    let dir = dir.path().canonicalize().expect("canonical");
    let mut client = Client::initialized(&dir);
    let unknown = |client: &mut Client| {
        let answer = client.send_request("ipub/unknown", Value::Null);
        assert_eq!(answer["error"]["code"], json!(-32601), "{answer}");
    };
    client.send_bytes(b"Content-Type: application/vscode-jsonrpc\r\n\r\n{\"jsonrpc\":\"2.0\",\"method\":\"$/bogus\"}");
    unknown(&mut client);
    let body = json!({ "jsonrpc": "2.0", "id": 100, "method": "ipub/unknown" }).to_string();
    client.send_bytes(format!("Content-Length: {}\n\n{body}", body.len()).as_bytes());
    let answer = client.receive("an answer to a request framed with LF");
    assert_eq!(answer["id"], json!(100), "{answer}");
    let body = json!({ "jsonrpc": "2.0", "method": "$/bogus" }).to_string();
    client.send_bytes(format!("Content-Length: {}\r\n\r\n{body}", body.len() + 30).as_bytes());
    unknown(&mut client);
    let status = client.shut_down();
    assert!(status.success(), "{status:?}");
}

/// `exit` without `shutdown` exits with 1; notifications after
/// `shutdown` are dropped; a request that is not JSON-RPC 2.0, or not
/// of the protocol's shape, is answered with `InvalidRequest` (with a null
/// id when its id is not a number or a string).
#[test]
fn the_lifecycle_follows_the_protocol() {
    let dir = tempfile::tempdir().expect("temporary directory");
    let dir = dir.path().canonicalize().expect("canonical");
    let mut client = Client::initialized(&dir);
    client.notify("exit", Value::Null);
    let status = client.child.wait().expect("ipub lsp exits");
    assert_eq!(status.code(), Some(1), "{status:?}");

    let mut client = Client::initialized(&dir);
    client.send_raw(r#"{"jsonrpc":"1.0","id":7,"method":"shutdown"}"#);
    let answer = client.receive("a refusal");
    assert_eq!(answer["id"], json!(7), "{answer}");
    assert_eq!(answer["error"]["code"], json!(-32600), "{answer}");
    client.send_raw(r#"{"jsonrpc":"2.0","id":8,"method":5}"#);
    let answer = client.receive("a refusal");
    assert_eq!(answer["id"], json!(8), "{answer}");
    assert_eq!(answer["error"]["code"], json!(-32600), "{answer}");
    // An id that cannot be read is answered with a null one.
    client.send_raw(r#"{"jsonrpc":"2.0","id":{"n":9},"method":"shutdown"}"#);
    let answer = client.receive("a refusal with a null id");
    assert_eq!(answer["id"], Value::Null, "{answer}");
    assert_eq!(answer["error"]["code"], json!(-32600), "{answer}");
    client.request("shutdown", Value::Null);
    client.open(&dir.join("p.toml"), "[project]\nname = 5\n");
    let late = client.notifications_so_far();
    assert_eq!(late, Vec::<Value>::new());
    client.notify("exit", Value::Null);
    let status = client.child.wait().expect("ipub lsp exits");
    assert_eq!(status.code(), Some(0), "{status:?}");
}

/// A temporary workspace (kept while the first value lives) with the
/// kernels in `device/` and an empty `proj/`, and its canonical path.
fn workspace_with_kernels() -> (tempfile::TempDir, PathBuf) {
    let temporary = tempfile::tempdir().expect("temporary directory");
    let dir = temporary.path().canonicalize().expect("canonical");
    copy_dir(
        &Path::new(env!("CARGO_MANIFEST_DIR")).join("device"),
        &dir.join("device"),
    );
    std::fs::create_dir_all(dir.join("proj")).expect("mkdir");
    (temporary, dir)
}

/// A build's diagnostic is at a position in the text it built; after an
/// unsaved edit it is not shown at that position in the new text, and
/// the next save's build shows it where it now is.
#[test]
fn build_diagnostics_are_not_shown_in_text_edited_since() {
    let (_temporary, dir) = workspace_with_kernels();
    let root = dir.join("proj/small.toml");
    let big = ROOT
        .replace("tiles = 4", "tiles = 1")
        .replace("shape = [32, 64]", "shape = [256, 512]");
    let big_layer = LAYER.replace("shape = [64, 32]", "shape = [512, 256]");
    std::fs::write(&root, &big).expect("write root");
    std::fs::write(dir.join("proj/layer.toml"), &big_layer).expect("write layer");
    let root_uri = uri(&root);
    let mut client = Client::initialized(&dir);
    client.open(&root, &big);
    client.diagnostics(&root_uri);
    client.save(&root);
    let placement = |diagnostics: &[Value]| {
        diagnostics
            .iter()
            .find(|d| d["code"] == json!("placement"))
            .map(|d| d["range"]["start"].clone())
    };
    client.wait_for("ipub/buildFinished", |_| true);
    let diagnostics = client.diagnostics(&root_uri);
    assert_eq!(placement(&diagnostics), Some(position(&big, "1\n", 0, 0)));

    let edited = format!("# a comment\n{big}");
    change(&mut client, &root_uri, 2, &edited);
    let diagnostics = client.diagnostics(&root_uri);
    assert_eq!(placement(&diagnostics), None, "{diagnostics:?}");

    std::fs::write(&root, &edited).expect("write root");
    client.save(&root);
    client.wait_for("ipub/buildFinished", |_| true);
    let diagnostics = client.diagnostics(&root_uri);
    assert_eq!(
        placement(&diagnostics),
        Some(position(&edited, "1\n", 0, 0))
    );
    let status = client.shut_down();
    assert!(status.success(), "{status:?}");
}

/// NaNs in a tensor file are data the build converts: the warning about
/// them comes with the build, at the tensor in the file that declares it.
#[test]
fn a_build_warns_of_nans_in_a_tensor_file_at_the_tensor() {
    let (_temporary, dir) = workspace_with_kernels();
    let root = dir.join("proj/small.toml");
    let layer = dir.join("proj/layer.toml");
    let from_file = LAYER.replace(
        "role = \"weight\"\n",
        "role = \"weight\"\ninit = { file = \"w.npy\" }\n",
    );
    let mut values = vec![0.01f32; 64 * 32];
    values[5] = f32::NAN;
    values[7] = f32::NAN;
    std::fs::write(dir.join("proj/w.npy"), npy::npy(&[64, 32], &values)).expect("write w.npy");
    std::fs::write(&root, ROOT).expect("write root");
    std::fs::write(&layer, &from_file).expect("write layer");
    let mut client = Client::initialized(&dir);
    client.open(&root, ROOT);
    client.save(&root);
    client.wait_for("ipub/buildFinished", |_| true);
    let diagnostics = client.diagnostics(&uri(&layer));
    let warning = diagnostics
        .iter()
        .find(|d| d["code"] == json!("tensor-file-values"))
        .unwrap_or_else(|| panic!("{diagnostics:?}"));
    let message = warning["message"].as_str().unwrap_or_default();
    let first = format!(
        "`w` reads 2 NaNs from `{}`\n",
        dir.join("proj/w.npy").display()
    );
    assert!(message.starts_with(&first), "{message}");
    assert_eq!(
        warning["range"]["start"],
        position(&from_file, "\"w\"", 0, 0)
    );
    let status = client.shut_down();
    assert!(status.success(), "{status:?}");
}

/// TOML files of other tools get no diagnostics and no builds, even a
/// `pyproject.toml` with its `[project]` table; a file in the project
/// format that no project includes is still checked.
#[test]
fn other_toml_files_are_left_alone() {
    let dir = tempfile::tempdir().expect("temporary directory");
    let dir = dir.path().canonicalize().expect("canonical");
    let files = [
        (
            "Cargo.toml",
            "[package]\nname = \"foo\"\nversion = \"0.1.0\"\n",
        ),
        (
            ".taplo.toml",
            "[[rule]]\ninclude = [\"projects/**/*.toml\"]\n\n[rule.schema]\npath = \"s.json\"\n",
        ),
        ("rustfmt.toml", "max_width = 100\n"),
        (
            "pyproject.toml",
            "[project]\nname = \"tool\"\nversion = \"1.0\"\ndependencies = []\n",
        ),
    ];
    for (name, text) in files {
        std::fs::write(dir.join(name), text).expect("write");
    }
    let mut client = Client::initialized(&dir);
    for (name, text) in files {
        client.open(&dir.join(name), text);
        client.save(&dir.join(name));
    }
    for message in client.notifications_so_far() {
        assert_ne!(message["method"], json!("ipub/buildFinished"), "{message}");
        let diagnostics = &message["params"]["diagnostics"];
        assert_eq!(diagnostics, &json!([]), "{message}");
    }
    let stray = dir.join("stray.toml");
    let text = "[[tensor]]\nname = \"t\"\nshap = [4]\n";
    client.open(&stray, text);
    let diagnostics = client.diagnostics(&uri(&stray));
    assert!(!diagnostics.is_empty(), "{diagnostics:?}");
    let status = client.shut_down();
    assert!(status.success(), "{status:?}");
}

/// An editor buffer over the 16 MiB source limit is refused as the file
/// would be by `ipub check`.
#[test]
fn the_source_size_limit_applies_to_editor_buffers() {
    let dir = tempfile::tempdir().expect("temporary directory");
    let dir = dir.path().canonicalize().expect("canonical");
    let path = dir.join("big.toml");
    let text = "[project]\nname = \"p\"\ntarget = \"ipu21\"\ntiles = 4\n";
    std::fs::write(&path, text).expect("write");
    let big = format!("{text}{}", "# padding\n".repeat((17 << 20) / 10));
    let mut client = Client::initialized(&dir);
    client.open(&path, &big);
    let diagnostics = client.diagnostics(&uri(&path));
    assert!(
        diagnostics.iter().any(|d| d["message"]
            .as_str()
            .is_some_and(|m| m.contains("more than the limit of 16777216 bytes"))),
        "{diagnostics:?}"
    );
    let status = client.shut_down();
    assert!(status.success(), "{status:?}");
}

/// A save of a project with errors reports them in `ipub/buildFinished`.
#[test]
fn a_failed_build_of_an_invalid_project_says_why() {
    let dir = tempfile::tempdir().expect("temporary directory");
    let dir = dir.path().canonicalize().expect("canonical");
    let path = dir.join("p.toml");
    let text = "[project]\nname = \"p\"\ntarget = \"ipu21\"\ntiles = 4\n\n[[op]]\nname = \"y\"\nop = \"gelu\"\ninputs = [\"nowhere\"]\ndtype = \"f16\"\n";
    std::fs::write(&path, text).expect("write");
    let mut client = Client::initialized(&dir);
    client.open(&path, text);
    client.save(&path);
    let built = client.wait_for("ipub/buildFinished", |_| true);
    assert_eq!(built["success"], json!(false), "{built}");
    let errors = built["errors"].as_array().expect("errors");
    assert!(
        errors.iter().any(|e| e
            .as_str()
            .is_some_and(|e| e.contains("unknown tensor `nowhere`"))),
        "{built}"
    );
    let status = client.shut_down();
    assert!(status.success(), "{status:?}");
}
