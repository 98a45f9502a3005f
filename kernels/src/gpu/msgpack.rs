//! A MessagePack reader for what AMDGPU code objects' metadata notes hold: maps, arrays,
//! strings, integers, booleans, nil, floats and binary data, read into a tree.

/// A decoded value.
#[derive(Clone, Debug, PartialEq)]
pub enum Value {
    Nil,
    Bool(bool),
    Int(i128),
    Float(f64),
    Str(String),
    Bin(Vec<u8>),
    Array(Vec<Value>),
    Map(Vec<(Value, Value)>),
}

impl Value {
    /// The value of key `key` of a map.
    pub fn get(&self, key: &str) -> Option<&Value> {
        match self {
            Value::Map(entries) => entries.iter().find(|(k, _)| k.as_str() == Some(key)).map(|(_, v)| v),
            _ => None,
        }
    }

    pub fn as_str(&self) -> Option<&str> {
        match self {
            Value::Str(s) => Some(s),
            _ => None,
        }
    }

    pub fn as_int(&self) -> Option<i128> {
        match self {
            Value::Int(n) => Some(*n),
            _ => None,
        }
    }

    pub fn as_array(&self) -> Option<&[Value]> {
        match self {
            Value::Array(items) => Some(items),
            _ => None,
        }
    }
}

/// The value `bytes` holds (all of them), or why it cannot be read.
pub fn decode(bytes: &[u8]) -> Result<Value, String> {
    let mut r = Reader { rest: bytes };
    let v = r.value(0)?;
    match r.rest.len() {
        0 => Ok(v),
        n => Err(format!("{n} bytes after the value")),
    }
}

/// How deep arrays and maps may nest (a corrupt note must not exhaust the stack).
const MAX_DEPTH: usize = 32;

/// The bytes not read yet.
struct Reader<'a> {
    rest: &'a [u8],
}

impl Reader<'_> {
    fn take(&mut self, n: usize) -> Result<&[u8], String> {
        let (head, rest) = self.rest.split_at_checked(n).ok_or("truncated")?;
        self.rest = rest;
        Ok(head)
    }

    fn uint(&mut self, n: usize) -> Result<u64, String> {
        Ok(self.take(n)?.iter().fold(0u64, |acc, &b| acc << 8 | u64::from(b)))
    }

    fn value(&mut self, depth: usize) -> Result<Value, String> {
        if depth > MAX_DEPTH {
            return Err(format!("nested deeper than {MAX_DEPTH}"));
        }
        let tag = self.take(1)?[0];
        let sized = |r: &mut Self, n: usize| r.uint(n).map(|v| v as usize);
        Ok(match tag {
            0x00..=0x7f => Value::Int(i128::from(tag)),
            0x80..=0x8f => self.map(usize::from(tag & 0x0f), depth)?,
            0x90..=0x9f => self.array(usize::from(tag & 0x0f), depth)?,
            0xa0..=0xbf => self.string(usize::from(tag & 0x1f))?,
            0xc0 => Value::Nil,
            0xc2 => Value::Bool(false),
            0xc3 => Value::Bool(true),
            0xc4..=0xc6 => {
                let n = sized(self, 1 << (tag - 0xc4))?;
                Value::Bin(self.take(n)?.to_vec())
            }
            0xca => Value::Float(f64::from(f32::from_bits(self.uint(4)? as u32))),
            0xcb => Value::Float(f64::from_bits(self.uint(8)?)),
            0xcc..=0xcf => Value::Int(i128::from(self.uint(1 << (tag - 0xcc))?)),
            0xd0..=0xd3 => {
                let n = 1usize << (tag - 0xd0);
                let raw = self.uint(n)?;
                let shift = 64 - 8 * n as u32;
                Value::Int(i128::from(((raw << shift) as i64) >> shift))
            }
            0xd9..=0xdb => {
                let n = sized(self, 1 << (tag - 0xd9))?;
                self.string(n)?
            }
            0xdc | 0xdd => {
                let n = sized(self, 2 << (tag - 0xdc))?;
                self.array(n, depth)?
            }
            0xde | 0xdf => {
                let n = sized(self, 2 << (tag - 0xde))?;
                self.map(n, depth)?
            }
            0xe0..=0xff => Value::Int(i128::from(tag as i8)),
            other => return Err(format!("unsupported MessagePack type {other:#04x}")),
        })
    }

    fn string(&mut self, n: usize) -> Result<Value, String> {
        let bytes = self.take(n)?.to_vec();
        String::from_utf8(bytes)
            .map(Value::Str)
            .map_err(|_| "a string is not UTF-8".into())
    }

    fn array(&mut self, n: usize, depth: usize) -> Result<Value, String> {
        // each item takes at least a byte: a count larger than what is left is corrupt
        if n > self.rest.len() {
            return Err("an array longer than the data".into());
        }
        (0..n)
            .map(|_| self.value(depth + 1))
            .collect::<Result<_, _>>()
            .map(Value::Array)
    }

    fn map(&mut self, n: usize, depth: usize) -> Result<Value, String> {
        if n > self.rest.len() {
            return Err("a map longer than the data".into());
        }
        (0..n)
            .map(|_| Ok((self.value(depth + 1)?, self.value(depth + 1)?)))
            .collect::<Result<_, String>>()
            .map(Value::Map)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_maps_arrays_strings_and_numbers() {
        // {"a": [1, -1, 300, "xy"], "b": true, "c": -200}
        let bytes = [
            0x83, 0xa1, b'a', 0x94, 0x01, 0xff, 0xcd, 0x01, 0x2c, 0xa2, b'x', b'y', 0xa1, b'b', 0xc3, 0xa1, b'c', 0xd1,
            0xff, 0x38,
        ];
        let v = decode(&bytes).unwrap();
        let a = v.get("a").and_then(Value::as_array).unwrap();
        assert_eq!(
            a[0..3].iter().map(|x| x.as_int().unwrap()).collect::<Vec<_>>(),
            [1, -1, 300]
        );
        assert_eq!(a[3].as_str(), Some("xy"));
        assert_eq!(v.get("b"), Some(&Value::Bool(true)));
        assert_eq!(v.get("c").and_then(Value::as_int), Some(-200));
        assert!(decode(&bytes[..bytes.len() - 1]).is_err());
        assert!(decode(&[0xdd, 0xff, 0xff, 0xff, 0xff])
            .unwrap_err()
            .contains("longer than the data"));
        let deep = vec![0x91; 100];
        assert!(decode(&deep).unwrap_err().contains("nested deeper"));
    }
}
