//! Weight matrices repacked into a row-interleaved layout, as llama.cpp repacks them when it
//! loads a model on a CPU with kernels for the layout, and the products on them.
//!
//! llama.cpp's CPU backend repacks some weight types at load (`ggml-cpu/repack.cpp`): on AVX2,
//! every Q4_K matrix whose row count is a multiple of 8 becomes groups of eight interleaved
//! rows, and every product with it runs its GEMM kernel on the activation rows in groups of
//! four and its GEMV kernel on the rest (and on the single row of token-by-token decoding).
//! Those kernels sum each output in their own order, which is neither `vec_dot`'s nor the
//! same for the GEMM and the GEMV. [`PackedMatrix`] has the same layout choice and the same
//! orders, so products give llama.cpp's numbers bit for bit; the interleaving also lets one
//! vector instruction work on eight rows at once.
//!
//! The layout is ours (each kernel reads what suits it), not ggml's `block_q4_Kx8` byte for
//! byte; the arithmetic is the same. One *tile* holds one super-block (256 columns) of eight
//! rows, [`Q4K_X8_TILE`] bytes: `d` and `dmin` of the eight rows (f16), their 6-bit scales and
//! mins unpacked to bytes, and their nibbles four bytes of each row at a time. A matrix is its
//! groups of eight rows one after another, each its tiles in column order.

use crate::error::{QuantError, Result};
use crate::kernels::{self, PackedKernels};
use crate::{check_lengths, GgmlType};

/// Bytes of one Q4_K tile: eight rows × one super-block (32 more than the eight blocks, the
/// scales and mins being stored unpacked).
pub(crate) const Q4K_X8_TILE: usize = Q4K_X8_QS + 1024;
/// Offset of the eight rows' `d` (f16, row `r` at `2r`).
pub(crate) const Q4K_X8_D: usize = 0;
/// Offset of the eight rows' `dmin` (f16).
pub(crate) const Q4K_X8_DMIN: usize = 16;
/// Offset of the scales: sub-block `j` of row `r` at `8j + r` (one byte each, 0..64).
pub(crate) const Q4K_X8_SCALES: usize = 32;
/// Offset of the mins: sub-block `2g + h` of row `r` at `16g + 2r + h`, so that each pair of
/// sub-blocks is one 16-byte load with the rows' two mins side by side.
pub(crate) const Q4K_X8_MINS: usize = 96;
/// Offset of the nibbles: byte `32g + 4t + b` of row `r`'s `qs` at `256g + 32t + 4r + b`
/// (`g` the 64-value group, `t` the four-byte step in it); its low nibble is value
/// `64g + 4t + b` of the row, its high nibble value `64g + 32 + 4t + b`.
pub(crate) const Q4K_X8_QS: usize = 160;

/// Rows interleaved in one group.
const GROUP: usize = 8;

/// Groups of eight rows a thread takes at a time: their tiles stay in cache while every
/// activation row goes past them.
const GROUPS_PER_CHUNK: usize = 4;

/// A weight matrix repacked for this CPU's packed kernels: `rows` rows of `cols` values of
/// `ty`, interleaved in groups of eight rows. It owns its bytes (the original rows are not
/// read again), and its products give the numbers of llama.cpp's repacked kernels on the
/// same CPU.
///
/// ```
/// use gguf_quant::{matmul, quantize_row, GgmlType, PackedMatrix};
/// let (rows, cols) = (8, 256);
/// let w: Vec<f32> = (0..rows * cols).map(|i| ((i * 7 % 31) as f32 - 15.0) / 8.0).collect();
/// let mut q = vec![0u8; rows * 144];
/// for (r, out) in w.chunks_exact(cols).zip(q.chunks_exact_mut(144)) {
///     quantize_row(GgmlType::Q4_K, r, out)?;
/// }
/// let x = vec![0.5f32; 3 * cols]; // three activation rows
/// let mut y = vec![0f32; 3 * rows];
/// let mut scratch = Vec::new();
/// match PackedMatrix::new(GgmlType::Q4_K, &q, rows, cols)? {
///     // This CPU has packed kernels for Q4_K (AVX2): y[b * rows + r] = W[r] · x[b].
///     Some(p) => p.matmul(&x, 3, &mut y, &mut scratch)?,
///     // Otherwise the plain product, as llama.cpp does without them.
///     None => matmul(GgmlType::Q4_K, &q, cols, &x, 3, &mut y, &mut scratch)?,
/// }
/// # Ok::<(), gguf_quant::QuantError>(())
/// ```
pub struct PackedMatrix {
    ty: GgmlType,
    rows: usize,
    cols: usize,
    data: Vec<u8>,
    k: PackedKernels,
}

impl std::fmt::Debug for PackedMatrix {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PackedMatrix")
            .field("ty", &self.ty)
            .field("rows", &self.rows)
            .field("cols", &self.cols)
            .field("bytes", &self.data.len())
            .finish()
    }
}

impl PackedMatrix {
    /// Repacks `weights` (`rows` rows of `cols` values of `ty`, row-major as ggml stores them)
    /// when this process's instruction set has packed kernels for the type and the shape
    /// suits them, as llama.cpp decides on the same CPU: today AVX2 and Q4_K with `rows` a
    /// multiple of 8. `Ok(None)` otherwise (keep the plain products); an error if `weights`
    /// does not hold exactly that matrix, or if the environment forces an instruction set this
    /// CPU lacks ([`crate::check_isa`]). Large matrices are repacked on rayon's pool.
    pub fn new(
        ty: GgmlType,
        weights: &[u8],
        rows: usize,
        cols: usize,
    ) -> Result<Option<PackedMatrix>> {
        check_lengths(ty, rows * cols, weights.len())?;
        let Some(k) = kernels::packed_kernels(ty)? else {
            return Ok(None);
        };
        if rows == 0 || !rows.is_multiple_of(GROUP) {
            return Ok(None);
        }
        let data = match ty {
            GgmlType::Q4_K => pack_q4_k(weights, rows, cols),
            _ => return Ok(None),
        };
        Ok(Some(PackedMatrix {
            ty,
            rows,
            cols,
            data,
            k,
        }))
    }

    /// The weight type.
    pub fn ty(&self) -> GgmlType {
        self.ty
    }

    /// Rows (outputs of a product).
    pub fn rows(&self) -> usize {
        self.rows
    }

    /// Columns (inputs of a product).
    pub fn cols(&self) -> usize {
        self.cols
    }

    /// Bytes of the packed copy (for Q4_K, 1184 per 8 rows × 256 columns: 2.8% more than
    /// the original).
    pub fn bytes(&self) -> usize {
        self.data.len()
    }

    /// `y[b * rows + r] = W[r] · x[b]` for `batch` activation rows `x` (each `cols` long), on a
    /// [`ThreadPool`](crate::ThreadPool) (each thread one contiguous share of the groups of
    /// rows), as [`matmul_on`](crate::matmul_on) does for plain matrices. The activations are
    /// quantized to Q8_K into `scratch`; the first `batch - batch % 4` rows go through the
    /// GEMM, the others (and a batch of one) through the GEMV, as in llama.cpp.
    pub fn matmul_on(
        &self,
        pool: &crate::ThreadPool,
        x: &[f32],
        batch: usize,
        y: &mut [f32],
        scratch: &mut Vec<u8>,
    ) -> Result<()> {
        self.matmul_on_with(pool, x, batch, y, scratch, true)
    }

    /// [`PackedMatrix::matmul_on`] with every activation row through the GEMV, as llama.cpp's
    /// repacked `mul_mat_id` (a mixture of experts' products) computes them.
    pub fn matmul_gemv_on(
        &self,
        pool: &crate::ThreadPool,
        x: &[f32],
        batch: usize,
        y: &mut [f32],
        scratch: &mut Vec<u8>,
    ) -> Result<()> {
        self.matmul_on_with(pool, x, batch, y, scratch, false)
    }

    fn matmul_on_with(
        &self,
        pool: &crate::ThreadPool,
        x: &[f32],
        batch: usize,
        y: &mut [f32],
        scratch: &mut Vec<u8>,
        gemm: bool,
    ) -> Result<()> {
        let act_row = self.prepare(x, batch, y.len(), scratch)?;
        let groups = self.rows / GROUP;
        let threads = pool.threads();
        let share = groups.div_ceil(threads);
        let parts: Vec<std::sync::Mutex<Vec<&mut [f32]>>> =
            split_outputs(y, self.rows, share * GROUP, threads)
                .into_iter()
                .map(std::sync::Mutex::new)
                .collect();
        let acts: &[u8] = scratch;
        pool.run(|t, _| {
            // Each thread takes only its own share; the mutexes are never contended.
            let mut outs = parts[t].lock().unwrap_or_else(|e| e.into_inner());
            if !outs.is_empty() && !outs[0].is_empty() {
                self.compute(acts, act_row, t * share, &mut outs, gemm);
            }
        });
        Ok(())
    }

    /// [`PackedMatrix::matmul_on`] on rayon's current pool (tasks of a few groups of rows), as
    /// [`matmul`](crate::matmul) is for plain matrices. Same results.
    pub fn matmul(
        &self,
        x: &[f32],
        batch: usize,
        y: &mut [f32],
        scratch: &mut Vec<u8>,
    ) -> Result<()> {
        use rayon::prelude::*;

        let act_row = self.prepare(x, batch, y.len(), scratch)?;
        let groups = self.rows / GROUP;
        let share = groups
            .div_ceil(4 * rayon::current_num_threads())
            .max(GROUPS_PER_CHUNK);
        let tasks = groups.div_ceil(share);
        let parts = split_outputs(y, self.rows, share * GROUP, tasks);
        let acts: &[u8] = scratch;
        parts
            .into_par_iter()
            .enumerate()
            .for_each(|(t, mut outs)| self.compute(acts, act_row, t * share, &mut outs, true));
        Ok(())
    }

    /// Checks the shapes and quantizes the activation rows into `scratch`; returns the bytes
    /// of one quantized row.
    fn prepare(
        &self,
        x: &[f32],
        batch: usize,
        outputs: usize,
        scratch: &mut Vec<u8>,
    ) -> Result<usize> {
        let batch = batch.max(1);
        if x.len() != batch * self.cols || outputs != batch * self.rows {
            return Err(QuantError::Shape(format!(
                "{batch} activation rows of {} need {} inputs and {} outputs; got {} and {outputs}",
                self.cols,
                batch * self.cols,
                batch * self.rows,
                x.len(),
            )));
        }
        // llama.cpp quantizes the rows it gives its GEMM with `quantize_mat_q8_K_4x8`, the
        // others with `quantize_row_q8_K`. On AVX2 the former differs from the latter only
        // when a block's largest magnitude occurs with both signs, the negative one first: it
        // then takes the positive one as the block's extreme, which negates the block's
        // scale and every value. Each product term is then negated twice and the products are
        // the same bits, so one quantizer serves all rows.
        let quantize = kernels::kernels(self.ty)?.quantize;
        let act_row = crate::row_bytes(kernels::vec_dot_type(self.ty), self.cols)?;
        scratch.resize(act_row * batch, 0);
        for (xb, qb) in x
            .chunks_exact(self.cols)
            .zip(scratch.chunks_exact_mut(act_row))
        {
            quantize(xb, qb);
        }
        Ok(act_row)
    }

    /// Groups `first..first + outs[b].len() / 8` against every activation row `b`, into
    /// `outs[b]`: a few groups at a time, each against the activation rows four by four
    /// (GEMM), then one by one for the last `batch % 4` (GEMV); without `gemm`, every row one
    /// by one.
    fn compute(
        &self,
        acts: &[u8],
        act_row: usize,
        first: usize,
        outs: &mut [&mut [f32]],
        gemm: bool,
    ) {
        let tile_row = self.cols / 256 * Q4K_X8_TILE;
        let groups = outs[0].len() / GROUP;
        let batch = outs.len();
        let whole = if gemm { batch - batch % 4 } else { 0 };
        let act = |b: usize| &acts[b * act_row..(b + 1) * act_row];
        for c in (0..groups).step_by(GROUPS_PER_CHUNK) {
            let n = GROUPS_PER_CHUNK.min(groups - c);
            let w = &self.data[(first + c) * tile_row..(first + c + n) * tile_row];
            let span = c * GROUP..(c + n) * GROUP;
            for b in (0..whole).step_by(4) {
                let [o0, o1, o2, o3] = &mut outs[b..b + 4] else {
                    unreachable!("four rows")
                };
                (self.k.gemm4)(
                    self.cols,
                    w,
                    [act(b), act(b + 1), act(b + 2), act(b + 3)],
                    [
                        &mut o0[span.clone()],
                        &mut o1[span.clone()],
                        &mut o2[span.clone()],
                        &mut o3[span.clone()],
                    ],
                );
            }
            for (b, out) in outs.iter_mut().enumerate().skip(whole) {
                (self.k.gemv)(self.cols, w, act(b), &mut out[span.clone()]);
            }
        }
    }
}

/// The outputs `y` (`batch` rows of `rows`) cut into `parts` shares of `share` rows: share `t`
/// holds, for every activation row, the outputs of weight rows `t * share..` (empty for the
/// shares past the last row).
fn split_outputs(y: &mut [f32], rows: usize, share: usize, parts: usize) -> Vec<Vec<&mut [f32]>> {
    let mut out: Vec<Vec<&mut [f32]>> = (0..parts).map(|_| Vec::new()).collect();
    for yb in y.chunks_mut(rows) {
        for (t, piece) in yb.chunks_mut(share.max(1)).enumerate() {
            out[t].push(piece);
        }
    }
    out
}

/// Repacks a Q4_K matrix (rows a multiple of 8) into tiles; see the module's documentation
/// and the `Q4K_X8_*` offsets.
pub(crate) fn pack_q4_k(weights: &[u8], rows: usize, cols: usize) -> Vec<u8> {
    use rayon::prelude::*;

    let blocks = cols / 256;
    let row_bytes = blocks * 144;
    let mut out = vec![0u8; rows / GROUP * blocks * Q4K_X8_TILE];
    if blocks == 0 {
        return out;
    }
    let pack_group = |(g, dst): (usize, &mut [u8])| {
        for (i, tile) in dst.chunks_exact_mut(Q4K_X8_TILE).enumerate() {
            for r in 0..GROUP {
                let src = &weights[(g * GROUP + r) * row_bytes + i * 144..][..144];
                tile[Q4K_X8_D + 2 * r..][..2].copy_from_slice(&src[0..2]);
                tile[Q4K_X8_DMIN + 2 * r..][..2].copy_from_slice(&src[2..4]);
                let (sc, mn) = crate::dequant::k_scale_min(&src[4..16]);
                for j in 0..8 {
                    tile[Q4K_X8_SCALES + 8 * j + r] = sc[j];
                    tile[Q4K_X8_MINS + 16 * (j / 2) + 2 * r + j % 2] = mn[j];
                }
                for g4 in 0..4 {
                    for t in 0..8 {
                        let at = Q4K_X8_QS + 256 * g4 + 32 * t + 4 * r;
                        tile[at..at + 4].copy_from_slice(&src[16 + 32 * g4 + 4 * t..][..4]);
                    }
                }
            }
        }
    };
    let per_group = blocks * Q4K_X8_TILE;
    // A small matrix is repacked faster than rayon wakes up.
    if weights.len() >= 1 << 20 {
        out.par_chunks_exact_mut(per_group)
            .enumerate()
            .for_each(pack_group);
    } else {
        out.chunks_exact_mut(per_group)
            .enumerate()
            .for_each(pack_group);
    }
    out
}
