//! SentencePiece `tokenizer.model` files: the protobuf `ModelProto` of Google's SentencePiece,
//! declared here for the fields a conversion reads and an export writes (field numbers from
//! SentencePiece's `sentencepiece_model.proto`).

use prost::Message;

/// A piece's kind (`SentencePiece.Type`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, prost::Enumeration)]
#[repr(i32)]
pub enum PieceType {
    /// An ordinary piece.
    Normal = 1,
    /// The unknown-token piece.
    Unknown = 2,
    /// A control symbol (`<s>`, `</s>`).
    Control = 3,
    /// A user-defined symbol, always one piece.
    UserDefined = 4,
    /// A byte-fallback piece (`<0x0A>`).
    Byte = 6,
    /// An unused piece.
    Unused = 5,
}

/// One vocabulary entry.
#[derive(Clone, PartialEq, prost::Message)]
pub struct SentencePiece {
    /// Its text, `▁` for spaces.
    #[prost(string, optional, tag = "1")]
    pub piece: Option<String>,
    /// Its score (log probability for unigram models, merge rank for BPE).
    #[prost(float, optional, tag = "2")]
    pub score: Option<f32>,
    /// Its kind (default `Normal`).
    #[prost(enumeration = "PieceType", optional, tag = "3")]
    pub r#type: Option<i32>,
}

impl SentencePiece {
    /// Its kind; unknown values read as `Normal`, as SentencePiece defaults them.
    pub fn kind(&self) -> PieceType {
        self.r#type
            .and_then(|t| PieceType::try_from(t).ok())
            .unwrap_or(PieceType::Normal)
    }
}

/// The training options kept in the model (only the model type is declared).
#[derive(Clone, PartialEq, prost::Message)]
pub struct TrainerSpec {
    /// 1 unigram, 2 BPE, 3 word, 4 char.
    #[prost(int32, optional, tag = "3")]
    pub model_type: Option<i32>,
    /// Whether unknown bytes become `<0xNN>` pieces.
    #[prost(bool, optional, tag = "35")]
    pub byte_fallback: Option<bool>,
}

/// The text normalization options.
#[derive(Clone, PartialEq, prost::Message)]
pub struct NormalizerSpec {
    /// The rule set's name (`identity`, `nmt_nfkc`, ...).
    #[prost(string, optional, tag = "1")]
    pub name: Option<String>,
    /// Whether a `▁` is put before the text.
    #[prost(bool, optional, tag = "3")]
    pub add_dummy_prefix: Option<bool>,
    /// Whether runs of spaces are squeezed.
    #[prost(bool, optional, tag = "4")]
    pub remove_extra_whitespaces: Option<bool>,
    /// Whether spaces become `▁`.
    #[prost(bool, optional, tag = "5")]
    pub escape_whitespaces: Option<bool>,
}

/// A `tokenizer.model`.
#[derive(Clone, PartialEq, prost::Message)]
pub struct ModelProto {
    /// The vocabulary, by id.
    #[prost(message, repeated, tag = "1")]
    pub pieces: Vec<SentencePiece>,
    /// Training options.
    #[prost(message, optional, tag = "2")]
    pub trainer_spec: Option<TrainerSpec>,
    /// Normalization options.
    #[prost(message, optional, tag = "3")]
    pub normalizer_spec: Option<NormalizerSpec>,
}

impl ModelProto {
    /// Parses a `tokenizer.model`'s bytes (unknown fields are skipped).
    pub fn parse(bytes: &[u8]) -> Result<ModelProto, prost::DecodeError> {
        ModelProto::decode(bytes)
    }

    /// The protobuf bytes.
    pub fn to_bytes(&self) -> Vec<u8> {
        self.encode_to_vec()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trips_and_reads_known_bytes() {
        // One piece "a" (score 0.5, CONTROL): field 1 { 1: "a", 2: 0.5f, 3: 3 }.
        let bytes = [
            0x0a, 0x0a, 0x0a, 0x01, b'a', 0x15, 0x00, 0x00, 0x00, 0x3f, 0x18, 0x03,
        ];
        let m = ModelProto::parse(&bytes).unwrap();
        assert_eq!(m.pieces.len(), 1);
        assert_eq!(m.pieces[0].piece.as_deref(), Some("a"));
        assert_eq!(m.pieces[0].score, Some(0.5));
        assert_eq!(m.pieces[0].kind(), PieceType::Control);
        assert_eq!(ModelProto::parse(&m.to_bytes()).unwrap(), m);
        assert!(ModelProto::parse(&[0x0a, 0x40, 0x0a]).is_err());
    }
}
