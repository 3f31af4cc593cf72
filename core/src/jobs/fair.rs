//! Who gets the free slots: the plan of one claim. Interactive work before bulk work, except that bulk work
//! which has waited `BULK_AGE_MS` past its due time goes first for a share of the slots (`AGED_SHARE`), so
//! interactive work that never lets up cannot hold a broadcast back for ever; within a class, accounts take
//! turns, one job each per turn, the least recently served first; within an account its queues (lanes,
//! kinds) take turns the same way. Every queue with a due job is seen by every claim, so no
//! backlog, however long, can hold back another queue's job longer than the caps and the turns allow. The
//! caps: running jobs per lane and per account and class (counted across replicas, from the table), and the
//! bulk class's share of this process's slots.

use std::collections::HashMap;

use super::queue::QueueKey;

/// Interactive work: AI replies, single sends, receipts, webhook deliveries.
pub const INTERACTIVE: i32 = 0;
/// Bulk work: broadcast sends, imports, embeddings, housekeeping.
pub const BULK: i32 = 1;
/// How long a bulk queue's head may wait past its due time before the queue is planned ahead of
/// interactive work.
pub const BULK_AGE_MS: i64 = 30_000;
/// Of a claim's free slots, aged bulk work takes at most one in this many first (and at least one).
const AGED_SHARE: usize = 8;

#[derive(Clone, Copy, Debug)]
pub struct Caps {
    /// Running at once per lane (an account's channel, subscription, or its jobs without a lane).
    pub lane: u32,
    /// Running at once per account and class.
    pub account: u32,
}

/// What runs now, across replicas (claimed rows whose lease has not ended).
#[derive(Clone, Debug, Default)]
pub struct Loads {
    pub lanes: HashMap<(String, String), u32>,
    pub accounts: HashMap<(i32, String), u32>,
}

impl Loads {
    pub fn add(&mut self, key: &QueueKey, n: u32) {
        *self.lanes.entry(key.lane_key()).or_default() += n;
        *self.accounts.entry(key.account_key()).or_default() += n;
    }

    /// Gives back what a plan counted but did not take.
    pub fn remove(&mut self, key: &QueueKey, n: u32) {
        if let Some(lane) = self.lanes.get_mut(&key.lane_key()) {
            *lane = lane.saturating_sub(n);
        }
        if let Some(account) = self.accounts.get_mut(&key.account_key()) {
            *account = account.saturating_sub(n);
        }
    }

    fn lane(&self, key: &QueueKey) -> u32 {
        self.lanes.get(&key.lane_key()).copied().unwrap_or(0)
    }

    fn account(&self, key: &QueueKey) -> u32 {
        self.accounts.get(&key.account_key()).copied().unwrap_or(0)
    }
}

/// When each account and queue was last served, in this process: the turn order of the next claims.
#[derive(Debug, Default)]
pub struct Rotation {
    turn: u64,
    accounts: HashMap<(i32, String), u64>,
    queues: HashMap<QueueKey, u64>,
}

impl Rotation {
    /// Records that `served` got jobs in this claim, and forgets those with no due work any more (`seen`
    /// are the queues the claim saw), so the map stays as small as the set of busy queues.
    pub fn served<'a>(&mut self, served: impl IntoIterator<Item = &'a QueueKey>, seen: &[QueueKey]) {
        self.turn += 1;
        for key in served {
            self.accounts.insert(key.account_key(), self.turn);
            self.queues.insert(key.clone(), self.turn);
        }
        if self.queues.len() > seen.len() * 2 + 64 {
            let seen_queues: std::collections::HashSet<&QueueKey> = seen.iter().collect();
            self.queues.retain(|key, _| seen_queues.contains(key));
            let seen_accounts: std::collections::HashSet<(i32, String)> =
                seen.iter().map(QueueKey::account_key).collect();
            self.accounts.retain(|key, _| seen_accounts.contains(key));
        }
    }

    fn account(&self, key: &QueueKey) -> u64 {
        self.accounts.get(&key.account_key()).copied().unwrap_or(0)
    }

    fn queue(&self, key: &QueueKey) -> u64 {
        self.queues.get(key).copied().unwrap_or(0)
    }
}

/// How many slots each class may fill in this claim.
#[derive(Clone, Copy, Debug)]
pub struct Budget {
    /// Free slots of this process.
    pub free: usize,
    /// Of which bulk work may take at most this many (its share of the slots, less what it runs).
    pub bulk: usize,
}

/// How many jobs to take from each queue (`heads`: the queues with due work this process runs; `aged`: the
/// bulk ones among them that waited `BULK_AGE_MS` past their due time), given the loads (which the plan adds
/// its own picks to).
pub fn plan(
    heads: &[QueueKey],
    aged: &[QueueKey],
    loads: &mut Loads,
    caps: Caps,
    budget: Budget,
    rotation: &Rotation,
) -> Vec<(QueueKey, u32)> {
    let mut taken: HashMap<QueueKey, u32> = HashMap::new();
    let mut free = budget.free;
    let mut bulk = budget.bulk;
    let aged_room = (free / AGED_SHARE).max(1).min(free).min(bulk);
    let passes = [
        (aged, BULK, aged_room),
        (heads, INTERACTIVE, usize::MAX),
        (heads, BULK, usize::MAX),
    ];
    for (queues, class, most) in passes {
        let mut room = free.min(most);
        if class == BULK {
            room = room.min(bulk);
        }
        let before = room;
        take_turns(queues, class, loads, caps, rotation, &mut room, &mut taken);
        free -= before - room;
        if class == BULK {
            bulk -= before - room;
        }
    }
    let mut planned: Vec<(QueueKey, u32)> = taken.into_iter().collect();
    planned.sort();
    planned
}

/// One class's turns: accounts in rotation order, one job each per turn, each from the account's next queue
/// with room.
fn take_turns(
    heads: &[QueueKey],
    class: i32,
    loads: &mut Loads,
    caps: Caps,
    rotation: &Rotation,
    room: &mut usize,
    taken: &mut HashMap<QueueKey, u32>,
) {
    // Account -> its queues, in turn order.
    let mut accounts: Vec<(u64, &str, Vec<&QueueKey>)> = Vec::new();
    let mut by_account: HashMap<&str, usize> = HashMap::new();
    for key in heads.iter().filter(|key| key.class == class) {
        let at = *by_account.entry(key.account.as_str()).or_insert_with(|| {
            accounts.push((rotation.account(key), key.account.as_str(), Vec::new()));
            accounts.len() - 1
        });
        accounts[at].2.push(key);
    }
    accounts.sort_by(|a, b| (a.0, a.1).cmp(&(b.0, b.1)));
    for (_, _, queues) in &mut accounts {
        queues.sort_by(|a, b| (rotation.queue(a), *a).cmp(&(rotation.queue(b), *b)));
    }
    // Each account's next queue to try.
    let mut next = vec![0usize; accounts.len()];
    let mut active: Vec<usize> = (0..accounts.len()).collect();
    while *room > 0 && !active.is_empty() {
        active.retain(|&a| {
            if *room == 0 {
                return true;
            }
            let queues = &accounts[a].2;
            if loads.account(queues[0]) >= caps.account {
                return false;
            }
            // The account's queues from its next one round, the first with lane room.
            for step in 0..queues.len() {
                let at = (next[a] + step) % queues.len();
                let key = queues[at];
                if loads.lane(key) < caps.lane {
                    loads.add(key, 1);
                    *taken.entry(key.clone()).or_default() += 1;
                    *room -= 1;
                    next[a] = at + 1;
                    return true;
                }
            }
            false
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key(class: i32, account: &str, lane: &str) -> QueueKey {
        QueueKey {
            class,
            account: account.into(),
            lane: lane.into(),
            kind: "k".into(),
        }
    }

    fn caps() -> Caps {
        Caps { lane: 64, account: 128 }
    }

    fn count(plan: &[(QueueKey, u32)], wanted: &QueueKey) -> u32 {
        plan.iter().find(|(k, _)| k == wanted).map_or(0, |(_, n)| *n)
    }

    #[test]
    fn a_busy_lane_just_under_its_cap_leaves_the_free_slot_to_nobody_else_but_other_accounts_still_get_theirs() {
        let busy = key(INTERACTIVE, "a", "ch_busy");
        let quiet = key(INTERACTIVE, "b", "ch_quiet");
        let mut loads = Loads::default();
        loads.add(&busy, 63);
        let budget = Budget { free: 193, bulk: 0 };
        let plan = plan(
            &[busy.clone(), quiet.clone()],
            &[],
            &mut loads,
            caps(),
            budget,
            &Rotation::default(),
        );
        assert_eq!(count(&plan, &busy), 1, "the busy lane takes only its room");
        assert!(
            count(&plan, &quiet) >= 1,
            "the quiet account is served in the same claim"
        );
    }

    #[test]
    fn accounts_take_turns_when_slots_are_scarce_and_the_rotation_moves_on() {
        let a = key(INTERACTIVE, "a", "ch_a");
        let b = key(INTERACTIVE, "b", "ch_b");
        let mut rotation = Rotation::default();
        let heads = [a.clone(), b.clone()];
        let one = Budget { free: 1, bulk: 0 };
        let first = plan(&heads, &[], &mut Loads::default(), caps(), one, &rotation);
        assert_eq!(first, vec![(a.clone(), 1)]);
        rotation.served([&a], &heads);
        let second = plan(&heads, &[], &mut Loads::default(), caps(), one, &rotation);
        assert_eq!(second, vec![(b.clone(), 1)], "the account served last waits its turn");
        rotation.served([&b], &heads);
        let third = plan(&heads, &[], &mut Loads::default(), caps(), one, &rotation);
        assert_eq!(third, vec![(a, 1)]);
    }

    #[test]
    fn an_accounts_lanes_take_turns_within_it() {
        let sends = key(INTERACTIVE, "a", "ch_1");
        let reply = key(INTERACTIVE, "a", "conv_1");
        let heads = [sends.clone(), reply.clone()];
        let mut rotation = Rotation::default();
        rotation.served([&sends], &heads);
        let plan = plan(
            &heads,
            &[],
            &mut Loads::default(),
            caps(),
            Budget { free: 1, bulk: 0 },
            &rotation,
        );
        assert_eq!(plan, vec![(reply, 1)], "the lane not served last goes first");
    }

    #[test]
    fn interactive_work_goes_first_and_bulk_keeps_to_its_share() {
        let import = key(BULK, "a", "");
        let send = key(INTERACTIVE, "b", "ch_b");
        let mut loads = Loads::default();
        let plan = plan(
            &[import.clone(), send.clone()],
            &[],
            &mut loads,
            caps(),
            Budget { free: 10, bulk: 3 },
            &Rotation::default(),
        );
        assert_eq!(count(&plan, &send), 10, "interactive work may take every free slot");
        assert_eq!(count(&plan, &import), 0);
        let plan = super::plan(
            std::slice::from_ref(&import),
            &[],
            &mut Loads::default(),
            caps(),
            Budget { free: 10, bulk: 3 },
            &Rotation::default(),
        );
        assert_eq!(count(&plan, &import), 3, "bulk work takes no more than its share");
    }

    #[test]
    fn an_account_at_its_cap_gets_nothing_and_its_other_class_is_capped_apart() {
        let busy = key(INTERACTIVE, "a", "ch_1");
        let other = key(INTERACTIVE, "a", "ch_2");
        let import = key(BULK, "a", "");
        let mut loads = Loads::default();
        loads.add(&busy, 64);
        loads.add(&key(INTERACTIVE, "a", "ch_3"), 64);
        let plan = plan(
            &[busy, other.clone(), import.clone()],
            &[],
            &mut loads,
            caps(),
            Budget { free: 50, bulk: 50 },
            &Rotation::default(),
        );
        assert_eq!(count(&plan, &other), 0, "the account's interactive work is at its cap");
        assert_eq!(count(&plan, &import), 50, "its bulk work has a cap of its own");
    }

    #[test]
    fn one_accounts_imports_cannot_take_every_slot() {
        let imports = key(BULK, "a", "");
        let plan = plan(
            std::slice::from_ref(&imports),
            &[],
            &mut Loads::default(),
            Caps { lane: 4, account: 8 },
            Budget { free: 100, bulk: 100 },
            &Rotation::default(),
        );
        assert_eq!(
            count(&plan, &imports),
            4,
            "jobs without a lane share their account's lane cap"
        );
    }

    #[test]
    fn bulk_work_that_waited_past_its_age_goes_first_for_its_share() {
        let broadcast = key(BULK, "a", "ch_a");
        let replies = key(INTERACTIVE, "b", "conv_b");
        let heads = [broadcast.clone(), replies.clone()];
        let budget = Budget { free: 16, bulk: 12 };
        let fresh = plan(&heads, &[], &mut Loads::default(), caps(), budget, &Rotation::default());
        assert_eq!(count(&fresh, &broadcast), 0, "interactive work takes every slot first");
        let aged = std::slice::from_ref(&broadcast);
        let waited = plan(
            &heads,
            aged,
            &mut Loads::default(),
            caps(),
            budget,
            &Rotation::default(),
        );
        assert_eq!(count(&waited, &broadcast), 2, "an eighth of the free slots");
        assert_eq!(count(&waited, &replies), 14);
        let one = Budget { free: 1, bulk: 1 };
        let scarce = plan(&heads, aged, &mut Loads::default(), caps(), one, &Rotation::default());
        assert_eq!(scarce, vec![(broadcast, 1)], "at least one slot, however few are free");
    }
}
