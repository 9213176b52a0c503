//! Building and writing GGUF files: metadata and tensor infos first, then tensor data one
//! tensor at a time, so a model never has to be held in memory.

use std::io::{self, Write};

use crate::error::{Error, Result};
use crate::keys;
use crate::reader::{GgufFile, DEFAULT_ALIGNMENT, MAGIC};
use crate::types::GgmlType;
use crate::value::{ArrayView, ByteOrder, Value, ValueType};

/// Longest tensor name ggml accepts (its `GGML_MAX_NAME` is 64 including the NUL).
pub const MAX_TENSOR_NAME_BYTES: usize = 63;

/// A metadata value owned by the caller, for building files.
///
/// ```
/// use gguf_format::OwnedValue;
/// let v = OwnedValue::from(vec!["a", "b"]);
/// assert_eq!(v.value_type().name(), "array");
/// assert_eq!(OwnedValue::from(7u32).value_type().name(), "u32");
/// ```
#[derive(Debug, Clone, PartialEq)]
pub enum OwnedValue {
    /// `uint8`
    U8(u8),
    /// `int8`
    I8(i8),
    /// `uint16`
    U16(u16),
    /// `int16`
    I16(i16),
    /// `uint32`
    U32(u32),
    /// `int32`
    I32(i32),
    /// `float32`
    F32(f32),
    /// `bool`
    Bool(bool),
    /// `string` (bytes, normally UTF-8)
    String(Vec<u8>),
    /// `array`
    Array(OwnedArray),
    /// `uint64`
    U64(u64),
    /// `int64`
    I64(i64),
    /// `float64`
    F64(f64),
}

/// An owned array: an element type and elements all of that type.
#[derive(Debug, Clone, PartialEq)]
pub struct OwnedArray {
    elem: ValueType,
    items: Vec<OwnedValue>,
}

impl OwnedArray {
    /// An array of `items`, each of type `elem`.
    pub fn new(elem: ValueType, items: Vec<OwnedValue>) -> Result<OwnedArray> {
        if let Some(bad) = items.iter().find(|v| v.value_type() != elem) {
            return Err(Error::Invalid(format!(
                "array of {elem} holds an element of type {}",
                bad.value_type()
            )));
        }
        Ok(OwnedArray { elem, items })
    }

    /// The element type.
    pub fn element_type(&self) -> ValueType {
        self.elem
    }

    /// The elements.
    pub fn items(&self) -> &[OwnedValue] {
        &self.items
    }
}

impl OwnedValue {
    /// The value's type.
    pub fn value_type(&self) -> ValueType {
        match self {
            OwnedValue::U8(_) => ValueType::U8,
            OwnedValue::I8(_) => ValueType::I8,
            OwnedValue::U16(_) => ValueType::U16,
            OwnedValue::I16(_) => ValueType::I16,
            OwnedValue::U32(_) => ValueType::U32,
            OwnedValue::I32(_) => ValueType::I32,
            OwnedValue::F32(_) => ValueType::F32,
            OwnedValue::Bool(_) => ValueType::Bool,
            OwnedValue::String(_) => ValueType::String,
            OwnedValue::Array(_) => ValueType::Array,
            OwnedValue::U64(_) => ValueType::U64,
            OwnedValue::I64(_) => ValueType::I64,
            OwnedValue::F64(_) => ValueType::F64,
        }
    }

    /// Copies a borrowed value.
    pub fn from_value(value: Value<'_>) -> OwnedValue {
        match value {
            Value::U8(v) => OwnedValue::U8(v),
            Value::I8(v) => OwnedValue::I8(v),
            Value::U16(v) => OwnedValue::U16(v),
            Value::I16(v) => OwnedValue::I16(v),
            Value::U32(v) => OwnedValue::U32(v),
            Value::I32(v) => OwnedValue::I32(v),
            Value::F32(v) => OwnedValue::F32(v),
            Value::Bool(v) => OwnedValue::Bool(v),
            Value::String(v) => OwnedValue::String(v.to_vec()),
            Value::Array(a) => OwnedValue::Array(OwnedArray {
                elem: a.element_type(),
                items: a.iter().map(OwnedValue::from_value).collect(),
            }),
            Value::U64(v) => OwnedValue::U64(v),
            Value::I64(v) => OwnedValue::I64(v),
            Value::F64(v) => OwnedValue::F64(v),
        }
    }
}

macro_rules! owned_from {
    ($t:ty, $variant:ident) => {
        impl From<$t> for OwnedValue {
            fn from(v: $t) -> OwnedValue {
                OwnedValue::$variant(v)
            }
        }
    };
}
owned_from!(u8, U8);
owned_from!(i8, I8);
owned_from!(u16, U16);
owned_from!(i16, I16);
owned_from!(u32, U32);
owned_from!(i32, I32);
owned_from!(f32, F32);
owned_from!(bool, Bool);
owned_from!(u64, U64);
owned_from!(i64, I64);
owned_from!(f64, F64);
owned_from!(OwnedArray, Array);

impl From<&str> for OwnedValue {
    fn from(v: &str) -> OwnedValue {
        OwnedValue::String(v.as_bytes().to_vec())
    }
}

impl From<String> for OwnedValue {
    fn from(v: String) -> OwnedValue {
        OwnedValue::String(v.into_bytes())
    }
}

impl<T: Into<OwnedValue>> From<Vec<T>> for OwnedValue {
    /// An array; an empty `Vec` becomes an empty array of the type `T` maps to.
    fn from(v: Vec<T>) -> OwnedValue {
        let items: Vec<OwnedValue> = v.into_iter().map(Into::into).collect();
        let elem = items
            .first()
            .map(OwnedValue::value_type)
            .unwrap_or(ValueType::U8);
        OwnedValue::Array(OwnedArray { elem, items })
    }
}

/// A metadata value in a builder: borrowed from a file being copied, or new.
#[derive(Debug, Clone)]
pub enum MetaValue<'a> {
    /// Copied from a file; written back without decoding when the encoding allows.
    Borrowed(Value<'a>),
    /// Set by the caller.
    Owned(OwnedValue),
}

impl MetaValue<'_> {
    /// The value's type.
    pub fn value_type(&self) -> ValueType {
        match self {
            MetaValue::Borrowed(v) => v.value_type(),
            MetaValue::Owned(v) => v.value_type(),
        }
    }

    fn as_u32(&self) -> Option<u32> {
        match self {
            MetaValue::Borrowed(Value::U32(v)) | MetaValue::Owned(OwnedValue::U32(v)) => Some(*v),
            _ => None,
        }
    }
}

/// What the writer needs to know of one tensor.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TensorSpec {
    name: String,
    ggml_type: GgmlType,
    shape: Vec<u64>,
    size: u64,
}

impl TensorSpec {
    /// A tensor of `ggml_type` and `shape` (ggml order, at most 4 dimensions).
    pub fn new(name: impl Into<String>, ggml_type: GgmlType, shape: &[u64]) -> Result<TensorSpec> {
        let name = name.into();
        if name.len() > MAX_TENSOR_NAME_BYTES {
            return Err(Error::Invalid(format!(
                "tensor name '{name}' is {} bytes; ggml allows at most {MAX_TENSOR_NAME_BYTES}",
                name.len()
            )));
        }
        if shape.len() > 4 {
            return Err(Error::TooManyDims {
                offset: 0,
                name,
                n_dims: shape.len() as u32,
            });
        }
        let size = ggml_type
            .tensor_size(shape)
            .filter(|_| shape.iter().all(|&d| d <= i64::MAX as u64))
            .ok_or_else(|| Error::BadShape {
                offset: 0,
                name: name.clone(),
                ggml_type: ggml_type.name(),
                shape: shape.to_vec(),
                reason: format!(
                    "ne[0] must be a multiple of the block size {} and the size must fit 64 bits",
                    ggml_type.block_size()
                ),
            })?;
        Ok(TensorSpec {
            name,
            ggml_type,
            shape: shape.to_vec(),
            size,
        })
    }

    /// The name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The type.
    pub fn ggml_type(&self) -> GgmlType {
        self.ggml_type
    }

    /// The shape, ggml order.
    pub fn shape(&self) -> &[u64] {
        &self.shape
    }

    /// Data bytes.
    pub fn size(&self) -> u64 {
        self.size
    }

    /// The same tensor with trailing dimensions of 1 dropped (at least one kept), as ggml's
    /// own writer stores shapes.
    pub fn with_trimmed_shape(mut self) -> TensorSpec {
        while self.shape.len() > 1 && self.shape.last() == Some(&1) {
            self.shape.pop();
        }
        self
    }
}

/// The metadata and tensor table of a file to be written.
///
/// ```
/// use gguf_format::{GgmlType, GgufBuilder, GgufFile};
/// let mut b = GgufBuilder::new();
/// b.set("general.architecture", "llama");
/// b.add_tensor("w", GgmlType::F32, &[2, 2])?;
/// let mut out = Vec::new();
/// let mut tensors = b.write(&mut out)?;
/// tensors.write_tensor(&[0u8; 16])?;
/// tensors.finish()?;
/// let file = GgufFile::parse(&out)?;
/// assert_eq!(file.tensor("w").unwrap().shape(), &[2, 2]);
/// # Ok::<(), gguf_format::Error>(())
/// ```
#[derive(Debug, Clone)]
pub struct GgufBuilder<'a> {
    metadata: Vec<(String, MetaValue<'a>)>,
    tensors: Vec<TensorSpec>,
    version: u32,
    byte_order: ByteOrder,
}

impl Default for GgufBuilder<'_> {
    fn default() -> Self {
        GgufBuilder::new()
    }
}

impl<'a> GgufBuilder<'a> {
    /// An empty GGUF v3 little-endian file.
    pub fn new() -> GgufBuilder<'a> {
        GgufBuilder {
            metadata: Vec::new(),
            tensors: Vec::new(),
            version: 3,
            byte_order: ByteOrder::Little,
        }
    }

    /// The metadata and tensor table of `file`, for a copy or an edit. The output is v3 in
    /// the file's byte order.
    pub fn from_file(file: &GgufFile<'a>) -> GgufBuilder<'a> {
        GgufBuilder {
            metadata: file
                .metadata()
                .iter()
                .map(|kv| (kv.key.to_string(), MetaValue::Borrowed(kv.value)))
                .collect(),
            tensors: file
                .tensors()
                .iter()
                .map(|t| TensorSpec {
                    name: t.name.to_string(),
                    ggml_type: t.ggml_type,
                    shape: t.shape().to_vec(),
                    size: t.size,
                })
                .collect(),
            version: 3,
            byte_order: file.byte_order(),
        }
    }

    /// Writes version `version` (1, 2 or 3). Use 3 (the default) unless making test files:
    /// llama.cpp reads only 2 and 3.
    pub fn version(&mut self, version: u32) -> Result<&mut Self> {
        if !(1..=3).contains(&version) {
            return Err(Error::Invalid(format!(
                "cannot write GGUF version {version}"
            )));
        }
        self.version = version;
        Ok(self)
    }

    /// Writes numbers in `order` (little-endian by default).
    pub fn byte_order(&mut self, order: ByteOrder) -> &mut Self {
        self.byte_order = order;
        self
    }

    /// Sets `key`, replacing any value in place or appending it at the end.
    pub fn set(&mut self, key: &str, value: impl Into<OwnedValue>) -> &mut Self {
        self.set_meta(key, MetaValue::Owned(value.into()))
    }

    /// Sets `key` to a value borrowed from a file.
    pub fn set_value(&mut self, key: &str, value: Value<'a>) -> &mut Self {
        self.set_meta(key, MetaValue::Borrowed(value))
    }

    fn set_meta(&mut self, key: &str, value: MetaValue<'a>) -> &mut Self {
        match self.metadata.iter_mut().find(|(k, _)| k == key) {
            Some(slot) => slot.1 = value,
            None => self.metadata.push((key.to_string(), value)),
        }
        self
    }

    /// Removes `key`; returns whether it was present.
    pub fn remove(&mut self, key: &str) -> bool {
        let before = self.metadata.len();
        self.metadata.retain(|(k, _)| k != key);
        before != self.metadata.len()
    }

    /// Renames `from` to `to`, keeping its position; an error if `from` is absent or `to`
    /// exists.
    pub fn rename(&mut self, from: &str, to: &str) -> Result<&mut Self> {
        if self.get(to).is_some() {
            return Err(Error::Invalid(format!(
                "cannot rename '{from}' to '{to}': '{to}' exists"
            )));
        }
        match self.metadata.iter_mut().find(|(k, _)| k == from) {
            Some(slot) => slot.0 = to.to_string(),
            None => {
                return Err(Error::MissingKey {
                    key: from.to_string(),
                })
            }
        }
        Ok(self)
    }

    /// The value of `key`.
    pub fn get(&self, key: &str) -> Option<&MetaValue<'a>> {
        self.metadata.iter().find(|(k, _)| k == key).map(|(_, v)| v)
    }

    /// The metadata in write order.
    pub fn metadata(&self) -> &[(String, MetaValue<'a>)] {
        &self.metadata
    }

    /// Appends a tensor info; an error if the name exists or the shape is invalid.
    pub fn add_tensor(
        &mut self,
        name: &str,
        ggml_type: GgmlType,
        shape: &[u64],
    ) -> Result<&mut Self> {
        self.push_tensor(TensorSpec::new(name, ggml_type, shape)?)
    }

    /// Appends a tensor info; an error if the name exists.
    pub fn push_tensor(&mut self, spec: TensorSpec) -> Result<&mut Self> {
        if self.tensors.iter().any(|t| t.name == spec.name) {
            return Err(Error::Invalid(format!(
                "duplicate tensor name '{}'",
                spec.name
            )));
        }
        self.tensors.push(spec);
        Ok(self)
    }

    /// The tensor infos in write order.
    pub fn tensors(&self) -> &[TensorSpec] {
        &self.tensors
    }

    /// Mutable access to the tensor infos, to reorder or drop them.
    pub fn tensors_mut(&mut self) -> &mut Vec<TensorSpec> {
        &mut self.tensors
    }

    /// The alignment the file will use: `general.alignment` if set, else 32.
    pub fn alignment(&self) -> Result<u64> {
        match self.get(keys::general::ALIGNMENT) {
            None => Ok(DEFAULT_ALIGNMENT),
            Some(v) => match v.as_u32() {
                Some(a) if a.is_power_of_two() => Ok(a.into()),
                _ => Err(Error::Invalid(format!(
                    "general.alignment must be a non-zero power of two of type u32, found {}",
                    match v.as_u32() {
                        Some(a) => a.to_string(),
                        None => format!("a {}", v.value_type()),
                    }
                ))),
            },
        }
    }

    /// The data offset each tensor will get: each starts where the previous one ends,
    /// padded to the alignment.
    pub fn tensor_offsets(&self) -> Result<Vec<u64>> {
        let alignment = self.alignment()?;
        let mut offsets = Vec::with_capacity(self.tensors.len());
        let mut next = 0u64;
        for t in &self.tensors {
            offsets.push(next);
            next = t
                .size
                .checked_next_multiple_of(alignment)
                .and_then(|s| next.checked_add(s))
                .ok_or_else(|| Error::Invalid("total tensor data overflows 64 bits".into()))?;
        }
        Ok(offsets)
    }

    /// Writes a file without tensors as gguf-py writes a vocabulary-only file: the header and
    /// metadata, and no padding after them (there is no data section to align).
    ///
    /// ```
    /// use gguf_format::{GgufBuilder, GgufFile};
    /// let mut b = GgufBuilder::new();
    /// b.set("general.architecture", "llama");
    /// let bytes = b.write_without_data(Vec::new())?;
    /// assert_eq!(bytes.len(), 4 + 4 + 8 + 8 + (8 + 20) + 4 + (8 + 5));
    /// assert_eq!(GgufFile::parse(&bytes)?.tensors().len(), 0);
    /// # Ok::<(), gguf_format::Error>(())
    /// ```
    ///
    /// # Errors
    /// [`Error::Invalid`] when the builder has tensors, or as [`GgufBuilder::write`].
    pub fn write_without_data<W: Write>(&self, out: W) -> Result<W> {
        if !self.tensors.is_empty() {
            return Err(Error::Invalid(format!(
                "{} tensors need a data section",
                self.tensors.len()
            )));
        }
        Ok(self.write_inner(out, false)?.out)
    }

    /// Writes the header, metadata, tensor infos and padding to `out`, and returns the
    /// writer that takes the tensor data in order.
    pub fn write<W: Write>(&self, out: W) -> Result<TensorWriter<W>> {
        self.write_inner(out, true)
    }

    fn write_inner<W: Write>(&self, out: W, pad: bool) -> Result<TensorWriter<W>> {
        let alignment = self.alignment()?;
        let offsets = self.tensor_offsets()?;
        let mut seen = std::collections::HashSet::new();
        for (k, _) in &self.metadata {
            if k.is_empty() {
                return Err(Error::Invalid("empty metadata key".into()));
            }
            if !seen.insert(k.as_str()) {
                return Err(Error::Invalid(format!("duplicate metadata key '{k}'")));
            }
        }
        let mut enc = Encoder {
            out,
            order: self.byte_order,
            wide: self.version >= 2,
            written: 0,
        };
        enc.raw(MAGIC)?;
        enc.u32(self.version)?;
        enc.count(self.tensors.len() as u64)?;
        enc.count(self.metadata.len() as u64)?;
        for (key, value) in &self.metadata {
            enc.string(key.as_bytes())?;
            enc.u32(value.value_type().id())?;
            match value {
                MetaValue::Borrowed(v) => enc.value(v)?,
                MetaValue::Owned(v) => enc.owned(v)?,
            }
        }
        for (t, &offset) in self.tensors.iter().zip(&offsets) {
            enc.string(t.name.as_bytes())?;
            enc.u32(t.shape.len() as u32)?;
            for &d in &t.shape {
                enc.count(d)?;
            }
            enc.u32(t.ggml_type.id())?;
            enc.u64(offset)?;
        }
        if pad {
            enc.pad(alignment)?;
        }
        Ok(TensorWriter {
            out: enc.out,
            sizes: self
                .tensors
                .iter()
                .map(|t| (t.name.clone(), t.size))
                .collect(),
            next: 0,
            alignment,
            header_bytes: enc.written,
            data_bytes: 0,
        })
    }
}

impl GgufBuilder<'_> {
    /// Writes the whole file, taking each tensor's data from the tensor of the same name in
    /// `source` (typically the file this builder was made from). `progress` gets (bytes of
    /// tensor data written, total).
    ///
    /// ```
    /// # let bytes = gguf_format::testing::tiny_file();
    /// use gguf_format::{GgufBuilder, GgufFile};
    /// let file = GgufFile::parse(&bytes)?;
    /// let copy = GgufBuilder::from_file(&file).write_from(&file, Vec::new(), &mut |_, _| {})?;
    /// assert_eq!(copy, bytes);
    /// # Ok::<(), gguf_format::Error>(())
    /// ```
    pub fn write_from<W: Write>(
        &self,
        source: &GgufFile<'_>,
        out: W,
        progress: &mut dyn FnMut(u64, u64),
    ) -> Result<W> {
        let total: u64 = self.tensors.iter().map(|t| t.size).sum();
        let mut done = 0;
        let mut w = self.write(out)?;
        for spec in &self.tensors {
            let info = source
                .tensor(&spec.name)
                .ok_or_else(|| Error::MissingTensor {
                    name: spec.name.clone(),
                })?;
            w.write_tensor(source.tensor_data(info))?;
            done += spec.size;
            progress(done, total);
        }
        w.finish()
    }
}

/// Writes tensor data, in the order of the tensor infos, each padded to the alignment.
///
/// Each tensor must get exactly its size in bytes; [`TensorWriter::finish`] checks that every
/// tensor was written.
#[derive(Debug)]
pub struct TensorWriter<W: Write> {
    out: W,
    sizes: Vec<(String, u64)>,
    next: usize,
    alignment: u64,
    header_bytes: u64,
    data_bytes: u64,
}

impl<W: Write> TensorWriter<W> {
    /// The name and size of the tensor to write next, if any.
    pub fn next_tensor(&self) -> Option<(&str, u64)> {
        self.sizes.get(self.next).map(|(n, s)| (n.as_str(), *s))
    }

    /// Bytes written so far (header and data).
    pub fn bytes_written(&self) -> u64 {
        self.header_bytes + self.data_bytes
    }

    /// Writes the next tensor's data from a slice.
    pub fn write_tensor(&mut self, data: &[u8]) -> Result<()> {
        self.write_tensor_with(|w| w.write_all(data))
    }

    /// Writes the next tensor's data from a callback that writes it in pieces (for
    /// converting or quantizing on the fly without holding the tensor in memory).
    pub fn write_tensor_with(
        &mut self,
        produce: impl FnOnce(&mut dyn Write) -> io::Result<()>,
    ) -> Result<()> {
        let Some((name, size)) = self.sizes.get(self.next).cloned() else {
            return Err(Error::Invalid(format!(
                "all {} tensors are already written",
                self.sizes.len()
            )));
        };
        let mut counting = CountingWriter {
            inner: &mut self.out,
            count: 0,
            limit: size,
        };
        produce(&mut counting)?;
        if counting.count != size {
            return Err(Error::Invalid(format!(
                "tensor '{name}' needs {size} bytes of data but {} were written",
                counting.count
            )));
        }
        let padded = size.next_multiple_of(self.alignment);
        write_zeros(&mut self.out, padded - size)?;
        self.data_bytes += padded;
        self.next += 1;
        Ok(())
    }

    /// Checks that every tensor was written, flushes, and returns the output.
    pub fn finish(mut self) -> Result<W> {
        if self.next != self.sizes.len() {
            return Err(Error::Invalid(format!(
                "only {} of {} tensors were written (next: '{}')",
                self.next,
                self.sizes.len(),
                self.sizes[self.next].0
            )));
        }
        self.out.flush()?;
        Ok(self.out)
    }
}

struct CountingWriter<'w, W: Write> {
    inner: &'w mut W,
    count: u64,
    limit: u64,
}

impl<W: Write> Write for CountingWriter<'_, W> {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        if self.count + buf.len() as u64 > self.limit {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                format!("tensor data longer than its {} bytes", self.limit),
            ));
        }
        let n = self.inner.write(buf)?;
        self.count += n as u64;
        Ok(n)
    }

    fn flush(&mut self) -> io::Result<()> {
        self.inner.flush()
    }
}

fn write_zeros(out: &mut impl Write, mut n: u64) -> io::Result<()> {
    const ZEROS: [u8; 256] = [0; 256];
    while n > 0 {
        let k = n.min(ZEROS.len() as u64) as usize;
        out.write_all(&ZEROS[..k])?;
        n -= k as u64;
    }
    Ok(())
}

/// Encodes GGUF values in one byte order and count width.
struct Encoder<W: Write> {
    out: W,
    order: ByteOrder,
    wide: bool,
    written: u64,
}

macro_rules! write_num {
    ($name:ident, $t:ty) => {
        fn $name(&mut self, v: $t) -> io::Result<()> {
            match self.order {
                ByteOrder::Little => self.raw(&v.to_le_bytes()),
                ByteOrder::Big => self.raw(&v.to_be_bytes()),
            }
        }
    };
}

impl<W: Write> Encoder<W> {
    fn raw(&mut self, b: &[u8]) -> io::Result<()> {
        self.out.write_all(b)?;
        self.written += b.len() as u64;
        Ok(())
    }

    write_num!(u16, u16);
    write_num!(i16, i16);
    write_num!(u32, u32);
    write_num!(i32, i32);
    write_num!(u64, u64);
    write_num!(i64, i64);
    write_num!(f32, f32);
    write_num!(f64, f64);

    fn count(&mut self, n: u64) -> io::Result<()> {
        if self.wide {
            self.u64(n)
        } else {
            let n = u32::try_from(n).map_err(|_| {
                io::Error::new(io::ErrorKind::InvalidInput, "count too large for GGUF v1")
            })?;
            self.u32(n)
        }
    }

    fn string(&mut self, s: &[u8]) -> io::Result<()> {
        self.count(s.len() as u64)?;
        self.raw(s)
    }

    fn pad(&mut self, alignment: u64) -> io::Result<()> {
        let n = self.written.next_multiple_of(alignment) - self.written;
        write_zeros(&mut self.out, n)?;
        self.written += n;
        Ok(())
    }

    fn value(&mut self, v: &Value<'_>) -> io::Result<()> {
        match *v {
            Value::U8(x) => self.raw(&[x]),
            Value::I8(x) => self.raw(&x.to_ne_bytes()),
            Value::U16(x) => self.u16(x),
            Value::I16(x) => self.i16(x),
            Value::U32(x) => self.u32(x),
            Value::I32(x) => self.i32(x),
            Value::F32(x) => self.f32(x),
            Value::Bool(x) => self.raw(&[x as u8]),
            Value::String(s) => self.string(s),
            Value::Array(a) => self.array(&a),
            Value::U64(x) => self.u64(x),
            Value::I64(x) => self.i64(x),
            Value::F64(x) => self.f64(x),
        }
    }

    fn array(&mut self, a: &ArrayView<'_>) -> io::Result<()> {
        self.u32(a.element_type().id())?;
        self.count(a.len())?;
        let single_bytes = matches!(
            a.element_type(),
            ValueType::U8 | ValueType::I8 | ValueType::Bool
        );
        if a.wide_counts() == self.wide && (a.byte_order() == self.order || single_bytes) {
            // Same encoding: copy the elements as they are.
            return self.raw(a.raw_bytes());
        }
        for item in a.iter() {
            self.value(&item)?;
        }
        Ok(())
    }

    fn owned(&mut self, v: &OwnedValue) -> io::Result<()> {
        match v {
            OwnedValue::U8(x) => self.raw(&[*x]),
            OwnedValue::I8(x) => self.raw(&x.to_ne_bytes()),
            OwnedValue::U16(x) => self.u16(*x),
            OwnedValue::I16(x) => self.i16(*x),
            OwnedValue::U32(x) => self.u32(*x),
            OwnedValue::I32(x) => self.i32(*x),
            OwnedValue::F32(x) => self.f32(*x),
            OwnedValue::Bool(x) => self.raw(&[*x as u8]),
            OwnedValue::String(s) => self.string(s),
            OwnedValue::Array(a) => {
                self.u32(a.elem.id())?;
                self.count(a.items.len() as u64)?;
                for item in &a.items {
                    self.owned(item)?;
                }
                Ok(())
            }
            OwnedValue::U64(x) => self.u64(*x),
            OwnedValue::I64(x) => self.i64(*x),
            OwnedValue::F64(x) => self.f64(*x),
        }
    }
}
