//! Counts by key where a key at zero is no key at all: what the work engines keep of the work in hand per
//! endpoint, account, lane or claim token.

use std::{collections::HashMap, hash::Hash};

/// Lowers the count of `key`, removing it at zero; returns what it was (0 for an absent key).
pub fn decrement<K: Hash + Eq>(map: &mut HashMap<K, u32>, key: &K) -> u32 {
    let Some(count) = map.get_mut(key) else {
        return 0;
    };
    let was = *count;
    *count -= 1;
    if *count == 0 {
        map.remove(key);
    }
    was
}
