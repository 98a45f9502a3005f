//! Authenticity of `.mxr` files: Ed25519 key pairs (`mxc keygen`), the signature a file carries
//! over its BLAKE3 digest, and the trust policy a loader applies (docs/security.md).
//!
//! Key files are one line of text: `mxc-ed25519-secret-key <64 hex digits>` (the 32-byte seed,
//! written readable by its owner only) or `mxc-ed25519-public-key <64 hex digits>`.

use crate::RunError;
use ed25519_dalek::{Signature, Signer, SigningKey, Verifier, VerifyingKey};
use std::path::Path;

const SECRET_TAG: &str = "mxc-ed25519-secret-key";
const PUBLIC_TAG: &str = "mxc-ed25519-public-key";

/// What a signature signs: this tag, then the file's digest (so a signature over some other
/// message made with the same key is never taken for a file's).
const DOMAIN: &[u8] = b"mxc .mxr digest\0";

/// Bytes of a public key and of a signature.
pub const KEY_BYTES: usize = 32;
pub const SIGNATURE_BYTES: usize = 64;

/// A key that signs files.
pub struct SecretKey(SigningKey);

/// A key that checks signatures.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PublicKey(VerifyingKey);

/// Which files a loader accepts.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub enum TrustPolicy {
    /// Any file whose digest is right; a signature it carries must still be valid.
    #[default]
    AnyIntact,
    /// Only files signed by one of these keys.
    SignedBy(Vec<PublicKey>),
}

impl SecretKey {
    /// A new key from the operating system's random source.
    pub fn generate() -> Result<SecretKey, RunError> {
        let mut seed = [0u8; 32];
        getrandom::fill(&mut seed).map_err(|e| RunError::Key(format!("no random bytes: {e}")))?;
        Ok(SecretKey(SigningKey::from_bytes(&seed)))
    }

    pub fn read(path: &Path) -> Result<SecretKey, RunError> {
        let seed = read_key_file(path, SECRET_TAG)?;
        Ok(SecretKey(SigningKey::from_bytes(&seed)))
    }

    /// Writes the key to `path`, readable by its owner only; an existing file is not replaced.
    pub fn write(&self, path: &Path) -> Result<(), RunError> {
        write_key_file(path, SECRET_TAG, &self.0.to_bytes(), 0o600)
    }

    pub fn public(&self) -> PublicKey {
        PublicKey(self.0.verifying_key())
    }

    /// The signature of a file whose digest is `digest`.
    pub fn sign(&self, digest: &[u8; 32]) -> [u8; SIGNATURE_BYTES] {
        self.0.sign(&message(digest)).to_bytes()
    }
}

impl PublicKey {
    pub fn read(path: &Path) -> Result<PublicKey, RunError> {
        PublicKey::from_bytes(&read_key_file(path, PUBLIC_TAG)?)
            .map_err(|m| RunError::Key(format!("{}: {m}", path.display())))
    }

    pub fn from_bytes(bytes: &[u8; KEY_BYTES]) -> Result<PublicKey, String> {
        VerifyingKey::from_bytes(bytes)
            .map(PublicKey)
            .map_err(|_| "not an Ed25519 public key".to_string())
    }

    pub fn to_bytes(self) -> [u8; KEY_BYTES] {
        self.0.to_bytes()
    }

    /// Writes the key to `path`; an existing file is not replaced.
    pub fn write(&self, path: &Path) -> Result<(), RunError> {
        write_key_file(path, PUBLIC_TAG, &self.to_bytes(), 0o644)
    }

    /// Whether `signature` signs a file whose digest is `digest` with this key.
    pub fn verifies(&self, digest: &[u8; 32], signature: &[u8; SIGNATURE_BYTES]) -> bool {
        self.0
            .verify(&message(digest), &Signature::from_bytes(signature))
            .is_ok()
    }

    /// The key's first 8 bytes in hex, to name it in messages.
    pub fn fingerprint(&self) -> String {
        hex(&self.to_bytes()[..8])
    }
}

impl TrustPolicy {
    /// The keys in the files `paths`; no paths, no policy.
    pub fn from_files(paths: &[impl AsRef<Path>]) -> Result<TrustPolicy, RunError> {
        if paths.is_empty() {
            return Ok(TrustPolicy::AnyIntact);
        }
        let keys = paths
            .iter()
            .map(|p| PublicKey::read(p.as_ref()))
            .collect::<Result<_, _>>()?;
        Ok(TrustPolicy::SignedBy(keys))
    }
}

fn message(digest: &[u8; 32]) -> Vec<u8> {
    [DOMAIN, digest].concat()
}

/// Writes a key file of kind `tag` holding `key` to `path` (a new file, with Unix permissions
/// `mode`).
fn write_key_file(path: &Path, tag: &str, key: &[u8; 32], mode: u32) -> Result<(), RunError> {
    let mut options = std::fs::OpenOptions::new();
    options.write(true).create_new(true);
    #[cfg(unix)]
    std::os::unix::fs::OpenOptionsExt::mode(&mut options, mode);
    #[cfg(not(unix))]
    let _ = mode;
    let io = |e: std::io::Error| RunError::Key(format!("{}: {e}", path.display()));
    let mut file = options.open(path).map_err(io)?;
    std::io::Write::write_all(&mut file, format!("{tag} {}\n", hex(key)).as_bytes()).map_err(io)
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// The 32 bytes of the key file at `path`, which must be of kind `tag`.
fn read_key_file(path: &Path, tag: &str) -> Result<[u8; 32], RunError> {
    let bad = |m: &str| RunError::Key(format!("{}: {m}", path.display()));
    let text = std::fs::read_to_string(path).map_err(|e| bad(&e.to_string()))?;
    let (kind, digits) = text.trim().split_once(' ').ok_or_else(|| bad("not an mxc key file"))?;
    if kind != tag {
        let other = if kind == SECRET_TAG || kind == PUBLIC_TAG {
            kind
        } else {
            "not an mxc key"
        };
        return Err(bad(&format!("expected a `{tag}` file, found {other}")));
    }
    let digits = digits.trim().as_bytes();
    if digits.len() != 64 {
        return Err(bad("the key is not 64 hex digits"));
    }
    let mut key = [0u8; 32];
    for (i, pair) in digits.chunks(2).enumerate() {
        let pair = std::str::from_utf8(pair).map_err(|_| bad("the key is not hex"))?;
        key[i] = u8::from_str_radix(pair, 16).map_err(|_| bad("the key is not hex"))?;
    }
    Ok(key)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_signature_verifies_under_its_key_only() {
        let (a, b) = (SecretKey::generate().unwrap(), SecretKey::generate().unwrap());
        let digest = [7u8; 32];
        let signature = a.sign(&digest);
        assert!(a.public().verifies(&digest, &signature));
        assert!(!b.public().verifies(&digest, &signature));
        let mut other = digest;
        other[0] ^= 1;
        assert!(!a.public().verifies(&other, &signature));
    }

    #[test]
    fn keys_round_trip_through_files_and_kinds_are_not_confused() {
        let dir = tempfile::tempdir().unwrap();
        let key = SecretKey::generate().unwrap();
        let (secret, public) = (dir.path().join("k.key"), dir.path().join("k.pub"));
        key.write(&secret).unwrap();
        key.public().write(&public).unwrap();
        assert_eq!(SecretKey::read(&secret).unwrap().public(), key.public());
        assert_eq!(PublicKey::read(&public).unwrap(), key.public());
        let err = PublicKey::read(&secret).unwrap_err().to_string();
        assert!(err.contains("expected a `mxc-ed25519-public-key` file"), "{err}");
        assert!(key.write(&secret).is_err(), "an existing key is not replaced");
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt;
            let mode = std::fs::metadata(&secret).unwrap().permissions().mode();
            assert_eq!(mode & 0o777, 0o600);
        }
        std::fs::write(&public, "mxc-ed25519-public-key 12zz").unwrap();
        assert!(PublicKey::read(&public)
            .unwrap_err()
            .to_string()
            .contains("64 hex digits"));
    }
}
