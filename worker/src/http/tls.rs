//! TLS for `https://` endpoints: the settings the plan fills (`TlsSettings`), the one rustls
//! `ClientConfig` a worker builds at start (`TlsClient`), and each connection's handshake
//! (monoio-rustls over the connection's `TcpStream`, ALPN `http/1.1`).

use std::fmt;
use std::io;
use std::path::PathBuf;
use std::sync::Arc;

use monoio::net::TcpStream;
use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use rustls::crypto::{verify_tls12_signature, verify_tls13_signature, CryptoProvider};
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, ServerName, UnixTime};
use rustls::{ClientConfig, DigitallySignedStruct, RootCertStore, SignatureScheme};

/// A TLS connection of the worker.
pub type TlsStream = monoio_rustls::ClientTlsStream<TcpStream>;

/// How an `https://` endpoint is reached: the name the certificate must carry and how it is
/// checked. `Endpoint::parse` fills it from the URL with `Verify::SystemRoots`; the plan
/// changes `verify` for `--insecure` or a CA bundle.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TlsSettings {
    /// The URL's host, without IPv6 brackets: a DNS name is sent as SNI and must be in the
    /// certificate; an IP literal is sent without SNI (RFC 6066) and must be an IP SAN.
    pub server_name: String,
    pub verify: Verify,
}

/// How the server's certificate is verified.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Verify {
    /// The system's trust store (`rustls-native-certs`: SSL_CERT_FILE / SSL_CERT_DIR, else the
    /// distribution's bundle). An empty store is a setup error, not a run where every
    /// handshake fails.
    SystemRoots,
    /// Only the PEM certificates in this file are trusted (the system store is not read).
    CaBundle(PathBuf),
    /// No verification at all (the reference's `--insecure`: Python's `CERT_NONE` without a
    /// host name check): any certificate for any name is accepted; the connection is still
    /// encrypted, but not authenticated.
    Insecure,
}

/// Why a worker cannot set TLS up (a setup error, before any connection).
#[derive(Debug, thiserror::Error)]
pub enum TlsSetupError {
    #[error(
        "no system root certificates found{detail}; install the system's CA certificates (or \
         set SSL_CERT_FILE), or pass a CA bundle (--ca-bundle FILE), or --insecure to skip \
         verification"
    )]
    NoSystemRoots { detail: String },
    #[error("cannot read the CA bundle {path:?}: {source}; check the path")]
    ReadCaBundle { path: PathBuf, source: io::Error },
    #[error(
        "the CA bundle {path:?} holds no usable PEM certificate{detail}; pass a file of \
         -----BEGIN CERTIFICATE----- blocks"
    )]
    EmptyCaBundle { path: PathBuf, detail: String },
    #[error("{name:?} is not a valid TLS server name; check the endpoint's host")]
    BadServerName { name: String },
    #[error("cannot set up TLS: {0}")]
    Rustls(#[from] rustls::Error),
}

/// Longest wait for a handshake after the TCP connect. A server that accepts and never answers
/// TLS would otherwise hold a slot for ever (a TCP connect has the kernel's own limit): most
/// often a plain-HTTP server given an `https://` URL, which reads the ClientHello as the start
/// of a request head and waits for the rest. The reference inherits asyncio's 60 s
/// `ssl_handshake_timeout`, so such a mistake took a minute to report; a handshake is a round
/// trip or two and the server's key operation, well under a second even on a loaded server, so
/// 10 s is ample for a real one.
pub const TLS_HANDSHAKE_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(10);

/// What a worker's connections share for TLS: the config and the server name.
pub struct TlsClient {
    connector: monoio_rustls::TlsConnector,
    server_name: ServerName<'static>,
    handshake_timeout: std::time::Duration,
}

impl fmt::Debug for TlsClient {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("TlsClient").field("server_name", &self.server_name).finish()
    }
}

impl TlsClient {
    /// Builds the client config once (roots read, CA bundle parsed): every failure here is a
    /// setup error with its cause, so the plan may call it before the fork to refuse a run.
    pub fn new(settings: &TlsSettings) -> Result<TlsClient, TlsSetupError> {
        let server_name = ServerName::try_from(settings.server_name.clone())
            .map_err(|_| TlsSetupError::BadServerName { name: settings.server_name.clone() })?;
        let config = client_config(&settings.verify)?;
        let connector = monoio_rustls::TlsConnector::from(config);
        Ok(TlsClient { connector, server_name, handshake_timeout: TLS_HANDSHAKE_TIMEOUT })
    }

    /// The same client with another handshake limit (tests).
    pub fn with_handshake_timeout(mut self, timeout: std::time::Duration) -> TlsClient {
        self.handshake_timeout = timeout;
        self
    }

    /// Runs the handshake on a connected socket, within the handshake limit (the runtime must
    /// have its timer, as the worker's has).
    pub async fn handshake(&self, tcp: TcpStream) -> Result<TlsStream, HandshakeError> {
        let host = || self.server_name.to_str().into_owned();
        let limit = self.handshake_timeout;
        monoio::select! {
            done = self.connector.connect(self.server_name.clone(), tcp) => {
                done.map_err(|error| HandshakeError { host: host(), error })
            }
            _ = monoio::time::sleep(limit) => {
                let why = format!(
                    "no handshake within {} s (TLS_HANDSHAKE_TIMEOUT); a plain-HTTP server \
                     waits like this for the rest of a request: if it serves plain HTTP, use an \
                     http:// URL",
                    limit.as_secs_f64()
                );
                let error = io::Error::new(io::ErrorKind::TimedOut, why).into();
                Err(HandshakeError { host: host(), error })
            }
        }
    }
}

/// The rustls config for `verify`: the ring provider, TLS 1.2 and 1.3, ALPN `http/1.1`.
pub fn client_config(verify: &Verify) -> Result<Arc<ClientConfig>, TlsSetupError> {
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let builder = ClientConfig::builder_with_provider(provider.clone())
        .with_safe_default_protocol_versions()?;
    let mut config = match verify {
        Verify::SystemRoots => builder.with_root_certificates(system_roots()?),
        Verify::CaBundle(path) => builder.with_root_certificates(bundle_roots(path)?),
        Verify::Insecure => {
            builder.dangerous().with_custom_certificate_verifier(Arc::new(NoVerification(provider)))
        }
    }
    .with_no_client_auth();
    config.alpn_protocols = vec![b"http/1.1".to_vec()];
    Ok(Arc::new(config))
}

fn system_roots() -> Result<RootCertStore, TlsSetupError> {
    roots_from_system_store(rustls_native_certs::load_native_certs())
}

/// The roots the system store gave; none at all is an error that says what the loader hit
/// (a run would otherwise fail every handshake as an unknown issuer).
fn roots_from_system_store(
    found: rustls_native_certs::CertificateResult,
) -> Result<RootCertStore, TlsSetupError> {
    let mut roots = RootCertStore::empty();
    roots.add_parsable_certificates(found.certs);
    if roots.is_empty() {
        let detail = match found.errors.first() {
            Some(e) => format!(" ({e})"),
            None => String::new(),
        };
        return Err(TlsSetupError::NoSystemRoots { detail });
    }
    Ok(roots)
}

fn bundle_roots(path: &std::path::Path) -> Result<RootCertStore, TlsSetupError> {
    let pem = std::fs::read(path)
        .map_err(|source| TlsSetupError::ReadCaBundle { path: path.to_path_buf(), source })?;
    let mut roots = RootCertStore::empty();
    let mut first_error = None;
    for cert in CertificateDer::pem_slice_iter(&pem) {
        match cert.map_err(|e| e.to_string()).and_then(|c| roots.add(c).map_err(|e| e.to_string()))
        {
            Ok(()) => {}
            Err(e) => {
                first_error.get_or_insert(e);
            }
        }
    }
    if roots.is_empty() {
        let detail = first_error.map(|e| format!(" ({e})")).unwrap_or_default();
        return Err(TlsSetupError::EmptyCaBundle { path: path.to_path_buf(), detail });
    }
    Ok(roots)
}

/// A handshake that failed, with the host it was for.
#[derive(Debug)]
pub struct HandshakeError {
    pub host: String,
    pub error: monoio_rustls::TlsError,
}

impl HandshakeError {
    /// The rustls error under the failure, when rustls (not the socket) ended it.
    pub fn rustls_error(&self) -> Option<&rustls::Error> {
        match &self.error {
            monoio_rustls::TlsError::Rustls(e) => Some(e),
            monoio_rustls::TlsError::Io(e) => e.get_ref()?.downcast_ref::<rustls::Error>(),
        }
    }

    /// The server answered with bytes that are no TLS record (a plain-HTTP server's
    /// `HTTP/1.1 400 …` starts with `H`, no TLS content type).
    pub fn not_tls(&self) -> bool {
        use rustls::InvalidMessage as M;
        matches!(
            self.rustls_error(),
            Some(rustls::Error::InvalidMessage(M::InvalidContentType | M::UnknownProtocolVersion))
        )
    }

    /// The server's certificate was refused (unknown issuer, wrong name, expired, ...).
    pub fn certificate_not_verified(&self) -> bool {
        self.rustls_error().is_some_and(refuses_certificate)
    }
}

/// Whether `e` is the server's certificate being refused (unknown issuer, wrong name,
/// expired, none presented), rather than the protocol failing.
pub fn refuses_certificate(e: &rustls::Error) -> bool {
    matches!(e, rustls::Error::InvalidCertificate(_) | rustls::Error::NoCertificatesPresented)
}

/// What a refused certificate of `host` reads as: why, and what to do by why (a wrong name
/// wants the right host name, not another CA bundle), for the benchmark and the probe alike.
pub fn certificate_refused_message(host: &str, e: &rustls::Error) -> String {
    format!(
        "the certificate of {host} did not verify ({e}); {}, or --insecure to skip verification",
        remedy(e)
    )
}

impl fmt::Display for HandshakeError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let host = &self.host;
        if self.not_tls() {
            return write!(
                f,
                "tls handshake with {host} failed: the server did not answer in TLS (most likely \
                 it serves plain HTTP); use an http:// URL for it"
            );
        }
        match (self.certificate_not_verified(), self.rustls_error()) {
            (true, Some(e)) => f.write_str(&certificate_refused_message(host, e)),
            (false, Some(e)) => write!(f, "tls handshake with {host} failed: {e}"),
            (_, None) => match &self.error {
                monoio_rustls::TlsError::Io(e) => {
                    write!(f, "tls handshake with {host} failed: {e}")
                }
                monoio_rustls::TlsError::Rustls(e) => {
                    write!(f, "tls handshake with {host} failed: {e}")
                }
            },
        }
    }
}

/// What a user can do about a certificate that did not verify, by why it did not.
fn remedy(e: &rustls::Error) -> &'static str {
    use rustls::CertificateError as C;
    match e {
        rustls::Error::InvalidCertificate(
            C::NotValidForName | C::NotValidForNameContext { .. },
        ) => {
            "put a host name the certificate carries in the URL (its issuer was trusted, the \
             name did not match, so --ca-bundle cannot help)"
        }
        rustls::Error::InvalidCertificate(
            C::Expired | C::ExpiredContext { .. } | C::NotValidYet | C::NotValidYetContext { .. },
        ) => "renew the server's certificate (or check this machine's clock)",
        _ => "pass a CA bundle that holds its issuer (--ca-bundle FILE)",
    }
}

/// `Verify::Insecure`: accepts every certificate for every name. The handshake's signatures
/// are still checked against the key the certificate presents, as OpenSSL does under Python's
/// `CERT_NONE`: that is the protocol itself, not the verification a user turns off.
#[derive(Debug)]
struct NoVerification(Arc<CryptoProvider>);

impl ServerCertVerifier for NoVerification {
    fn verify_server_cert(
        &self,
        _end_entity: &CertificateDer<'_>,
        _intermediates: &[CertificateDer<'_>],
        _server_name: &ServerName<'_>,
        _ocsp_response: &[u8],
        _now: UnixTime,
    ) -> Result<ServerCertVerified, rustls::Error> {
        Ok(ServerCertVerified::assertion())
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        verify_tls12_signature(message, cert, dss, &self.0.signature_verification_algorithms)
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        verify_tls13_signature(message, cert, dss, &self.0.signature_verification_algorithms)
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.0.signature_verification_algorithms.supported_schemes()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_missing_ca_bundle_is_a_setup_error_naming_the_file() {
        let path = PathBuf::from("/nonexistent/llm-loadgen-ca.pem");
        let e = client_config(&Verify::CaBundle(path)).unwrap_err();
        let text = e.to_string();
        assert!(text.starts_with("cannot read the CA bundle \"/nonexistent/llm-loadgen-ca.pem\""));
        assert!(text.ends_with("check the path"), "{text}");
    }

    #[test]
    fn a_ca_bundle_without_certificates_is_refused() {
        let dir = std::env::temp_dir().join(format!("tls-empty-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("empty.pem");
        std::fs::write(&path, "not a certificate\n").unwrap();
        let e = client_config(&Verify::CaBundle(path.clone())).unwrap_err();
        assert!(matches!(e, TlsSetupError::EmptyCaBundle { .. }), "{e}");
        assert!(e.to_string().contains("holds no usable PEM certificate"), "{e}");
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn ip_literals_and_names_are_server_names_and_garbage_is_not() {
        let verify = Verify::Insecure;
        for name in ["localhost", "127.0.0.1", "::1", "api.example.com"] {
            let settings = TlsSettings { server_name: name.into(), verify: verify.clone() };
            assert!(TlsClient::new(&settings).is_ok(), "{name}");
        }
        let settings = TlsSettings { server_name: "bad name!".into(), verify };
        let e = TlsClient::new(&settings).unwrap_err();
        assert_eq!(
            e.to_string(),
            "\"bad name!\" is not a valid TLS server name; check the endpoint's host"
        );
    }

    #[test]
    fn an_empty_system_store_is_a_setup_error_that_says_what_to_do() {
        let e = roots_from_system_store(Default::default()).unwrap_err();
        assert_eq!(
            e.to_string(),
            "no system root certificates found; install the system's CA certificates (or set \
             SSL_CERT_FILE), or pass a CA bundle (--ca-bundle FILE), or --insecure to skip \
             verification"
        );
    }

    #[test]
    fn the_config_offers_http11_by_alpn() {
        let config = client_config(&Verify::Insecure).unwrap();
        assert_eq!(config.alpn_protocols, vec![b"http/1.1".to_vec()]);
    }
}
