//! Signed `.mxr` files and the trust policy through the CLI (docs/security.md): `mxc keygen`,
//! `mxc compile --sign`, `--trust` and `$MXC_TRUSTED_KEYS`; a file whose shared object was
//! swapped after signing is refused before anything in it is loaded; loading leaves nothing in
//! the temporary folder.

use crate::common::{kernel_cache, mxc, repo, stderr};
use std::path::Path;
use std::process::{Command, Output};

/// Bytes of the trailer: the digest, the signer's key, the signature.
const TRAILER: usize = 32 + 32 + 64;

fn ok(out: Output, what: &str) -> String {
    assert!(out.status.success(), "{what}: {}", stderr(&out));
    String::from_utf8(out.stdout).unwrap()
}

fn refused(out: Output, expected: &str) {
    let err = stderr(&out);
    assert!(!out.status.success(), "it ran");
    assert!(err.contains(expected), "{err}");
}

fn path(p: &Path) -> &str {
    p.to_str().unwrap()
}

#[test]
fn signed_files_run_under_a_trust_policy_and_others_do_not() {
    let dir = tempfile::tempdir().unwrap();
    let d = |name: &str| dir.path().join(name);
    ok(mxc(&["keygen", path(&d("release"))]), "keygen");
    ok(mxc(&["keygen", path(&d("other"))]), "keygen");
    refused(mxc(&["keygen", path(&d("release"))]), "File exists");
    let model = repo().join("examples/tiny_cnn.onnx");
    let (signed, unsigned) = (d("signed.mxr"), d("unsigned.mxr"));
    ok(
        mxc(&[
            "compile",
            path(&model),
            "-o",
            path(&signed),
            "--sign",
            path(&d("release.key")),
        ]),
        "compile --sign",
    );
    ok(mxc(&["compile", path(&model), "-o", path(&unsigned)]), "compile");
    refused(
        mxc(&[
            "compile",
            path(&model),
            "-o",
            path(&d("x.mxr")),
            "--sign",
            path(&d("release.pub")),
        ]),
        "expected a `mxc-ed25519-secret-key` file",
    );

    let release = d("release.pub");
    let trust = ["--trust", path(&release)];
    ok(
        mxc(&[&["run", path(&signed)][..], &trust].concat()),
        "run a signed file",
    );
    ok(mxc(&["run", path(&unsigned)]), "run an unsigned file without a policy");
    refused(
        mxc(&[&["run", path(&unsigned)][..], &trust].concat()),
        "not signed, and the trust policy asks for a trusted signature",
    );
    refused(
        mxc(&["run", path(&signed), "--trust", path(&d("other.pub"))]),
        "which the trust policy does not trust",
    );
    // the policy from the environment, for params as for run and perf
    let with_env = |args: &[&str], keys: &Path| {
        Command::new(env!("CARGO_BIN_EXE_mxc"))
            .env("MXC_CACHE_DIR", kernel_cache())
            .env("MXC_TRUSTED_KEYS", keys)
            .args(args)
            .output()
            .unwrap()
    };
    ok(
        with_env(&["params", path(&signed)], &d("release.pub")),
        "params, trusted",
    );
    refused(
        with_env(&["perf", path(&unsigned), "-n", "1"], &d("release.pub")),
        "not signed",
    );
    // the keys are read for compiled files only: a model compiled now runs no code from a file
    refused(with_env(&["run", path(&signed)], &d("missing.pub")), "missing.pub");
    ok(
        with_env(&["run", path(&model)], &d("missing.pub")),
        "run a model with a policy set",
    );

    // the shared object changed and the digest made again: the signature gives it away
    let mut bytes = std::fs::read(&signed).unwrap();
    let library = bytes.windows(4).position(|w| w == b"\x7fELF").expect("the kernels");
    bytes[library + 0x200] ^= 0xff;
    let body = bytes.len() - TRAILER;
    let digest = blake3::hash(&bytes[..body]);
    bytes[body..body + 32].copy_from_slice(digest.as_bytes());
    let swapped = d("swapped.mxr");
    std::fs::write(&swapped, &bytes).unwrap();
    refused(
        mxc(&[&["run", path(&swapped)][..], &trust].concat()),
        "does not match the file: it was changed after signing",
    );
    refused(mxc(&["run", path(&swapped)]), "does not match the file");
}

#[test]
fn loading_leaves_nothing_in_the_temporary_folder() {
    let dir = tempfile::tempdir().unwrap();
    let tmp = tempfile::tempdir().unwrap();
    let file = dir.path().join("tiny.mxr");
    let model = repo().join("examples/tiny_cnn.onnx");
    ok(mxc(&["compile", path(&model), "-o", path(&file)]), "compile");
    let run = Command::new(env!("CARGO_BIN_EXE_mxc"))
        .env("MXC_CACHE_DIR", kernel_cache())
        .env("TMPDIR", tmp.path())
        .args(["run", path(&file)])
        .output()
        .unwrap();
    ok(run, "run");
    let left: Vec<_> = std::fs::read_dir(tmp.path()).unwrap().collect();
    assert!(left.is_empty(), "left behind: {left:?}");
}
