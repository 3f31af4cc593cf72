//! A large account: contact search (`GET /v1/contacts?q=`) and conversation lists (`GET /v1/conversations`)
//! on an account of 1,000,000 contacts, 1,000,000 conversations and 10,000,000 messages, beside the same
//! queries on an account a tenth its size in the same database, so that a cost growing with the account
//! shows as a ratio. The rows are written by SQL; each query is timed from one client over HTTP.

use std::{sync::Arc, time::Duration};

use sea_orm::{ConnectionTrait, Database, DatabaseConnection, DbBackend};

use crate::{
    load::{self, HttpRequest, Pace, Requests, Shape},
    process::ServerProcess,
    report,
    scenarios::{Setup, funded_account, get, measure},
};

#[derive(clap::Args)]
pub struct LargeArgs {
    /// Contacts of the large account (as many conversations, ten messages each).
    #[arg(long, default_value_t = 1_000_000)]
    contacts: u64,
    /// Measured seconds per query and account.
    #[arg(long, default_value_t = 10)]
    seconds: u64,
    /// On the embedded default (SQLite) instead of PostgreSQL + Redis.
    #[arg(long)]
    sqlite: bool,
}

/// What each query is, and the requests that ask it (cycled through).
struct Query {
    name: &'static str,
    paths: Vec<String>,
}

const SURNAMES: [&str; 13] = [
    "Patel", "Smith", "Garcia", "Chen", "Khan", "Novak", "Tanaka", "Silva", "Okafor", "Muller", "Ivanova", "Brown",
    "Lee",
];
const FIRST_NAMES: [&str; 10] = [
    "Asha", "Ravi", "Maria", "John", "Wei", "Fatima", "Liam", "Olga", "Kenji", "Sara",
];
const DOMAINS: [&str; 4] = ["gmail.com", "example.org", "shop.in", "mail.co"];

pub async fn run(setup: &Setup, args: LargeArgs) -> anyhow::Result<()> {
    let database = setup.database(args.sqlite).await?;
    let serve = ServerProcess::spawn(&setup.frontdesk, &["serve"], &setup.env(&database, !args.sqlite), 2)?;
    let grpc = serve.grpc.expect("grpc");
    let (large, large_key) = funded_account(grpc, "").await?;
    let (small, small_key) = funded_account(grpc, "").await?;
    let db = Database::connect(database.as_str()).await?;
    let started = std::time::Instant::now();
    for (account, prefix, contacts) in [(&large, "l", args.contacts), (&small, "s", args.contacts / 10)] {
        seed(&db, account, prefix, contacts).await?;
    }
    analyze(&db).await?;
    println!(
        "seeded {} + {} contacts, as many conversations, ten messages each, in {:.0} s",
        args.contacts,
        args.contacts / 10,
        started.elapsed().as_secs_f64()
    );

    let shape = Shape {
        concurrency: 1,
        duration: Duration::from_secs(args.seconds),
        warmup: Duration::from_secs(1),
    };
    let addr = serve.http.expect("http");
    let mut measured = Vec::new();
    let mut ratios = Vec::new();
    let accounts = [
        (&large_key, "large", queries(args.contacts, "l")),
        (&small_key, "small", queries(args.contacts / 10, "s")),
    ];
    for (i, query) in accounts[0].2.iter().enumerate() {
        let mut p99 = Vec::new();
        for (key, label, queries) in &accounts {
            let paths = &queries[i].paths;
            let requests: Arc<[HttpRequest]> = paths.iter().map(|path| get(path, Some(key))).collect();
            let name: &'static str = Box::leak(format!("{} ({label} account)", query.name).into_boxed_str());
            let drive = load::http_sends(addr, Requests::Cycle(requests), Pace::Closed, shape);
            let result = measure(name, &[&serve], drive).await?;
            p99.push(result.outcome.latency_us.value_at_quantile(0.99) as f64 / 1000.0);
            measured.push(result);
        }
        ratios.push(format!(
            "{}: p99 {:.1} ms on the large account, {:.1} ms on the small one ({:.2}x)",
            query.name,
            p99[0],
            p99[1],
            p99[0] / p99[1].max(0.001)
        ));
    }
    println!("{}", report::table(&measured));
    for line in ratios {
        println!("{line}");
    }
    drop(serve);
    setup.drop_database(&database).await?;
    Ok(())
}

/// The queries on an account of `contacts` seeded with `prefix`, each over many values so that no answer is
/// simply cached; the fragments are picked to match many, few, one or none of the contacts.
fn queries(contacts: u64, prefix: &str) -> Vec<Query> {
    let picks = |count: u64| (0..count).map(move |i| 1 + (i * 7_919 + 13) % contacts);
    let contacts_q = |q: String| format!("/v1/contacts?q={q}");
    vec![
        Query {
            name: "contacts ?q= a surname (1 in 13 contacts)",
            paths: SURNAMES.iter().map(|s| contacts_q(s.to_lowercase())).collect(),
        },
        Query {
            name: "contacts ?q= an e-mail domain (1 in 4)",
            paths: DOMAINS.iter().map(|d| contacts_q(d.to_string())).collect(),
        },
        Query {
            name: "contacts ?q= a surname and the first digits of a number (tens of contacts)",
            paths: picks(200)
                .map(|n| contacts_q(format!("{}+{}", SURNAMES[((n / 10) % 13) as usize], n / 1000)))
                .collect(),
        },
        Query {
            name: "contacts ?q= a whole e-mail (1 contact)",
            paths: picks(200)
                .map(|n| contacts_q(format!("user{n}%40{}", DOMAINS[(n % 4) as usize])))
                .collect(),
        },
        Query {
            name: "contacts ?q= seven digits of a phone (1 or 2 contacts)",
            paths: picks(200).map(|n| contacts_q(phone(n)[5..12].to_owned())).collect(),
        },
        Query {
            name: "contacts ?q= a fragment nobody has",
            paths: picks(200).map(|n| contacts_q(format!("zq{n}x"))).collect(),
        },
        Query {
            name: "conversations, first page",
            paths: vec!["/v1/conversations".to_owned()],
        },
        Query {
            name: "conversations ?status=open",
            paths: vec!["/v1/conversations?status=open".to_owned()],
        },
        Query {
            name: "conversations ?handoff=true (1 in 10,000)",
            paths: vec!["/v1/conversations?handoff=true".to_owned()],
        },
        Query {
            name: "conversations ?unread=true (1 in 7)",
            paths: vec!["/v1/conversations?unread=true".to_owned()],
        },
        Query {
            name: "conversations ?contact_id= (1 conversation)",
            paths: picks(200)
                .map(|n| format!("/v1/conversations?contact_id=ct_{prefix}{n:013}"))
                .collect(),
        },
    ]
}

/// The phone of contact `n`: distinct for every `n` below 1,000,000,000.
fn phone(n: u64) -> String {
    format!("+1{}", 2_000_000_000 + (n * 7_919) % 1_000_000_000)
}

/// The account's contacts (numbered 1..=count, contact n created n seconds ago), one conversation each, and
/// ten messages per conversation, all by SQL.
async fn seed(db: &DatabaseConnection, account: &str, prefix: &str, count: u64) -> anyhow::Result<()> {
    let sql = Sql(db.get_database_backend());
    let surname = sql.pick("(n / 10) % 13", &SURNAMES);
    let first = sql.pick("n % 10", &FIRST_NAMES);
    let domain = sql.pick("n % 4", &DOMAINS);
    let contact = |n: &str| format!("'ct_{prefix}' || {}", sql.pad(n, 13));
    let conversation = |n: &str| format!("'cv_{prefix}' || {}", sql.pad(n, 13));
    let statements = [
        (
            format!(
                "INSERT INTO contacts (id, account_id, name, phone, email, tags, attributes, opted_out, recap, \
                 recap_at, created_at, updated_at) \
                 SELECT {id}, '{account}', {first} || ' ' || {surname} || ' ' || n, \
                 '+1' || (2000000000 + (CAST(n AS BIGINT) * 7919) % 1000000000), 'user' || n || '@' || {domain}, \
                 '[]', '{{}}', 1 = 0, '', NULL, {at}, {at}",
                id = contact("n"),
                at = sql.ago("n"),
            ),
            count,
        ),
        (
            format!(
                "INSERT INTO conversations (id, account_id, contact_id, channel, channel_id, channel_type, agent_id, \
                 status, handoff, handoff_reason, unread_count, last_message_at, activity_bucket, broadcast_id, \
                 created_at, closed_at, inbound_seq, ai_answered_seq, follow_up_seq, follow_ups_sent) \
                 SELECT {id}, '{account}', {contact}, 'sms', 'ch_bench', 'sms', '', \
                 CASE WHEN n % 3 = 0 THEN 'open' ELSE 'closed' END, n % 10000 = 0, '', \
                 CASE WHEN n % 7 = 0 THEN 1 ELSE 0 END, {last}, {bucket}, '', {created}, NULL, 10, 10, 0, 0",
                id = conversation("n"),
                contact = contact("n"),
                last = sql.ago("n * 3"),
                bucket = sql.bucket_ago("n * 3"),
                created = sql.ago("n * 3 + 600"),
            ),
            count,
        ),
        (
            format!(
                "INSERT INTO messages (id, account_id, conversation_id, contact_id, channel_id, direction, author, \
                 text, attachments, status, provider_message_id, reactions, edited, edits, removed, reply_to, \
                 broadcast_id, created_at, template) \
                 SELECT 'msg_{prefix}' || {id}, '{account}', {conversation}, {contact}, 'ch_bench', \
                 CASE WHEN n % 2 = 0 THEN 'inbound' ELSE 'outbound' END, \
                 CASE WHEN n % 2 = 0 THEN 'contact' ELSE 'agent' END, 'Message ' || n, '[]', \
                 CASE WHEN n % 2 = 0 THEN 'received' ELSE 'delivered' END, 'SM{prefix}' || n, '[]', 1 = 0, '[]', \
                 1 = 0, '', '', {at}, ''",
                id = sql.pad("n", 13),
                conversation = conversation("1 + (n - 1) / 10"),
                contact = contact("1 + (n - 1) / 10"),
                at = sql.ago("((n - 1) / 10) * 3 + 60 - n % 10"),
            ),
            count * 10,
        ),
    ];
    for (select, rows) in statements {
        db.execute_unprepared(&sql.over(rows, &select)).await?;
    }
    Ok(())
}

/// Statistics and the visibility map, as autovacuum leaves them after a load.
async fn analyze(db: &DatabaseConnection) -> anyhow::Result<()> {
    let sql = match db.get_database_backend() {
        DbBackend::Postgres => "VACUUM ANALYZE",
        _ => "ANALYZE",
    };
    db.execute_unprepared(sql).await?;
    Ok(())
}

/// The SQL the seed's statements differ in between the two databases.
struct Sql(DbBackend);

impl Sql {
    /// `insert` (an `INSERT ... SELECT` naming `n`) over n in 1..=rows.
    fn over(&self, rows: u64, insert: &str) -> String {
        match self.0 {
            DbBackend::Postgres => format!("{insert} FROM generate_series(1, {rows}) AS g(n)"),
            _ => format!(
                "WITH RECURSIVE g(n) AS (SELECT 1 UNION ALL SELECT n + 1 FROM g WHERE n < {rows}) {insert} FROM g"
            ),
        }
    }

    /// `n` in `width` digits, zeros first.
    fn pad(&self, n: &str, width: usize) -> String {
        match self.0 {
            DbBackend::Postgres => format!("lpad(({n})::text, {width}, '0')"),
            _ => format!("printf('%0{width}d', {n})"),
        }
    }

    /// The time `seconds` ago.
    fn ago(&self, seconds: &str) -> String {
        match self.0 {
            DbBackend::Postgres => format!("now() - make_interval(secs => {seconds})"),
            _ => format!("strftime('%Y-%m-%dT%H:%M:%f+00:00', 'now', '-' || ({seconds}) || ' seconds')"),
        }
    }

    /// The five-minute activity window of the time `seconds` ago.
    fn bucket_ago(&self, seconds: &str) -> String {
        match self.0 {
            DbBackend::Postgres => format!("floor((extract(epoch FROM now()) - ({seconds})) / 300)::bigint"),
            _ => format!("(CAST(strftime('%s', 'now') AS INTEGER) - ({seconds})) / 300"),
        }
    }

    /// `values[index]`, `index` an expression.
    fn pick(&self, index: &str, values: &[&str]) -> String {
        let cases: String = values
            .iter()
            .enumerate()
            .map(|(i, value)| format!(" WHEN {i} THEN '{value}'"))
            .collect();
        format!("(CASE {index}{cases} END)")
    }
}
