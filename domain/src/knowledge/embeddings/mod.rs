//! Sentence embeddings: text to a unit vector whose dot product with another is their cosine similarity,
//! so that a question and a FAQ that mean the same thing score high whatever their words. The retrieval
//! index fuses this dense score with its lexical one.
//!
//! One implementation runs in process: a sentence-transformers BERT folder on the CPU with `candle`
//! (`local`), read on its first use (`lazy`). Without a model folder there is no embedder and retrieval is
//! lexical only.

mod bert;
mod lazy;
mod local;

use std::path::{Path, PathBuf};

pub use lazy::LazyModel;
pub use local::{LocalModel, ModelFolder};

/// Turns texts into unit vectors of one dimension. CPU-bound and synchronous: call it from a blocking
/// thread (`tokio::task::spawn_blocking`).
pub trait Embedder: Send + Sync {
    /// What made the vectors: stored with each so that a change of model re-embeds everything.
    fn name(&self) -> &str;

    /// The vectors' dimension.
    fn dimension(&self) -> usize;

    /// One unit vector per text, in order.
    fn embed(&self, texts: &[&str]) -> anyhow::Result<Vec<Vec<f32>>>;
}

/// The model folder of this deployment: `FRONTDESK_EMBEDDING_MODEL` when set (empty or `none`: no model);
/// else `models/all-MiniLM-L6-v2` beside the SQLite file, or in the working directory, whichever holds a
/// model. `None`: lexical retrieval only.
pub fn model_folder(configured: Option<&str>, database_url: &str) -> Option<PathBuf> {
    if let Some(configured) = configured {
        let configured = configured.trim();
        return (!configured.is_empty() && configured != "none").then(|| PathBuf::from(configured));
    }
    let default = Path::new("models").join("all-MiniLM-L6-v2");
    let beside_database = database_url
        .strip_prefix("sqlite:")
        .map(|rest| rest.trim_start_matches("//").split('?').next().unwrap_or_default())
        .filter(|path| !path.is_empty() && !path.contains(":memory:"))
        .and_then(|path| Path::new(path).parent().map(|dir| dir.join(&default)));
    beside_database
        .into_iter()
        .chain([default])
        .find(|folder| folder.join("model.safetensors").is_file())
}

/// The dot product of two vectors (their cosine, as both are unit vectors). Summed in eight lanes, so
/// the compiler vectorises it (one running sum would chain every addition on the last), always in the
/// same order, so the result is the same to the bit wherever it runs.
pub fn dot(a: &[f32], b: &[f32]) -> f32 {
    const LANES: usize = 8;
    let (a_chunks, b_chunks) = (a.chunks_exact(LANES), b.chunks_exact(LANES));
    let tail: f32 = a_chunks
        .remainder()
        .iter()
        .zip(b_chunks.remainder())
        .map(|(x, y)| x * y)
        .sum();
    let mut lanes = [0.0_f32; LANES];
    for (x, y) in a_chunks.zip(b_chunks) {
        for i in 0..LANES {
            lanes[i] += x[i] * y[i];
        }
    }
    lanes.iter().sum::<f32>() + tail
}

/// A vector as stored: its components as little-endian `f32`s.
pub fn to_bytes(vector: &[f32]) -> Vec<u8> {
    vector.iter().flat_map(|x| x.to_le_bytes()).collect()
}

/// A stored vector read back (`None` if the byte count is not a whole number of components).
pub fn from_bytes(bytes: &[u8]) -> Option<Vec<f32>> {
    bytes.len().is_multiple_of(4).then(|| {
        bytes
            .chunks_exact(4)
            .map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]]))
            .collect()
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn vectors_round_trip_through_bytes() {
        let v = vec![0.25_f32, -1.5, 3.0e-7];
        assert_eq!(from_bytes(&to_bytes(&v)), Some(v));
        assert_eq!(from_bytes(&[0, 1, 2]), None);
    }

    #[test]
    fn dot_is_the_plain_sum_of_products() {
        let a: Vec<f32> = (0..19).map(|i| i as f32 * 0.5).collect();
        let b: Vec<f32> = (0..19).map(|i| 1.0 - i as f32 * 0.25).collect();
        let plain: f32 = a.iter().zip(&b).map(|(x, y)| x * y).sum();
        assert!((dot(&a, &b) - plain).abs() < 1e-3);
    }

    #[test]
    fn an_explicit_none_turns_the_model_off() {
        assert_eq!(model_folder(Some("none"), "sqlite://x.db"), None);
        assert_eq!(model_folder(Some(" "), "sqlite://x.db"), None);
        assert_eq!(model_folder(Some("/m"), "sqlite://x.db"), Some(PathBuf::from("/m")));
    }
}
