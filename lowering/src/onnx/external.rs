//! External tensor data: the `location`, `offset` and `length` keys of a `TensorProto`,
//! read from a file inside the model's folder. A location that is absolute or climbs out of
//! the folder with `..` is refused.

use super::proto::TensorProto;
use super::ImportError;
use std::fs::File;
use std::io::{Read, Seek, SeekFrom};
use std::path::{Component, Path, PathBuf};

/// The bytes a tensor stored as external data refers to.
pub fn read_external(t: &TensorProto, model_dir: Option<&Path>) -> Result<Vec<u8>, ImportError> {
    let key = |k: &str| {
        t.external_data
            .iter()
            .find(|e| e.key() == k)
            .map(|e| e.value().to_string())
    };
    let location = key("location").unwrap_or_default();
    let err = |message: String| ImportError::ExternalData {
        tensor: t.name().to_string(),
        location: location.clone(),
        message,
    };
    if location.is_empty() {
        return Err(err("no `location` key".into()));
    }
    let number = |k: &str| -> Result<Option<u64>, ImportError> {
        key(k)
            .map(|v| {
                v.trim()
                    .parse::<u64>()
                    .map_err(|_| err(format!("`{k}` is not a byte count: \"{v}\"")))
            })
            .transpose()
    };
    let (offset, length) = (number("offset")?.unwrap_or(0), number("length")?);
    let dir =
        model_dir.ok_or_else(|| err("the model's folder is not known, so external data cannot be found".into()))?;
    let path = resolve(dir, &location).map_err(err)?;
    let mut file = File::open(&path).map_err(|e| match e.kind() {
        std::io::ErrorKind::NotFound => err(format!("file {} not found", path.display())),
        _ => err(format!("cannot open {}: {e}", path.display())),
    })?;
    let size = file
        .metadata()
        .map_err(|e| err(format!("cannot read {}: {e}", path.display())))?
        .len();
    let length = length.unwrap_or(size.saturating_sub(offset));
    if offset.checked_add(length).is_none_or(|end| end > size) {
        return Err(err(format!(
            "bytes {offset}..{} lie past the end of the file ({size} bytes)",
            offset.saturating_add(length)
        )));
    }
    let mut data = Vec::with_capacity(length as usize);
    file.seek(SeekFrom::Start(offset))
        .and_then(|_| file.take(length).read_to_end(&mut data))
        .map_err(|e| err(format!("cannot read {}: {e}", path.display())))?;
    Ok(data)
}

/// `location` joined to `dir`, refusing absolute paths and paths that leave `dir`.
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

#[cfg(test)]
mod tests {
    use super::super::proto::tensor_proto::{DataLocation, DataType};
    use super::super::proto::StringStringEntryProto;
    use super::super::testutil::*;
    use super::super::{import_file, ImportOptions};
    use super::*;

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
        let w = g
            .ops
            .iter()
            .find_map(|op| op.attrs.tensor("value").ok())
            .expect("a constant");
        assert_eq!(w.to_f64_vec(), vec![1.5, -2.0]);
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
