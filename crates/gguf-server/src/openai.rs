//! OpenAI's wire format, typed: the request bodies the routes accept (`request`: each a
//! `#[derive(Deserialize)]` struct holding exactly the fields its endpoint accepts, then
//! checked field by field) and the responses and stream chunks they write (`response`: each
//! a `#[derive(Serialize)]` struct whose field order is the order of the JSON keys).

pub(crate) mod request;
pub(crate) mod response;
