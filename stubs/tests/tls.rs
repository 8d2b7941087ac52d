//! `--tls` stubs: each serves https:// with a certificate its own CA verifies for `localhost`
//! and `127.0.0.1` (and `::1`, checked in memory), over keep-alive connections, streaming or
//! not; a client that does not trust the CA is refused and the stub keeps serving.

use std::io::{Read, Write};
use std::net::TcpStream;
use std::sync::Arc;
use std::time::Duration;

use loadgen_stubs::{StubConfig, StubKind, StubServer};
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, ServerName};
use rustls::{ClientConfig, ClientConnection, RootCertStore, StreamOwned};

fn tls_stub(kind: StubKind) -> StubServer {
    let mut cfg = StubConfig::new(kind);
    cfg.tls = true;
    cfg.output_length = 40;
    cfg.variable.output_len_mean = 40.0;
    StubServer::start(cfg).expect("start the tls stub")
}

fn client_config(ca_pem: &str) -> Arc<ClientConfig> {
    let mut roots = RootCertStore::empty();
    for cert in CertificateDer::pem_slice_iter(ca_pem.as_bytes()) {
        roots.add(cert.unwrap()).unwrap();
    }
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let mut config = ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .unwrap()
        .with_root_certificates(roots)
        .with_no_client_auth();
    config.alpn_protocols = vec![b"http/1.1".to_vec()];
    Arc::new(config)
}

type Tls = StreamOwned<ClientConnection, TcpStream>;

fn connect(server: &StubServer, config: Arc<ClientConfig>, name: &str) -> Tls {
    let tcp = TcpStream::connect(server.addr()).unwrap();
    tcp.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    let name = ServerName::try_from(name.to_string()).unwrap();
    StreamOwned::new(ClientConnection::new(config, name).unwrap(), tcp)
}

fn request(stream: bool) -> Vec<u8> {
    let body = format!(
        r#"{{"model":"m","messages":[{{"role":"user","content":"hello over tls"}}],"stream":{stream}}}"#
    );
    format!(
        "POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\r\n{body}",
        body.len()
    )
    .into_bytes()
}

/// Reads one response: a Content-Length body, or a chunked one up to its last chunk.
fn read_response(tls: &mut Tls) -> String {
    let mut got = Vec::new();
    let mut buf = [0u8; 4096];
    loop {
        let text = String::from_utf8_lossy(&got).into_owned();
        if let Some(end) = text.find("\r\n\r\n") {
            let head = text[..end].to_ascii_lowercase();
            let body = &text[end + 4..];
            let whole = match head.split("content-length:").nth(1) {
                Some(rest) => {
                    let len: usize = rest.lines().next().unwrap().trim().parse().unwrap();
                    body.len() >= len
                }
                None => body.ends_with("0\r\n\r\n"),
            };
            if whole {
                return text;
            }
        }
        let n = tls.read(&mut buf).expect("read a tls response");
        assert!(n > 0, "the stub closed mid-response: {:?}", String::from_utf8_lossy(&got));
        got.extend_from_slice(&buf[..n]);
    }
}

#[test]
fn every_stub_serves_https_that_its_ca_verifies_for_localhost_and_127_0_0_1() {
    for kind in [StubKind::Echo, StubKind::MaxThroughput, StubKind::Variable] {
        let server = tls_stub(kind);
        assert!(server.url().starts_with("https://127.0.0.1:"), "{}", server.url());
        let config = client_config(server.ca_pem().expect("a tls stub has a CA"));
        for name in ["localhost", "127.0.0.1"] {
            let mut tls = connect(&server, config.clone(), name);
            // Two requests, streaming and not, on one keep-alive connection.
            for stream in [false, true] {
                tls.write_all(&request(stream)).unwrap();
                let response = read_response(&mut tls);
                assert!(response.starts_with("HTTP/1.1 200"), "{kind:?} {name}: {response}");
                if kind == StubKind::Echo && !stream {
                    assert!(response.contains("hello over tls"), "{response}");
                }
                if stream {
                    assert!(response.contains("data: [DONE]"), "{kind:?}: {response}");
                }
            }
            assert_eq!(tls.conn.alpn_protocol(), Some(&b"http/1.1"[..]), "{kind:?}");
        }
        assert_eq!(server.totals().connections, 2, "{kind:?}: one per name, kept alive");
        assert_eq!(server.requests_total(), 4, "{kind:?}");
        server.stop();
    }
}

#[test]
fn a_client_that_does_not_trust_the_stub_is_refused_and_the_stub_keeps_serving() {
    let server = tls_stub(StubKind::Echo);
    let other = loadgen_stubs::tls::StubTls::generate().unwrap();
    let mut stranger = connect(&server, client_config(&other.ca_pem), "localhost");
    let e = stranger.write_all(&request(false)).and_then(|_| stranger.flush()).unwrap_err();
    assert!(e.to_string().contains("UnknownIssuer"), "{e}");
    let mut trusted = connect(&server, client_config(server.ca_pem().unwrap()), "localhost");
    trusted.write_all(&request(false)).unwrap();
    assert!(read_response(&mut trusted).contains("hello over tls"));
    server.stop();
}

/// Runs a handshake between `client` and `server` in memory (no socket, so `::1` is checked
/// without an IPv6 listener); the first error either side saw.
fn handshake_in_memory(
    mut client: ClientConnection,
    mut server: rustls::ServerConnection,
) -> Result<(), rustls::Error> {
    let mut wire = Vec::new();
    for _ in 0..16 {
        if !client.is_handshaking() && !server.is_handshaking() {
            return Ok(());
        }
        wire.clear();
        client.write_tls(&mut wire).unwrap();
        server.read_tls(&mut wire.as_slice()).unwrap();
        server.process_new_packets()?;
        wire.clear();
        server.write_tls(&mut wire).unwrap();
        client.read_tls(&mut wire.as_slice()).unwrap();
        client.process_new_packets()?;
    }
    panic!("the handshake did not finish in 16 flights");
}

#[test]
fn the_certificate_verifies_for_each_name_it_is_made_for_and_no_other() {
    let stub = loadgen_stubs::tls::StubTls::generate().unwrap();
    let config = client_config(&stub.ca_pem);
    let attempt = |name: &str| {
        let name = ServerName::try_from(name.to_string()).unwrap();
        let client = ClientConnection::new(config.clone(), name).unwrap();
        let server = rustls::ServerConnection::new(stub.config.clone()).unwrap();
        handshake_in_memory(client, server)
    };
    for name in loadgen_stubs::tls::STUB_CERT_NAMES {
        attempt(name).unwrap_or_else(|e| panic!("{name}: {e}"));
    }
    for name in ["example.com", "127.0.0.2"] {
        let e = attempt(name).unwrap_err();
        assert!(e.to_string().contains("certificate not valid for name"), "{name}: {e}");
    }
}

#[test]
fn a_plain_stub_has_no_ca_and_an_http_url() {
    let server = StubServer::start(StubConfig::new(StubKind::Echo)).unwrap();
    assert!(server.url().starts_with("http://"), "{}", server.url());
    assert_eq!(server.ca_pem(), None);
    server.stop();
}
