//! The strings of a run. A buffer of strings holds one little-endian u64 handle per element
//! into a table: the program's string constants first (each constant's buffer is a copy of
//! its handles into them, made at load), then the strings the run's inputs and host steps
//! give, each kept once however often it is given.

use crate::RunError;
use std::collections::HashMap;

pub(crate) struct StringTable<'a> {
    constants: &'a [String],
    added: Vec<String>,
    /// The handle of each added string.
    handles: HashMap<String, u64>,
}

impl<'a> StringTable<'a> {
    pub fn new(constants: &'a [String]) -> StringTable<'a> {
        StringTable {
            constants,
            added: Vec::new(),
            handles: HashMap::new(),
        }
    }

    fn get(&self, handle: u64) -> Option<&str> {
        let n = self.constants.len() as u64;
        match handle.checked_sub(n) {
            None => Some(&self.constants[handle as usize]),
            Some(k) => self.added.get(usize::try_from(k).ok()?).map(String::as_str),
        }
    }

    fn intern(&mut self, s: &str) -> u64 {
        if let Some(&h) = self.handles.get(s) {
            return h;
        }
        let h = (self.constants.len() + self.added.len()) as u64;
        self.added.push(s.to_string());
        self.handles.insert(s.to_string(), h);
        h
    }

    /// The handles of `strings`, as a buffer holds them.
    pub fn encode<S: AsRef<str>>(&mut self, strings: &[S]) -> Vec<u8> {
        strings
            .iter()
            .flat_map(|s| self.intern(s.as_ref()).to_le_bytes())
            .collect()
    }

    /// The strings whose handles `bytes` holds (`what` names the buffer for the error: a
    /// handle outside the table means the buffer was read before it was written).
    pub fn decode(&self, bytes: &[u8], what: impl Fn() -> String) -> Result<Vec<String>, RunError> {
        bytes
            .chunks_exact(8)
            .map(|h| {
                let h = u64::from_le_bytes(h.try_into().expect("8 bytes"));
                self.get(h)
                    .map(str::to_string)
                    .ok_or_else(|| RunError::Run(format!("{} holds string handle {h}, which no string has", what())))
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn strings_are_kept_once_after_the_constants() {
        let constants = vec!["a".to_string(), "b".to_string()];
        let mut table = StringTable::new(&constants);
        let bytes = table.encode(&["c", "a", "c", "d"]);
        let handles: Vec<u64> = bytes
            .chunks_exact(8)
            .map(|h| u64::from_le_bytes(h.try_into().unwrap()))
            .collect();
        // "a" added again (constants are not looked up: their handles are their own)
        assert_eq!(handles, [2, 3, 2, 4]);
        let back = table.decode(&[0, 0, 0, 0, 0, 0, 0, 0, 4, 0, 0, 0, 0, 0, 0, 0], || "b".into());
        assert_eq!(back.unwrap(), ["a", "d"]);
        let err = table.decode(&9u64.to_le_bytes(), || "buffer 7".into()).unwrap_err();
        assert!(err.to_string().contains("buffer 7 holds string handle 9"), "{err}");
    }
}
