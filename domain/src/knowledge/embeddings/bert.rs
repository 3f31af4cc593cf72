//! The BERT encoder of a sentence-transformers folder, run on the CPU with `candle` in `f32`: what
//! `candle-transformers` ships for BERT, cut to what a sentence embedding needs (no dropout, no prefixes,
//! token type 0 for every token), with the query, key and value projections in one product. Written here
//! so the build does not compile every model `candle-transformers` holds for this one.

use candle_core::{D, DType, Module, Result, Tensor};
use candle_nn::{Embedding, LayerNorm, Linear, VarBuilder, embedding, layer_norm, linear, ops::softmax_last_dim};
use serde::Deserialize;

/// The folder's `config.json`, what of it this encoder reads.
#[derive(Clone, Deserialize)]
pub struct Config {
    pub vocab_size: usize,
    pub hidden_size: usize,
    pub num_hidden_layers: usize,
    pub num_attention_heads: usize,
    pub intermediate_size: usize,
    pub hidden_act: String,
    pub max_position_embeddings: usize,
    pub type_vocab_size: usize,
    pub layer_norm_eps: f64,
    #[serde(default)]
    pub position_embedding_type: Option<String>,
}

struct Layer {
    /// Query, key and value in one product: their weights stacked.
    qkv: Linear,
    attention_out: Linear,
    attention_norm: LayerNorm,
    intermediate: Linear,
    output: Linear,
    output_norm: LayerNorm,
}

impl Layer {
    fn load(vb: VarBuilder, config: &Config) -> Result<Self> {
        let (hidden, eps) = (config.hidden_size, config.layer_norm_eps);
        let attention = vb.pp("attention");
        let parts = ["query", "key", "value"].map(|name| attention.pp("self").pp(name));
        let weights = parts
            .iter()
            .map(|vb| vb.get((hidden, hidden), "weight"))
            .collect::<Result<Vec<_>>>()?;
        let biases = parts
            .iter()
            .map(|vb| vb.get(hidden, "bias"))
            .collect::<Result<Vec<_>>>()?;
        Ok(Self {
            qkv: Linear::new(Tensor::cat(&weights, 0)?, Some(Tensor::cat(&biases, 0)?)),
            attention_out: linear(hidden, hidden, attention.pp("output").pp("dense"))?,
            attention_norm: layer_norm(hidden, eps, attention.pp("output").pp("LayerNorm"))?,
            intermediate: linear(hidden, config.intermediate_size, vb.pp("intermediate").pp("dense"))?,
            output: linear(config.intermediate_size, hidden, vb.pp("output").pp("dense"))?,
            output_norm: layer_norm(hidden, eps, vb.pp("output").pp("LayerNorm"))?,
        })
    }

    /// `xs`: (batch, tokens, hidden); `mask`: (batch, 1, 1, tokens), 0 for a token, very negative for
    /// padding.
    fn forward(&self, xs: &Tensor, mask: &Tensor, heads: usize) -> Result<Tensor> {
        let (batch, tokens, hidden) = xs.dims3()?;
        let head = hidden / heads;
        // (3, batch, heads, tokens, head)
        let qkv = self
            .qkv
            .forward(xs)?
            .reshape((batch, tokens, 3, heads, head))?
            .permute((2, 0, 3, 1, 4))?;
        let (query, key, value) = (
            qkv.get(0)?.contiguous()?,
            qkv.get(1)?.contiguous()?,
            qkv.get(2)?.contiguous()?,
        );
        let scores = (query.matmul(&key.t()?)? / (head as f64).sqrt())?.broadcast_add(mask)?;
        let context = softmax_last_dim(&scores)?
            .matmul(&value)?
            .transpose(1, 2)?
            .reshape((batch, tokens, hidden))?;
        let attended = self
            .attention_norm
            .forward(&(self.attention_out.forward(&context)? + xs)?)?;
        let inner = self.intermediate.forward(&attended)?.gelu_erf()?;
        self.output_norm.forward(&(self.output.forward(&inner)? + attended)?)
    }
}

pub struct Bert {
    words: Embedding,
    positions: Tensor,
    /// The token-type embedding of type 0, every token's type here (one text per input).
    type_zero: Tensor,
    norm: LayerNorm,
    layers: Vec<Layer>,
    heads: usize,
}

impl Bert {
    /// The encoder of `vb` (the folder's `model.safetensors`, tensors named as BERT's without prefix).
    pub fn load(vb: VarBuilder, config: &Config) -> anyhow::Result<Self> {
        anyhow::ensure!(
            config.hidden_act == "gelu",
            "activation {:?} is not supported (gelu only)",
            config.hidden_act
        );
        anyhow::ensure!(
            config
                .position_embedding_type
                .as_deref()
                .is_none_or(|p| p == "absolute"),
            "only absolute position embeddings are supported"
        );
        let hidden = config.hidden_size;
        let embeddings = vb.pp("embeddings");
        let types = embeddings.get((config.type_vocab_size, hidden), "token_type_embeddings.weight")?;
        let encoder = vb.pp("encoder").pp("layer");
        Ok(Self {
            words: embedding(config.vocab_size, hidden, embeddings.pp("word_embeddings"))?,
            positions: embeddings.get((config.max_position_embeddings, hidden), "position_embeddings.weight")?,
            type_zero: types.get(0)?,
            norm: layer_norm(hidden, config.layer_norm_eps, embeddings.pp("LayerNorm"))?,
            layers: (0..config.num_hidden_layers)
                .map(|i| Layer::load(encoder.pp(i), config))
                .collect::<Result<_>>()?,
            heads: config.num_attention_heads,
        })
    }

    /// Every token's last hidden state, (batch, tokens, hidden), for `ids` (batch, tokens) and their
    /// attention `mask` (1 for a token, 0 for padding).
    pub fn forward(&self, ids: &Tensor, mask: &Tensor) -> Result<Tensor> {
        let tokens = ids.dim(D::Minus1)?;
        let position_and_type = self.positions.narrow(0, 0, tokens)?.broadcast_add(&self.type_zero)?;
        let mut xs = self
            .norm
            .forward(&self.words.forward(ids)?.broadcast_add(&position_and_type)?)?;
        // Padding gets the lowest score, so no weight in any softmax.
        let mask = ((mask.to_dtype(DType::F32)?.unsqueeze(1)?.unsqueeze(1)? - 1.0)? * f64::from(f32::MAX))?;
        for layer in &self.layers {
            xs = layer.forward(&xs, &mask, self.heads)?;
        }
        Ok(xs)
    }
}
