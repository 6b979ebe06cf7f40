//! A real remote cache for tests and benches: nginx from the
//! distribution's packages with its WebDAV module, configured as Bazel's
//! documentation describes for an HTTP cache (`PUT` creating the
//! directories it needs, `GET` of what was put), run as the current user
//! in a temporary directory on a free port of 127.0.0.1.

use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// A running nginx; stopped when dropped.
pub struct Nginx {
    dir: tempfile::TempDir,
    port: u16,
    child: Option<Child>,
}

/// The nginx binary, if one is installed (`/usr/sbin` is not on every
/// user's `PATH`).
fn binary() -> Option<PathBuf> {
    let on_path = std::env::var_os("PATH")
        .into_iter()
        .flat_map(|path| std::env::split_paths(&path).collect::<Vec<_>>())
        .map(|dir| dir.join("nginx"));
    on_path
        .chain([PathBuf::from("/usr/sbin/nginx")])
        .find(|candidate| candidate.is_file())
}

impl Nginx {
    /// Starts a server, or says why not (nginx is not installed: `.ci/run`
    /// installs it) and returns `None`.
    pub fn start() -> Option<Nginx> {
        let Some(nginx) = binary() else {
            // Written past the test harness's capture, so the skip is seen.
            let _ = writeln!(
                std::io::stderr(),
                "note: nginx is not installed (apt-get install nginx); the tests against a real cache server are skipped"
            );
            return None;
        };
        // A free port may be taken between finding it and nginx binding
        // it; another one is tried then.
        for _ in 0..5 {
            let dir = tempfile::tempdir().expect("temporary directory");
            let port = TcpListener::bind("127.0.0.1:0")
                .and_then(|l| l.local_addr())
                .expect("a free port")
                .port();
            std::fs::create_dir(dir.path().join("root")).expect("server root");
            let conf = dir.path().join("nginx.conf");
            std::fs::File::create(&conf)
                .and_then(|mut f| f.write_all(config(dir.path(), port).as_bytes()))
                .expect("write nginx.conf");
            let child = Command::new(&nginx)
                .arg("-e")
                .arg(dir.path().join("error.log"))
                .arg("-c")
                .arg(&conf)
                .arg("-p")
                .arg(dir.path())
                .stdin(Stdio::null())
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .spawn()
                .expect("start nginx");
            let mut server = Nginx {
                dir,
                port,
                child: Some(child),
            };
            if server.wait_until_listening() {
                return Some(server);
            }
            let log =
                std::fs::read_to_string(server.dir.path().join("error.log")).unwrap_or_default();
            eprintln!("nginx did not start on port {port}; trying another\n{log}");
            server.stop();
        }
        panic!("nginx does not start (see its error logs above)");
    }

    /// Whether nginx listens on the port. The port was free when it was
    /// chosen, but another test's server (a stub that resets or stalls)
    /// may have taken it before nginx bound it, and then nginx exits: the
    /// server on the port must answer as nginx.
    fn wait_until_listening(&mut self) -> bool {
        let deadline = Instant::now() + Duration::from_secs(10);
        while Instant::now() < deadline {
            if TcpStream::connect(("127.0.0.1", self.port)).is_ok() {
                return self.answers_as_nginx();
            }
            let exited = self
                .child
                .as_mut()
                .map(|c| c.try_wait().ok().flatten().is_some())
                .unwrap_or(true);
            if exited {
                return false;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        false
    }

    /// Whether the server on the port answers a `HEAD /` as nginx.
    fn answers_as_nginx(&self) -> bool {
        let Ok(mut stream) = TcpStream::connect(("127.0.0.1", self.port)) else {
            return false;
        };
        let _ = stream.set_read_timeout(Some(Duration::from_secs(5)));
        if stream.write_all(b"HEAD / HTTP/1.0\r\n\r\n").is_err() {
            return false;
        }
        let mut response = Vec::new();
        let _ = stream.read_to_end(&mut response);
        String::from_utf8_lossy(&response)
            .lines()
            .any(|line| line.to_ascii_lowercase().starts_with("server: nginx"))
    }

    pub fn url(&self) -> String {
        format!("http://127.0.0.1:{}", self.port)
    }

    /// Where the server keeps what was put: `ac/` and `cas/` below it.
    pub fn root(&self) -> PathBuf {
        self.dir.path().join("root")
    }

    /// The files the server holds under `namespace` (`ac` or `cas`).
    pub fn files(&self, namespace: &str) -> Vec<PathBuf> {
        let mut files: Vec<PathBuf> = std::fs::read_dir(self.root().join(namespace))
            .map(|entries| entries.flatten().map(|e| e.path()).collect())
            .unwrap_or_default();
        files.sort();
        files
    }

    /// The bytes the server holds, in both namespaces.
    pub fn bytes_held(&self) -> u64 {
        ["ac", "cas"]
            .iter()
            .flat_map(|ns| self.files(ns))
            .filter_map(|f| f.metadata().ok())
            .map(|m| m.len())
            .sum()
    }

    /// Stops the server; its port refuses connections from then on.
    pub fn stop(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

impl Drop for Nginx {
    fn drop(&mut self) {
        self.stop();
    }
}

/// The configuration: one process (no master, so it runs as whoever starts
/// it and stops with it), every path inside `dir`, WebDAV `PUT` with
/// directories created on demand and bodies as large as a package.
fn config(dir: &Path, port: u16) -> String {
    let d = dir.display();
    format!(
        r#"daemon off;
master_process off;
pid {d}/nginx.pid;
error_log {d}/error.log;
events {{ worker_connections 256; }}
http {{
    access_log {d}/access.log;
    client_body_temp_path {d}/client_body;
    proxy_temp_path {d}/proxy;
    fastcgi_temp_path {d}/fastcgi;
    uwsgi_temp_path {d}/uwsgi;
    scgi_temp_path {d}/scgi;
    server {{
        listen 127.0.0.1:{port};
        root {d}/root;
        client_max_body_size 1024m;
        location / {{
            dav_methods PUT;
            create_full_put_path on;
            dav_access user:rw group:r all:r;
        }}
    }}
}}
"#
    )
}
