//! The remote cache end to end: `ipub build` processes with their own
//! local stores ("machines") sharing a real cache server (nginx with
//! WebDAV), and servers that are down, stall, fail or answer garbage.
//! Whatever the remote does, every build succeeds and writes the package a
//! clean local build writes, byte for byte.

mod nginx;
mod stub;

use nginx::Nginx;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};
use stub::{Behaviour, Stub};

const VIT: &str = "vit-fp8";
const MATMUL: &str = "matmul-f8";

/// A machine: its own local store and kernel cache, and an empty user
/// configuration directory (so the tester's own settings stay out).
struct Machine {
    dir: tempfile::TempDir,
}

/// What one build printed and wrote.
struct Built {
    stdout: String,
    stderr: String,
    package: Vec<u8>,
    elapsed: Duration,
}

impl Built {
    /// Lines of the log at warning level.
    fn warnings(&self) -> Vec<&str> {
        self.stderr.lines().filter(|l| l.contains("WARN")).collect()
    }

    /// How many items of `phase` `--explain` says were recomputed.
    fn recomputed(&self, phase: &str) -> u64 {
        let prefix = format!("{phase}:");
        self.stdout
            .lines()
            .find_map(|l| l.trim().strip_prefix(&prefix))
            .and_then(|rest| rest.split_whitespace().next())
            .and_then(|n| n.parse().ok())
            .unwrap_or_else(|| panic!("no `{phase}` line in\n{}", self.stdout))
    }
}

impl Machine {
    fn new() -> Machine {
        let dir = tempfile::tempdir().expect("temporary directory");
        std::fs::create_dir(dir.path().join("config")).expect("config directory");
        Machine { dir }
    }

    fn command(&self, args: &[&str], env: &[(&str, &str)]) -> Command {
        let mut command = Command::new(env!("CARGO_BIN_EXE_ipub"));
        command
            .args(args)
            .current_dir(self.dir.path())
            .env("IPUB_CACHE_DIR", self.dir.path().join("cache"))
            .env("XDG_CONFIG_HOME", self.dir.path().join("config"));
        for name in [
            "RUST_LOG",
            "IPUB_LOG",
            "IPUB_REMOTE_CACHE",
            "IPUB_REMOTE_CACHE_READ_ONLY",
            "IPUB_REMOTE_CACHE_TOKEN",
            "IPUB_REMOTE_CACHE_USER",
            "IPUB_REMOTE_CACHE_PASSWORD",
        ] {
            command.env_remove(name);
        }
        command.envs(env.iter().copied());
        command
    }

    /// Builds the shipped project `name` into `out` with `args` and the
    /// environment `env`; the build must succeed.
    fn build(&self, name: &str, out: &Path, args: &[&str], env: &[(&str, &str)]) -> Built {
        let project = Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("projects")
            .join(format!("{name}.toml"));
        let out_arg = out.to_str().expect("utf-8 path");
        let project_arg = project.to_str().expect("utf-8 path");
        let all = [&["build", project_arg, "--out", out_arg], args].concat();
        let started = Instant::now();
        let output = self.command(&all, env).output().expect("runs ipub");
        let elapsed = started.elapsed();
        let stdout = String::from_utf8_lossy(&output.stdout).into_owned();
        let stderr = String::from_utf8_lossy(&output.stderr).into_owned();
        assert!(
            output.status.success(),
            "ipub {all:?} failed\n{stdout}{stderr}"
        );
        let package = std::fs::read(out.join(format!("{name}.ipuexe"))).expect("the package");
        Built {
            stdout,
            stderr,
            package,
            elapsed,
        }
    }
}

/// A fresh output directory.
fn out_dir(parent: &tempfile::TempDir, name: &str) -> PathBuf {
    parent.path().join(name)
}

/// The package a clean local build of `name` writes.
fn clean_package(name: &str) -> Vec<u8> {
    let outs = tempfile::tempdir().expect("temporary directory");
    Machine::new()
        .build(name, &out_dir(&outs, "clean"), &["--no-remote-cache"], &[])
        .package
}

#[test]
fn a_second_machine_builds_vit_fp8_from_the_remote_cache() {
    let Some(server) = Nginx::start() else { return };
    let url = server.url();
    let outs = tempfile::tempdir().expect("temporary directory");
    let clean = clean_package(VIT);

    let first = Machine::new().build(
        VIT,
        &out_dir(&outs, "first"),
        &["--remote-cache", &url, "--explain"],
        &[],
    );
    assert!(first.warnings().is_empty(), "{}", first.stderr);
    assert!(first.recomputed("kernels") > 0, "{}", first.stdout);
    assert!(first.stdout.contains(" uploaded ("), "{}", first.stdout);
    assert!(!server.files("ac").is_empty() && !server.files("cas").is_empty());

    // Another machine, with an empty local store, into another directory:
    // the pipeline runs, but no kernel is compiled and no plan searched
    // here.
    let second = Machine::new().build(
        VIT,
        &out_dir(&outs, "second"),
        &["--remote-cache", &url, "--explain"],
        &[("IPUB_LOG", "info")],
    );
    assert!(second.warnings().is_empty(), "{}", second.stderr);
    for phase in ["plan", "kernels"] {
        assert_eq!(second.recomputed(phase), 0, "{phase}\n{}", second.stdout);
    }
    assert!(
        !second.stderr.contains("compiling kernel"),
        "{}",
        second.stderr
    );
    assert!(second.stdout.contains(" fetched ("), "{}", second.stdout);

    // A third machine builds the same files into the same directory as
    // the first: the stamp says nothing changed, and the package itself
    // comes from the remote.
    let first_package = out_dir(&outs, "first").join("vit-fp8.ipuexe");
    std::fs::remove_file(&first_package).expect("remove the first package");
    let third = Machine::new().build(
        VIT,
        &out_dir(&outs, "first"),
        &["--remote-cache", &url],
        &[],
    );
    assert!(
        third.stdout.contains("is up to date") && third.stdout.contains("from the remote cache"),
        "{}",
        third.stdout
    );

    for (built, what) in [(&first, "first"), (&second, "second"), (&third, "third")] {
        assert!(
            built.package == clean,
            "the {what} package differs from a clean build's"
        );
    }
}

/// Flips a byte in the middle of every blob the server holds, and makes
/// one action result garbage.
fn corrupt(server: &Nginx) {
    for blob in server.files("cas") {
        let mut bytes = std::fs::read(&blob).expect("read blob");
        let middle = bytes.len() / 2;
        if let Some(byte) = bytes.get_mut(middle) {
            *byte ^= 0x5a;
        }
        std::fs::write(&blob, bytes).expect("corrupt blob");
    }
    let action = server.files("ac").into_iter().next().expect("an action");
    std::fs::write(action, b"\x0a\xffnot an action result").expect("corrupt action");
}

#[test]
fn corrupted_remote_entries_are_reported_once_recomputed_and_replaced() {
    let Some(server) = Nginx::start() else { return };
    let url = server.url();
    let outs = tempfile::tempdir().expect("temporary directory");
    let remote = ["--remote-cache", url.as_str(), "--explain"];
    let first = Machine::new().build(MATMUL, &out_dir(&outs, "first"), &remote, &[]);
    corrupt(&server);

    let second = Machine::new().build(MATMUL, &out_dir(&outs, "second"), &remote, &[]);
    let warnings = second.warnings();
    assert_eq!(warnings.len(), 1, "{}", second.stderr);
    assert!(warnings[0].contains("is corrupt"), "{}", second.stderr);
    assert!(second.recomputed("kernels") > 0, "{}", second.stdout);
    assert!(second.recomputed("plan") > 0, "{}", second.stdout);
    assert!(second.package == first.package);

    // What the second machine recomputed was uploaded over the corrupt
    // entries: a third machine computes nothing.
    let third = Machine::new().build(MATMUL, &out_dir(&outs, "third"), &remote, &[]);
    assert!(third.warnings().is_empty(), "{}", third.stderr);
    for phase in ["plan", "kernels"] {
        assert_eq!(third.recomputed(phase), 0, "{phase}\n{}", third.stdout);
    }
    assert!(third.package == first.package);
}

/// Changes the first parameter offset of every kernel's metadata the
/// server holds (`"offset": 4` to `5`): still well-formed JSON that names
/// the right key and object, but no longer the bytes its digest names.
fn damage_kernel_metadata(server: &Nginx) -> usize {
    let mut damaged = 0;
    for blob in server.files("cas") {
        let bytes = std::fs::read(&blob).expect("read blob");
        let Ok(text) = String::from_utf8(bytes) else {
            continue;
        };
        if text.contains("\"object_hash\"") && text.contains("\"offset\": 4") {
            let edited = text.replacen("\"offset\": 4", "\"offset\": 5", 1);
            std::fs::write(&blob, edited).expect("damage blob");
            damaged += 1;
        }
    }
    damaged
}

#[test]
fn blobs_that_do_not_match_their_digest_are_corrupt_and_never_kept() {
    let Some(server) = Nginx::start() else { return };
    let url = server.url();
    let outs = tempfile::tempdir().expect("temporary directory");
    let remote = ["--remote-cache", url.as_str(), "--explain"];
    let first = Machine::new().build(MATMUL, &out_dir(&outs, "first"), &remote, &[]);
    assert!(
        damage_kernel_metadata(&server) > 0,
        "no kernel metadata to damage"
    );

    let second_machine = Machine::new();
    let read_only = [&remote[..], &["--remote-cache-read-only"]].concat();
    let second = second_machine.build(MATMUL, &out_dir(&outs, "second"), &read_only, &[]);
    let warnings = second.warnings();
    assert_eq!(warnings.len(), 1, "{}", second.stderr);
    assert!(warnings[0].contains("SHA-256"), "{}", second.stderr);
    assert!(second.recomputed("kernels") > 0, "{}", second.stdout);
    assert!(second.package == first.package);

    // Nothing damaged reached the local kernel cache: a build from it
    // alone writes the same package.
    let local = second_machine.build(
        MATMUL,
        &out_dir(&outs, "local"),
        &["--no-remote-cache"],
        &[],
    );
    assert!(local.warnings().is_empty(), "{}", local.stderr);
    assert!(local.package == first.package);
}

#[test]
fn a_stopped_server_degrades_to_local_building_with_one_warning() {
    let Some(mut server) = Nginx::start() else {
        return;
    };
    let url = server.url();
    server.stop();
    let outs = tempfile::tempdir().expect("temporary directory");
    let built = Machine::new().build(
        MATMUL,
        &out_dir(&outs, "out"),
        &["--remote-cache", &url],
        &[],
    );
    let warnings = built.warnings();
    assert_eq!(warnings.len(), 1, "{}", built.stderr);
    assert!(warnings[0].contains("building locally"), "{}", built.stderr);
    assert!(
        built.stdout.contains("unavailable, built locally"),
        "{}",
        built.stdout
    );
    assert!(built.package == clean_package(MATMUL));
}

#[test]
fn a_read_only_remote_is_read_and_never_written() {
    let Some(server) = Nginx::start() else { return };
    let url = server.url();
    let outs = tempfile::tempdir().expect("temporary directory");
    let read_only = [
        "--remote-cache",
        url.as_str(),
        "--remote-cache-read-only",
        "--explain",
    ];
    let first = Machine::new().build(MATMUL, &out_dir(&outs, "first"), &read_only, &[]);
    assert_eq!(server.bytes_held(), 0, "a read-only build uploaded");
    assert!(first.warnings().is_empty(), "{}", first.stderr);

    // Filled by a writing build (through the environment this time), the
    // cache serves read-only builds.
    Machine::new().build(
        MATMUL,
        &out_dir(&outs, "writer"),
        &[],
        &[("IPUB_REMOTE_CACHE", &url)],
    );
    let held = server.bytes_held();
    assert!(held > 0);
    let reader = Machine::new().build(MATMUL, &out_dir(&outs, "reader"), &read_only, &[]);
    assert_eq!(reader.recomputed("kernels"), 0, "{}", reader.stdout);
    assert_eq!(server.bytes_held(), held, "a read-only build uploaded");
    assert!(reader.package == first.package);
}

/// Builds matmul-f8 against `server` with a token and the debug log on,
/// and checks that the build degraded with one warning saying
/// `expected_warning`, in bounded time, to the clean package, and that the
/// token shows nowhere.
fn check_degrades(server: &str, expected_warning: &str) -> Built {
    const TOKEN: &str = "tok-3b1d0e9c77f2";
    let outs = tempfile::tempdir().expect("temporary directory");
    let built = Machine::new().build(
        MATMUL,
        &out_dir(&outs, "out"),
        &["--remote-cache", server],
        &[("IPUB_REMOTE_CACHE_TOKEN", TOKEN), ("IPUB_LOG", "debug")],
    );
    let warnings = built.warnings();
    assert_eq!(warnings.len(), 1, "{}", built.stderr);
    assert!(warnings[0].contains(expected_warning), "{}", built.stderr);
    assert!(
        !built.stdout.contains(TOKEN) && !built.stderr.contains(TOKEN),
        "the token was shown"
    );
    // One time-out at most, and the flush at the end does not wait.
    assert!(
        built.elapsed < Duration::from_secs(30),
        "{:?}",
        built.elapsed
    );
    assert!(built.package == clean_package(MATMUL));
    built
}

#[test]
fn servers_that_stall_fail_or_answer_garbage_degrade_to_local_building() {
    let port_nobody_uses = std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .expect("a free port")
        .port();
    check_degrades(
        &format!("http://127.0.0.1:{port_nobody_uses}"),
        "cannot connect",
    );
    let stalling = Stub::start(Behaviour::Stall);
    check_degrades(&stalling.url(), "no answer within the time-out");
    let failing = Stub::start(Behaviour::Error500);
    check_degrades(&failing.url(), "HTTP 500");
    let garbage = Stub::start(Behaviour::Garbage);
    check_degrades(&garbage.url(), "not HTTP");
    let refusing = Stub::start(Behaviour::RefusesWrites);
    check_degrades(&refusing.url(), "refuses uploads (HTTP 405)");
    assert!(refusing
        .requests()
        .iter()
        .any(|r| r.starts_with("PUT /cas/")));
}

#[test]
fn credentials_reach_the_server_and_never_the_output() {
    let refusing = Stub::start(Behaviour::Unauthorized);
    let built = check_degrades(
        &refusing.url(),
        "access refused; check IPUB_REMOTE_CACHE_TOKEN",
    );
    assert!(!built.stdout.is_empty());
    let requests = refusing.requests();
    assert!(
        requests[0].contains("Authorization: Bearer tok-3b1d0e9c77f2\r\n"),
        "{}",
        requests[0]
    );

    // Basic credentials in the URL, with the debug log on.
    let outs = tempfile::tempdir().expect("temporary directory");
    let url = format!("http://alice:pw-91c4e@127.0.0.1:{}", refusing.port);
    let built = Machine::new().build(
        MATMUL,
        &out_dir(&outs, "out"),
        &["--remote-cache", &url, "--log", "debug"],
        &[],
    );
    assert!(!built.stdout.contains("pw-91c4e") && !built.stderr.contains("pw-91c4e"));
    assert!(built
        .stderr
        .contains(&format!("http://127.0.0.1:{}", refusing.port)));
    let basic = refusing.requests().into_iter().last().expect("a request");
    // base64("alice:pw-91c4e")
    assert!(
        basic.contains("Authorization: Basic YWxpY2U6cHctOTFjNGU=\r\n"),
        "{basic}"
    );
}

#[test]
fn the_configuration_file_names_the_remote_and_bad_settings_are_errors() {
    let stub = Stub::start(Behaviour::RefusesWrites);
    let machine = Machine::new();
    let config = machine.dir.path().join("config/ipub/config.toml");
    std::fs::create_dir_all(config.parent().expect("parent")).expect("config directory");
    std::fs::write(
        &config,
        format!("[cache]\nremote = \"{}\"\nread_only = true\n", stub.url()),
    )
    .expect("write config");
    let outs = tempfile::tempdir().expect("temporary directory");
    let built = machine.build(MATMUL, &out_dir(&outs, "out"), &["--explain"], &[]);
    let requests = stub.requests();
    assert!(!requests.is_empty(), "the configured remote was not asked");
    assert!(
        requests.iter().all(|r| r.starts_with("GET ")),
        "read_only = true uploaded"
    );
    assert!(built.warnings().is_empty(), "{}", built.stderr);

    // Settings that cannot work stop the command before it builds.
    let project = Path::new(env!("CARGO_MANIFEST_DIR")).join("projects/matmul-f8.toml");
    let project = project.to_str().expect("utf-8 path");
    let fails = |args: &[&str], env: &[(&str, &str)], expected: &str| {
        let output = machine.command(args, env).output().expect("runs ipub");
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert_eq!(output.status.code(), Some(1), "{stderr}");
        assert!(stderr.contains(expected), "{stderr}");
        assert!(!stderr.contains("panicked"), "{stderr}");
    };
    fails(
        &["build", project, "--remote-cache", "https://cache.example"],
        &[],
        "`https://` is not supported",
    );
    fails(
        &["run", project],
        &[("IPUB_REMOTE_CACHE", "cache.example:8080")],
        "the remote cache URL from IPUB_REMOTE_CACHE is not usable",
    );
    std::fs::write(&config, "[cache]\nremtoe = \"http://h\"\n").expect("write config");
    fails(&["watch", project], &[], "unknown field `remtoe`");
}
