//! The model loaded when it is first needed. A process that never searches or imports with vectors (an
//! API replica, a small deployment, every start of `serve`) then never holds the model's ~90 MiB of
//! weights, and starts without reading them; the folder's configuration is still checked at start, so a
//! broken folder stops the start as before.

use std::{
    sync::{Arc, Mutex},
    time::Instant,
};

use super::{Embedder, LocalModel, local::ModelFolder};

pub struct LazyModel {
    folder: ModelFolder,
    /// Held while the first caller loads, so the callers that come meanwhile wait for that one load.
    loaded: Mutex<Option<Arc<LocalModel>>>,
}

impl LazyModel {
    pub fn new(folder: ModelFolder) -> Self {
        Self {
            folder,
            loaded: Mutex::new(None),
        }
    }

    /// Whether the weights have been read.
    pub fn is_loaded(&self) -> bool {
        self.loaded.lock().is_ok_and(|loaded| loaded.is_some())
    }

    /// The loaded model, reading it on the first call. A failed load is logged and tried again by the next
    /// caller (a file being replaced, memory short for a moment).
    fn model(&self) -> anyhow::Result<Arc<LocalModel>> {
        let mut loaded = self
            .loaded
            .lock()
            .map_err(|_| anyhow::anyhow!("an earlier load of the embedding model panicked"))?;
        if let Some(model) = loaded.as_ref() {
            return Ok(Arc::clone(model));
        }
        let started = Instant::now();
        let model = LocalModel::load_checked(&self.folder).inspect_err(|err| {
            tracing::error!(model = %self.folder.path().display(), error = %format!("{err:#}"), "loading the embedding model")
        })?;
        tracing::info!(
            model = %self.folder.path().display(),
            load_ms = started.elapsed().as_millis() as u64,
            "semantic retrieval: embedding model loaded on first use"
        );
        let model = Arc::new(model);
        *loaded = Some(Arc::clone(&model));
        Ok(model)
    }
}

impl Embedder for LazyModel {
    fn name(&self) -> &str {
        self.folder.name()
    }

    fn dimension(&self) -> usize {
        self.folder.dimension()
    }

    fn embed(&self, texts: &[&str]) -> anyhow::Result<Vec<Vec<f32>>> {
        if texts.is_empty() {
            return Ok(Vec::new());
        }
        self.model()?.embed(texts)
    }
}

#[cfg(test)]
mod tests {
    use std::path::Path;

    use super::*;

    /// The repository's model folder, when `scripts/fetch-model` has installed it.
    fn installed() -> Option<ModelFolder> {
        let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../models/all-MiniLM-L6-v2");
        dir.join("model.safetensors")
            .is_file()
            .then(|| ModelFolder::read(&dir).expect("the installed model folder reads"))
    }

    #[test]
    fn the_weights_are_read_on_the_first_embedding_and_give_the_eager_models_vectors() {
        let Some(folder) = installed() else {
            panic!("no model in models/: run scripts/test-prereqs");
        };
        let lazy = LazyModel::new(folder.clone());
        assert!(!lazy.is_loaded(), "nothing is read before it is needed");
        assert_eq!((lazy.name(), lazy.dimension()), ("all-MiniLM-L6-v2", 384));
        assert_eq!(lazy.embed(&[]).unwrap().len(), 0);
        assert!(!lazy.is_loaded(), "an empty batch needs no model");
        let vectors = lazy.embed(&["How do I reset my password?"]).unwrap();
        assert!(lazy.is_loaded());
        let eager = LocalModel::load_checked(&folder).unwrap();
        assert_eq!(vectors, eager.embed(&["How do I reset my password?"]).unwrap());
    }

    #[test]
    fn a_folder_without_weights_is_refused_at_start() {
        let dir = std::env::temp_dir().join(format!("frontdesk-model-{}", std::process::id()));
        std::fs::create_dir_all(dir.join("1_Pooling")).unwrap();
        if let Some(folder) = installed() {
            for file in ["config.json", "1_Pooling/config.json", "tokenizer.json"] {
                std::fs::copy(folder.path().join(file), dir.join(file)).unwrap();
            }
        }
        let err = ModelFolder::read(&dir).err().expect("refused").to_string();
        std::fs::remove_dir_all(&dir).ok();
        assert!(
            err.contains("model.safetensors") || err.contains("config.json"),
            "{err}"
        );
    }
}
