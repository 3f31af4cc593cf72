//! A sentence-transformers folder run in process on the CPU: the BERT encoder (`bert`) over
//! `model.safetensors` and `config.json`, the folder's own `tokenizer.json`, then the pooling its
//! `1_Pooling/config.json` names (mean over the real tokens; the only mode supported) and L2
//! normalisation, as sentence-transformers does for all-MiniLM-L6-v2. Nothing is downloaded.

use std::path::{Path, PathBuf};

use anyhow::{Context, bail};
use candle_core::{DType, Device, Tensor};
use candle_nn::VarBuilder;
use serde::Deserialize;
use tokenizers::{PaddingParams, PaddingStrategy, Tokenizer, TruncationParams};

use super::{
    Embedder,
    bert::{Bert, Config},
};

/// Tokens read of one text when the folder does not say (`sentence_bert_config.json`'s `max_seq_length`).
const DEFAULT_MAX_TOKENS: usize = 256;

pub struct LocalModel {
    name: String,
    dimension: usize,
    model: Bert,
    tokenizer: Tokenizer,
    device: Device,
}

#[derive(Deserialize)]
struct Pooling {
    word_embedding_dimension: usize,
    #[serde(default)]
    pooling_mode_mean_tokens: bool,
    #[serde(default)]
    pooling_mode_cls_token: bool,
    #[serde(default)]
    pooling_mode_max_tokens: bool,
}

#[derive(Deserialize)]
struct SentenceBert {
    max_seq_length: Option<usize>,
}

fn json<T: for<'de> Deserialize<'de>>(path: &Path) -> anyhow::Result<T> {
    let text = std::fs::read_to_string(path).with_context(|| format!("reading {}", path.display()))?;
    serde_json::from_str(&text).with_context(|| format!("parsing {}", path.display()))
}

/// A model folder whose configuration has been read and checked, and whose weights and tokenizer are
/// present: what `LocalModel::load` needs, known without reading the weights.
#[derive(Clone)]
pub struct ModelFolder {
    dir: PathBuf,
    name: String,
    config: Config,
    max_tokens: usize,
}

impl ModelFolder {
    /// Reads and checks the folder's configuration (a few KiB; the weights are only looked for).
    pub fn read(dir: &Path) -> anyhow::Result<Self> {
        let config: Config = json(&dir.join("config.json"))?;
        let pooling: Pooling = json(&dir.join("1_Pooling").join("config.json"))?;
        if !pooling.pooling_mode_mean_tokens || pooling.pooling_mode_cls_token || pooling.pooling_mode_max_tokens {
            bail!("{}: only mean pooling is supported", dir.display());
        }
        if pooling.word_embedding_dimension != config.hidden_size {
            bail!("{}: the pooling dimension is not the model's", dir.display());
        }
        let sentence_bert = dir.join("sentence_bert_config.json");
        let max_tokens = if sentence_bert.is_file() {
            json::<SentenceBert>(&sentence_bert)?
                .max_seq_length
                .unwrap_or(DEFAULT_MAX_TOKENS)
        } else {
            DEFAULT_MAX_TOKENS
        }
        .min(config.max_position_embeddings);
        for file in ["tokenizer.json", "model.safetensors"] {
            if !dir.join(file).is_file() {
                bail!("{}: no {file}", dir.display());
            }
        }
        let name = dir
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_else(|| "model".to_owned());
        Ok(Self {
            dir: dir.to_owned(),
            name,
            config,
            max_tokens,
        })
    }

    /// The name stored with each vector: the folder's.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The vectors' dimension.
    pub fn dimension(&self) -> usize {
        self.config.hidden_size
    }

    pub fn path(&self) -> &Path {
        &self.dir
    }
}

impl LocalModel {
    /// Loads the model folder `dir`.
    pub fn load(dir: &Path) -> anyhow::Result<Self> {
        Self::load_checked(&ModelFolder::read(dir)?)
    }

    /// Loads a checked folder's tokenizer and weights (about 90 MiB for all-MiniLM-L6-v2).
    pub fn load_checked(folder: &ModelFolder) -> anyhow::Result<Self> {
        let dir = folder.path();
        let mut tokenizer = Tokenizer::from_file(dir.join("tokenizer.json"))
            .map_err(|e| anyhow::anyhow!("{}: {e}", dir.join("tokenizer.json").display()))?;
        // The folder's tokenizer.json pads every text to a fixed length and cuts at 128; sentence-transformers
        // pads a batch to its longest text only and cuts at the folder's `max_seq_length`.
        let pad = tokenizer.get_padding().cloned().unwrap_or_default();
        tokenizer.with_padding(Some(PaddingParams {
            strategy: PaddingStrategy::BatchLongest,
            ..pad
        }));
        tokenizer
            .with_truncation(Some(TruncationParams {
                max_length: folder.max_tokens,
                ..TruncationParams::default()
            }))
            .map_err(|e| anyhow::anyhow!("{e}"))?;

        let device = Device::Cpu;
        let weights = dir.join("model.safetensors");
        let bytes = std::fs::read(&weights).with_context(|| format!("reading {}", weights.display()))?;
        let vb = VarBuilder::from_buffered_safetensors(bytes, DType::F32, &device)?;
        let model = Bert::load(vb, &folder.config).with_context(|| format!("loading {}", weights.display()))?;
        Ok(Self {
            name: folder.name.clone(),
            dimension: folder.dimension(),
            model,
            tokenizer,
            device,
        })
    }
}

impl Embedder for LocalModel {
    fn name(&self) -> &str {
        &self.name
    }

    fn dimension(&self) -> usize {
        self.dimension
    }

    fn embed(&self, texts: &[&str]) -> anyhow::Result<Vec<Vec<f32>>> {
        if texts.is_empty() {
            return Ok(Vec::new());
        }
        let encodings = self
            .tokenizer
            .encode_batch(texts.to_vec(), true)
            .map_err(|e| anyhow::anyhow!("tokenizing: {e}"))?;
        let rows = encodings.len();
        let width = encodings.first().map_or(0, |e| e.get_ids().len());
        let flat = |part: fn(&tokenizers::Encoding) -> &[u32]| -> Vec<u32> {
            encodings.iter().flat_map(|e| part(e).iter().copied()).collect()
        };
        let ids = Tensor::from_vec(flat(|e| e.get_ids()), (rows, width), &self.device)?;
        let mask = Tensor::from_vec(flat(|e| e.get_attention_mask()), (rows, width), &self.device)?;
        let tokens = self.model.forward(&ids, &mask)?;
        // Mean over the real tokens (padding masked out), then unit length.
        let mask = mask.to_dtype(DType::F32)?.unsqueeze(2)?;
        let sums = tokens.broadcast_mul(&mask)?.sum(1)?;
        let counts = mask.sum(1)?.clamp(1e-9, f32::MAX)?;
        let means = sums.broadcast_div(&counts)?;
        let norms = means.sqr()?.sum_keepdim(1)?.sqrt()?.clamp(1e-12, f32::MAX)?;
        Ok(means.broadcast_div(&norms)?.to_vec2::<f32>()?)
    }
}

#[cfg(test)]
mod tests {
    use std::path::PathBuf;

    use super::*;
    use crate::knowledge::embeddings::dot;

    /// The repository's model folder (`scripts/fetch-model`); CI installs it, elsewhere the test is skipped
    /// when it is missing.
    fn model() -> Option<LocalModel> {
        let dir = std::env::var_os("FRONTDESK_EMBEDDING_MODEL")
            .map(PathBuf::from)
            .unwrap_or_else(|| Path::new(env!("CARGO_MANIFEST_DIR")).join("../models/all-MiniLM-L6-v2"));
        if !dir.join("model.safetensors").is_file() {
            assert!(
                std::env::var_os("CI").is_none(),
                "{} is missing: run scripts/fetch-model",
                dir.display()
            );
            eprintln!(
                "skipped: no model at {} (scripts/fetch-model installs it)",
                dir.display()
            );
            return None;
        }
        Some(LocalModel::load(&dir).expect("the model folder loads"))
    }

    /// The similarity matrix sentence-transformers publishes for these three sentences under
    /// all-MiniLM-L6-v2, to its four decimals: the tokenizer, the weights, the encoder, the pooling and the
    /// normalisation all match the reference.
    #[test]
    fn reproduces_the_reference_similarities() {
        let Some(model) = model() else { return };
        let sentences = [
            "The weather is lovely today.",
            "It's so sunny outside!",
            "He drove to the stadium.",
        ];
        let expected = [[1.0, 0.6660, 0.1046], [0.6660, 1.0, 0.1411], [0.1046, 0.1411, 1.0]];
        let vectors = model.embed(&sentences).expect("embeds");
        assert_eq!(model.dimension(), 384);
        for (i, row) in expected.iter().enumerate() {
            for (j, want) in row.iter().enumerate() {
                let got = dot(&vectors[i], &vectors[j]);
                assert!(
                    (got - want).abs() < 5e-4,
                    "similarity[{i}][{j}] = {got:.4}, expected {want:.4}"
                );
            }
        }
        // One text alone gives the vector it gets in a padded batch.
        let alone = model.embed(&sentences[2..]).expect("embeds");
        assert!(dot(&alone[0], &vectors[2]) > 0.9999);
    }
}
