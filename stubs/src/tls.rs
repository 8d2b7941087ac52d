//! TLS for the stubs (`--tls`): a throwaway CA and a server certificate for `localhost`,
//! `127.0.0.1` and `::1`, made with rcgen when the server starts, served with rustls (ring).

use std::io;
use std::sync::Arc;

use rcgen::{BasicConstraints, CertificateParams, DnType, IsCa, KeyPair, KeyUsagePurpose};
use rustls::pki_types::{CertificateDer, PrivateKeyDer, PrivatePkcs8KeyDer};
use rustls::ServerConfig;

/// The names the server certificate is valid for.
pub const STUB_CERT_NAMES: [&str; 3] = ["localhost", "127.0.0.1", "::1"];

/// A stub's TLS identity: the rustls config its workers accept with, and the CA certificate
/// (PEM) a client trusts to verify it.
pub struct StubTls {
    pub config: Arc<ServerConfig>,
    pub ca_pem: String,
}

impl std::fmt::Debug for StubTls {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("StubTls").finish_non_exhaustive()
    }
}

impl StubTls {
    /// A new CA and a server certificate signed by it (ECDSA P-256), valid for
    /// `STUB_CERT_NAMES`. A CA and a leaf, as a real server has: a client trusts the CA
    /// (`ca_pem`), and webpki refuses a CA certificate served as the leaf
    /// (`CaUsedAsEndEntity`).
    pub fn generate() -> io::Result<StubTls> {
        let err =
            |e: rcgen::Error| io::Error::other(format!("cannot make the stub certificate: {e}"));
        let ca_key = KeyPair::generate().map_err(err)?;
        let mut ca_params = CertificateParams::new(Vec::<String>::new()).map_err(err)?;
        ca_params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        // A name of its own per CA: webpki picks the trust anchor by subject, so two stubs'
        // CAs of one name would fail as a bad signature instead of an unknown issuer.
        let id: String =
            ca_key.public_key_raw().iter().take(8).map(|b| format!("{b:02x}")).collect();
        ca_params.distinguished_name.push(DnType::CommonName, format!("llm-loadgen stub CA {id}"));
        ca_params.key_usages = vec![KeyUsagePurpose::KeyCertSign, KeyUsagePurpose::CrlSign];
        let ca = ca_params.self_signed(&ca_key).map_err(err)?;
        let leaf_key = KeyPair::generate().map_err(err)?;
        let names: Vec<String> = STUB_CERT_NAMES.iter().map(|n| n.to_string()).collect();
        let mut leaf_params = CertificateParams::new(names).map_err(err)?;
        leaf_params.distinguished_name.push(DnType::CommonName, "llm-loadgen stub");
        let leaf = leaf_params.signed_by(&leaf_key, &ca, &ca_key).map_err(err)?;
        let chain: Vec<CertificateDer<'static>> = vec![leaf.der().clone(), ca.der().clone()];
        let key = PrivateKeyDer::Pkcs8(PrivatePkcs8KeyDer::from(leaf_key.serialize_der()));
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let tls_err = |e: rustls::Error| io::Error::other(format!("cannot set up stub TLS: {e}"));
        let mut config = ServerConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()
            .map_err(tls_err)?
            .with_no_client_auth()
            .with_single_cert(chain, key)
            .map_err(tls_err)?;
        config.alpn_protocols = vec![b"http/1.1".to_vec()];
        Ok(StubTls { config: Arc::new(config), ca_pem: ca.pem() })
    }
}
