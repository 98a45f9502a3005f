//! External tensor data: the `location`, `offset` and `length` keys of a `TensorProto`,
//! read from a file inside the model's folder.
//!
//! A model is untrusted input, so its external data may only name a regular file that really
//! lies inside the model's folder: a location that is absolute or climbs out with `..` is
//! refused as written, and the path is then resolved (symlinks included) and must still lie
//! inside the folder (also resolved). The file's type is checked before it is opened, since
//! opening a FIFO or a device can block forever, and `offset` and `length` are checked against
//! its size before anything is allocated or read. Keys other than those ONNX defines are
//! refused, as is a key given twice.

use super::proto::TensorProto;
use super::ImportError;
use bytes::Bytes;
use std::fs::{File, Metadata};
use std::path::{Component, Path, PathBuf};

/// The bytes a tensor stored as external data refers to: a memory-mapped range of its file
/// (read from the page cache where the weight is used, never copied; like the model's own
/// mapping, the file must not shrink while the model is compiled).
pub fn read_external(t: &TensorProto, model_dir: Option<&Path>) -> Result<Bytes, ImportError> {
    let location = t
        .external_data
        .iter()
        .find(|e| e.key() == "location")
        .map_or(String::new(), |e| e.value().to_string());
    let err = |message: String| ImportError::ExternalData {
        tensor: t.name().to_string(),
        location: location.clone(),
        message,
    };
    let (mut offset, mut length) = (None, None);
    for (i, e) in t.external_data.iter().enumerate() {
        if t.external_data[..i].iter().any(|earlier| earlier.key() == e.key()) {
            return Err(err(format!("key `{}` is given twice", e.key())));
        }
        match e.key() {
            "location" => {}
            "offset" => offset = Some(byte_count("offset", e.value()).map_err(err)?),
            "length" => length = Some(byte_count("length", e.value()).map_err(err)?),
            // ONNX's optional SHA-1 of the data, and the folder onnx's Python helper may record
            // (which its own reader ignores too): neither is used. The checksum is not
            // verified, there being no SHA-1 here without a new dependency; it protects
            // against accidents only, and the size checks below catch a truncated file.
            "checksum" | "basepath" => {}
            other => {
                return Err(err(format!(
                    "unknown key `{other}` (known: location, offset, length, checksum)"
                )))
            }
        }
    }
    if location.is_empty() {
        return Err(err("no `location` key".into()));
    }
    let offset = offset.unwrap_or(0);
    let dir =
        model_dir.ok_or_else(|| err("the model's folder is not known, so external data cannot be found".into()))?;
    let path = resolve(dir, &location).map_err(&err)?;
    let (real, meta) = regular_file_inside(dir, &path).map_err(&err)?;
    let size = meta.len();
    let length = length.unwrap_or(size.saturating_sub(offset));
    if offset.checked_add(length).is_none_or(|end| end > size) {
        return Err(err(format!(
            "bytes {offset}..{} lie past the end of the file ({size} bytes)",
            offset.saturating_add(length)
        )));
    }
    let file = open_without_blocking(&real).map_err(|e| err(format!("cannot open {}: {e}", real.display())))?;
    // The file checked above must be the one opened (nothing swapped it in between).
    let opened = file
        .metadata()
        .map_err(|e| err(format!("cannot read {}: {e}", real.display())))?;
    if !same_file(&meta, &opened) {
        return Err(err(format!("{} changed while it was being opened", real.display())));
    }
    // `offset + length` is within the file's size, checked above
    let want = usize::try_from(length).map_err(|_| err(format!("{length} bytes do not fit in memory")))?;
    if want == 0 {
        return Ok(Bytes::new());
    }
    // a mapping starts on a page: map from the page that holds `offset`
    let start = offset - offset % PAGE;
    let skip = (offset - start) as usize;
    // SAFETY: mapped read-only and only read through `Bytes`; a file shortened underneath
    // faults, as with the model's own mapping (`model.rs`)
    let map = unsafe { memmap2::MmapOptions::new().offset(start).len(skip + want).map(&file) }
        .map_err(|e| err(format!("cannot map {}: {e}", real.display())))?;
    Ok(Bytes::from_owner(map).slice(skip..))
}

/// The granularity of a mapping's offset (the page size of every machine mxc runs on, or a
/// multiple of it).
const PAGE: u64 = 1 << 16;

/// The value of an `offset` or `length` key: a decimal byte count.
fn byte_count(key: &str, value: &str) -> Result<u64, String> {
    let digits = value.trim();
    if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return Err(format!("`{key}` is not a byte count: \"{value}\""));
    }
    digits
        .parse::<u64>()
        .map_err(|_| format!("`{key}` is too large: \"{value}\""))
}

/// `location` joined to `dir`, refusing absolute paths and paths that leave `dir` as written.
fn resolve(dir: &Path, location: &str) -> Result<PathBuf, String> {
    let rel = Path::new(location);
    let mut depth = 0usize;
    for c in rel.components() {
        match c {
            Component::Normal(_) => depth += 1,
            Component::CurDir => {}
            Component::ParentDir if depth > 0 => depth -= 1,
            Component::ParentDir => return Err("the path leaves the model's folder".into()),
            Component::RootDir | Component::Prefix(_) => {
                return Err("the path is absolute; it must be relative to the model's folder".into())
            }
        }
    }
    Ok(dir.join(rel))
}

/// `path` with every symlink resolved, and its metadata, if it is a regular file inside `dir`
/// (resolved too). Nothing is opened: a FIFO or a device is refused from its metadata alone.
fn regular_file_inside(dir: &Path, path: &Path) -> Result<(PathBuf, Metadata), String> {
    let real_dir =
        std::fs::canonicalize(dir).map_err(|e| format!("cannot resolve the model's folder {}: {e}", dir.display()))?;
    let real = std::fs::canonicalize(path).map_err(|e| match e.kind() {
        std::io::ErrorKind::NotFound => format!("file {} not found", path.display()),
        _ => format!("cannot resolve {}: {e}", path.display()),
    })?;
    if !real.starts_with(&real_dir) {
        return Err(format!(
            "{} resolves to {}, outside the model's folder {}",
            path.display(),
            real.display(),
            real_dir.display()
        ));
    }
    let meta = std::fs::metadata(&real).map_err(|e| format!("cannot read {}: {e}", real.display()))?;
    if !meta.is_file() {
        return Err(format!("{} is {}, not a regular file", real.display(), kind_of(&meta)));
    }
    Ok((real, meta))
}

/// What a file that is not a regular file is, in words.
fn kind_of(meta: &Metadata) -> &'static str {
    let ty = meta.file_type();
    if ty.is_dir() {
        return "a directory";
    }
    #[cfg(unix)]
    {
        use std::os::unix::fs::FileTypeExt;
        if ty.is_fifo() {
            return "a FIFO";
        }
        if ty.is_socket() {
            return "a socket";
        }
        if ty.is_block_device() || ty.is_char_device() {
            return "a device";
        }
    }
    "a special file"
}

/// Opens `path` for reading; on Unix without blocking, so that a FIFO swapped in after the
/// type check cannot hang the open (the check after opening then refuses it).
fn open_without_blocking(path: &Path) -> std::io::Result<File> {
    let mut options = std::fs::OpenOptions::new();
    options.read(true);
    #[cfg(unix)]
    std::os::unix::fs::OpenOptionsExt::custom_flags(&mut options, libc::O_NONBLOCK);
    options.open(path)
}

/// Whether two metadata describe the same file (device and inode where there are such).
fn same_file(a: &Metadata, b: &Metadata) -> bool {
    #[cfg(unix)]
    {
        use std::os::unix::fs::MetadataExt;
        a.dev() == b.dev() && a.ino() == b.ino() && b.is_file()
    }
    #[cfg(not(unix))]
    {
        a.len() == b.len() && b.is_file()
    }
}

#[cfg(test)]
mod tests {
    use super::super::proto::tensor_proto::{DataLocation, DataType};
    use super::super::proto::StringStringEntryProto;
    use super::super::testutil::*;
    use super::super::{import_file, ImportOptions};
    use super::*;

    /// The values of the graph's first constant.
    fn constant_values(g: &mxc_dialects::Graph) -> Vec<f64> {
        let w = g.ops.iter().find_map(|op| op.attrs.tensor("value").ok());
        w.expect("a constant").to_f64_vec()
    }

    /// A fresh folder under the system's temporary folder.
    fn scratch(name: &str) -> PathBuf {
        let dir = std::env::temp_dir().join(format!("mxc-external-{name}-{}", std::process::id()));
        std::fs::create_dir_all(&dir).expect("creates the folder");
        dir
    }

    fn external(location: &str, offset: Option<u64>, length: Option<u64>) -> TensorProto {
        let entry = |k: &str, v: String| StringStringEntryProto {
            key: Some(k.into()),
            value: Some(v),
        };
        let mut data = vec![entry("location", location.into())];
        data.extend(offset.map(|o| entry("offset", o.to_string())));
        data.extend(length.map(|l| entry("length", l.to_string())));
        TensorProto {
            name: Some("w".into()),
            dims: vec![2],
            data_type: Some(DataType::Float as i32),
            external_data: data,
            data_location: Some(DataLocation::External as i32),
            ..Default::default()
        }
    }

    /// Writes a model whose initializer `w` is `t` next to `y = x + w`, and imports it.
    fn import_with(dir: &Path, t: TensorProto) -> Result<mxc_dialects::Graph, ImportError> {
        let bytes = ModelBuilder::new(17)
            .input("x", DataType::Float, &[2])
            .init(t)
            .node(node("Add", &["x", "w"], &["y"], vec![]))
            .output("y")
            .bytes();
        let path = dir.join("model.onnx");
        std::fs::write(&path, bytes).expect("writes the model");
        import_file(&path, &ImportOptions::default())
    }

    #[test]
    fn reads_data_at_an_offset() {
        let dir = scratch("offset");
        let mut data = vec![0u8; 8];
        data.extend([1.5f32, -2.0].iter().flat_map(|v| v.to_le_bytes()));
        std::fs::write(dir.join("weights.bin"), data).expect("writes");
        let g = import_with(&dir, external("./weights.bin", Some(8), Some(8))).expect("imports");
        assert_eq!(constant_values(&g), vec![1.5, -2.0]);
        let err = import_with(&dir, external("weights.bin", Some(12), None))
            .map(|_| ())
            .unwrap_err();
        assert!(err.to_string().contains("holds 4 bytes"), "{err}");
        let err = import_with(&dir, external("weights.bin", Some(8), Some(100)))
            .map(|_| ())
            .unwrap_err();
        assert!(err.to_string().contains("past the end of the file"), "{err}");
        std::fs::remove_dir_all(&dir).ok();
    }

    /// The data is mapped from the page that holds its offset: offsets on either side of a
    /// mapping's granularity, and not on a page, read the right bytes.
    #[test]
    fn data_past_the_first_pages_at_unaligned_offsets_is_read_exactly() {
        let dir = scratch("mapped");
        let values: Vec<f32> = (0..100_000).map(|i| i as f32 * 0.5).collect();
        let bytes: Vec<u8> = values.iter().flat_map(|v| v.to_le_bytes()).collect();
        std::fs::write(dir.join("weights.bin"), &bytes).expect("writes");
        for first in [1usize, 1023, 16_383, 16_384, 16_385, 99_998] {
            let g = import_with(&dir, external("weights.bin", Some(first as u64 * 4), Some(8))).expect("imports");
            assert_eq!(
                constant_values(&g),
                vec![values[first] as f64, values[first + 1] as f64],
                "at {first}"
            );
        }
        std::fs::remove_dir_all(&dir).ok();
    }

    #[test]
    fn paths_leaving_the_model_folder_are_refused() {
        let dir = scratch("escape");
        let err = import_with(&dir, external("../secret.bin", None, None))
            .map(|_| ())
            .unwrap_err();
        assert_eq!(
            err.to_string(),
            "tensor \"w\": external data \"../secret.bin\": the path leaves the model's folder"
        );
        let err = import_with(&dir, external("a/../../secret.bin", None, None))
            .map(|_| ())
            .unwrap_err();
        assert!(err.to_string().contains("leaves the model's folder"), "{err}");
        let err = import_with(&dir, external("/etc/passwd", None, None))
            .map(|_| ())
            .unwrap_err();
        assert!(
            err.to_string().contains("\"/etc/passwd\": the path is absolute"),
            "{err}"
        );
        std::fs::remove_dir_all(&dir).ok();
    }

    #[test]
    fn a_missing_file_is_named() {
        let dir = scratch("missing");
        let err = import_with(&dir, external("sub/../gone.bin", None, None))
            .map(|_| ())
            .unwrap_err();
        let msg = err.to_string();
        assert!(
            msg.starts_with("tensor \"w\": external data \"sub/../gone.bin\": file "),
            "{msg}"
        );
        assert!(msg.ends_with("gone.bin not found"), "{msg}");
        std::fs::remove_dir_all(&dir).ok();
    }

    /// `t` with one more `key = value` entry.
    fn with_key(mut t: TensorProto, key: &str, value: &str) -> TensorProto {
        t.external_data.push(StringStringEntryProto {
            key: Some(key.into()),
            value: Some(value.into()),
        });
        t
    }

    fn import_err(dir: &Path, t: TensorProto) -> String {
        import_with(dir, t).map(|_| ()).unwrap_err().to_string()
    }

    fn two_floats(path: &Path) {
        let bytes: Vec<u8> = [1.5f32, -2.0].iter().flat_map(|v| v.to_le_bytes()).collect();
        std::fs::write(path, bytes).expect("writes");
    }

    #[test]
    fn symlinks_are_followed_only_inside_the_model_folder() {
        let dir = scratch("symlink");
        let outside = scratch("symlink-outside");
        two_floats(&outside.join("secret.bin"));
        std::os::unix::fs::symlink(outside.join("secret.bin"), dir.join("link.bin")).expect("links");
        let msg = import_err(&dir, external("link.bin", None, None));
        assert!(msg.starts_with("tensor \"w\": external data \"link.bin\": "), "{msg}");
        assert!(msg.contains("secret.bin, outside the model's folder"), "{msg}");
        // a link to a folder outside, followed by a name inside it
        std::os::unix::fs::symlink(&outside, dir.join("out")).expect("links");
        let msg = import_err(&dir, external("out/secret.bin", None, None));
        assert!(msg.contains("outside the model's folder"), "{msg}");
        // a link that stays inside is fine
        std::fs::create_dir_all(dir.join("data")).expect("creates");
        two_floats(&dir.join("data/w.bin"));
        std::os::unix::fs::symlink("data/w.bin", dir.join("inside.bin")).expect("links");
        let g = import_with(&dir, external("inside.bin", None, None)).expect("imports");
        assert_eq!(constant_values(&g), vec![1.5, -2.0]);
        std::fs::remove_dir_all(&dir).ok();
        std::fs::remove_dir_all(&outside).ok();
    }

    #[test]
    fn a_fifo_is_refused_without_blocking() {
        let dir = scratch("fifo");
        let fifo = dir.join("pipe.bin");
        let made = std::process::Command::new("mkfifo")
            .arg(&fifo)
            .status()
            .expect("runs mkfifo");
        assert!(made.success(), "mkfifo failed");
        // Opening a FIFO with no writer blocks: run the import on a thread and give it a
        // deadline, so that a regression fails instead of hanging the tests.
        let (tx, rx) = std::sync::mpsc::channel();
        let d = dir.clone();
        std::thread::spawn(move || {
            tx.send(import_err(&d, external("pipe.bin", None, Some(8)))).ok();
        });
        let msg = rx
            .recv_timeout(std::time::Duration::from_secs(20))
            .expect("the import returns instead of blocking on the FIFO");
        assert!(msg.contains("pipe.bin is a FIFO, not a regular file"), "{msg}");
        std::fs::remove_dir_all(&dir).ok();
    }

    #[test]
    fn a_directory_is_refused() {
        let dir = scratch("directory");
        std::fs::create_dir_all(dir.join("weights")).expect("creates");
        let msg = import_err(&dir, external("weights", None, None));
        assert!(msg.contains("weights is a directory, not a regular file"), "{msg}");
        let msg = import_err(&dir, external(".", None, None));
        assert!(msg.contains("is a directory, not a regular file"), "{msg}");
        std::fs::remove_dir_all(&dir).ok();
    }

    #[test]
    fn ranges_past_the_end_are_refused_before_reading() {
        let dir = scratch("range");
        two_floats(&dir.join("w.bin"));
        for (offset, length) in [
            (Some(4), Some(8)),
            (Some(9), None),
            (None, Some(1 << 62)),
            (Some(u64::MAX), Some(1)),
        ] {
            let msg = import_err(&dir, external("w.bin", offset, length));
            assert!(
                msg.contains("past the end of the file (8 bytes)"),
                "{offset:?} {length:?}: {msg}"
            );
        }
        std::fs::remove_dir_all(&dir).ok();
    }

    #[test]
    fn keys_are_checked() {
        let dir = scratch("keys");
        two_floats(&dir.join("w.bin"));
        let msg = import_err(&dir, with_key(external("w.bin", None, None), "frobnicate", "1"));
        assert!(
            msg.ends_with("unknown key `frobnicate` (known: location, offset, length, checksum)"),
            "{msg}"
        );
        let msg = import_err(&dir, with_key(external("w.bin", Some(0), None), "offset", "0"));
        assert!(msg.ends_with("key `offset` is given twice"), "{msg}");
        let msg = import_err(&dir, with_key(external("w.bin", None, None), "location", "other.bin"));
        assert!(msg.ends_with("key `location` is given twice"), "{msg}");
        for bad in ["-8", "8.0", "", "0x8", "1e3", "eight"] {
            let msg = import_err(&dir, with_key(external("w.bin", None, None), "length", bad));
            assert!(
                msg.ends_with(&format!("`length` is not a byte count: \"{bad}\"")),
                "{msg}"
            );
        }
        let msg = import_err(
            &dir,
            with_key(external("w.bin", None, None), "offset", "99999999999999999999"),
        );
        assert!(msg.contains("`offset` is too large"), "{msg}");
        // the optional checksum is accepted (and not verified)
        import_with(
            &dir,
            with_key(external("w.bin", Some(0), Some(8)), "checksum", "da39a3ee"),
        )
        .expect("imports");
        std::fs::remove_dir_all(&dir).ok();
    }

    #[test]
    fn model_bytes_without_a_folder_cannot_use_external_data() {
        let bytes = ModelBuilder::new(17)
            .init(external("w.bin", None, None))
            .output("w")
            .bytes();
        let err = super::super::import_bytes(&bytes, None, &ImportOptions::default())
            .map(|_| ())
            .unwrap_err();
        assert!(err.to_string().contains("the model's folder is not known"), "{err}");
    }
}
