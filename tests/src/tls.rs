//! HTTPS on loopback for the servers the service may only call over https (custom functions, MCP servers): a
//! certificate authority of this test process (made once with the `openssl` command) and a certificate for
//! `localhost` and 127.0.0.1 signed by it. A service started with `trust_env()` in its environment
//! (`SSL_CERT_FILE`, which the platform verifier's Linux trust store reads) trusts it.

use std::{
    net::SocketAddr,
    path::PathBuf,
    process::Command,
    sync::{Arc, OnceLock},
};

use axum::Router;
use rustls::pki_types::{CertificateDer, PrivateKeyDer, pem::PemObject};
use tokio::net::{TcpListener, TcpStream};
use tokio_rustls::{TlsAcceptor, server::TlsStream};

struct Authority {
    dir: PathBuf,
}

fn authority() -> &'static Authority {
    static AUTHORITY: OnceLock<Authority> = OnceLock::new();
    AUTHORITY.get_or_init(|| {
        let dir = std::env::temp_dir().join(format!("frontdesk-test-ca_{}", std::process::id()));
        std::fs::create_dir_all(&dir).expect("the CA folder");
        let run = |args: &[&str]| {
            let out = Command::new("openssl")
                .args(args)
                .current_dir(&dir)
                .output()
                .expect("openssl (scripts/test-prereqs installs it)");
            assert!(out.status.success(), "openssl {args:?}: {}", String::from_utf8_lossy(&out.stderr));
        };
        std::fs::write(
            dir.join("leaf.ext"),
            "basicConstraints=CA:FALSE\nkeyUsage=digitalSignature,keyEncipherment\nextendedKeyUsage=serverAuth\nsubjectAltName=DNS:localhost,IP:127.0.0.1\n",
        )
        .expect("the extensions file");
        run(&["req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "2", "-subj", "/CN=frontdesk test CA",
              "-keyout", "ca.key", "-out", "ca.pem"]);
        run(&["req", "-newkey", "rsa:2048", "-nodes", "-subj", "/CN=localhost", "-keyout", "leaf.key", "-out", "leaf.csr"]);
        run(&["x509", "-req", "-in", "leaf.csr", "-CA", "ca.pem", "-CAkey", "ca.key", "-CAcreateserial", "-days", "2",
              "-extfile", "leaf.ext", "-out", "leaf.pem"]);
        Authority { dir }
    })
}

/// The environment a service needs to trust the test authority.
pub fn trust_env() -> (&'static str, String) {
    ("SSL_CERT_FILE", authority().dir.join("ca.pem").display().to_string())
}

/// Serves `app` over HTTPS on an ephemeral loopback port; its base URL (`https://127.0.0.1:PORT`).
pub async fn serve(app: Router) -> String {
    let _ = rustls::crypto::ring::default_provider().install_default();
    let dir = &authority().dir;
    let chain: Vec<CertificateDer<'static>> = CertificateDer::pem_file_iter(dir.join("leaf.pem"))
        .expect("the certificate")
        .collect::<Result<_, _>>()
        .expect("the certificate's PEM");
    let key = PrivateKeyDer::from_pem_file(dir.join("leaf.key")).expect("the key");
    let config = rustls::ServerConfig::builder()
        .with_no_client_auth()
        .with_single_cert(chain, key)
        .expect("a server config");
    let listener = TlsListener {
        tcp: TcpListener::bind("127.0.0.1:0").await.expect("bind"),
        acceptor: TlsAcceptor::from(Arc::new(config)),
    };
    let url = format!("https://{}", listener.tcp.local_addr().expect("addr"));
    tokio::spawn(async move { axum::serve(listener, app).await });
    url
}

struct TlsListener {
    tcp: TcpListener,
    acceptor: TlsAcceptor,
}

impl axum::serve::Listener for TlsListener {
    type Io = TlsStream<TcpStream>;
    type Addr = SocketAddr;

    async fn accept(&mut self) -> (Self::Io, Self::Addr) {
        loop {
            let Ok((stream, peer)) = self.tcp.accept().await else {
                continue;
            };
            // A handshake that fails (a client that does not trust us) drops that connection only.
            if let Ok(tls) = self.acceptor.accept(stream).await {
                return (tls, peer);
            }
        }
    }

    fn local_addr(&self) -> std::io::Result<Self::Addr> {
        self.tcp.local_addr()
    }
}
