//! Checks that read the service's own sources: the layers' rooms without a cycle, the architecture's table
//! against the crates, and no function taking two ids as strings. One walker reads the sources for all.

mod layering;
mod resource_ids;

use std::path::{Path, PathBuf};

/// The layer crates, bottom up, by folder (each also named `frontdesk-FOLDER`).
const LAYERS: [&str; 4] = ["kernel", "domain", "ai", "server"];

/// One source file of a layer's library.
struct Source {
    /// The layer's folder.
    layer: &'static str,
    /// The top module of the crate the file belongs to (a folder or a file of `src`).
    room: String,
    path: PathBuf,
    /// The file's code without its comments and its `#[cfg(test)]` module.
    code: String,
}

fn workspace() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..")
}

/// Every source file of the layers' libraries: `lib.rs`, `main.rs`, test-only files (`tests.rs`,
/// `*_tests.rs`, `tests/` folders) and these checks left out (tests may reach anywhere and name ids as they
/// like).
fn library_sources() -> Vec<Source> {
    let mut found = Vec::new();
    for layer in LAYERS {
        let root = workspace().join(layer).join("src");
        let mut stack = vec![root.clone()];
        while let Some(dir) = stack.pop() {
            for entry in std::fs::read_dir(&dir).expect("read a source folder") {
                let path = entry.expect("a source entry").path();
                let name = path.file_name().unwrap_or_default().to_string_lossy().into_owned();
                if path.is_dir() {
                    if name != "tests" && !(dir == root && name == "lints") {
                        stack.push(path);
                    }
                } else if name.ends_with(".rs") && !name.ends_with("tests.rs") {
                    let relative = path.strip_prefix(&root).expect("under the root");
                    let top = relative.components().next().expect("a first component");
                    let room = top.as_os_str().to_string_lossy().trim_end_matches(".rs").to_owned();
                    if !["main", "lib"].contains(&room.as_str()) {
                        let code = code_of(&std::fs::read_to_string(&path).expect("read a source file"));
                        found.push(Source {
                            layer,
                            room,
                            path,
                            code,
                        });
                    }
                }
            }
        }
    }
    found
}

/// The rooms a layer declares: the `pub mod NAME;` lines of its `lib.rs`.
fn rooms_of(layer: &str) -> Vec<String> {
    let lib = std::fs::read_to_string(workspace().join(layer).join("src/lib.rs")).expect("read a lib.rs");
    lib.lines()
        .filter_map(|line| line.strip_prefix("pub mod ")?.strip_suffix(';'))
        .map(str::to_owned)
        .collect()
}

/// The code of a file without its comments and its `#[cfg(test)]` module.
fn code_of(text: &str) -> String {
    let text = match text.find("#[cfg(test)]\nmod tests") {
        Some(at) => &text[..at],
        None => text,
    };
    text.lines()
        .map(|line| match line.find("//") {
            Some(at) => &line[..at],
            None => line,
        })
        .collect::<Vec<_>>()
        .join("\n")
}
