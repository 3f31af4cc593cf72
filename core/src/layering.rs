//! Keeps the rooms of the core one-way: the modules at the top of `src` (a folder or a file each) may use
//! one another only without a cycle, so that a lower room never calls a higher one (it emits an event, or
//! calls a trait the higher room implements and `app` wires, as `channels::live_feed` does for web chat).
//! The test reads the sources, so a new import that closes a cycle fails it with the files to look at.
//! docs/architecture.md shows the rooms in their order. The library itself never uses the HTTP edge: what
//! both need lives in `frontdesk-api`; only the binary (`main.rs`) wires the edge in.

use std::{
    collections::{BTreeMap, BTreeSet},
    path::{Path, PathBuf},
};

/// `(room, file)` for every source file of the library (the binary's `main.rs`, `lib.rs` and test-only
/// files left out).
fn sources(root: &Path) -> Vec<(String, PathBuf)> {
    let mut found = Vec::new();
    let mut stack = vec![root.to_path_buf()];
    while let Some(dir) = stack.pop() {
        for entry in std::fs::read_dir(&dir).expect("read the source folder") {
            let path = entry.expect("a source entry").path();
            if path.is_dir() {
                stack.push(path);
            } else if path.extension().is_some_and(|e| e == "rs") {
                let relative = path.strip_prefix(root).expect("under the root");
                let top = relative.components().next().expect("a first component");
                let room = top.as_os_str().to_string_lossy().trim_end_matches(".rs").to_owned();
                let name = path.file_name().unwrap_or_default();
                if !["main", "lib"].contains(&room.as_str()) && name != "tests.rs" {
                    found.push((room, path));
                }
            }
        }
    }
    found
}

/// The code of a file without its comments and its `#[cfg(test)]` module (tests may reach anywhere).
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

/// The top-level modules `code` uses: `crate::NAME` paths, and the first names inside `use crate::{...}`.
fn used_rooms(code: &str) -> BTreeSet<String> {
    let mut used = BTreeSet::new();
    let ident = |s: &str| -> String { s.chars().take_while(|c| c.is_alphanumeric() || *c == '_').collect() };
    let mut rest = code;
    while let Some(at) = rest.find("crate::") {
        rest = &rest[at + "crate::".len()..];
        if let Some(inner) = rest.strip_prefix('{') {
            // `use crate::{a::b, c, d::{e, f}}`: the names at depth 0.
            let (mut depth, mut start) = (0usize, 0usize);
            for (i, ch) in inner.char_indices() {
                match ch {
                    '{' => depth += 1,
                    '}' if depth == 0 => {
                        used.insert(ident(inner[start..i].trim()));
                        break;
                    }
                    '}' => depth -= 1,
                    ',' if depth == 0 => {
                        used.insert(ident(inner[start..i].trim()));
                        start = i + 1;
                    }
                    _ => {}
                }
            }
        } else {
            used.insert(ident(rest));
        }
    }
    used.remove("");
    used
}

/// The room graph: room -> (used room -> files that use it).
fn graph(root: &Path) -> BTreeMap<String, BTreeMap<String, BTreeSet<String>>> {
    let files = sources(root);
    let rooms: BTreeSet<String> = files.iter().map(|(room, _)| room.clone()).collect();
    let mut graph: BTreeMap<String, BTreeMap<String, BTreeSet<String>>> = BTreeMap::new();
    for (room, path) in &files {
        let code = code_of(&std::fs::read_to_string(path).expect("read a source file"));
        let entry = graph.entry(room.clone()).or_default();
        for used in used_rooms(&code) {
            if &used != room && rooms.contains(&used) {
                let file = path.strip_prefix(root).unwrap_or(path).display().to_string();
                entry.entry(used).or_default().insert(file);
            }
        }
    }
    graph
}

/// A cycle of the graph, if it has one (depth-first search; the path from the room that closes it).
fn cycle(graph: &BTreeMap<String, BTreeMap<String, BTreeSet<String>>>) -> Option<Vec<String>> {
    #[derive(Clone, Copy, PartialEq)]
    enum Mark {
        Open,
        Done,
    }
    fn visit(
        room: &str,
        graph: &BTreeMap<String, BTreeMap<String, BTreeSet<String>>>,
        marks: &mut BTreeMap<String, Mark>,
        path: &mut Vec<String>,
    ) -> Option<Vec<String>> {
        marks.insert(room.to_owned(), Mark::Open);
        path.push(room.to_owned());
        for next in graph.get(room).into_iter().flat_map(BTreeMap::keys) {
            match marks.get(next) {
                Some(Mark::Open) => {
                    let from = path.iter().position(|r| r == next).unwrap_or(0);
                    let mut found = path[from..].to_vec();
                    found.push(next.clone());
                    return Some(found);
                }
                Some(Mark::Done) => {}
                None => {
                    if let Some(found) = visit(next, graph, marks, path) {
                        return Some(found);
                    }
                }
            }
        }
        path.pop();
        marks.insert(room.to_owned(), Mark::Done);
        None
    }
    let mut marks = BTreeMap::new();
    for room in graph.keys() {
        if !marks.contains_key(room) {
            let found = visit(room, graph, &mut marks, &mut Vec::new());
            if found.is_some() {
                return found;
            }
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    fn root() -> PathBuf {
        Path::new(env!("CARGO_MANIFEST_DIR")).join("src")
    }

    #[test]
    fn rooms_use_one_another_without_a_cycle() {
        let graph = graph(&root());
        if let Some(found) = cycle(&graph) {
            let steps: Vec<String> = found
                .windows(2)
                .map(|pair| format!("{} -> {} in {:?}", pair[0], pair[1], graph[&pair[0]][&pair[1]]))
                .collect();
            panic!("the rooms form a cycle:\n{}", steps.join("\n"));
        }
    }

    #[test]
    fn the_library_does_not_use_the_http_edge() {
        let users: Vec<PathBuf> = sources(&root())
            .into_iter()
            .filter(|(_, path)| {
                let code = code_of(&std::fs::read_to_string(path).unwrap_or_default());
                code.contains("frontdesk_edge")
            })
            .map(|(_, path)| path)
            .collect();
        assert!(users.is_empty(), "only main.rs wires the edge in: {users:?}");
    }

    #[test]
    fn the_reader_sees_every_form_of_a_use() {
        let code = code_of(
            "use crate::{a::b, c, d::{e, f}};\n// crate::commented\nfn x() { crate::g::h(); }\n\
             #[cfg(test)]\nmod tests { use crate::t; }",
        );
        let used: Vec<String> = used_rooms(&code).into_iter().collect();
        assert_eq!(used, ["a", "c", "d", "g"]);
        let mut looped = BTreeMap::new();
        looped.insert("a".to_owned(), BTreeMap::from([("b".to_owned(), BTreeSet::new())]));
        looped.insert("b".to_owned(), BTreeMap::from([("a".to_owned(), BTreeSet::new())]));
        assert_eq!(
            cycle(&looped),
            Some(vec!["a".to_owned(), "b".to_owned(), "a".to_owned()])
        );
    }
}
