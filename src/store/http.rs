//! A small HTTP/1.1 client for the remote cache: `GET` and `PUT` of whole
//! bodies over plain `http://`, with bounded time and memory.
//!
//! Every request has a deadline (a few seconds plus time for its body), and
//! every socket read and write waits at most until it, so a server that
//! stalls or trickles bytes costs a bounded wait. Connecting waits at most
//! [`Timeouts::connect`], and so does resolving the host name (on a helper
//! thread, since the system resolver has no time-out of its own).
//! Responses are read within limits: the status line and headers together
//! at most [`MAX_HEAD_BYTES`], the body at most what the caller allows.
//! Connections are kept alive and reused; a reused connection that the
//! server has closed meanwhile is retried once on a new one.
//!
//! Credentials go into the `Authorization` header and nowhere else: the
//! [`Endpoint`]'s `Display` and `Debug` never show them, and no error
//! carries a request's headers.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpStream, ToSocketAddrs};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// The most bytes of a response's status line and headers.
pub(super) const MAX_HEAD_BYTES: usize = 64 << 10;

/// The most bytes of an error response's body read to keep its connection.
const MAX_ERROR_BODY_BYTES: u64 = 64 << 10;

/// The most idle connections kept.
const MAX_IDLE: usize = 8;

/// Where the cache is: host, port, a path prefix, and credentials.
#[derive(Clone, PartialEq, Eq)]
pub(crate) struct Endpoint {
    host: String,
    port: u16,
    /// The path every request starts with: empty, or `/` plus segments
    /// without a trailing slash.
    prefix: String,
    auth: Option<Credentials>,
}

/// How requests authenticate.
#[derive(Clone, PartialEq, Eq)]
pub(super) enum Credentials {
    Bearer(String),
    Basic { user: String, password: String },
}

impl Credentials {
    fn header(&self) -> String {
        match self {
            Credentials::Bearer(token) => format!("Bearer {token}"),
            Credentials::Basic { user, password } => {
                format!("Basic {}", base64(format!("{user}:{password}").as_bytes()))
            }
        }
    }

    /// Whether the value can go into a header line: visible ASCII or
    /// spaces for basic credentials (encoded), no control characters.
    fn is_valid(&self) -> bool {
        let visible = |s: &str| s.bytes().all(|b| b.is_ascii_graphic());
        match self {
            Credentials::Bearer(token) => !token.is_empty() && visible(token),
            Credentials::Basic { user, password } => {
                !user.contains(':') && !format!("{user}{password}").chars().any(char::is_control)
            }
        }
    }
}

/// Why a cache URL is not usable.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub(crate) enum UrlError {
    #[error("`{scheme}://` is not supported: use an `http://` URL (a TLS proxy on this machine can reach an `https://` cache)")]
    Scheme { scheme: String },
    #[error("it is not a URL: it must start with `http://`")]
    NotAUrl,
    #[error("it has no host")]
    NoHost,
    #[error("its host `{0}` is not a host name or an IP address")]
    BadHost(String),
    #[error("its port `{0}` is not a number from 1 to 65535")]
    BadPort(String),
    #[error("its path holds characters a request line cannot carry (spaces, quotes, controls or non-ASCII)")]
    BadPath,
    #[error("queries and fragments (`?`, `#`) are not supported")]
    Query,
    #[error("its credentials are not valid in an HTTP header")]
    BadCredentials,
}

impl Endpoint {
    /// Parses `http://[user[:password]@]host[:port][/prefix]`. Credentials
    /// in the URL are percent-decoded; `auth` (from the environment)
    /// replaces them when given.
    pub(super) fn parse(url: &str, auth: Option<Credentials>) -> Result<Endpoint, UrlError> {
        let url = url.trim();
        let Some((scheme, rest)) = url.split_once("://") else {
            return Err(UrlError::NotAUrl);
        };
        if !scheme.eq_ignore_ascii_case("http") {
            return Err(UrlError::Scheme {
                scheme: scheme.chars().take(16).collect(),
            });
        }
        if rest.contains(['?', '#']) {
            return Err(UrlError::Query);
        }
        let (authority, path) = match rest.find('/') {
            Some(at) => rest.split_at(at),
            None => (rest, ""),
        };
        let (userinfo, hostport) = match authority.rfind('@') {
            Some(at) => (Some(&authority[..at]), &authority[at + 1..]),
            None => (None, authority),
        };
        let (host, port) = split_host_port(hostport)?;
        let prefix = path.trim_end_matches('/');
        let path_char = |c: char| c.is_ascii_graphic() && !matches!(c, '"' | '<' | '>' | '\\');
        if !prefix.chars().all(path_char) {
            return Err(UrlError::BadPath);
        }
        let from_url = userinfo.map(|info| {
            let (user, password) = info.split_once(':').unwrap_or((info, ""));
            Credentials::Basic {
                user: percent_decode(user),
                password: percent_decode(password),
            }
        });
        let auth = auth.or(from_url);
        if auth.as_ref().is_some_and(|a| !a.is_valid()) {
            return Err(UrlError::BadCredentials);
        }
        Ok(Endpoint {
            host,
            port,
            prefix: prefix.to_string(),
            auth,
        })
    }

    fn host_header(&self) -> String {
        if self.port == 80 {
            self.host.clone()
        } else {
            format!("{}:{}", self.host, self.port)
        }
    }
}

/// The URL without credentials: what logs and messages show.
impl std::fmt::Display for Endpoint {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "http://{}{}", self.host_header(), self.prefix)
    }
}

impl std::fmt::Debug for Endpoint {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Endpoint({self}")?;
        if self.auth.is_some() {
            write!(f, " with credentials")?;
        }
        write!(f, ")")
    }
}

fn split_host_port(hostport: &str) -> Result<(String, u16), UrlError> {
    let (host, port) = if let Some(rest) = hostport.strip_prefix('[') {
        let (inside, after) = rest
            .split_once(']')
            .ok_or_else(|| UrlError::BadHost(hostport.to_string()))?;
        if inside.parse::<std::net::Ipv6Addr>().is_err() {
            return Err(UrlError::BadHost(hostport.to_string()));
        }
        let port = match after.strip_prefix(':') {
            Some(port) => Some(port),
            None if after.is_empty() => None,
            None => return Err(UrlError::BadHost(hostport.to_string())),
        };
        (format!("[{inside}]"), port)
    } else {
        match hostport.rsplit_once(':') {
            Some((host, port)) => (host.to_string(), Some(port)),
            None => (hostport.to_string(), None),
        }
    };
    if host.is_empty() {
        return Err(UrlError::NoHost);
    }
    let name_char = |c: char| c.is_ascii_alphanumeric() || matches!(c, '.' | '-' | '_');
    if !host.starts_with('[') && !host.chars().all(name_char) {
        return Err(UrlError::BadHost(host.chars().take(64).collect()));
    }
    let port = match port {
        None => 80,
        Some(text) => text
            .parse::<u16>()
            .ok()
            .filter(|&p| p != 0)
            .ok_or_else(|| UrlError::BadPort(text.chars().take(16).collect()))?,
    };
    Ok((host, port))
}

fn percent_decode(text: &str) -> String {
    let bytes = text.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        let hex = |b: u8| char::from(b).to_digit(16);
        if bytes[i] == b'%' && i + 2 < bytes.len() {
            if let (Some(hi), Some(lo)) = (hex(bytes[i + 1]), hex(bytes[i + 2])) {
                out.push((hi * 16 + lo) as u8);
                i += 3;
                continue;
            }
        }
        out.push(bytes[i]);
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// Standard base64 with padding (RFC 4648), for basic authentication.
pub(super) fn base64(bytes: &[u8]) -> String {
    const ALPHABET: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    let mut out = String::with_capacity(bytes.len().div_ceil(3) * 4);
    for chunk in bytes.chunks(3) {
        let word = chunk
            .iter()
            .enumerate()
            .fold(0u32, |w, (i, &b)| w | u32::from(b) << (16 - 8 * i));
        for i in 0..4 {
            if i <= chunk.len() {
                out.push(char::from(ALPHABET[(word >> (18 - 6 * i) & 63) as usize]));
            } else {
                out.push('=');
            }
        }
    }
    out
}

/// How long to wait.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Timeouts {
    /// For name resolution and for connecting.
    pub connect: Duration,
    /// For a whole request with a small body.
    pub request: Duration,
    /// Added to a request's deadline per MiB of body sent or announced.
    pub per_mib: Duration,
}

impl Default for Timeouts {
    fn default() -> Timeouts {
        Timeouts {
            connect: Duration::from_secs(1),
            request: Duration::from_secs(5),
            per_mib: Duration::from_secs(1),
        }
    }
}

/// Why a request failed. None of them names the request's headers.
#[derive(Debug, thiserror::Error)]
pub(super) enum HttpError {
    #[error("cannot resolve the host: {0}")]
    Resolve(String),
    #[error("resolving the host took longer than {0:?}")]
    ResolveTimeout(Duration),
    #[error("cannot connect: {0}")]
    Connect(std::io::Error),
    #[error("no answer within the time-out ({0:.1?})")]
    Timeout(Duration),
    #[error("{0}")]
    Io(std::io::Error),
    #[error("the server's answer is not HTTP/1.x: {0}")]
    Protocol(String),
    #[error("the answer's body is larger than {limit} bytes")]
    TooLarge { limit: u64 },
}

/// A response: its status and body.
#[derive(Debug)]
pub(super) struct Response {
    pub status: u16,
    pub body: Vec<u8>,
}

/// A client for one endpoint, shared by every thread of the process.
#[derive(Debug)]
pub(crate) struct Client {
    endpoint: Endpoint,
    timeouts: Timeouts,
    addresses: Mutex<Option<Arc<[SocketAddr]>>>,
    idle: Mutex<Vec<Connection>>,
}

#[derive(Debug)]
struct Connection {
    reader: BufReader<TcpStream>,
}

impl Client {
    pub(crate) fn new(endpoint: Endpoint, timeouts: Timeouts) -> Client {
        Client {
            endpoint,
            timeouts,
            addresses: Mutex::default(),
            idle: Mutex::default(),
        }
    }

    pub(crate) fn endpoint(&self) -> &Endpoint {
        &self.endpoint
    }

    /// `GET prefix/path`, reading a body of at most `limit` bytes when the
    /// status is 200.
    pub(super) fn get(&self, path: &str, limit: u64) -> Result<Response, HttpError> {
        self.request("GET", path, &[], limit)
    }

    /// `PUT prefix/path` with `body`.
    pub(super) fn put(&self, path: &str, body: &[u8]) -> Result<Response, HttpError> {
        self.request("PUT", path, body, MAX_ERROR_BODY_BYTES)
    }

    fn request(
        &self,
        method: &str,
        path: &str,
        body: &[u8],
        limit: u64,
    ) -> Result<Response, HttpError> {
        let started = Instant::now();
        let deadline = started + self.timeouts.request + self.body_time(body.len() as u64);
        let reused = self.idle.lock().expect("connection pool lock").pop();
        if let Some(connection) = reused {
            match self.exchange(connection, method, path, body, limit, deadline) {
                Err(Failure {
                    error,
                    answered: false,
                }) if !matches!(error, HttpError::Timeout(_)) => {
                    // The server closed the idle connection; a new one is
                    // worth one more try.
                    tracing::debug!(%error, "a kept-alive connection failed; reconnecting");
                }
                other => return other.map_err(|f| f.error),
            }
        }
        let connection = self.connect(deadline)?;
        self.exchange(connection, method, path, body, limit, deadline)
            .map_err(|f| f.error)
    }

    fn body_time(&self, bytes: u64) -> Duration {
        self.timeouts
            .per_mib
            .saturating_mul(u32::try_from(bytes.div_ceil(1 << 20)).unwrap_or(u32::MAX))
    }

    fn addresses(&self) -> Result<Arc<[SocketAddr]>, HttpError> {
        if let Some(known) = self.addresses.lock().expect("address lock").clone() {
            return Ok(known);
        }
        let host = self.endpoint.host.trim_matches(['[', ']']).to_string();
        let port = self.endpoint.port;
        let (sender, receiver) = std::sync::mpsc::channel();
        // The system resolver may wait far longer than the connect
        // time-out; the thread is left to finish on its own if it does.
        std::thread::spawn(move || {
            let _ = sender.send((host.as_str(), port).to_socket_addrs().map(Vec::from_iter));
        });
        let found = match receiver.recv_timeout(self.timeouts.connect) {
            Ok(Ok(found)) if !found.is_empty() => Arc::<[SocketAddr]>::from(found),
            Ok(Ok(_)) => return Err(HttpError::Resolve("no addresses".into())),
            Ok(Err(error)) => return Err(HttpError::Resolve(error.to_string())),
            Err(_) => return Err(HttpError::ResolveTimeout(self.timeouts.connect)),
        };
        *self.addresses.lock().expect("address lock") = Some(found.clone());
        Ok(found)
    }

    fn connect(&self, deadline: Instant) -> Result<Connection, HttpError> {
        let mut last = None;
        for address in self.addresses()?.iter() {
            let wait = self
                .timeouts
                .connect
                .min(deadline.saturating_duration_since(Instant::now()));
            if wait.is_zero() {
                break;
            }
            match TcpStream::connect_timeout(address, wait) {
                Ok(stream) => {
                    let _ = stream.set_nodelay(true);
                    return Ok(Connection {
                        reader: BufReader::with_capacity(64 << 10, stream),
                    });
                }
                Err(error) => last = Some(error),
            }
        }
        Err(match last {
            Some(error) if error.kind() == std::io::ErrorKind::TimedOut => {
                HttpError::Timeout(self.timeouts.connect)
            }
            Some(error) => HttpError::Connect(error),
            None => HttpError::Timeout(self.timeouts.connect),
        })
    }

    fn exchange(
        &self,
        mut connection: Connection,
        method: &str,
        path: &str,
        body: &[u8],
        limit: u64,
        deadline: Instant,
    ) -> Result<Response, Failure> {
        let unanswered = |error| Failure {
            error,
            answered: false,
        };
        let mut head = format!(
            "{method} {}{path} HTTP/1.1\r\nHost: {}\r\nUser-Agent: ipub/{}\r\nContent-Length: {}\r\n",
            self.endpoint.prefix,
            self.endpoint.host_header(),
            env!("CARGO_PKG_VERSION"),
            body.len()
        );
        if !body.is_empty() {
            head.push_str("Content-Type: application/octet-stream\r\n");
        }
        if let Some(auth) = &self.endpoint.auth {
            head.push_str("Authorization: ");
            head.push_str(&auth.header());
            head.push_str("\r\n");
        }
        head.push_str("\r\n");
        let mut timed = Timed {
            connection: &mut connection,
            deadline,
            total: deadline.saturating_duration_since(Instant::now()),
        };
        timed.write_all(head.as_bytes()).map_err(unanswered)?;
        timed.write_all(body).map_err(unanswered)?;
        let (status, keep_alive, framing) = timed.read_head()?;
        let answered = |error| Failure {
            error,
            answered: true,
        };
        let limit = if status == 200 {
            limit
        } else {
            MAX_ERROR_BODY_BYTES
        };
        if let Framing::Length(length) = framing {
            // A large body announced within its limit gets time to arrive.
            timed.deadline += self.body_time(length.min(limit));
        }
        let body = match timed.read_body(framing, limit) {
            Ok(body) => body,
            // An error answer's body is not needed; the connection is
            // dropped rather than kept.
            Err(_) if status != 200 => Vec::new(),
            Err(error) => return Err(answered(error)),
        };
        if keep_alive && !matches!(framing, Framing::UntilClose) {
            let mut idle = self.idle.lock().expect("connection pool lock");
            if idle.len() < MAX_IDLE {
                idle.push(connection);
            }
        }
        Ok(Response { status, body })
    }
}

/// A failed exchange, and whether the server had begun to answer (only a
/// request without an answer is retried).
struct Failure {
    error: HttpError,
    answered: bool,
}

impl From<HttpError> for Failure {
    fn from(error: HttpError) -> Failure {
        Failure {
            error,
            answered: true,
        }
    }
}

#[derive(Clone, Copy, Debug)]
enum Framing {
    Length(u64),
    Chunked,
    UntilClose,
}

/// A connection's reads and writes under one deadline.
struct Timed<'a> {
    connection: &'a mut Connection,
    deadline: Instant,
    total: Duration,
}

impl Timed<'_> {
    fn remaining(&self) -> Result<Duration, HttpError> {
        let left = self.deadline.saturating_duration_since(Instant::now());
        if left.is_zero() {
            Err(HttpError::Timeout(self.total))
        } else {
            Ok(left)
        }
    }

    fn io_error(&self, error: std::io::Error) -> HttpError {
        match error.kind() {
            std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut => {
                HttpError::Timeout(self.total)
            }
            _ => HttpError::Io(error),
        }
    }

    fn write_all(&mut self, bytes: &[u8]) -> Result<(), HttpError> {
        for chunk in bytes.chunks(64 << 10) {
            let left = self.remaining()?;
            let stream = self.connection.reader.get_mut();
            stream
                .set_write_timeout(Some(left))
                .map_err(HttpError::Io)?;
            stream.write_all(chunk).map_err(|e| self.io_error(e))?;
        }
        Ok(())
    }

    /// Reads one line (without its CRLF) of at most `limit` bytes.
    fn read_line(&mut self, limit: usize) -> Result<Vec<u8>, HttpError> {
        let mut line = Vec::new();
        loop {
            let left = self.remaining()?;
            let reader = &mut self.connection.reader;
            reader
                .get_ref()
                .set_read_timeout(Some(left))
                .map_err(HttpError::Io)?;
            let available = match reader.fill_buf() {
                Ok(bytes) => bytes,
                Err(error) if error.kind() == std::io::ErrorKind::Interrupted => continue,
                Err(error) => return Err(self.io_error(error)),
            };
            if available.is_empty() {
                return Err(HttpError::Io(std::io::Error::new(
                    std::io::ErrorKind::UnexpectedEof,
                    "the server closed the connection",
                )));
            }
            let (taken, done) = match available.iter().position(|&b| b == b'\n') {
                Some(at) => (at + 1, true),
                None => (available.len(), false),
            };
            line.extend_from_slice(&available[..taken]);
            reader.consume(taken);
            if line.len() > limit {
                return Err(HttpError::Protocol(format!(
                    "a header line longer than {limit} bytes"
                )));
            }
            if done {
                line.pop();
                if line.last() == Some(&b'\r') {
                    line.pop();
                }
                return Ok(line);
            }
        }
    }

    /// The status, whether the connection may be kept, and how the body
    /// is framed. Informational (1xx) answers are skipped.
    fn read_head(&mut self) -> Result<(u16, bool, Framing), Failure> {
        let mut budget = MAX_HEAD_BYTES;
        let mut first = true;
        loop {
            let line = self.read_line(budget).map_err(|error| Failure {
                // Nothing at all read means the server never answered.
                answered: !first,
                error,
            })?;
            first = false;
            budget = budget.saturating_sub(line.len() + 2);
            let text = String::from_utf8_lossy(&line);
            let mut words = text.splitn(3, ' ');
            let version = words.next().unwrap_or("");
            let status = words.next().and_then(|s| s.parse::<u16>().ok());
            let (Some(status), true) = (status, version.starts_with("HTTP/1.")) else {
                return Err(HttpError::Protocol(format!(
                    "status line `{}`",
                    text.chars().take(40).collect::<String>()
                ))
                .into());
            };
            let mut keep_alive = version == "HTTP/1.1";
            let mut framing = Framing::UntilClose;
            loop {
                let line = self.read_line(budget)?;
                budget = budget.saturating_sub(line.len() + 2);
                if budget == 0 {
                    return Err(HttpError::Protocol("headers too long".into()).into());
                }
                if line.is_empty() {
                    break;
                }
                let text = String::from_utf8_lossy(&line);
                let Some((name, value)) = text.split_once(':') else {
                    return Err(HttpError::Protocol("a header without a colon".into()).into());
                };
                let value = value.trim();
                if name.eq_ignore_ascii_case("content-length") {
                    let length = value.parse::<u64>().map_err(|_| {
                        HttpError::Protocol(format!(
                            "Content-Length `{}`",
                            value.chars().take(20).collect::<String>()
                        ))
                    })?;
                    if !matches!(framing, Framing::Chunked) {
                        framing = Framing::Length(length);
                    }
                } else if name.eq_ignore_ascii_case("transfer-encoding") {
                    if value.to_ascii_lowercase().ends_with("chunked") {
                        framing = Framing::Chunked;
                    }
                } else if name.eq_ignore_ascii_case("connection") {
                    keep_alive = !value.eq_ignore_ascii_case("close");
                }
            }
            if (100..200).contains(&status) {
                continue;
            }
            // Bodies of these answers are empty whatever the headers say.
            if status == 204 || status == 304 {
                framing = Framing::Length(0);
            }
            return Ok((status, keep_alive, framing));
        }
    }

    fn read_exact(&mut self, buffer: &mut [u8]) -> Result<(), HttpError> {
        let mut filled = 0;
        while filled < buffer.len() {
            let left = self.remaining()?;
            let reader = &mut self.connection.reader;
            reader
                .get_ref()
                .set_read_timeout(Some(left))
                .map_err(HttpError::Io)?;
            match reader.read(&mut buffer[filled..]) {
                Ok(0) => {
                    return Err(HttpError::Io(std::io::Error::new(
                        std::io::ErrorKind::UnexpectedEof,
                        "the answer ends early",
                    )))
                }
                Ok(n) => filled += n,
                Err(error) if error.kind() == std::io::ErrorKind::Interrupted => {}
                Err(error) => return Err(self.io_error(error)),
            }
        }
        Ok(())
    }

    fn read_body(&mut self, framing: Framing, limit: u64) -> Result<Vec<u8>, HttpError> {
        match framing {
            Framing::Length(length) => {
                if length > limit {
                    return Err(HttpError::TooLarge { limit });
                }
                let mut body = vec![0; length as usize];
                self.read_exact(&mut body)?;
                Ok(body)
            }
            Framing::Chunked => {
                let mut body = Vec::new();
                loop {
                    let line = self.read_line(1024)?;
                    let text = String::from_utf8_lossy(&line);
                    let size = text.split(';').next().unwrap_or("").trim();
                    let size = u64::from_str_radix(size, 16).map_err(|_| {
                        HttpError::Protocol(format!(
                            "chunk size `{}`",
                            size.chars().take(20).collect::<String>()
                        ))
                    })?;
                    if size == 0 {
                        // Trailers, up to the empty line.
                        while !self.read_line(MAX_HEAD_BYTES)?.is_empty() {}
                        return Ok(body);
                    }
                    if body.len() as u64 + size > limit {
                        return Err(HttpError::TooLarge { limit });
                    }
                    let start = body.len();
                    body.resize(start + size as usize, 0);
                    self.read_exact(&mut body[start..])?;
                    if !self.read_line(2)?.is_empty() {
                        return Err(HttpError::Protocol("a chunk longer than its size".into()));
                    }
                }
            }
            Framing::UntilClose => {
                let mut body = Vec::new();
                let mut buffer = [0u8; 16 << 10];
                loop {
                    let left = self.remaining()?;
                    let reader = &mut self.connection.reader;
                    reader
                        .get_ref()
                        .set_read_timeout(Some(left))
                        .map_err(HttpError::Io)?;
                    match reader.read(&mut buffer) {
                        Ok(0) => return Ok(body),
                        Ok(n) => {
                            if body.len() as u64 + n as u64 > limit {
                                return Err(HttpError::TooLarge { limit });
                            }
                            body.extend_from_slice(&buffer[..n]);
                        }
                        Err(error) if error.kind() == std::io::ErrorKind::Interrupted => {}
                        Err(error) => return Err(self.io_error(error)),
                    }
                }
            }
        }
    }
}

#[cfg(test)]
mod tests;
