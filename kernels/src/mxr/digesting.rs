//! Writing a file's bytes in order while keeping their BLAKE3 digest (`digest`), which the trailer
//! ends the file with (signed where a key is given). The weights, the bulk of a file, go
//! through threads that compute the deferred ones (weights folded at compile time) and digest
//! them while this one writes: computing, digesting and writing overlap.

use super::align;
use crate::signing::{SecretKey, KEY_BYTES, SIGNATURE_BYTES};
use mxc_dialects::program::ALIGN;
use mxc_dialects::Tensor;
use std::io::Write;
use std::sync::mpsc::{sync_channel, Receiver};

/// The threads that compute deferred weights while they are written.
const COMPUTING: usize = 2;

/// The digest a file ends with: BLAKE3 (256 bits), which a core computes several times as fast
/// as SHA-256 (vector units, not a chain of blocks): reading a file checks every byte of it,
/// so its speed is load time as much as compile time.
pub(super) fn digest(bytes: &[u8]) -> [u8; super::DIGEST] {
    blake3::hash(bytes).into()
}

/// A writer that keeps the digest of what went through it, and its length.
pub(super) struct Digesting<'w> {
    out: &'w mut dyn Write,
    hash: blake3::Hasher,
    pub(super) written: usize,
}

const ZEROS: [u8; ALIGN] = [0; ALIGN];

impl<'w> Digesting<'w> {
    pub(super) fn new(out: &'w mut dyn Write) -> Self {
        Digesting {
            out,
            hash: blake3::Hasher::new(),
            written: 0,
        }
    }

    /// Ends the file with the trailer: the digest of everything written, then the public key
    /// of `key` and its signature of the digest (zeros without a key).
    pub(super) fn finish(self, key: Option<&SecretKey>) -> std::io::Result<()> {
        let digest: [u8; super::DIGEST] = self.hash.finalize().into();
        self.out.write_all(&digest)?;
        match key {
            Some(key) => {
                self.out.write_all(&key.public().to_bytes())?;
                self.out.write_all(&key.sign(&digest))
            }
            None => self.out.write_all(&[0; KEY_BYTES + SIGNATURE_BYTES]),
        }
    }

    pub(super) fn put(&mut self, bytes: &[u8]) -> std::io::Result<()> {
        self.out.write_all(bytes)?;
        self.hash.update(bytes);
        self.written += bytes.len();
        Ok(())
    }

    /// Zeros up to offset `at`.
    pub(super) fn pad_to(&mut self, at: usize) -> std::io::Result<()> {
        while self.written < at {
            let n = (at - self.written).min(ZEROS.len());
            self.put(&ZEROS[..n])?;
        }
        Ok(())
    }

    /// Puts `weights` in order, each at the next aligned offset, through a pipeline: two
    /// threads compute the deferred ones (weights folded at compile time), alternately; a
    /// third digests them in file order (the digest is its own until the last weight); this
    /// one writes. Each weight is dropped once written, so folded weights are never all in
    /// memory together, and computing, digesting and writing overlap.
    pub(super) fn put_weights(&mut self, weights: Vec<&Tensor>) -> std::io::Result<()> {
        let mut hash = std::mem::take(&mut self.hash);
        let (start, count) = (self.written, weights.len());
        let (hash, written) = std::thread::scope(|s| {
            let lanes: Vec<Receiver<Tensor>> = (0..COMPUTING)
                .map(|lane| {
                    let (ready, computed) = sync_channel::<Tensor>(1);
                    let mine: Vec<&Tensor> = weights.iter().skip(lane).step_by(COMPUTING).copied().collect();
                    s.spawn(move || {
                        for t in mine {
                            // the receiver stops listening when writing fails
                            if ready.send(t.materialized()).is_err() {
                                break;
                            }
                        }
                    });
                    computed
                })
                .collect();
            let (ready, digested) = sync_channel::<(usize, Tensor)>(1);
            let digester = s.spawn(move || {
                let mut at = start;
                for i in 0..count {
                    let Ok(t) = lanes[i % COMPUTING].recv() else { break };
                    let padding = align(at) - at;
                    hash.update(&ZEROS[..padding]);
                    hash.update(t.bytes());
                    at += padding + t.bytes().len();
                    if ready.send((padding, t)).is_err() {
                        break;
                    }
                }
                hash
            });
            let mut written = 0;
            for (padding, t) in digested {
                self.out.write_all(&ZEROS[..padding])?;
                self.out.write_all(t.bytes())?;
                self.written += padding + t.bytes().len();
                written += 1;
            }
            let hash = digester
                .join()
                .map_err(|_| std::io::Error::other("digesting the weights failed"))?;
            Ok::<_, std::io::Error>((hash, written))
        })?;
        if written != count {
            return Err(std::io::Error::other(format!(
                "{written} of {count} weights were computed"
            )));
        }
        self.hash = hash;
        Ok(())
    }
}
