//! A POST written straight to the socket, for bodies the service refuses while they arrive: it may answer
//! 413 and close before the body is all sent, which an HTTP client reports as a broken pipe instead of the
//! answer. The body is written on its own task (its errors ignored) while the answer is read.

use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};

/// The status the service at `http` (`http://host:port`) answers to `POST path` with `headers` and `body`,
/// sent with its `Content-Length`, or chunked.
pub async fn status(http: &str, path: &str, headers: &[(&str, &str)], body: Vec<u8>, chunked: bool) -> u16 {
    let addr = http.trim_start_matches("http://").to_owned();
    let socket = tokio::net::TcpStream::connect(&addr).await.expect("connect");
    let (mut read, mut write) = socket.into_split();
    let length = if chunked {
        "Transfer-Encoding: chunked".to_owned()
    } else {
        format!("Content-Length: {}", body.len())
    };
    let extra: String = headers
        .iter()
        .map(|(name, value)| format!("{name}: {value}\r\n"))
        .collect();
    let head = format!("POST {path} HTTP/1.1\r\nHost: {addr}\r\n{extra}{length}\r\n\r\n");
    let writer = tokio::spawn(async move {
        write.write_all(head.as_bytes()).await?;
        for chunk in body.chunks(64 * 1024) {
            if chunked {
                let frame = [format!("{:x}\r\n", chunk.len()).as_bytes(), chunk, b"\r\n"].concat();
                write.write_all(&frame).await?;
            } else {
                write.write_all(chunk).await?;
            }
        }
        if chunked {
            write.write_all(b"0\r\n\r\n").await?;
        }
        std::io::Result::Ok(write)
    });
    let mut answer = Vec::new();
    let mut buf = [0u8; 4096];
    let deadline = tokio::time::Instant::now() + Duration::from_secs(30);
    while !String::from_utf8_lossy(&answer).contains("\r\n\r\n") {
        match tokio::time::timeout_at(deadline, read.read(&mut buf)).await {
            Ok(Ok(n)) if n > 0 => answer.extend_from_slice(&buf[..n]),
            _ => break,
        }
    }
    writer.abort();
    let text = String::from_utf8_lossy(&answer);
    text.split_whitespace()
        .nth(1)
        .and_then(|code| code.parse().ok())
        .unwrap_or_else(|| panic!("no HTTP answer: {text}"))
}
