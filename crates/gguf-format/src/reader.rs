//! Parsing and validation of a whole GGUF file held in memory.

use std::collections::HashMap;

use crate::error::{Error, Result};
use crate::keys;
use crate::types::{GgmlType, TypeIdError};
use crate::value::{convert, ArrayView, ByteOrder, Cursor, FromValue, Value, ValueType};

/// Arrays may nest at most this deep (the spec allows nesting; ggml itself allows none).
/// The limit keeps a hostile file from exhausting the stack.
pub const MAX_ARRAY_DEPTH: u32 = 32;

/// The alignment of the data section when `general.alignment` is absent.
pub const DEFAULT_ALIGNMENT: u64 = 32;

/// The four bytes every GGUF file starts with.
pub const MAGIC: &[u8; 4] = b"GGUF";

/// One metadata entry.
#[derive(Debug, Clone, Copy)]
pub struct KeyValue<'a> {
    /// The key.
    pub key: &'a str,
    /// The value.
    pub value: Value<'a>,
    /// File offset where the entry (its key's length field) starts.
    pub offset: u64,
}

/// One tensor's description; its bytes are at [`GgufFile::tensor_data`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TensorInfo<'a> {
    /// The tensor's name.
    pub name: &'a str,
    n_dims: u8,
    ne: [u64; 4],
    /// Its ggml type.
    pub ggml_type: GgmlType,
    /// Where its data starts, relative to the data section.
    pub offset: u64,
    /// Its data size in bytes.
    pub size: u64,
    /// File offset where this tensor info starts.
    pub info_offset: u64,
}

impl<'a> TensorInfo<'a> {
    /// The dimensions in ggml order (`ne[0]`, the row length, first), as stored.
    pub fn shape(&self) -> &[u64] {
        &self.ne[..self.n_dims as usize]
    }

    /// All four ggml dimensions, missing ones as 1.
    pub fn ne(&self) -> [u64; 4] {
        self.ne
    }

    /// The number of elements.
    pub fn element_count(&self) -> u64 {
        // Cannot overflow: the byte size, which is at least this, was checked on parse.
        self.shape().iter().product()
    }
}

/// A parsed, validated GGUF file borrowing its bytes.
///
/// Metadata strings and arrays and tensor data are views into the bytes; nothing is copied.
/// [`GgufFile::parse`] reads from any byte slice; [`GgufFile::open`] maps a file into memory.
///
/// ```
/// # let bytes = gguf_format::testing::tiny_file();
/// use gguf_format::GgufFile;
/// let file = GgufFile::parse(&bytes)?;
/// assert_eq!(file.architecture()?, "llama");
/// assert_eq!(file.get::<u32>("llama.block_count")?, 2);
/// assert_eq!(file.arch_get::<u32>("block_count")?, 2);
/// let t = file.tensor("output_norm.weight").unwrap();
/// assert_eq!(t.shape(), &[8]);
/// assert_eq!(file.tensor_data(t).len(), 32);
/// # Ok::<(), gguf_format::Error>(())
/// ```
#[derive(Debug, Clone)]
pub struct GgufFile<'a> {
    data: &'a [u8],
    version: u32,
    byte_order: ByteOrder,
    alignment: u64,
    data_offset: u64,
    metadata: Vec<KeyValue<'a>>,
    key_index: HashMap<&'a str, usize>,
    tensors: Vec<TensorInfo<'a>>,
    tensor_index: HashMap<&'a str, usize>,
}

/// The smallest encoding of one metadata entry (v1: empty key, type, a u8 value).
const MIN_KV_BYTES: u64 = 4 + 4 + 1;
/// The smallest encoding of one tensor info (v1: empty name, zero dims, type, offset).
const MIN_TENSOR_INFO_BYTES: u64 = 4 + 4 + 4 + 8;

fn truncated(c: &Cursor<'_>, needed: u64, what: impl FnOnce() -> String) -> Error {
    Error::Truncated {
        offset: c.offset(),
        what: what(),
        needed,
        available: c.remaining(),
    }
}

/// Reads a fixed-width number, or reports what was being read.
macro_rules! need {
    ($c:expr, $method:ident, $size:expr, $what:expr) => {{
        let before = *$c;
        match $c.$method() {
            Some(v) => v,
            None => return Err(truncated(&before, $size, $what)),
        }
    }};
}

fn read_bytes<'a>(c: &mut Cursor<'a>, what: &dyn Fn() -> String) -> Result<(&'a [u8], u64)> {
    let len = need!(c, count, c.count_size(), || format!("length of {}", what()));
    let start = c.offset();
    match c.take(len) {
        Some(b) => Ok((b, start)),
        None => Err(truncated(c, len, what)),
    }
}

fn read_name<'a>(c: &mut Cursor<'a>, what: &dyn Fn() -> String) -> Result<&'a str> {
    let (bytes, start) = read_bytes(c, what)?;
    std::str::from_utf8(bytes).map_err(|_| Error::InvalidUtf8 {
        offset: start,
        what: what(),
    })
}

/// Reads and validates one value of type `ty`.
fn read_value<'a>(
    c: &mut Cursor<'a>,
    ty: ValueType,
    what: &dyn Fn() -> String,
    depth: u32,
) -> Result<Value<'a>> {
    let start = *c;
    match ty {
        ValueType::Bool => {
            let byte = need!(c, u8, 1, what);
            if byte > 1 {
                return Err(Error::InvalidBool {
                    offset: start.offset(),
                    what: what(),
                    byte,
                });
            }
            Ok(Value::Bool(byte == 1))
        }
        ValueType::String => Ok(Value::String(read_bytes(c, what)?.0)),
        ValueType::Array => {
            if depth >= MAX_ARRAY_DEPTH {
                return Err(Error::ArrayTooDeep {
                    offset: start.offset(),
                    what: what(),
                    max: MAX_ARRAY_DEPTH,
                });
            }
            let type_offset = c.offset();
            let type_id = need!(c, u32, 4, || format!("element type of {}", what()));
            let elem = ValueType::from_id(type_id).ok_or_else(|| Error::UnknownValueType {
                offset: type_offset,
                what: format!("element type of {}", what()),
                type_id,
            })?;
            let len = need!(c, count, c.count_size(), || format!("length of {}", what()));
            validate_elements(c, elem, len, what, depth + 1)?;
            // Validated above, so decoding from the start cannot fail.
            let mut again = start;
            again
                .value(ValueType::Array)
                .ok_or_else(|| truncated(&start, 0, what))
        }
        _ => {
            let size = ty.fixed_size().unwrap_or(0) as u64;
            match c.value(ty) {
                Some(v) => Ok(v),
                None => Err(truncated(&start, size, what)),
            }
        }
    }
}

/// Checks `len` elements of type `elem` starting at the cursor and moves past them.
fn validate_elements(
    c: &mut Cursor<'_>,
    elem: ValueType,
    len: u64,
    what: &dyn Fn() -> String,
    depth: u32,
) -> Result<()> {
    if let Some(size) = elem.fixed_size() {
        let total = len.saturating_mul(size as u64);
        let start = *c;
        let Some(bytes) = c.take(total) else {
            return Err(truncated(&start, total, || {
                format!("{} elements of type {} in {}", len, elem, what())
            }));
        };
        if elem == ValueType::Bool {
            if let Some(i) = bytes.iter().position(|&b| b > 1) {
                return Err(Error::InvalidBool {
                    offset: start.offset() + i as u64,
                    what: format!("{}[{}]", what(), i),
                    byte: bytes[i],
                });
            }
        }
        return Ok(());
    }
    // Strings and arrays: every element takes at least a length field, so this loop ends
    // after at most remaining/4 rounds whatever `len` claims.
    for i in 0..len {
        let elem_what = || format!("{}[{}]", what(), i);
        read_value(c, elem, &elem_what, depth)?;
    }
    Ok(())
}

impl<'a> GgufFile<'a> {
    /// Parses and validates a whole GGUF file held in `data`.
    ///
    /// Checks every length, count and offset against the size of `data`, rejects duplicate
    /// keys and tensor names, bad alignment, retired or unknown tensor types, and tensors that
    /// are misaligned, out of bounds or overlapping. Allocates in proportion to the number of
    /// keys and tensors, never to lengths read from the data.
    pub fn parse(data: &'a [u8]) -> Result<GgufFile<'a>> {
        let mut c = Cursor {
            data,
            pos: 0,
            order: ByteOrder::Little,
            wide: true,
            base: 0,
        };
        let magic = c.take(4).unwrap_or(data);
        if magic != MAGIC {
            let hint = match magic {
                b"lmgg" => {
                    " (this is a legacy unversioned GGML file; a llama model in it converts \
                     to GGUF with `gguf convert`)"
                }
                b"fmgg" => " (this is a legacy GGMF file; `gguf convert` turns it into GGUF)",
                b"tjgg" => " (this is a legacy GGJT file; `gguf convert` turns it into GGUF)",
                _ if data.len() < 4 => " (the file is shorter than 4 bytes)",
                _ => "",
            };
            return Err(Error::BadMagic {
                found: magic.to_vec(),
                hint,
            });
        }
        let raw_version = need!(&mut c, u32, 4, || "version".to_string());
        // A big-endian file's version (1..3) reads as a multiple of 65536 in little-endian,
        // the same test the reference reader uses.
        let (version, byte_order) = if raw_version & 0xFFFF == 0 && raw_version != 0 {
            (raw_version.swap_bytes(), ByteOrder::Big)
        } else {
            (raw_version, ByteOrder::Little)
        };
        if !(1..=3).contains(&version) {
            return Err(Error::UnsupportedVersion {
                version: raw_version,
            });
        }
        c.order = byte_order;
        c.wide = version >= 2;

        let tensor_count = need!(&mut c, count, c.count_size(), || "tensor count".into());
        let kv_count = need!(&mut c, count, c.count_size(), || "metadata count".into());
        // Cheap early rejection of absurd counts; also bounds the allocations below.
        let min_needed = kv_count
            .saturating_mul(MIN_KV_BYTES)
            .saturating_add(tensor_count.saturating_mul(MIN_TENSOR_INFO_BYTES));
        if min_needed > c.remaining() {
            return Err(truncated(&c, min_needed, || {
                format!("{kv_count} metadata entries and {tensor_count} tensor infos")
            }));
        }

        let mut metadata = Vec::with_capacity(kv_count as usize);
        let mut key_index = HashMap::with_capacity(kv_count as usize);
        for i in 0..kv_count {
            let offset = c.offset();
            let key = read_name(&mut c, &|| format!("key of metadata entry {i}"))?;
            let what = || format!("value of metadata key '{key}'");
            let type_offset = c.offset();
            let type_id = need!(&mut c, u32, 4, || format!("type of {}", what()));
            let ty = ValueType::from_id(type_id).ok_or_else(|| Error::UnknownValueType {
                offset: type_offset,
                what: what(),
                type_id,
            })?;
            let value = read_value(&mut c, ty, &what, 0)?;
            if let Some(&first) = key_index.get(key) {
                let first: &KeyValue = &metadata[first];
                return Err(Error::DuplicateKey {
                    offset,
                    key: key.to_string(),
                    first: first.offset,
                });
            }
            key_index.insert(key, metadata.len());
            metadata.push(KeyValue { key, value, offset });
        }

        let alignment = match key_index.get(keys::general::ALIGNMENT) {
            None => DEFAULT_ALIGNMENT,
            Some(&i) => {
                let kv = &metadata[i];
                match kv.value {
                    Value::U32(a) if a.is_power_of_two() => u64::from(a),
                    Value::U32(a) => {
                        return Err(Error::BadAlignment {
                            offset: kv.offset,
                            found: a.to_string(),
                        })
                    }
                    other => {
                        return Err(Error::BadAlignment {
                            offset: kv.offset,
                            found: format!("of type {}", other.value_type()),
                        })
                    }
                }
            }
        };

        let mut tensors = Vec::with_capacity(tensor_count as usize);
        let mut tensor_index = HashMap::with_capacity(tensor_count as usize);
        for i in 0..tensor_count {
            let info_offset = c.offset();
            let name = read_name(&mut c, &|| format!("name of tensor {i}"))?;
            let dims_offset = c.offset();
            let n_dims = need!(&mut c, u32, 4, || format!(
                "dimension count of tensor '{name}'"
            ));
            if n_dims > 4 {
                return Err(Error::TooManyDims {
                    offset: dims_offset,
                    name: name.to_string(),
                    n_dims,
                });
            }
            let mut ne = [1u64; 4];
            for (d, slot) in ne.iter_mut().enumerate().take(n_dims as usize) {
                *slot = need!(&mut c, count, c.count_size(), || format!(
                    "dimension {d} of tensor '{name}'"
                ));
            }
            let type_offset = c.offset();
            let type_id = need!(&mut c, u32, 4, || format!("type of tensor '{name}'"));
            let ggml_type = match GgmlType::from_id(type_id) {
                Ok(t) => t,
                Err(TypeIdError::Unknown) => {
                    return Err(Error::UnknownGgmlType {
                        offset: type_offset,
                        name: name.to_string(),
                        type_id,
                    })
                }
                Err(TypeIdError::Retired {
                    name: type_name,
                    replacement,
                }) => {
                    return Err(Error::RetiredGgmlType {
                        offset: type_offset,
                        name: name.to_string(),
                        type_id,
                        type_name,
                        replacement,
                    })
                }
            };
            let offset = need!(&mut c, u64, 8, || format!("data offset of tensor '{name}'"));
            let shape = &ne[..n_dims as usize];
            let size = tensor_size_checked(name, ggml_type, shape, info_offset)?;
            if !offset.is_multiple_of(alignment) {
                return Err(Error::MisalignedTensor {
                    offset: info_offset,
                    name: name.to_string(),
                    data_offset: offset,
                    alignment,
                });
            }
            if let Some(&first) = tensor_index.get(name) {
                let first: &TensorInfo = &tensors[first];
                return Err(Error::DuplicateTensor {
                    offset: info_offset,
                    name: name.to_string(),
                    first: first.info_offset,
                });
            }
            tensor_index.insert(name, tensors.len());
            tensors.push(TensorInfo {
                name,
                n_dims: n_dims as u8,
                ne,
                ggml_type,
                offset,
                size,
                info_offset,
            });
        }

        let data_offset = c.offset().next_multiple_of(alignment);
        let file_size = data.len() as u64;
        for t in &tensors {
            let start = data_offset.saturating_add(t.offset);
            let end = start.saturating_add(t.size);
            if end > file_size {
                return Err(Error::TensorOutOfBounds {
                    offset: t.info_offset,
                    name: t.name.to_string(),
                    start,
                    end,
                    file_size,
                });
            }
        }
        check_overlaps(&tensors)?;

        Ok(GgufFile {
            data,
            version,
            byte_order,
            alignment,
            data_offset,
            metadata,
            key_index,
            tensors,
            tensor_index,
        })
    }

    /// The whole file's bytes.
    pub fn bytes(&self) -> &'a [u8] {
        self.data
    }

    /// The GGUF version (1, 2 or 3).
    pub fn version(&self) -> u32 {
        self.version
    }

    /// The byte order of numbers in the file.
    pub fn byte_order(&self) -> ByteOrder {
        self.byte_order
    }

    /// The data section's alignment (`general.alignment`, default 32).
    pub fn alignment(&self) -> u64 {
        self.alignment
    }

    /// File offset where the data section starts.
    pub fn data_offset(&self) -> u64 {
        self.data_offset
    }

    /// Every metadata entry in file order.
    pub fn metadata(&self) -> &[KeyValue<'a>] {
        &self.metadata
    }

    /// The entry for `key`.
    pub fn entry(&self, key: &str) -> Option<&KeyValue<'a>> {
        self.key_index.get(key).map(|&i| &self.metadata[i])
    }

    /// The value of `key`.
    pub fn value(&self, key: &str) -> Option<Value<'a>> {
        self.entry(key).map(|kv| kv.value)
    }

    /// The value of `key` as `T`; an error names the key when it is missing or has another type.
    pub fn get<T: FromValue<'a>>(&self, key: &str) -> Result<T> {
        match self.value(key) {
            Some(v) => convert(key, v),
            None => Err(Error::MissingKey {
                key: key.to_string(),
            }),
        }
    }

    /// Like [`GgufFile::get`], but `Ok(None)` when the key is absent.
    pub fn get_opt<T: FromValue<'a>>(&self, key: &str) -> Result<Option<T>> {
        self.value(key).map(|v| convert(key, v)).transpose()
    }

    /// Any non-negative integer value of `key` as `usize` (files disagree on `u32` vs `u64`).
    pub fn get_usize(&self, key: &str) -> Result<usize> {
        let v = self.get::<Value>(key)?;
        v.as_integer()
            .and_then(|i| usize::try_from(i).ok())
            .ok_or_else(|| Error::wrong_type(key, "non-negative integer", v.value_type()))
    }

    /// The elements of array `key` as `T`; an error names the key when it is missing, not an
    /// array, or an array of another element type.
    pub fn get_array<T: FromValue<'a> + 'a>(
        &self,
        key: &str,
    ) -> Result<impl Iterator<Item = T> + 'a> {
        let array: ArrayView<'a> = self.get(key)?;
        let elem = array.element_type();
        array
            .typed::<T>()
            .ok_or_else(|| Error::wrong_type(key, format!("array of {}", T::EXPECTED), elem))
    }

    /// `general.architecture`.
    pub fn architecture(&self) -> Result<&'a str> {
        self.get(keys::general::ARCHITECTURE)
    }

    /// The full key `{general.architecture}.{suffix}`, e.g. `llama.block_count`.
    pub fn arch_key(&self, suffix: &str) -> Result<String> {
        Ok(format!("{}.{}", self.architecture()?, suffix))
    }

    /// The value of `{general.architecture}.{suffix}` as `T`.
    pub fn arch_get<T: FromValue<'a>>(&self, suffix: &str) -> Result<T> {
        self.get(&self.arch_key(suffix)?)
    }

    /// Every tensor info in file order.
    pub fn tensors(&self) -> &[TensorInfo<'a>] {
        &self.tensors
    }

    /// The tensor named `name`, in constant time.
    pub fn tensor(&self, name: &str) -> Option<&TensorInfo<'a>> {
        self.tensor_index.get(name).map(|&i| &self.tensors[i])
    }

    /// The bytes of a tensor of this file (validated on parse to lie inside the file).
    pub fn tensor_data(&self, info: &TensorInfo<'_>) -> &'a [u8] {
        let start = (self.data_offset + info.offset) as usize;
        self.data
            .get(start..start + info.size as usize)
            .unwrap_or(&[])
    }

    /// Whether every tensor starts exactly where the previous one ends, padded to the
    /// alignment: the layout llama.cpp's loader requires and [`crate::GgufBuilder`] writes.
    pub fn has_canonical_layout(&self) -> bool {
        let mut expected = 0u64;
        for t in &self.tensors {
            if t.offset != expected {
                return false;
            }
            expected = t.offset + t.size.next_multiple_of(self.alignment);
        }
        true
    }
}

fn tensor_size_checked(name: &str, t: GgmlType, shape: &[u64], offset: u64) -> Result<u64> {
    t.tensor_size(shape).ok_or_else(|| {
        let reason = if shape
            .first()
            .is_some_and(|&ne0| !ne0.is_multiple_of(t.block_size()))
        {
            format!(
                "ne[0] must be a multiple of the block size {}",
                t.block_size()
            )
        } else {
            "its size in bytes overflows 64 bits".to_string()
        };
        Error::BadShape {
            offset,
            name: name.to_string(),
            ggml_type: t.name(),
            shape: shape.to_vec(),
            reason,
        }
    })
}

fn check_overlaps(tensors: &[TensorInfo<'_>]) -> Result<()> {
    let mut order: Vec<&TensorInfo> = Vec::with_capacity(tensors.len());
    order.extend(tensors.iter().filter(|t| t.size > 0));
    order.sort_unstable_by_key(|t| t.offset);
    for pair in order.windows(2) {
        let (a, b) = (pair[0], pair[1]);
        let a_end = a.offset + a.size;
        if b.offset < a_end {
            return Err(Error::OverlappingTensors {
                offset: b.info_offset,
                first: a.name.to_string(),
                first_start: a.offset,
                first_end: a_end,
                second: b.name.to_string(),
                second_start: b.offset,
            });
        }
    }
    Ok(())
}
