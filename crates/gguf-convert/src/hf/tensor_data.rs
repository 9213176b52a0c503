//! How a planned tensor's bytes are made from the checkpoint's: widened to f32, transformed
//! (plus one, first rows, row slices, per-head rows, the Q/K permutation), encoded in the
//! output type; and the checkpoint's own MXFP4 blocks repacked into ggml's layout.

use std::io::Write;

use gguf_format::GgmlType;
use half::f16;

use super::arch::Transform;
use super::checkpoint::{Dtype, HfTensor};
use super::convert::PlannedTensor;
use crate::error::{Error, Result};

/// The shape (PyTorch's order) of what `transform` makes of checkpoint tensor `name` of
/// `shape`, or an error naming it when the transformation does not fit its shape.
pub(crate) fn output_shape(
    transform: Transform,
    name: &str,
    shape: &[usize],
) -> Result<Vec<usize>> {
    let misfit =
        |what: String| Error::Unsupported(format!("tensor '{name}' of shape {shape:?} {what}"));
    let mut out = shape.to_vec();
    match transform {
        Transform::FirstRows { rows } => {
            if let Some(first) = out.first_mut() {
                *first = (*first).min(rows);
            }
        }
        Transform::SliceRows { period, first, n } => {
            match out.len().checked_sub(2).map(|d| &mut out[d]) {
                Some(dim) if *dim == period && first + n <= period => *dim = n,
                _ => {
                    return Err(misfit(format!(
                        "has no dimension of {period} rows to split"
                    )))
                }
            }
        }
        Transform::EveryOther { first } => {
            if let Some(last) = out.last_mut() {
                *last = last.saturating_sub(first).div_ceil(2);
            }
        }
        Transform::HeadRows {
            period,
            first,
            n,
            transpose,
        } => {
            out = match *shape {
                [rows, columns] if period > 0 && rows % period == 0 && first + n <= period => {
                    let heads = rows / period;
                    match transpose {
                        true => vec![heads, columns, n],
                        false => vec![heads, n, columns],
                    }
                }
                _ => return Err(misfit(format!("is not a matrix of heads of {period} rows"))),
            }
        }
        Transform::None | Transform::AddOne | Transform::PermuteRows { .. } => {}
        Transform::Mxfp4 { .. } => {
            return Err(misfit("is MXFP4 blocks, planned with their scales".into()))
        }
    }
    Ok(out)
}

/// Elements converted at a time when a tensor is streamed.
const STREAM_ELEMENTS: usize = 1 << 20;

/// Converts and writes a tensor whose transformation works element by element (none, plus
/// one, first rows) a slab of whole rows at a time, so no copy of the whole tensor is made.
pub(crate) fn stream_tensor(
    source: &HfTensor<'_>,
    t: &PlannedTensor,
    out: &mut dyn Write,
) -> Result<()> {
    let len = match t.transform {
        Transform::FirstRows { rows } => {
            let outer: usize = source.shape.iter().skip(1).product();
            source.len().min(rows.saturating_mul(outer))
        }
        _ => source.len(),
    };
    let row_len = (t.shape.first().copied().unwrap_or(1) as usize).max(1);
    let step = row_len * (STREAM_ELEMENTS / row_len).max(1);
    let mut start = 0;
    while start < len {
        let end = (start + step).min(len);
        let mut values = source.values_f32(start..end)?;
        if t.transform == Transform::AddOne {
            add_one(&mut values, source.dtype);
        }
        out.write_all(&encode(&values, t.ty, row_len)?)
            .map_err(|e| Error::Unsupported(format!("writing '{}': {e}", t.name)))?;
        start = end;
    }
    Ok(())
}

/// Gemma's norm offset: plus one, in the tensor's own type as torch adds (an f16 sum is
/// rounded to f16).
fn add_one(values: &mut [f32], dtype: Dtype) {
    for v in values {
        *v += 1.0;
        if dtype == Dtype::F16 {
            *v = f16::from_f32(*v).to_f32();
        }
    }
}

/// One tensor's output bytes, converted whole.
pub(crate) fn convert_tensor(source: &HfTensor<'_>, t: &PlannedTensor) -> Result<Vec<u8>> {
    let mut values = source.to_f32()?;
    match t.transform {
        Transform::None => {}
        Transform::AddOne => add_one(&mut values, source.dtype),
        Transform::FirstRows { rows } => {
            let row_len: usize = source.shape.iter().skip(1).product();
            values.truncate(rows.saturating_mul(row_len));
        }
        Transform::SliceRows { period, first, n } => {
            let row_len = source.shape.last().copied().unwrap_or(1).max(1);
            values = values
                .chunks_exact(period * row_len)
                .flat_map(|group| &group[first * row_len..(first + n) * row_len])
                .copied()
                .collect();
        }
        Transform::HeadRows {
            period,
            first,
            n,
            transpose,
        } => {
            let columns = source.shape.last().copied().unwrap_or(1).max(1);
            let mut out = Vec::with_capacity(values.len() / period.max(1) * n);
            for head in values.chunks_exact(period * columns) {
                let kept = &head[first * columns..(first + n) * columns];
                if transpose {
                    for c in 0..columns {
                        out.extend((0..n).map(|r| kept[r * columns + c]));
                    }
                } else {
                    out.extend_from_slice(kept);
                }
            }
            values = out;
        }
        Transform::EveryOther { first } => {
            let row_len = source.shape.last().copied().unwrap_or(1).max(1);
            values = values
                .chunks_exact(row_len)
                .flat_map(|row| row.iter().skip(first).step_by(2))
                .copied()
                .collect();
        }
        Transform::Mxfp4 { .. } => {
            return Err(Error::Unsupported(format!(
                "tensor '{}': MXFP4 blocks are repacked, not converted",
                source.name
            )))
        }
        Transform::PermuteRows { heads } => {
            values = permute_rows(&values, source.shape, heads).ok_or_else(|| {
                Error::Unsupported(format!(
                    "tensor '{}' of shape {:?} cannot be split into {heads} heads of row pairs",
                    source.name, source.shape
                ))
            })?;
        }
    }
    encode(
        &values,
        t.ty,
        t.shape.first().copied().unwrap_or(1) as usize,
    )
}

/// llama's Q/K permutation: within each head, rows `[first half; second half]` become
/// interleaved pairs (`reshape(heads, 2, dim/heads/2, ...).swapaxes(1, 2)`).
pub(crate) fn permute_rows(values: &[f32], shape: &[usize], heads: usize) -> Option<Vec<f32>> {
    let rows = *shape.first()?;
    let row_len = if shape.len() > 1 {
        shape[1..].iter().product()
    } else {
        1
    };
    if heads == 0 || rows % (heads * 2) != 0 || values.len() != rows * row_len {
        return None;
    }
    let half = rows / heads / 2;
    let mut out = vec![0.0; values.len()];
    for h in 0..heads {
        for i in 0..half {
            for j in 0..2 {
                let dst = h * 2 * half + i * 2 + j;
                let src = h * 2 * half + j * half + i;
                out[dst * row_len..(dst + 1) * row_len]
                    .copy_from_slice(&values[src * row_len..(src + 1) * row_len]);
            }
        }
    }
    Some(out)
}

/// `values` in `ty`, as numpy and gguf-py's quantizers produce them.
pub(crate) fn encode(values: &[f32], ty: GgmlType, row_len: usize) -> Result<Vec<u8>> {
    Ok(match ty {
        GgmlType::F32 => values.iter().flat_map(|v| v.to_le_bytes()).collect(),
        GgmlType::F16 => values
            .iter()
            .flat_map(|&v| f16::from_f32(v).to_le_bytes())
            .collect(),
        GgmlType::BF16 => values
            .iter()
            .flat_map(|&v| f32_to_bf16(v).to_le_bytes())
            .collect(),
        GgmlType::Q8_0 => {
            let rows = values.len() / row_len.max(1);
            let mut out = vec![0u8; rows * (row_len / 32) * 34];
            gguf_quant::quantize_rows(GgmlType::Q8_0, values, &mut out)
                .map_err(|e| Error::Unsupported(format!("Q8_0: {e}")))?;
            out
        }
        other => {
            return Err(Error::Unsupported(format!(
                "cannot write {} tensors",
                other.name()
            )))
        }
    })
}

/// ggml's (and gguf-py's) f32 → bf16: round to nearest even, NaNs made quiet.
pub(crate) fn f32_to_bf16(v: f32) -> u16 {
    let mut n = v.to_bits();
    if n & 0x7fff_ffff > 0x7f80_0000 {
        n = (n & 0xffff_0000) | (64 << 16);
    }
    ((u64::from(n) + 0x7fff + u64::from((n >> 16) & 1)) >> 16) as u16
}

/// The bytes of a planned MXFP4 tensor: for each kept row, each block's scale byte and its 16
/// bytes with value `j` in the low nibble and `j + 16` in the high one (the checkpoint packs
/// values `2j` low and `2j + 1` high).
pub(crate) fn repack_mxfp4(
    blocks: &HfTensor<'_>,
    scales: &HfTensor<'_>,
    t: &PlannedTensor,
) -> Result<Vec<u8>> {
    let Transform::Mxfp4 { period, first } = t.transform else {
        return Err(Error::Unsupported(format!(
            "tensor '{}' is not MXFP4",
            t.name
        )));
    };
    let n_blocks = scales.shape.last().copied().unwrap_or(0);
    let mut out = Vec::with_capacity(t.shape.iter().product::<u64>() as usize / 32 * 17);
    let rows = blocks
        .data
        .chunks_exact(n_blocks * 16)
        .zip(scales.data.chunks_exact(n_blocks));
    for (r, (row, row_scales)) in rows.enumerate() {
        if r % period != first {
            continue;
        }
        for (block, &scale) in row.chunks_exact(16).zip(row_scales) {
            let value = |k: usize| (block[k / 2] >> (4 * (k % 2))) & 0x0F;
            out.push(scale);
            out.extend((0..16).map(|j| value(j) | (value(j + 16) << 4)));
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rows_are_permuted_per_head_into_pairs() {
        // Two heads of four rows (one value each): [a0 a1 b0 b1] per head → [a0 b0 a1 b1].
        let v: Vec<f32> = (0..8).map(|i| i as f32).collect();
        let p = permute_rows(&v, &[8, 1], 2).unwrap();
        assert_eq!(p, [0.0, 2.0, 1.0, 3.0, 4.0, 6.0, 5.0, 7.0]);
        assert!(permute_rows(&v, &[8, 1], 3).is_none());
    }

    #[test]
    fn bf16_rounds_to_nearest_even_and_quiets_nans() {
        assert_eq!(f32_to_bf16(1.0), 0x3f80);
        // 1 + 2^-8 is halfway: ties to even (down); 1 + 3*2^-8 ties up.
        assert_eq!(f32_to_bf16(f32::from_bits(0x3f80_8000)), 0x3f80);
        assert_eq!(f32_to_bf16(f32::from_bits(0x3f81_8000)), 0x3f82);
        assert_eq!(f32_to_bf16(f32::from_bits(0x7f80_0001)), 0x7fc0);
        assert_eq!(f32_to_bf16(f32::INFINITY), 0x7f80);
    }

    #[test]
    fn mxfp4_blocks_are_repacked_into_ggml_nibble_order() {
        // Value k of a block is k % 16: the checkpoint packs 2i low, 2i + 1 high in byte i;
        // ggml puts j low and j + 16 high in byte j, so byte j is j | j << 4.
        let row: Vec<u8> = (0..16u8)
            .map(|i| ((2 * i) % 16) | (((2 * i + 1) % 16) << 4))
            .collect();
        let blocks: Vec<u8> = [row.clone(), row.iter().map(|b| b ^ 0x88).collect()].concat();
        let scales = [120u8, 121];
        let (bshape, sshape) = ([1usize, 2, 1, 16], [1usize, 2, 1]);
        let file = std::path::Path::new("x");
        let blocks = HfTensor {
            name: "b",
            dtype: Dtype::U8,
            shape: &bshape,
            data: &blocks,
            file,
        };
        let scales = HfTensor {
            name: "s",
            dtype: Dtype::U8,
            shape: &sshape,
            data: &scales,
            file,
        };
        let planned = |period, first| PlannedTensor {
            name: "t".into(),
            source: Some("b".into()),
            source_dtype: Dtype::U8,
            ty: GgmlType::MXFP4,
            shape: vec![32, (2 / period) as u64, 1],
            transform: Transform::Mxfp4 { period, first },
            slices: Vec::new(),
            scales: Some("s".into()),
        };
        let expected: Vec<u8> = (0..16u8).map(|j| j | (j << 4)).collect();
        let second: Vec<u8> = expected.iter().map(|b| b ^ 0x88).collect();
        let all = repack_mxfp4(&blocks, &scales, &planned(1, 0)).unwrap();
        assert_eq!(all, [&[120][..], &expected, &[121], &second].concat());
        // The odd rows only (the up half of gate-and-up).
        let odd = repack_mxfp4(&blocks, &scales, &planned(2, 1)).unwrap();
        assert_eq!(odd, [&[121][..], &second].concat());
    }
}
