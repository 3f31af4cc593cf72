//! Who gets the free slots: the plan of one claim. Interactive work before bulk work, except that bulk work
//! whose queue has been ready `BULK_AGE_MS` without a turn goes first for a share of the slots (`AGED_SHARE`), so
//! interactive work that never lets up cannot hold a broadcast back for ever; within a class, accounts take
//! turns, one job each per turn, the account whose queues were ready longest first (a queue served goes to
//! the back of the line, so this is the least recently served; ties are broken by a draw, never by account
//! id); within an account its queues (lanes, kinds) take turns the same way. The order lives in the ready
//! queues' table, which every replica shares, so it survives restarts and any number of accounts, and
//! no backlog, however long, can hold back another queue's job longer than the caps and the turns allow. The
//! caps: running jobs per lane and per account and class (counted across replicas, from the table), and the
//! bulk class's share of this process's slots.

use std::collections::HashMap;

use super::queue::QueueKey;

/// Interactive work: AI replies, single sends, receipts, webhook deliveries.
pub const INTERACTIVE: i32 = 0;
/// Bulk work: broadcast sends, imports, embeddings, housekeeping.
pub const BULK: i32 = 1;
/// How long a bulk queue may be ready without a turn before it is planned ahead of interactive work.
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

    /// Adds the loads of other accounts.
    pub fn extend(&mut self, other: Loads) {
        self.lanes.extend(other.lanes);
        self.accounts.extend(other.accounts);
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

/// A queue with due work and since when it has been ready: its head's due time, or when it was last served
/// if that is later.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Head {
    pub key: QueueKey,
    pub ready_ms: i64,
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
/// bulk ones among them ready for `BULK_AGE_MS` or longer), given the loads (which the plan adds its own
/// picks to); `draw` breaks ties between accounts.
pub fn plan(
    heads: &[Head],
    aged: &[Head],
    loads: &mut Loads,
    caps: Caps,
    budget: Budget,
    draw: u64,
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
        take_turns(queues, class, loads, caps, draw, &mut room, &mut taken);
        free -= before - room;
        if class == BULK {
            bulk -= before - room;
        }
    }
    let mut planned: Vec<(QueueKey, u32)> = taken.into_iter().collect();
    planned.sort();
    planned
}

/// One class's turns: accounts in turn order, one job each per turn, each from the account's next queue with
/// room. An account's place is its most recently ready queue's (an account just served waits behind the
/// others, whichever of its queues was served); its queues go longest ready first.
fn take_turns(
    heads: &[Head],
    class: i32,
    loads: &mut Loads,
    caps: Caps,
    draw: u64,
    room: &mut usize,
    taken: &mut HashMap<QueueKey, u32>,
) {
    // Account -> its place and its queues.
    let mut accounts: Vec<(i64, u64, Vec<&Head>)> = Vec::new();
    let mut by_account: HashMap<&str, usize> = HashMap::new();
    for head in heads.iter().filter(|head| head.key.class == class) {
        let at = *by_account.entry(head.key.account.as_str()).or_insert_with(|| {
            accounts.push((i64::MIN, tie_break(draw, &head.key.account), Vec::new()));
            accounts.len() - 1
        });
        let account = &mut accounts[at];
        account.0 = account.0.max(head.ready_ms);
        account.2.push(head);
    }
    accounts.sort_by_key(|(place, tie, _)| (*place, *tie));
    let mut accounts: Vec<Vec<&QueueKey>> = accounts
        .into_iter()
        .map(|(_, _, mut queues)| {
            queues.sort_by(|a, b| (a.ready_ms, &a.key).cmp(&(b.ready_ms, &b.key)));
            queues.into_iter().map(|head| &head.key).collect()
        })
        .collect();
    let accounts = &mut accounts;
    // Each account's next queue to try.
    let mut next = vec![0usize; accounts.len()];
    let mut active: Vec<usize> = (0..accounts.len()).collect();
    while *room > 0 && !active.is_empty() {
        active.retain(|&a| {
            if *room == 0 {
                return true;
            }
            let queues = &accounts[a];
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

/// An account's place among accounts ready at the same moment: a hash of its id and the claim's draw, so
/// no account id order wins ties.
fn tie_break(draw: u64, account: &str) -> u64 {
    // FNV-1a seeded with the draw, then a finalizer so that every bit of the draw moves the order.
    let h = account.bytes().fold(0xcbf2_9ce4_8422_2325_u64 ^ draw, |h, b| {
        (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3)
    });
    let h = (h ^ (h >> 33)).wrapping_mul(0xff51_afd7_ed55_8ccd);
    h ^ (h >> 33)
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

    /// The queue, ready since `ready_ms`.
    fn at(key: &QueueKey, ready_ms: i64) -> Head {
        Head {
            key: key.clone(),
            ready_ms,
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
        let plan = plan(&[at(&busy, 0), at(&quiet, 0)], &[], &mut loads, caps(), budget, 7);
        assert_eq!(count(&plan, &busy), 1, "the busy lane takes only its room");
        assert!(
            count(&plan, &quiet) >= 1,
            "the quiet account is served in the same claim"
        );
    }

    #[test]
    fn the_account_ready_longest_goes_first_and_one_just_served_waits_its_turn() {
        let a = key(INTERACTIVE, "a", "ch_a");
        let b = key(INTERACTIVE, "b", "ch_b");
        let one = Budget { free: 1, bulk: 0 };
        let first = plan(&[at(&a, 10), at(&b, 20)], &[], &mut Loads::default(), caps(), one, 7);
        assert_eq!(first, vec![(a.clone(), 1)]);
        // Served, `a` is ready from now on: behind `b`.
        let second = plan(&[at(&a, 30), at(&b, 20)], &[], &mut Loads::default(), caps(), one, 7);
        assert_eq!(second, vec![(b, 1)], "the account served last waits its turn");
    }

    #[test]
    fn an_account_just_served_on_one_queue_waits_behind_the_others_whatever_its_other_queues() {
        let a_old = key(INTERACTIVE, "a", "ch_1");
        let a_served = key(INTERACTIVE, "a", "ch_2");
        let b = key(INTERACTIVE, "b", "ch_b");
        let heads = [at(&a_old, 1), at(&a_served, 50), at(&b, 20)];
        let one = Budget { free: 1, bulk: 0 };
        let plan = plan(&heads, &[], &mut Loads::default(), caps(), one, 7);
        assert_eq!(plan, vec![(b, 1)]);
    }

    #[test]
    fn ties_between_accounts_follow_the_draw_not_the_account_ids() {
        let accounts: Vec<QueueKey> = (0..50)
            .map(|n| key(INTERACTIVE, &format!("acct_{n:03}"), "ch"))
            .collect();
        let heads: Vec<Head> = accounts.iter().map(|k| at(k, 100)).collect();
        let one = Budget { free: 1, bulk: 0 };
        let firsts: std::collections::HashSet<QueueKey> = (0..40)
            .map(|draw| plan(&heads, &[], &mut Loads::default(), caps(), one, draw)[0].0.clone())
            .collect();
        assert!(
            firsts.len() > 10,
            "tied accounts are drawn: {} winners in 40 draws",
            firsts.len()
        );
    }

    #[test]
    fn an_accounts_lanes_take_turns_within_it() {
        let sends = key(INTERACTIVE, "a", "ch_1");
        let reply = key(INTERACTIVE, "a", "conv_1");
        let heads = [at(&sends, 40), at(&reply, 10)];
        let plan = plan(
            &heads,
            &[],
            &mut Loads::default(),
            caps(),
            Budget { free: 1, bulk: 0 },
            7,
        );
        assert_eq!(plan, vec![(reply, 1)], "the lane ready longest goes first");
    }

    #[test]
    fn interactive_work_goes_first_and_bulk_keeps_to_its_share() {
        let import = key(BULK, "a", "");
        let send = key(INTERACTIVE, "b", "ch_b");
        let heads = [at(&import, 0), at(&send, 0)];
        let budget = Budget { free: 10, bulk: 3 };
        let plan = plan(&heads, &[], &mut Loads::default(), caps(), budget, 7);
        assert_eq!(count(&plan, &send), 10, "interactive work may take every free slot");
        assert_eq!(count(&plan, &import), 0);
        let plan = super::plan(&heads[..1], &[], &mut Loads::default(), caps(), budget, 7);
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
        let heads = [at(&busy, 0), at(&other, 0), at(&import, 0)];
        let plan = plan(&heads, &[], &mut loads, caps(), Budget { free: 50, bulk: 50 }, 7);
        assert_eq!(count(&plan, &other), 0, "the account's interactive work is at its cap");
        assert_eq!(count(&plan, &import), 50, "its bulk work has a cap of its own");
    }

    #[test]
    fn one_accounts_imports_cannot_take_every_slot() {
        let imports = key(BULK, "a", "");
        let plan = plan(
            &[at(&imports, 0)],
            &[],
            &mut Loads::default(),
            Caps { lane: 4, account: 8 },
            Budget { free: 100, bulk: 100 },
            7,
        );
        assert_eq!(
            count(&plan, &imports),
            4,
            "jobs without a lane share their account's lane cap"
        );
    }

    #[test]
    fn bulk_work_ready_past_its_age_goes_first_for_its_share() {
        let broadcast = key(BULK, "a", "ch_a");
        let replies = key(INTERACTIVE, "b", "conv_b");
        let heads = [at(&broadcast, 0), at(&replies, 0)];
        let budget = Budget { free: 16, bulk: 12 };
        let fresh = plan(&heads, &[], &mut Loads::default(), caps(), budget, 7);
        assert_eq!(count(&fresh, &broadcast), 0, "interactive work takes every slot first");
        let aged = &heads[..1];
        let waited = plan(&heads, aged, &mut Loads::default(), caps(), budget, 7);
        assert_eq!(count(&waited, &broadcast), 2, "an eighth of the free slots");
        assert_eq!(count(&waited, &replies), 14);
        let one = Budget { free: 1, bulk: 1 };
        let scarce = plan(&heads, aged, &mut Loads::default(), caps(), one, 7);
        assert_eq!(scarce, vec![(broadcast, 1)], "at least one slot, however few are free");
    }
}
