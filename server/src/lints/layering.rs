//! Keeps the layers and their rooms one-way. Between the layer crates Cargo enforces it (a crate depends
//! only on those below it); inside a crate, the rooms (its top modules, a folder or a file each) may use one
//! another only without a cycle, so that a lower room never calls a higher one (it emits an event, or calls a
//! trait the higher room implements and `app` wires, as `channels::live_feed` does for web chat). The
//! architecture's table of rooms (docs/architecture.md) is checked against the crates, and only the server's
//! binary (`main.rs`) uses the HTTP edge.

use std::collections::{BTreeMap, BTreeSet};

use super::{LAYERS, Source, code_of, library_sources, rooms_of, workspace};

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

/// The room graph of one layer: room -> (used room of the same layer -> files that use it).
fn graph(sources: &[Source], layer: &str) -> BTreeMap<String, BTreeMap<String, BTreeSet<String>>> {
    let rooms: BTreeSet<String> = rooms_of(layer).into_iter().collect();
    let mut graph: BTreeMap<String, BTreeMap<String, BTreeSet<String>>> = BTreeMap::new();
    for source in sources.iter().filter(|source| source.layer == layer) {
        let entry = graph.entry(source.room.clone()).or_default();
        for used in used_rooms(&source.code) {
            if used != source.room && rooms.contains(&used) {
                entry.entry(used).or_default().insert(source.path.display().to_string());
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

#[test]
fn rooms_use_one_another_without_a_cycle() {
    let sources = library_sources();
    for layer in LAYERS {
        let graph = graph(&sources, layer);
        if let Some(found) = cycle(&graph) {
            let steps: Vec<String> = found
                .windows(2)
                .map(|pair| format!("{} -> {} in {:?}", pair[0], pair[1], graph[&pair[0]][&pair[1]]))
                .collect();
            panic!("the rooms of {layer} form a cycle:\n{}", steps.join("\n"));
        }
    }
}

#[test]
fn only_the_binary_uses_the_http_edge() {
    for layer in LAYERS.into_iter().filter(|layer| *layer != "server") {
        let manifest = std::fs::read_to_string(workspace().join(layer).join("Cargo.toml")).expect("a manifest");
        assert!(!manifest.contains("frontdesk-edge"), "{layer} depends on the HTTP edge");
    }
    let users: Vec<_> = library_sources()
        .into_iter()
        .filter(|source| source.code.contains("frontdesk_edge"))
        .map(|source| source.path)
        .collect();
    assert!(users.is_empty(), "only main.rs wires the edge in: {users:?}");
}

/// The architecture's table names each layer's crate in its first column and the rooms in backticks in its
/// third; it must list every room of every layer, under its own crate, and no other.
#[test]
fn the_table_of_rooms_matches_the_crates() {
    let text = std::fs::read_to_string(workspace().join("docs/architecture.md")).expect("docs/architecture.md");
    let mut listed: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    for line in text.lines() {
        let cells: Vec<&str> = line.split('|').map(str::trim).collect();
        let Some(layer) = cells
            .get(1)
            .and_then(|c| c.strip_prefix("`frontdesk-")?.strip_suffix('`'))
        else {
            continue;
        };
        let rooms = cells.get(3).copied().unwrap_or_default();
        let names = rooms.split('`').skip(1).step_by(2).map(str::to_owned);
        listed.entry(layer.to_owned()).or_default().extend(names);
    }
    for layer in LAYERS {
        let declared: BTreeSet<String> = rooms_of(layer).into_iter().collect();
        let in_table = listed.remove(layer).unwrap_or_default();
        assert_eq!(
            in_table, declared,
            "docs/architecture.md lists other rooms for frontdesk-{layer}"
        );
    }
    assert!(
        listed.is_empty(),
        "docs/architecture.md names crates that are not layers: {listed:?}"
    );
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
