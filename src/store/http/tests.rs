use super::*;
use expect_test::{expect, Expect};
use std::net::TcpListener;
use std::sync::atomic::{AtomicUsize, Ordering};

/// Parses `url` (with `auth` from the environment) and shows the endpoint
/// and where a request would go, or the error.
fn check_url(url: &str, auth: Option<Credentials>, expected: Expect) {
    let shown = match Endpoint::parse(url, auth) {
        Ok(endpoint) => format!(
            "{endpoint:?} host={} port={} prefix={:?} auth={:?}",
            endpoint.host_header(),
            endpoint.port,
            endpoint.prefix,
            endpoint.auth.as_ref().map(Credentials::header)
        ),
        Err(error) => format!("error: {error}"),
    };
    expected.assert_eq(&shown);
}

#[test]
fn urls_parse_into_endpoints_that_never_show_credentials() {
    check_url(
        "http://127.0.0.1:8080",
        None,
        expect![[
            r#"Endpoint(http://127.0.0.1:8080) host=127.0.0.1:8080 port=8080 prefix="" auth=None"#
        ]],
    );
    check_url(
        "HTTP://cache.example/team/ipub/",
        None,
        expect![[
            r#"Endpoint(http://cache.example/team/ipub) host=cache.example port=80 prefix="/team/ipub" auth=None"#
        ]],
    );
    check_url(
        "http://[::1]:9090/",
        None,
        expect![[r#"Endpoint(http://[::1]:9090) host=[::1]:9090 port=9090 prefix="" auth=None"#]],
    );
    check_url(
        "http://alice:p%40ss:word@cache:81",
        None,
        expect![[
            r#"Endpoint(http://cache:81 with credentials) host=cache:81 port=81 prefix="" auth=Some("Basic YWxpY2U6cEBzczp3b3Jk")"#
        ]],
    );
    check_url(
        "http://alice:secret@cache",
        Some(Credentials::Bearer("t0ken".into())),
        expect![[
            r#"Endpoint(http://cache with credentials) host=cache port=80 prefix="" auth=Some("Bearer t0ken")"#
        ]],
    );
    check_url(
        "https://cache",
        None,
        expect!["error: `https://` is not supported: use an `http://` URL (a TLS proxy on this machine can reach an `https://` cache)"],
    );
    check_url(
        "cache:8080",
        None,
        expect!["error: it is not a URL: it must start with `http://`"],
    );
    check_url("http://", None, expect!["error: it has no host"]);
    check_url("http://:80/x", None, expect!["error: it has no host"]);
    check_url(
        "http://h:0",
        None,
        expect!["error: its port `0` is not a number from 1 to 65535"],
    );
    check_url(
        "http://h:x",
        None,
        expect!["error: its port `x` is not a number from 1 to 65535"],
    );
    check_url(
        "http://bad host",
        None,
        expect!["error: its host `bad host` is not a host name or an IP address"],
    );
    check_url(
        "http://[nope]:80",
        None,
        expect!["error: its host `[nope]:80` is not a host name or an IP address"],
    );
    check_url(
        "http://h/a b",
        None,
        expect!["error: its path holds characters a request line cannot carry (spaces, quotes, controls or non-ASCII)"],
    );
    check_url(
        "http://h/?x=1",
        None,
        expect!["error: queries and fragments (`?`, `#`) are not supported"],
    );
    check_url(
        "http://h",
        Some(Credentials::Bearer("a\r\nX-Injected: 1".into())),
        expect!["error: its credentials are not valid in an HTTP header"],
    );
}

#[test]
fn base64_follows_rfc_4648() {
    for (input, expected) in [
        ("", ""),
        ("f", "Zg=="),
        ("fo", "Zm8="),
        ("foo", "Zm9v"),
        ("foob", "Zm9vYg=="),
        ("fooba", "Zm9vYmE="),
        ("foobar", "Zm9vYmFy"),
    ] {
        assert_eq!(base64(input.as_bytes()), expected);
    }
}

/// What the scripted server does with one request.
enum Reply {
    /// Sends these bytes and keeps the connection open for the next
    /// request.
    Send(Vec<u8>),
    /// Sends these bytes and closes the connection.
    SendAndClose(Vec<u8>),
    /// Reads the request and never answers.
    Stall,
}

/// A server on 127.0.0.1 answering each request with `reply(n, head,
/// body)` (n counts requests from 0); it counts the connections it
/// accepted and keeps every request's head.
struct Scripted {
    port: u16,
    connections: Arc<AtomicUsize>,
    heads: Arc<Mutex<Vec<String>>>,
}

impl Scripted {
    fn start(reply: impl Fn(usize, &str, &[u8]) -> Reply + Send + Sync + 'static) -> Scripted {
        let listener = TcpListener::bind("127.0.0.1:0").expect("bind");
        let port = listener.local_addr().expect("address").port();
        let connections = Arc::new(AtomicUsize::new(0));
        let heads = Arc::new(Mutex::new(Vec::new()));
        let reply = Arc::new(reply);
        let requests = Arc::new(AtomicUsize::new(0));
        {
            let (connections, heads) = (connections.clone(), heads.clone());
            std::thread::spawn(move || {
                for stream in listener.incoming() {
                    let Ok(stream) = stream else { return };
                    connections.fetch_add(1, Ordering::SeqCst);
                    let (reply, heads, requests) = (reply.clone(), heads.clone(), requests.clone());
                    std::thread::spawn(move || serve(stream, &*reply, &heads, &requests));
                }
            });
        }
        Scripted {
            port,
            connections,
            heads,
        }
    }

    fn client(&self, timeouts: Timeouts) -> Client {
        let endpoint =
            Endpoint::parse(&format!("http://127.0.0.1:{}/pre", self.port), None).expect("url");
        Client::new(endpoint, timeouts)
    }
}

fn serve(
    stream: TcpStream,
    reply: &(dyn Fn(usize, &str, &[u8]) -> Reply + Send + Sync),
    heads: &Mutex<Vec<String>>,
    requests: &AtomicUsize,
) {
    let mut reader = BufReader::new(stream);
    loop {
        let mut head = String::new();
        loop {
            let mut line = String::new();
            match reader.read_line(&mut line) {
                Ok(0) | Err(_) => return,
                Ok(_) => {}
            }
            head.push_str(&line);
            if line == "\r\n" {
                break;
            }
        }
        let length = head
            .lines()
            .find_map(|l| l.strip_prefix("Content-Length: "))
            .and_then(|n| n.trim().parse::<usize>().ok())
            .unwrap_or(0);
        let mut body = vec![0; length];
        if reader.read_exact(&mut body).is_err() {
            return;
        }
        heads.lock().expect("heads").push(head.clone());
        let n = requests.fetch_add(1, Ordering::SeqCst);
        match reply(n, &head, &body) {
            Reply::Send(bytes) => {
                if reader.get_mut().write_all(&bytes).is_err() {
                    return;
                }
            }
            Reply::SendAndClose(bytes) => {
                let _ = reader.get_mut().write_all(&bytes);
                return;
            }
            Reply::Stall => {
                std::thread::sleep(Duration::from_secs(30));
                return;
            }
        }
    }
}

fn ok(body: &str) -> Vec<u8> {
    format!(
        "HTTP/1.1 200 OK\r\nContent-Length: {}\r\n\r\n{body}",
        body.len()
    )
    .into_bytes()
}

fn quick() -> Timeouts {
    Timeouts {
        connect: Duration::from_millis(500),
        request: Duration::from_millis(500),
        per_mib: Duration::from_millis(100),
    }
}

#[test]
fn bodies_arrive_by_length_chunks_or_close_over_one_kept_connection() {
    let server = Scripted::start(|n, _, _| {
        match n {
        0 => Reply::Send(ok("hello")),
        1 => Reply::Send(
            b"HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n3;x=y\r\nabc\r\n2\r\nde\r\n0\r\nT: 1\r\n\r\n"
                .to_vec(),
        ),
        2 => Reply::Send(b"HTTP/1.1 204 No Content\r\nContent-Length: 99\r\n\r\n".to_vec()),
        _ => Reply::SendAndClose(b"HTTP/1.0 200 OK\r\n\r\nuntil close".to_vec()),
    }
    });
    let client = server.client(quick());
    let body = |r: Result<Response, HttpError>| {
        let r = r.expect("answered");
        (r.status, String::from_utf8(r.body).expect("text"))
    };
    assert_eq!(body(client.get("/cas/a", 100)), (200, "hello".into()));
    assert_eq!(body(client.get("/cas/b", 100)), (200, "abcde".into()));
    assert_eq!(body(client.put("/cas/c", b"data")), (204, String::new()));
    assert_eq!(body(client.get("/cas/d", 100)), (200, "until close".into()));
    assert_eq!(
        server.connections.load(Ordering::SeqCst),
        1,
        "one kept-alive connection"
    );
    let heads = server.heads.lock().expect("heads").clone();
    assert!(heads[0].starts_with("GET /pre/cas/a HTTP/1.1\r\nHost: 127.0.0.1:"));
    assert!(heads[2].starts_with("PUT /pre/cas/c HTTP/1.1\r\n"));
    assert!(heads[2].contains("Content-Length: 4\r\n"));
    assert!(!heads[0].contains("Authorization"));
}

#[test]
fn a_connection_the_server_closed_is_retried_once() {
    let server = Scripted::start(|_, _, _| Reply::SendAndClose(ok("x")));
    let client = server.client(quick());
    for _ in 0..3 {
        assert_eq!(client.get("/ac/k", 10).expect("answered").body, b"x");
    }
}

#[test]
fn credentials_go_into_the_authorization_header() {
    let server = Scripted::start(|_, _, _| Reply::Send(ok("")));
    let endpoint = Endpoint::parse(
        &format!("http://127.0.0.1:{}", server.port),
        Some(Credentials::Basic {
            user: "alice".into(),
            password: "pw".into(),
        }),
    )
    .expect("url");
    Client::new(endpoint, quick())
        .get("/ac/k", 10)
        .expect("answered");
    let heads = server.heads.lock().expect("heads").clone();
    assert!(
        heads[0].contains("Authorization: Basic YWxpY2U6cHc=\r\n"),
        "{}",
        heads[0]
    );
}

#[test]
fn stalls_garbage_and_oversized_answers_are_bounded_errors() {
    let server = Scripted::start(|n, _, _| match n {
        0 => Reply::Stall,
        1 => Reply::SendAndClose(b"SSH-2.0-OpenSSH_9.2\r\n".to_vec()),
        2 => Reply::Send(ok("0123456789")),
        3 => Reply::SendAndClose(b"HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\nshort".to_vec()),
        _ => Reply::SendAndClose(b"HTTP/1.1 200 OK\r\nContent-Length: nine\r\n\r\n".to_vec()),
    });
    let client = server.client(quick());
    let started = Instant::now();
    let error = client.get("/ac/stall", 100).expect_err("stalls");
    assert!(matches!(error, HttpError::Timeout(_)), "{error}");
    assert!(
        started.elapsed() < Duration::from_secs(2),
        "{:?}",
        started.elapsed()
    );
    let error = client.get("/ac/garbage", 100).expect_err("garbage");
    expect!["the server's answer is not HTTP/1.x: status line `SSH-2.0-OpenSSH_9.2`"]
        .assert_eq(&error.to_string());
    let error = client.get("/ac/large", 5).expect_err("too large");
    expect!["the answer's body is larger than 5 bytes"].assert_eq(&error.to_string());
    let error = client.get("/ac/short", 100).expect_err("truncated");
    expect!["the answer ends early"].assert_eq(&error.to_string());
    let error = client.get("/ac/bad-length", 100).expect_err("bad length");
    expect!["the server's answer is not HTTP/1.x: Content-Length `nine`"]
        .assert_eq(&error.to_string());
}

#[test]
fn nobody_listening_is_a_quick_connect_error() {
    let port = TcpListener::bind("127.0.0.1:0")
        .expect("bind")
        .local_addr()
        .expect("address")
        .port();
    let endpoint = Endpoint::parse(&format!("http://127.0.0.1:{port}"), None).expect("url");
    let started = Instant::now();
    let error = Client::new(endpoint, quick())
        .get("/ac/k", 10)
        .expect_err("nobody listens");
    assert!(matches!(error, HttpError::Connect(_)), "{error}");
    assert!(started.elapsed() < Duration::from_secs(1));
}
