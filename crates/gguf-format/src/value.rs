//! Metadata values: the 13 value types of the spec, borrowed from the file's bytes.
//!
//! Strings are exposed as bytes (`&[u8]`) and checked for UTF-8 only when read as text, so a
//! file whose vocabulary holds a token that is not valid UTF-8 still opens; asking for such a
//! value as `&str` is an [`Error::ValueNotUtf8`] that names the key. Arrays are not decoded on
//! open: an [`ArrayView`] is the array's encoded bytes, read element by element on demand.

use std::fmt;

use crate::error::{Error, Result};

/// The byte order of a GGUF file (detected from its version field).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ByteOrder {
    /// Little-endian, the common case.
    Little,
    /// Big-endian, written by `gguf-py` for s390x and the like.
    Big,
}

impl ByteOrder {
    /// `"little"` or `"big"`.
    pub const fn name(self) -> &'static str {
        match self {
            ByteOrder::Little => "little",
            ByteOrder::Big => "big",
        }
    }
}

/// The type of a metadata value, with the spec's ids.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[repr(u32)]
pub enum ValueType {
    /// `uint8`
    U8 = 0,
    /// `int8`
    I8 = 1,
    /// `uint16`
    U16 = 2,
    /// `int16`
    I16 = 3,
    /// `uint32`
    U32 = 4,
    /// `int32`
    I32 = 5,
    /// `float32`
    F32 = 6,
    /// `bool` (one byte, 0 or 1)
    Bool = 7,
    /// `string` (length-prefixed bytes)
    String = 8,
    /// `array` (element type, count, elements)
    Array = 9,
    /// `uint64`
    U64 = 10,
    /// `int64`
    I64 = 11,
    /// `float64`
    F64 = 12,
}

impl ValueType {
    /// The type for a spec id.
    pub const fn from_id(id: u32) -> Option<ValueType> {
        use ValueType::*;
        Some(match id {
            0 => U8,
            1 => I8,
            2 => U16,
            3 => I16,
            4 => U32,
            5 => I32,
            6 => F32,
            7 => Bool,
            8 => String,
            9 => Array,
            10 => U64,
            11 => I64,
            12 => F64,
            _ => return None,
        })
    }

    /// The spec id.
    pub const fn id(self) -> u32 {
        self as u32
    }

    /// The spec's lower-case name: `u8`, `i8`, ..., `string`, `array`, `f64`.
    pub const fn name(self) -> &'static str {
        use ValueType::*;
        match self {
            U8 => "u8",
            I8 => "i8",
            U16 => "u16",
            I16 => "i16",
            U32 => "u32",
            I32 => "i32",
            F32 => "f32",
            Bool => "bool",
            String => "string",
            Array => "array",
            U64 => "u64",
            I64 => "i64",
            F64 => "f64",
        }
    }

    /// Bytes of one value for fixed-size types; `None` for strings and arrays.
    pub const fn fixed_size(self) -> Option<usize> {
        use ValueType::*;
        match self {
            U8 | I8 | Bool => Some(1),
            U16 | I16 => Some(2),
            U32 | I32 | F32 => Some(4),
            U64 | I64 | F64 => Some(8),
            String | Array => None,
        }
    }
}

impl fmt::Display for ValueType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// A metadata value borrowed from a file's bytes.
#[derive(Debug, Clone, Copy)]
pub enum Value<'a> {
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
    /// `string`, as stored (normally UTF-8; see [`Value::as_str`]).
    String(&'a [u8]),
    /// `array`
    Array(ArrayView<'a>),
    /// `uint64`
    U64(u64),
    /// `int64`
    I64(i64),
    /// `float64`
    F64(f64),
}

impl<'a> Value<'a> {
    /// The value's type.
    pub fn value_type(&self) -> ValueType {
        match self {
            Value::U8(_) => ValueType::U8,
            Value::I8(_) => ValueType::I8,
            Value::U16(_) => ValueType::U16,
            Value::I16(_) => ValueType::I16,
            Value::U32(_) => ValueType::U32,
            Value::I32(_) => ValueType::I32,
            Value::F32(_) => ValueType::F32,
            Value::Bool(_) => ValueType::Bool,
            Value::String(_) => ValueType::String,
            Value::Array(_) => ValueType::Array,
            Value::U64(_) => ValueType::U64,
            Value::I64(_) => ValueType::I64,
            Value::F64(_) => ValueType::F64,
        }
    }

    /// The text of a string value; `None` for other types or invalid UTF-8.
    pub fn as_str(&self) -> Option<&'a str> {
        match self {
            Value::String(b) => std::str::from_utf8(b).ok(),
            _ => None,
        }
    }

    /// The array of an array value.
    pub fn as_array(&self) -> Option<ArrayView<'a>> {
        match self {
            Value::Array(a) => Some(*a),
            _ => None,
        }
    }

    /// Any integer value as `i128` (lossless for every integer type); `None` otherwise.
    pub fn as_integer(&self) -> Option<i128> {
        Some(match *self {
            Value::U8(v) => v.into(),
            Value::I8(v) => v.into(),
            Value::U16(v) => v.into(),
            Value::I16(v) => v.into(),
            Value::U32(v) => v.into(),
            Value::I32(v) => v.into(),
            Value::U64(v) => v.into(),
            Value::I64(v) => v.into(),
            _ => return None,
        })
    }

    /// Any float value as `f64`; `None` otherwise.
    pub fn as_float(&self) -> Option<f64> {
        match *self {
            Value::F32(v) => Some(v.into()),
            Value::F64(v) => Some(v),
            _ => None,
        }
    }
}

/// Equality by content; floats compare by bit pattern, so a NaN equals the same NaN and
/// arrays compare element by element whatever their byte order.
impl PartialEq for Value<'_> {
    fn eq(&self, other: &Self) -> bool {
        use Value::*;
        match (self, other) {
            (U8(a), U8(b)) => a == b,
            (I8(a), I8(b)) => a == b,
            (U16(a), U16(b)) => a == b,
            (I16(a), I16(b)) => a == b,
            (U32(a), U32(b)) => a == b,
            (I32(a), I32(b)) => a == b,
            (F32(a), F32(b)) => a.to_bits() == b.to_bits(),
            (Bool(a), Bool(b)) => a == b,
            (String(a), String(b)) => a == b,
            (Array(a), Array(b)) => a == b,
            (U64(a), U64(b)) => a == b,
            (I64(a), I64(b)) => a == b,
            (F64(a), F64(b)) => a.to_bits() == b.to_bits(),
            _ => false,
        }
    }
}

/// A cursor over encoded GGUF values: the one place that decodes numbers and lengths.
#[derive(Clone, Copy)]
pub(crate) struct Cursor<'a> {
    pub(crate) data: &'a [u8],
    pub(crate) pos: usize,
    pub(crate) order: ByteOrder,
    /// Counts and lengths are 64-bit (GGUF v2 and later) rather than 32-bit (v1).
    pub(crate) wide: bool,
    /// File offset of `data[0]`, for error messages.
    pub(crate) base: u64,
}

macro_rules! read_num {
    ($name:ident, $t:ty) => {
        #[inline]
        pub(crate) fn $name(&mut self) -> Option<$t> {
            const N: usize = std::mem::size_of::<$t>();
            let b: [u8; N] = self.take(N as u64)?.try_into().ok()?;
            Some(match self.order {
                ByteOrder::Little => <$t>::from_le_bytes(b),
                ByteOrder::Big => <$t>::from_be_bytes(b),
            })
        }
    };
}

impl<'a> Cursor<'a> {
    pub(crate) fn offset(&self) -> u64 {
        self.base + self.pos as u64
    }

    pub(crate) fn remaining(&self) -> u64 {
        (self.data.len() - self.pos) as u64
    }

    #[inline]
    pub(crate) fn take(&mut self, n: u64) -> Option<&'a [u8]> {
        if n > self.remaining() {
            return None;
        }
        let start = self.pos;
        self.pos += n as usize;
        Some(&self.data[start..self.pos])
    }

    read_num!(u8, u8);
    read_num!(i8, i8);
    read_num!(u16, u16);
    read_num!(i16, i16);
    read_num!(u32, u32);
    read_num!(i32, i32);
    read_num!(u64, u64);
    read_num!(i64, i64);
    read_num!(f32, f32);
    read_num!(f64, f64);

    /// A count or length: `u64` from v2 on, `u32` in v1.
    #[inline]
    pub(crate) fn count(&mut self) -> Option<u64> {
        if self.wide {
            self.u64()
        } else {
            self.u32().map(u64::from)
        }
    }

    pub(crate) fn count_size(&self) -> u64 {
        if self.wide {
            8
        } else {
            4
        }
    }

    /// Decodes one value of type `ty` that has already been validated.
    pub(crate) fn value(&mut self, ty: ValueType) -> Option<Value<'a>> {
        Some(match ty {
            ValueType::U8 => Value::U8(self.u8()?),
            ValueType::I8 => Value::I8(self.i8()?),
            ValueType::U16 => Value::U16(self.u16()?),
            ValueType::I16 => Value::I16(self.i16()?),
            ValueType::U32 => Value::U32(self.u32()?),
            ValueType::I32 => Value::I32(self.i32()?),
            ValueType::F32 => Value::F32(self.f32()?),
            ValueType::Bool => Value::Bool(self.u8()? != 0),
            ValueType::String => {
                let n = self.count()?;
                Value::String(self.take(n)?)
            }
            ValueType::Array => {
                let elem = ValueType::from_id(self.u32()?)?;
                let len = self.count()?;
                let start = self.pos;
                let offset = self.offset();
                self.skip_elements(elem, len)?;
                Value::Array(ArrayView {
                    elem,
                    len,
                    cursor: Cursor {
                        data: &self.data[start..self.pos],
                        pos: 0,
                        base: offset,
                        ..*self
                    },
                })
            }
            ValueType::U64 => Value::U64(self.u64()?),
            ValueType::I64 => Value::I64(self.i64()?),
            ValueType::F64 => Value::F64(self.f64()?),
        })
    }

    /// Moves past `len` already-validated elements of type `elem`.
    fn skip_elements(&mut self, elem: ValueType, len: u64) -> Option<()> {
        match elem.fixed_size() {
            Some(size) => {
                self.take(len.checked_mul(size as u64)?)?;
            }
            None => {
                for _ in 0..len {
                    self.value(elem)?;
                }
            }
        }
        Some(())
    }
}

/// An array value: element type, length, and the encoded elements borrowed from the file.
///
/// Nothing is decoded until asked: [`ArrayView::iter`] walks the elements, [`ArrayView::get`]
/// finds one (constant time for fixed-size elements, a walk for strings and nested arrays),
/// and [`ArrayView::as_slice`] borrows a little-endian numeric array as `&[T]` when its bytes are
/// aligned for `T`.
///
/// ```
/// # let bytes = gguf_format::testing::tiny_file();
/// let file = gguf_format::GgufFile::parse(&bytes)?;
/// let tokens = file.get::<gguf_format::ArrayView>("tokenizer.ggml.tokens")?;
/// let first: Vec<&[u8]> = tokens.strings().unwrap().take(2).collect();
/// assert_eq!(first, [b"<s>".as_slice(), b"hello".as_slice()]);
/// # Ok::<(), gguf_format::Error>(())
/// ```
#[derive(Clone, Copy)]
pub struct ArrayView<'a> {
    elem: ValueType,
    len: u64,
    cursor: Cursor<'a>,
}

impl<'a> ArrayView<'a> {
    /// The type of every element.
    pub fn element_type(&self) -> ValueType {
        self.elem
    }

    /// The number of elements.
    pub fn len(&self) -> u64 {
        self.len
    }

    /// Whether there are no elements.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// The encoded elements, exactly as stored in the file.
    pub fn raw_bytes(&self) -> &'a [u8] {
        self.cursor.data
    }

    /// The byte order of the encoded elements.
    pub fn byte_order(&self) -> ByteOrder {
        self.cursor.order
    }

    /// Whether lengths inside the encoding are 64-bit (GGUF v2+) rather than 32-bit (v1).
    pub(crate) fn wide_counts(&self) -> bool {
        self.cursor.wide
    }

    /// File offset of the first element.
    pub fn offset(&self) -> u64 {
        self.cursor.base
    }

    /// Walks every element.
    pub fn iter(&self) -> ArrayIter<'a> {
        ArrayIter {
            elem: self.elem,
            left: self.len,
            cursor: self.cursor,
        }
    }

    /// Element `index`, or `None` past the end.
    pub fn get(&self, index: u64) -> Option<Value<'a>> {
        if index >= self.len {
            return None;
        }
        match self.elem.fixed_size() {
            Some(size) => {
                let mut c = self.cursor;
                c.pos = (index as usize).checked_mul(size)?;
                c.value(self.elem)
            }
            None => self.iter().nth(index as usize),
        }
    }

    /// The elements of a string array as raw bytes; `None` for other element types.
    pub fn strings(&self) -> Option<impl Iterator<Item = &'a [u8]> + 'a> {
        (self.elem == ValueType::String).then(|| {
            self.iter().map(|v| match v {
                Value::String(s) => s,
                _ => &[],
            })
        })
    }

    /// The elements as `T`, when `T` matches the element type exactly.
    pub fn typed<T: FromValue<'a>>(&self) -> Option<impl Iterator<Item = T> + 'a> {
        (T::TYPE == Some(self.elem)).then(|| self.iter().filter_map(|v| T::from_value(v)))
    }

    /// Borrows a numeric array as a slice without copying. `None` unless the element type is
    /// `T`'s, the file is little-endian on a little-endian machine, and the bytes are aligned for `T`.
    pub fn as_slice<T: FromValue<'a> + bytemuck::Pod>(&self) -> Option<&'a [T]> {
        if T::TYPE != Some(self.elem)
            || self.elem == ValueType::Bool
            || self.cursor.order != ByteOrder::Little
            || cfg!(target_endian = "big")
        {
            return None;
        }
        bytemuck::try_cast_slice(self.cursor.data).ok()
    }
}

impl PartialEq for ArrayView<'_> {
    fn eq(&self, other: &Self) -> bool {
        self.elem == other.elem && self.len == other.len && self.iter().eq(other.iter())
    }
}

impl fmt::Debug for ArrayView<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "ArrayView<{}; {}> ", self.elem, self.len)?;
        f.debug_list().entries(self.iter().take(8)).finish()?;
        if self.len > 8 {
            f.write_str("...")?;
        }
        Ok(())
    }
}

/// Iterator over an [`ArrayView`]'s elements.
#[derive(Clone)]
pub struct ArrayIter<'a> {
    elem: ValueType,
    left: u64,
    cursor: Cursor<'a>,
}

impl<'a> Iterator for ArrayIter<'a> {
    type Item = Value<'a>;

    fn next(&mut self) -> Option<Value<'a>> {
        if self.left == 0 {
            return None;
        }
        self.left -= 1;
        let v = self.cursor.value(self.elem);
        if v.is_none() {
            // Unreachable for validated arrays; stop rather than loop on bad data.
            self.left = 0;
        }
        v
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        let n = usize::try_from(self.left).unwrap_or(usize::MAX);
        (n, Some(n))
    }

    fn nth(&mut self, n: usize) -> Option<Value<'a>> {
        if let Some(size) = self.elem.fixed_size() {
            let skip = (n as u64).min(self.left);
            self.cursor.pos += skip as usize * size;
            self.left -= skip;
            return self.next();
        }
        for _ in 0..n {
            self.next()?;
        }
        self.next()
    }
}

impl ExactSizeIterator for ArrayIter<'_> {}

/// Rust types that a metadata value converts to, used by [`crate::GgufFile::get`].
///
/// Conversions are exact: a `u32` value is not a `u64`, so a file that stores a key with an
/// unexpected type is reported rather than guessed at. For lenient integer reads use
/// [`crate::GgufFile::get_usize`].
pub trait FromValue<'a>: Sized {
    /// The value type this Rust type reads, or `None` when it reads several.
    const TYPE: Option<ValueType>;
    /// What to call the expected type in errors.
    const EXPECTED: &'static str;
    /// The conversion; `None` when `value` has another type.
    fn from_value(value: Value<'a>) -> Option<Self>;
}

macro_rules! from_value_scalar {
    ($t:ty, $variant:ident) => {
        impl<'a> FromValue<'a> for $t {
            const TYPE: Option<ValueType> = Some(ValueType::$variant);
            const EXPECTED: &'static str = ValueType::$variant.name();
            fn from_value(value: Value<'a>) -> Option<Self> {
                match value {
                    Value::$variant(v) => Some(v),
                    _ => None,
                }
            }
        }
    };
}

from_value_scalar!(u8, U8);
from_value_scalar!(i8, I8);
from_value_scalar!(u16, U16);
from_value_scalar!(i16, I16);
from_value_scalar!(u32, U32);
from_value_scalar!(i32, I32);
from_value_scalar!(f32, F32);
from_value_scalar!(bool, Bool);
from_value_scalar!(u64, U64);
from_value_scalar!(i64, I64);
from_value_scalar!(f64, F64);
from_value_scalar!(&'a [u8], String);
from_value_scalar!(ArrayView<'a>, Array);

impl<'a> FromValue<'a> for &'a str {
    const TYPE: Option<ValueType> = Some(ValueType::String);
    const EXPECTED: &'static str = "string";
    fn from_value(value: Value<'a>) -> Option<Self> {
        value.as_str()
    }
}

impl<'a> FromValue<'a> for Value<'a> {
    const TYPE: Option<ValueType> = None;
    const EXPECTED: &'static str = "any";
    fn from_value(value: Value<'a>) -> Option<Self> {
        Some(value)
    }
}

/// Converts `value` for `key`, with the error a caller of `get` expects.
pub(crate) fn convert<'a, T: FromValue<'a>>(key: &str, value: Value<'a>) -> Result<T> {
    match T::from_value(value) {
        Some(v) => Ok(v),
        None if T::TYPE == Some(ValueType::String) && value.value_type() == ValueType::String => {
            Err(Error::ValueNotUtf8 {
                key: key.to_string(),
            })
        }
        None => Err(Error::wrong_type(key, T::EXPECTED, value.value_type())),
    }
}
