//! Mat-vec and mat-mat products of a quantized weight matrix with f32 activations: the
//! activations are quantized once to the weight type's [`vec_dot_type`], then the rows are
//! split among threads (rayon's pool, or a [`ThreadPool`](crate::ThreadPool)) and computed with
//! the dispatched dot kernels, several rows per call where the ISA has that.

use super::{kernels, vec_dot_type, Kernels};
use crate::error::{QuantError, Result};
use crate::{check_lengths, GgmlType};

/// `y = W x` for a weight matrix of `rows` rows of `cols` elements of type `ty` (row-major, as
/// ggml stores `ne[1]` rows of `ne[0]`), in parallel over row blocks. `scratch` holds the
/// quantized activations between calls, so repeated calls allocate nothing.
pub fn matvec(
    ty: GgmlType,
    weights: &[u8],
    cols: usize,
    x: &[f32],
    y: &mut [f32],
    scratch: &mut Vec<u8>,
) -> Result<()> {
    matmul(ty, weights, cols, x, 1, y, scratch)
}

/// Weight rows a batched product takes at once (they stay in L1 across the activation rows).
const ROWS_PER_GROUP: usize = 4;

/// `Y = X W^T` for `batch` activation rows `x` (each `cols` long) against the weight matrix:
/// `y[b * rows + r] = dot(W[r], x[b])`, where `rows = y.len() / batch`. Parallel over blocks of
/// weight rows on rayon's current pool; each weight row is read once for the whole batch.
pub fn matmul(
    ty: GgmlType,
    weights: &[u8],
    cols: usize,
    x: &[f32],
    batch: usize,
    y: &mut [f32],
    scratch: &mut Vec<u8>,
) -> Result<()> {
    use rayon::prelude::*;

    let p = prepare(ty, weights, cols, x, batch, y.len(), scratch)?;
    if p.rows == 0 {
        return Ok(());
    }
    // Rows per task: four tasks per thread balance the load; at least 16 rows amortise the
    // scheduling (each task costs about as much as a few short rows).
    let rows_per_task = (p.rows / (4 * rayon::current_num_threads())).max(16);
    let tasks = p.rows.div_ceil(rows_per_task);
    let parts = p.split_outputs(y, rows_per_task, tasks);
    let acts: &[u8] = scratch;
    parts
        .into_par_iter()
        .enumerate()
        .for_each(|(t, mut outs)| p.compute(weights, acts, t * rows_per_task, &mut outs));
    Ok(())
}

/// [`matvec`] on a [`ThreadPool`](crate::ThreadPool): the rows are split into one contiguous
/// share per thread, with no task scheduling, for the short products of single-token decoding.
/// Results are identical to [`matvec`]'s.
pub fn matvec_on(
    pool: &crate::ThreadPool,
    ty: GgmlType,
    weights: &[u8],
    cols: usize,
    x: &[f32],
    y: &mut [f32],
    scratch: &mut Vec<u8>,
) -> Result<()> {
    matmul_on(pool, ty, weights, cols, x, 1, y, scratch)
}

/// [`matmul`] on a [`ThreadPool`](crate::ThreadPool) (see [`matvec_on`]).
#[allow(clippy::too_many_arguments)]
pub fn matmul_on(
    pool: &crate::ThreadPool,
    ty: GgmlType,
    weights: &[u8],
    cols: usize,
    x: &[f32],
    batch: usize,
    y: &mut [f32],
    scratch: &mut Vec<u8>,
) -> Result<()> {
    matmul_on_with(pool, ty, weights, cols, x, batch, y, scratch, true)
}

/// [`matmul_on`] with every output from the type's dot kernels, never its GEMM kernel: the
/// arithmetic of ggml's `mul_mat_id` (a mixture of experts' products), which has no GEMM path
/// for weights that are not repacked.
#[allow(clippy::too_many_arguments)]
pub fn matmul_dots_on(
    pool: &crate::ThreadPool,
    ty: GgmlType,
    weights: &[u8],
    cols: usize,
    x: &[f32],
    batch: usize,
    y: &mut [f32],
    scratch: &mut Vec<u8>,
) -> Result<()> {
    matmul_on_with(pool, ty, weights, cols, x, batch, y, scratch, false)
}

#[allow(clippy::too_many_arguments)]
fn matmul_on_with(
    pool: &crate::ThreadPool,
    ty: GgmlType,
    weights: &[u8],
    cols: usize,
    x: &[f32],
    batch: usize,
    y: &mut [f32],
    scratch: &mut Vec<u8>,
    gemm: bool,
) -> Result<()> {
    let mut p = prepare(ty, weights, cols, x, batch, y.len(), scratch)?;
    if !gemm {
        p.k.gemm = None;
    }
    if p.rows == 0 {
        return Ok(());
    }
    let threads = pool.threads();
    // Whole groups of rows per thread, so the several-rows kernels run at full width.
    let share = p
        .rows
        .div_ceil(threads)
        .next_multiple_of(ROWS_PER_GROUP)
        .max(ROWS_PER_GROUP);
    // Each thread takes only its own share; the mutexes are never contended.
    let parts: Vec<std::sync::Mutex<Vec<&mut [f32]>>> = p
        .split_outputs(y, share, threads)
        .into_iter()
        .map(std::sync::Mutex::new)
        .collect();
    let acts: &[u8] = scratch;
    pool.run(|t, _| {
        let mut outs = parts[t].lock().unwrap_or_else(|e| e.into_inner());
        if !outs.is_empty() {
            p.compute(weights, acts, t * share, &mut outs);
        }
    });
    Ok(())
}

/// A checked product, its activations quantized.
struct Prepared {
    k: Kernels,
    cols: usize,
    rows: usize,
    batch: usize,
    row_bytes: usize,
    act_row: usize,
}

/// Checks the shapes and quantizes the `batch` activation rows into `scratch`.
fn prepare(
    ty: GgmlType,
    weights: &[u8],
    cols: usize,
    x: &[f32],
    batch: usize,
    outputs: usize,
    scratch: &mut Vec<u8>,
) -> Result<Prepared> {
    let batch = batch.max(1);
    let rows = outputs / batch;
    let row_bytes = crate::row_bytes(ty, cols)?;
    check_lengths(ty, rows * cols, weights.len())?;
    if x.len() != batch * cols || outputs != batch * rows {
        return Err(QuantError::Shape(format!(
            "{batch} activation rows of {cols} need {} inputs and a multiple of {batch} outputs; got {} and {outputs}",
            batch * cols,
            x.len(),
        )));
    }
    let k = kernels(ty)?;
    let act = vec_dot_type(ty);
    let act_row = crate::row_bytes(act, cols)?;
    scratch.resize(act_row * batch, 0);
    for (xb, qb) in x.chunks_exact(cols).zip(scratch.chunks_exact_mut(act_row)) {
        (k.quantize)(xb, qb);
    }
    Ok(Prepared {
        k,
        cols,
        rows,
        batch,
        row_bytes,
        act_row,
    })
}

impl Prepared {
    /// The outputs `y` (`batch` rows of `rows`) cut into `parts` shares of `share` weight rows:
    /// share `t` holds, for every activation row, the outputs of weight rows `t * share..`, up
    /// to `share` of them (none for the shares past the last row).
    fn split_outputs<'y>(
        &self,
        y: &'y mut [f32],
        share: usize,
        parts: usize,
    ) -> Vec<Vec<&'y mut [f32]>> {
        let mut out: Vec<Vec<&mut [f32]>> =
            (0..parts).map(|_| Vec::with_capacity(self.batch)).collect();
        for yb in y.chunks_mut(self.rows) {
            for (t, piece) in yb.chunks_mut(share).enumerate() {
                out[t].push(piece);
            }
        }
        out
    }

    /// Weight rows `first..first + outs[b].len()` against every activation row `b`, into
    /// `outs[b]`. A batch runs on the type's GEMM kernel where the ISA has one; otherwise it
    /// takes a few weight rows at a time against every activation row, so the weights are read
    /// from memory once and from L1 for the rest of the batch.
    fn compute(&self, weights: &[u8], acts: &[u8], first: usize, outs: &mut [&mut [f32]]) {
        let rb = self.row_bytes;
        let count = outs[0].len();
        if let [out] = outs {
            let w = &weights[first * rb..(first + count) * rb];
            self.k.rows(self.cols, w, rb, &acts[..self.act_row], out);
            return;
        }
        if let Some(gemm) = self.k.gemm {
            let w = &weights[first * rb..(first + count) * rb];
            gemm(self.cols, w, rb, acts, self.act_row, outs);
            return;
        }
        for i in (0..count).step_by(ROWS_PER_GROUP) {
            let group = ROWS_PER_GROUP.min(count - i);
            let w = &weights[(first + i) * rb..(first + i + group) * rb];
            for (out, a) in outs.iter_mut().zip(acts.chunks_exact(self.act_row)) {
                self.k.rows(self.cols, w, rb, a, &mut out[i..i + group]);
            }
        }
    }
}
