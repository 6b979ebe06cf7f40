//! Cache servers that misbehave, on 127.0.0.1: each connection is served
//! on its own thread, every request answered the same way.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::sync::{Arc, Mutex};
use std::time::Duration;

#[derive(Clone, Copy, Debug)]
pub enum Behaviour {
    /// Reads the request and never answers.
    Stall,
    /// `500 Internal Server Error` to everything.
    Error500,
    /// Bytes that are not HTTP, then the connection closed.
    Garbage,
    /// `401 Unauthorized` to everything.
    Unauthorized,
    /// `404` to reads, `405 Method Not Allowed` to writes: a read-only
    /// server.
    RefusesWrites,
}

pub struct Stub {
    pub port: u16,
    /// The head of every request received.
    pub heads: Arc<Mutex<Vec<String>>>,
}

impl Stub {
    pub fn start(behaviour: Behaviour) -> Stub {
        let listener = TcpListener::bind("127.0.0.1:0").expect("bind");
        let port = listener.local_addr().expect("address").port();
        let heads = Arc::new(Mutex::new(Vec::new()));
        let kept = heads.clone();
        std::thread::spawn(move || {
            for stream in listener.incoming().flatten() {
                let heads = kept.clone();
                std::thread::spawn(move || serve(stream, behaviour, &heads));
            }
        });
        Stub { port, heads }
    }

    pub fn url(&self) -> String {
        format!("http://127.0.0.1:{}", self.port)
    }

    pub fn requests(&self) -> Vec<String> {
        self.heads.lock().expect("heads").clone()
    }
}

fn serve(stream: TcpStream, behaviour: Behaviour, heads: &Mutex<Vec<String>>) {
    let mut reader = BufReader::new(stream);
    loop {
        let mut head = String::new();
        loop {
            let mut line = String::new();
            match reader.read_line(&mut line) {
                Ok(0) | Err(_) => return,
                Ok(_) => head.push_str(&line),
            }
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
        let put = head.starts_with("PUT ");
        heads.lock().expect("heads").push(head);
        let answer: &[u8] = match behaviour {
            Behaviour::Stall => {
                std::thread::sleep(Duration::from_secs(60));
                return;
            }
            Behaviour::Error500 => {
                b"HTTP/1.1 500 Internal Server Error\r\nContent-Length: 5\r\n\r\noops\n"
            }
            Behaviour::Garbage => {
                let _ = reader.get_mut().write_all(b"\x00\xffnot http at all\r\n\r\n");
                return;
            }
            Behaviour::Unauthorized => {
                b"HTTP/1.1 401 Unauthorized\r\nWWW-Authenticate: Bearer\r\nContent-Length: 0\r\n\r\n"
            }
            Behaviour::RefusesWrites if put => {
                b"HTTP/1.1 405 Method Not Allowed\r\nContent-Length: 0\r\n\r\n"
            }
            Behaviour::RefusesWrites => b"HTTP/1.1 404 Not Found\r\nContent-Length: 0\r\n\r\n",
        };
        if reader.get_mut().write_all(answer).is_err() {
            return;
        }
    }
}
