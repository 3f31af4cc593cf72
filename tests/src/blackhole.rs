//! A TCP listener that accepts every connection and never answers: a stand-in for a service that hangs
//! (a Redis behind a broken network path, say) rather than refusing.

use tokio::{net::TcpListener, task::JoinHandle};

pub struct Blackhole {
    /// `127.0.0.1:PORT`.
    pub addr: String,
    task: JoinHandle<()>,
}

impl Blackhole {
    pub async fn start() -> Self {
        let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind the blackhole");
        let addr = listener.local_addr().expect("blackhole address").to_string();
        let task = tokio::spawn(async move {
            // Held open, never read from or written to.
            let mut held = Vec::new();
            while let Ok((socket, _)) = listener.accept().await {
                held.push(socket);
            }
        });
        Self { addr, task }
    }
}

impl Drop for Blackhole {
    fn drop(&mut self) {
        self.task.abort();
    }
}
