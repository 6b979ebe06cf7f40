//! The HTML profile report in a real browser: the reports of vit-fp8 and of
//! a 1472-tile project open in headless Chromium without console errors,
//! draw the expected timeline rows and heatmap cells, open in under two
//! seconds and stay under 10 MB. Screenshots of each report (the page and
//! its sections) are written to `target/tmp/report-screenshots/`.
//!
//! Chromium is driven through `chromedriver` and the WebDriver protocol
//! (HTTP and JSON over a local socket), so the test needs no browser
//! library. `.ci/run` installs Debian's `chromium` and `chromium-driver`;
//! where they are missing the test says so and passes without checking.

use serde_json::{json, Value};
use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

const CHROMIUM: &str = "/usr/bin/chromium";
const CHROMEDRIVER: &str = "/usr/bin/chromedriver";

fn ipub(args: &[&str], cache: &Path) {
    let output = Command::new(env!("CARGO_BIN_EXE_ipub"))
        .args(args)
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .env("IPUB_CACHE_DIR", cache)
        .env("IPUB_DEVICE_LOCK", cache.join("device.lock"))
        .env("IPUB_LOG", "warn")
        .output()
        .expect("run ipub");
    assert!(
        output.status.success(),
        "ipub {args:?}\n{}\n{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
}

/// Runs `project` on the model and writes its HTML report; returns the
/// report's path and the profile.
fn report_of(project: &str, dir: &Path) -> (PathBuf, Value) {
    let name = Path::new(project).file_stem().unwrap().to_str().unwrap();
    let out = dir.join(name);
    ipub(&["run", project, "--out", out.to_str().unwrap()], dir);
    let profile = out.join(format!("{name}.profile.json"));
    let html = out.join("report.html");
    ipub(
        &[
            "profile",
            profile.to_str().unwrap(),
            "--html",
            html.to_str().unwrap(),
        ],
        dir,
    );
    let profile: Value =
        serde_json::from_slice(&std::fs::read(profile).expect("profile")).expect("json");
    (html, profile)
}

/// The tiles that took part in any step, ascending.
fn used_tiles(profile: &Value) -> Vec<u64> {
    let mut tiles: Vec<u64> = profile["steps"]
        .as_array()
        .unwrap()
        .iter()
        .flat_map(|s| s["tiles"].as_array().unwrap().iter())
        .map(|t| t["tile"].as_u64().unwrap())
        .collect();
    tiles.sort_unstable();
    tiles.dedup();
    tiles
}

/// Rows the timeline shows at first: the steps, then one per group of
/// tiles (groups of a power of two, at least 4, so that there are at most
/// 48), or one per tile for 24 tiles or fewer (`book/src/profile.md`).
fn expected_rows(tiles: usize) -> usize {
    if tiles <= 24 {
        return 1 + tiles;
    }
    let mut size = 4;
    while tiles.div_ceil(size) > 48 {
        size *= 2;
    }
    1 + tiles.div_ceil(size)
}

/// One HTTP/1.1 exchange with the driver; returns the JSON body's `value`.
fn http(port: u16, method: &str, path: &str, body: Option<&Value>) -> Result<Value, String> {
    let mut stream =
        TcpStream::connect(("127.0.0.1", port)).map_err(|e| format!("connect: {e}"))?;
    stream
        .set_read_timeout(Some(Duration::from_secs(120)))
        .map_err(|e| e.to_string())?;
    let payload = body.map(Value::to_string).unwrap_or_default();
    let request = format!(
        "{method} {path} HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nContent-Type: application/json\r\n\
         Content-Length: {}\r\nConnection: close\r\n\r\n{payload}",
        payload.len()
    );
    stream
        .write_all(request.as_bytes())
        .map_err(|e| format!("send: {e}"))?;
    // The driver keeps the connection open after its answer, so the body
    // is read by its length (or its chunks), not to the end of the stream.
    let mut response = Vec::new();
    let mut buffer = [0u8; 64 * 1024];
    let mut receive = |response: &mut Vec<u8>| -> Result<(), String> {
        let n = stream
            .read(&mut buffer)
            .map_err(|e| format!("receive: {e}"))?;
        if n == 0 {
            return Err("the driver closed the connection early".into());
        }
        response.extend_from_slice(&buffer[..n]);
        Ok(())
    };
    let split = loop {
        if let Some(at) = response.windows(4).position(|w| w == b"\r\n\r\n") {
            break at;
        }
        receive(&mut response)?;
    };
    let head = String::from_utf8_lossy(&response[..split]).to_ascii_lowercase();
    let length = head
        .lines()
        .find_map(|l| l.strip_prefix("content-length:"))
        .and_then(|v| v.trim().parse::<usize>().ok());
    let body = loop {
        let body = &response[split + 4..];
        match length {
            Some(n) if body.len() >= n => break body[..n].to_vec(),
            None if body.ends_with(b"0\r\n\r\n") => break unchunk(body)?,
            _ => receive(&mut response)?,
        }
    };
    let status = head.split_whitespace().nth(1).unwrap_or("").to_string();
    let json: Value = serde_json::from_slice(&body)
        .map_err(|e| format!("{method} {path}: status {status}, body is not JSON: {e}"))?;
    if !status.starts_with('2') {
        return Err(format!("{method} {path}: status {status}: {json}"));
    }
    Ok(json["value"].clone())
}

fn unchunk(mut body: &[u8]) -> Result<Vec<u8>, String> {
    let mut out = Vec::new();
    loop {
        let line = body
            .windows(2)
            .position(|w| w == b"\r\n")
            .ok_or("bad chunk")?;
        let size = usize::from_str_radix(
            String::from_utf8_lossy(&body[..line])
                .split(';')
                .next()
                .unwrap_or("")
                .trim(),
            16,
        )
        .map_err(|e| e.to_string())?;
        body = &body[line + 2..];
        if size == 0 {
            return Ok(out);
        }
        out.extend_from_slice(body.get(..size).ok_or("short chunk")?);
        body = body.get(size + 2..).ok_or("short chunk")?;
    }
}

fn base64(text: &str) -> Vec<u8> {
    let value = |c: u8| match c {
        b'A'..=b'Z' => Some(c - b'A'),
        b'a'..=b'z' => Some(c - b'a' + 26),
        b'0'..=b'9' => Some(c - b'0' + 52),
        b'+' => Some(62),
        b'/' => Some(63),
        _ => None,
    };
    let digits: Vec<u8> = text.bytes().filter_map(value).collect();
    digits
        .chunks(4)
        .flat_map(|c| {
            let n = c
                .iter()
                .enumerate()
                .fold(0u32, |n, (i, &d)| n | u32::from(d) << (18 - 6 * i));
            let bytes = n.to_be_bytes();
            bytes[1..c.len()].to_vec()
        })
        .collect()
}

/// A chromedriver process and one browser session.
struct Browser {
    driver: Child,
    port: u16,
    session: String,
    _profile: tempfile::TempDir,
}

impl Browser {
    fn start() -> Browser {
        let port = TcpListener::bind("127.0.0.1:0")
            .and_then(|l| l.local_addr())
            .expect("a free port")
            .port();
        let driver = Command::new(CHROMEDRIVER)
            .arg(format!("--port={port}"))
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("start chromedriver");
        let started = Instant::now();
        while let Err(error) = http(port, "GET", "/status", None) {
            assert!(
                started.elapsed() < Duration::from_secs(30),
                "chromedriver did not start: {error}"
            );
            std::thread::sleep(Duration::from_millis(100));
        }
        let user_data = tempfile::tempdir().expect("browser profile directory");
        let args = [
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--disable-dev-shm-usage",
            "--disable-quic",
            "--no-first-run",
            "--disable-background-networking",
            "--disable-component-update",
            "--disable-sync",
            "--hide-scrollbars",
            &format!("--user-data-dir={}", user_data.path().display()),
        ];
        let capabilities = json!({"capabilities": {"alwaysMatch": {
            "browserName": "chrome",
            "goog:chromeOptions": {"binary": CHROMIUM, "args": args},
            "goog:loggingPrefs": {"browser": "ALL"},
        }}});
        let session = http(port, "POST", "/session", Some(&capabilities))
            .expect("a browser session")["sessionId"]
            .as_str()
            .expect("a session id")
            .to_string();
        let browser = Browser {
            driver,
            port,
            session,
            _profile: user_data,
        };
        browser.call(
            "POST",
            "window/rect",
            Some(json!({"width": 1400, "height": 1000})),
        );
        browser
    }

    fn call(&self, method: &str, what: &str, body: Option<Value>) -> Value {
        let path = format!("/session/{}/{what}", self.session);
        http(self.port, method, &path, body.as_ref()).unwrap_or_else(|e| panic!("{e}"))
    }

    fn script(&self, script: &str) -> Value {
        self.call(
            "POST",
            "execute/sync",
            Some(json!({"script": script, "args": []})),
        )
    }

    /// Browser console entries since the last call.
    fn console(&self) -> Vec<Value> {
        let path = format!("/session/{}/se/log", self.session);
        let body = json!({"type": "browser"});
        let entries = http(self.port, "POST", &path, Some(&body))
            .or_else(|_| {
                let legacy = format!("/session/{}/log", self.session);
                http(self.port, "POST", &legacy, Some(&body))
            })
            .expect("the browser's console log");
        entries.as_array().cloned().unwrap_or_default()
    }

    fn save_screenshot(&self, what: &str, to: &Path) {
        let png = base64(self.call("GET", what, None).as_str().expect("base64 PNG"));
        assert!(png.starts_with(b"\x89PNG"), "a PNG screenshot");
        std::fs::write(to, png).expect("write screenshot");
    }
}

impl Drop for Browser {
    fn drop(&mut self) {
        let _ = http(
            self.port,
            "DELETE",
            &format!("/session/{}", self.session),
            None,
        );
        let _ = self.driver.kill();
        let _ = self.driver.wait();
    }
}

/// Opens `html` and checks what it drew; saves screenshots as `name`.
fn check_report(browser: &Browser, name: &str, html: &Path, profile: &Value) {
    let bytes = std::fs::metadata(html).expect("report").len();
    assert!(bytes < 10 << 20, "{name}: the report is {bytes} bytes");
    let _ = browser.console();
    let url = format!("file://{}", html.display());
    let opened = Instant::now();
    browser.call("POST", "url", Some(json!({ "url": url })));
    let wall = opened.elapsed();
    let load_ms = browser
        .script("return performance.getEntriesByType('navigation')[0].loadEventEnd;")
        .as_f64()
        .expect("navigation timing");
    println!(
        "{name}: {bytes} bytes, loaded and drawn in {load_ms:.0} ms ({} ms to navigate)",
        wall.as_millis()
    );
    assert!(
        load_ms < 2000.0,
        "{name}: the report took {load_ms} ms to open"
    );
    let errors: Vec<Value> = browser
        .console()
        .into_iter()
        .filter(|e| e["level"] == "SEVERE")
        .collect();
    assert!(errors.is_empty(), "{name}: console errors {errors:?}");

    let drawn = browser.script(
        "const r = window.ipubReport; return {ready: r.ready, timeline: r.timeline, \
         heatmaps: r.heatmaps, memory: r.memory, \
         labels: document.querySelectorAll('#tl-labels .tl-row').length, \
         cells: Array.from(document.querySelectorAll('canvas.heat')).map(c => Number(c.dataset.cells))};",
    );
    assert_eq!(drawn["ready"], true, "{name}: {drawn}");
    let tiles = used_tiles(profile);
    let rows = expected_rows(tiles.len());
    assert_eq!(drawn["labels"], rows, "{name}: timeline row labels");
    assert_eq!(drawn["timeline"]["rows"], rows, "{name}: timeline rows");
    assert_eq!(drawn["timeline"]["tiles"], tiles.len(), "{name}");
    assert!(
        drawn["timeline"]["bars"].as_u64().unwrap_or(0) > 0,
        "{name}"
    );
    assert_eq!(drawn["cells"], json!([1472, 1472, 1472, 1472]), "{name}");
    let heatmaps = drawn["heatmaps"].as_array().expect("heatmaps");
    assert_eq!(heatmaps.len(), 4, "{name}");
    assert!(heatmaps.iter().all(|h| h["cells"] == 1472), "{name}");
    assert!(
        drawn["memory"]["buffers"].as_u64().unwrap_or(0) > 0,
        "{name}"
    );

    // A used tile and an unused one differ on the busy heatmap (cells are
    // 10 pixels: the centre of tile t is at (t % 64 * 10 + 6, t / 64 * 10 + 6)).
    let unused = (0..1472u64).find(|t| !tiles.contains(t));
    let pixel = |tile: u64| {
        browser.script(&format!(
            "const c = document.getElementById('heat-busy'); const r = window.devicePixelRatio || 1; \
             return Array.from(c.getContext('2d').getImageData(({} % 64 * 10 + 6) * r, (Math.floor({} / 64) * 10 + 6) * r, 1, 1).data);",
            tile, tile
        ))
    };
    if let Some(unused) = unused {
        assert_eq!(pixel(unused), json!([233, 236, 241, 255]), "{name}: unused");
        assert_ne!(pixel(tiles[0]), pixel(unused), "{name}: used tile drawn");
    }

    // Scrolling over the timeline zooms in around the pointer; hovering a
    // tile row shows that tile's part in the step under the pointer.
    let zoom = browser.script(
        "const c = document.getElementById('tl-canvas'); const r = c.getBoundingClientRect(); \
         const before = window.ipubReport.timeline.view.slice(); \
         for (let i = 0; i < 5; i++) c.dispatchEvent(new WheelEvent('wheel', {deltaY: -100, \
           clientX: r.left + r.width / 4, clientY: r.top + 5, bubbles: true, cancelable: true})); \
         const after = window.ipubReport.timeline.view.slice(); \
         c.dispatchEvent(new MouseEvent('mousemove', \
           {clientX: r.left + r.width / 2, clientY: r.top + 18 + 9, bubbles: true})); \
         const tip = document.getElementById('tooltip'); \
         return [before, after, tip.hidden, tip.textContent];",
    );
    let span = |v: &Value| v[1].as_f64().unwrap() - v[0].as_f64().unwrap();
    assert!(
        span(&zoom[1]) < span(&zoom[0]) * 0.6,
        "{name}: scrolling zooms in: {zoom}"
    );
    assert_eq!(zoom[2], false, "{name}: a tooltip shows: {zoom}");
    assert!(
        zoom[3].as_str().is_some_and(|t| t.contains("cycles")),
        "{name}: {zoom}"
    );
    browser.script("document.getElementById('tl-reset').click(); return 0;");

    // Expanding a group of tiles adds a row per tile.
    if tiles.len() > 24 {
        let expanded = browser.script(
            "const before = document.querySelectorAll('#tl-labels .tl-row').length; \
             const group = document.querySelector('#tl-labels .tl-row.group'); \
             const size = Number(group.querySelector('.dim').textContent.replace(/[()]/g, '')); \
             group.click(); \
             return [before, size, document.querySelectorAll('#tl-labels .tl-row').length];",
        );
        let (before, size, after) = (&expanded[0], &expanded[1], &expanded[2]);
        assert_eq!(
            after.as_u64(),
            Some(before.as_u64().unwrap() + size.as_u64().unwrap()),
            "{name}: {expanded}"
        );
    }
    // The screenshots show the first iteration or so of the run, with the
    // first group of tiles open, and no tooltip.
    browser.script(
        "document.getElementById('tooltip').hidden = true; \
         const c = document.getElementById('tl-canvas'); const r = c.getBoundingClientRect(); \
         for (let i = 0; i < 6; i++) c.dispatchEvent(new WheelEvent('wheel', {deltaY: -100, \
           clientX: r.left, clientY: r.top + 5, bubbles: true, cancelable: true})); \
         return 0;",
    );
    let errors: Vec<Value> = browser
        .console()
        .into_iter()
        .filter(|e| e["level"] == "SEVERE")
        .collect();
    assert!(errors.is_empty(), "{name}: console errors {errors:?}");

    let shots = Path::new(env!("CARGO_TARGET_TMPDIR")).join("report-screenshots");
    std::fs::create_dir_all(&shots).expect("screenshot directory");
    browser.save_screenshot("screenshot", &shots.join(format!("{name}.png")));
    for section in ["summary", "timeline", "chip", "memory", "operations"] {
        // An element's screenshot holds what the window shows of it: make
        // the window tall enough, then bring the section to the top.
        let height = browser
            .script(&format!(
                "return document.getElementById('{section}').getBoundingClientRect().height;"
            ))
            .as_f64()
            .unwrap_or(0.0);
        browser.call(
            "POST",
            "window/rect",
            Some(json!({"width": 1400, "height": (height as u64 + 200).max(1000)})),
        );
        browser.script(&format!(
            "document.getElementById('{section}').scrollIntoView(); return 0;"
        ));
        let element = browser.call(
            "POST",
            "element",
            Some(json!({"using": "css selector", "value": format!("#{section}")})),
        );
        let id = element
            .as_object()
            .and_then(|o| o.values().next())
            .and_then(Value::as_str)
            .expect("an element id")
            .to_string();
        browser.save_screenshot(
            &format!("element/{id}/screenshot"),
            &shots.join(format!("{name}-{section}.png")),
        );
    }
    browser.call(
        "POST",
        "window/rect",
        Some(json!({"width": 1400, "height": 1000})),
    );
    println!("{name}: screenshots in {}", shots.display());
}

#[test]
fn reports_render_in_a_real_browser() {
    if !Path::new(CHROMIUM).exists() || !Path::new(CHROMEDRIVER).exists() {
        eprintln!(
            "SKIPPED reports_render_in_a_real_browser: {CHROMIUM} or {CHROMEDRIVER} is missing \
             (apt-get install chromium chromium-driver; .ci/run installs them)"
        );
        return;
    }
    let dir = tempfile::tempdir().expect("temporary directory");
    let reports = [
        ("vit-fp8", report_of("projects/vit-fp8.toml", dir.path())),
        (
            "chip-1472",
            report_of("tests/data/projects/chip/chip-1472.toml", dir.path()),
        ),
    ];
    let browser = Browser::start();
    for (name, (html, profile)) in &reports {
        check_report(&browser, name, html, profile);
    }

    // A version 1 profile (steps only) still makes a working report.
    let (_, (_, vit)) = &reports[0];
    let mut old = vit.clone();
    let fields = old.as_object_mut().expect("a profile object");
    for field in ["build", "ops", "tiles"] {
        fields.remove(field);
    }
    fields.insert("format_version".into(), json!(1));
    let old_profile = dir.path().join("old.profile.json");
    std::fs::write(&old_profile, old.to_string()).expect("write");
    let old_html = dir.path().join("old.html");
    ipub(
        &[
            "profile",
            old_profile.to_str().unwrap(),
            "--html",
            old_html.to_str().unwrap(),
        ],
        dir.path(),
    );
    let _ = browser.console();
    let url = format!("file://{}", old_html.display());
    browser.call("POST", "url", Some(json!({ "url": url })));
    let errors: Vec<Value> = browser
        .console()
        .into_iter()
        .filter(|e| e["level"] == "SEVERE")
        .collect();
    assert!(errors.is_empty(), "version 1: console errors {errors:?}");
    let drawn = browser.script(
        "return [window.ipubReport.ready, window.ipubReport.timeline.rows,          window.ipubReport.heatmaps.map(h => h.cells)];",
    );
    assert_eq!(
        drawn,
        json!([
            true,
            expected_rows(used_tiles(vit).len()),
            [1472, 1472, 1472, 1472]
        ]),
        "version 1"
    );
}

#[test]
fn base64_decodes() {
    assert_eq!(base64("aXB1Yg=="), b"ipub");
    assert_eq!(base64("aXB1YnM="), b"ipubs");
    assert_eq!(base64("aXB1YnMh"), b"ipubs!");
}
