//! One shutdown signal for the whole process: Ctrl-C or SIGTERM flips it, every server waits on a clone and
//! drains its in-flight requests.

use tokio::sync::watch;

#[derive(Clone, Debug)]
pub struct Shutdown(watch::Receiver<bool>);

impl Shutdown {
    /// Starts listening for the process's termination signals.
    pub fn on_signals() -> Self {
        let (tx, rx) = watch::channel(false);
        tokio::spawn(async move {
            terminated().await;
            tracing::info!("shutting down");
            let _ = tx.send(true);
        });
        Self(rx)
    }

    /// A signal the caller flips itself (with the sender), for tests of what waits on it.
    #[cfg(any(test, feature = "testing"))]
    pub fn by_hand() -> (watch::Sender<bool>, Self) {
        let (tx, rx) = watch::channel(false);
        (tx, Self(rx))
    }

    /// Whether shutdown has begun.
    pub fn is_stopping(&self) -> bool {
        *self.0.borrow()
    }

    /// Resolves once shutdown has begun.
    pub async fn wait(mut self) {
        let _ = self.0.wait_for(|stopping| *stopping).await;
    }
}

async fn terminated() {
    let ctrl_c = async {
        let _ = tokio::signal::ctrl_c().await;
    };
    #[cfg(unix)]
    let term = async {
        match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
            Ok(mut signal) => {
                signal.recv().await;
            }
            Err(_) => std::future::pending().await,
        }
    };
    #[cfg(not(unix))]
    let term = std::future::pending::<()>();
    tokio::select! {
        () = ctrl_c => {},
        () = term => {},
    }
}
