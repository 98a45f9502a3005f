//! The persistent kernel cache: one object file per kernel, keyed by a SHA-256 of everything its
//! code depends on (the kernel's MLIR with its symbol normalised, its arity, the machine and
//! optimisation settings, the MLIR → LLVM pipeline, mxc's version and `CODEGEN_VERSION`).
//!
//! Layout: `<root>/<mxc version>-<CODEGEN_VERSION>/<key as 64 hex digits>.o`, each file the
//! `MAGIC` line, the SHA-256 of the object, then the object. An entry is written to a temporary
//! file in the same folder and renamed into place, so a reader sees a whole entry or none and two
//! processes writing the same key (the same bytes) need no lock. An entry that is missing,
//! unreadable or whose checksum does not match is a miss, and is written again.

use sha2::{Digest, Sha256};
use std::io::Write;
use std::path::{Path, PathBuf};

/// Bump when code generation changes what an object holds for the same key contents (the entry
/// wrapper, the object format, ...); it names the version folder and is part of every key.
pub const CODEGEN_VERSION: u32 = 2;

const MAGIC: &[u8] = b"mxc kernel object 1\n";

/// Where the cache lives unless told otherwise: `$MXC_CACHE_DIR`, else `$XDG_CACHE_HOME/mxc`,
/// else `~/.cache/mxc`; `None` when none of these is set.
pub fn default_dir() -> Option<PathBuf> {
    let var = |name: &str| std::env::var_os(name).filter(|v| !v.is_empty()).map(PathBuf::from);
    var("MXC_CACHE_DIR")
        .or_else(|| var("XDG_CACHE_HOME").map(|d| d.join("mxc")))
        .or_else(|| var("HOME").map(|d| d.join(".cache").join("mxc")))
}

/// An open cache: the version folder under a root.
pub struct Cache {
    dir: PathBuf,
}

impl Cache {
    /// The cache under `root`, or `None` when its folder cannot be created (then nothing is
    /// cached and every kernel is compiled).
    pub fn open(root: &Path) -> Option<Cache> {
        let dir = root.join(format!("{}-{CODEGEN_VERSION}", env!("CARGO_PKG_VERSION")));
        std::fs::create_dir_all(&dir).ok()?;
        Some(Cache { dir })
    }

    fn path(&self, key: &Key) -> PathBuf {
        self.dir.join(format!("{}.o", key.hex()))
    }

    /// The object stored under `key`, if there is an intact one.
    pub fn get(&self, key: &Key) -> Option<Vec<u8>> {
        let bytes = std::fs::read(self.path(key)).ok()?;
        let rest = bytes.strip_prefix(MAGIC)?;
        if rest.len() < 32 {
            return None;
        }
        let (sum, object) = rest.split_at(32);
        (Sha256::digest(object).as_slice() == sum).then(|| object.to_vec())
    }

    /// Stores `object` under `key` (atomically: temporary file, then rename).
    pub fn put(&self, key: &Key, object: &[u8]) -> std::io::Result<()> {
        let mut file = tempfile::NamedTempFile::new_in(&self.dir)?;
        file.write_all(MAGIC)?;
        file.write_all(&Sha256::digest(object))?;
        file.write_all(object)?;
        file.persist(self.path(key)).map_err(|e| e.error)?;
        Ok(())
    }
}

/// A kernel's cache key.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Key([u8; 32]);

impl Key {
    /// The key of kernel `symbol` whose `func.func` text is `func` and which takes `arity`
    /// pointers, compiled as `machine` describes. The symbol is replaced by a fixed name first,
    /// so the same code under another op index has the same key.
    pub fn of(func: &str, symbol: &str, arity: usize, machine: &str) -> Key {
        let normalised = func.replacen(&format!("@{symbol}("), "@kernel(", 1);
        let mut h = Sha256::new();
        let arity = arity.to_string();
        let version = CODEGEN_VERSION.to_string();
        let fields = [
            env!("CARGO_PKG_VERSION"),
            &version,
            mxc_lowering::loops::PIPELINE,
            machine,
            &arity,
            &normalised,
        ];
        for field in fields {
            h.update((field.len() as u64).to_le_bytes());
            h.update(field.as_bytes());
        }
        Key(h.finalize().into())
    }

    pub fn hex(&self) -> String {
        self.0.iter().map(|b| format!("{b:02x}")).collect()
    }

    /// The name the kernel is compiled under (its entry is this plus `_entry`): the same for the
    /// same code in any program, and distinct between kernels linked together.
    pub fn symbol(&self) -> String {
        format!("mxk_{}", &self.hex()[..32])
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const FUNC: &str = "func.func @k3_relu(%in0: memref<4xf32>, %out0: memref<4xf32>) {\n  return\n}\n";

    #[test]
    fn key_ignores_the_symbol_but_not_the_code_or_machine() {
        let renamed = FUNC.replace("@k3_relu(", "@k7_relu(");
        let a = Key::of(FUNC, "k3_relu", 2, "cpu");
        assert_eq!(a, Key::of(&renamed, "k7_relu", 2, "cpu"));
        assert_ne!(a, Key::of(&FUNC.replace("4xf32", "8xf32"), "k3_relu", 2, "cpu"));
        assert_ne!(a, Key::of(FUNC, "k3_relu", 2, "ref"));
        assert_ne!(a, Key::of(FUNC, "k3_relu", 3, "cpu"));
    }

    #[test]
    fn entries_round_trip_and_damage_is_a_miss() {
        let root = tempfile::tempdir().unwrap();
        let cache = Cache::open(root.path()).unwrap();
        let key = Key::of(FUNC, "k3_relu", 2, "cpu");
        assert_eq!(cache.get(&key), None);
        cache.put(&key, b"object bytes").unwrap();
        assert_eq!(cache.get(&key).as_deref(), Some(&b"object bytes"[..]));
        let path = cache.path(&key);
        let mut bytes = std::fs::read(&path).unwrap();
        *bytes.last_mut().unwrap() ^= 1;
        std::fs::write(&path, &bytes).unwrap();
        assert_eq!(cache.get(&key), None);
        std::fs::write(&path, &bytes[..10]).unwrap();
        assert_eq!(cache.get(&key), None);
        cache.put(&key, b"object bytes").unwrap();
        assert_eq!(cache.get(&key).as_deref(), Some(&b"object bytes"[..]));
        let names: Vec<_> = std::fs::read_dir(&cache.dir)
            .unwrap()
            .flatten()
            .map(|e| e.file_name())
            .collect();
        assert_eq!(names.len(), 1, "no temporary file left behind: {names:?}");
    }
}
