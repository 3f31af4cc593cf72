//! A TCP proxy between the service and a server it depends on, which a test can cut: every open connection
//! is dropped at once and new ones are refused until it is restored, as a server's restart looks from the
//! client's side.

use std::sync::{
    Arc,
    atomic::{AtomicBool, Ordering},
};

use tokio::{
    net::{TcpListener, TcpStream},
    sync::watch,
    task::JoinHandle,
};

pub struct TcpProxy {
    /// `127.0.0.1:PORT`, where clients connect.
    pub addr: String,
    up: Arc<AtomicBool>,
    cuts: watch::Sender<u64>,
    task: JoinHandle<()>,
}

impl TcpProxy {
    /// A proxy to `target` (`host:port`).
    pub async fn start(target: &str) -> Self {
        let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind the proxy");
        let addr = listener.local_addr().expect("proxy address").to_string();
        let up = Arc::new(AtomicBool::new(true));
        let (cuts, _) = watch::channel(0u64);
        let (target, is_up, cut) = (target.to_owned(), up.clone(), cuts.clone());
        let task = tokio::spawn(async move {
            while let Ok((mut client, _)) = listener.accept().await {
                if !is_up.load(Ordering::SeqCst) {
                    continue; // dropped: the client sees its connection closed at once
                }
                let (target, mut cut) = (target.clone(), cut.subscribe());
                tokio::spawn(async move {
                    let Ok(mut server) = TcpStream::connect(&target).await else {
                        return;
                    };
                    tokio::select! {
                        _ = tokio::io::copy_bidirectional(&mut client, &mut server) => {}
                        _ = cut.changed() => {}
                    }
                });
            }
        });
        Self { addr, up, cuts, task }
    }

    /// Drops every open connection and refuses new ones until `restore`.
    pub fn cut(&self) {
        self.up.store(false, Ordering::SeqCst);
        self.cuts.send_modify(|n| *n += 1);
    }

    pub fn restore(&self) {
        self.up.store(true, Ordering::SeqCst);
    }
}

impl Drop for TcpProxy {
    fn drop(&mut self) {
        self.task.abort();
    }
}
