//! The drill on broadcasts (`frontdesk-bench crash-drill --path broadcast`): a broadcast to 10,000 phone
//! numbers on an sms channel whose Twilio is a receiver in this process, sent at once, while the service goes
//! through a fault (`faults`: by default SIGKILLs of `serve` during its expansion and sending). Afterwards
//! every recipient must have received the opener; the drill reports who was missed, who got it twice, and
//! whether the broadcast's own counts match what the provider received.

use std::{
    collections::HashSet,
    sync::{Arc, RwLock},
    time::{Duration, Instant},
};

use frontdesk_api::v1::{Audience, CreateBroadcastRequest, GetBroadcastRequest, broadcasts_client::BroadcastsClient};
use sea_orm::Database;
use tonic::{metadata::MetadataValue, transport::Channel};

use super::{Engine, PUBLIC_URL, keyed, send_drill::start_twilio};
use crate::{
    drill::{DrillArgs, Tally, scalar, store, tear_down},
    faults::{ProviderSwitch, Stage},
    process::ServerProcess,
};

/// The most numbers one broadcast's audience takes.
const MAX_PHONES: u64 = 10_000;

pub async fn run(mut stage: Stage, args: &DrillArgs) -> anyhow::Result<()> {
    let recipients = args.sends.unwrap_or(MAX_PHONES).min(MAX_PHONES);
    let setup = &stage.setup.clone();
    let database = setup.database(args.sqlite).await?;
    let (twilio, received) = start_twilio(ProviderSwitch::default()).await?;
    let mut env = setup.env(&database, !args.sqlite);
    env.insert("FRONTDESK_TWILIO_BASE_URL".into(), format!("http://{twilio}"));
    env.insert("FRONTDESK_PUBLIC_URL".into(), PUBLIC_URL.into());
    let spawn = || ServerProcess::spawn(&setup.frontdesk, &["serve"], &env, 2);
    let serve = spawn()?;
    let engine = Engine::prepare(&serve, &database, 0).await?;

    let grpc = Channel::from_shared(format!("http://{}", engine.grpc))?
        .connect()
        .await?;
    let key: MetadataValue<_> = engine.key.parse()?;
    let agent = engine.plain_agent("Offers").await?;
    let phones: Vec<String> = (0..recipients).map(|n| format!("+1666{n:07}")).collect();
    let broadcast = BroadcastsClient::new(grpc)
        .create_broadcast(keyed(
            &key,
            CreateBroadcastRequest {
                name: "drill".into(),
                agent_id: agent,
                channel: "sms".into(),
                audience: Some(Audience {
                    phones: phones.clone(),
                    ..Default::default()
                }),
                opener: "This week only: 20% off.".into(),
                send_at: "now".into(),
                template: None,
            },
        ))
        .await?
        .into_inner()
        .broadcast
        .map(|b| b.id)
        .unwrap_or_default();

    // The fault comes a second into the broadcast; nothing else is asked of the service meanwhile.
    let current = Arc::new(RwLock::new(serve.http));
    let (serve, (_, fault_ended)) = stage.disrupt(serve, spawn, &current, |s| s.http, args).await?;

    let phones: HashSet<String> = phones.into_iter().collect();
    let db = Database::connect(&database).await?;
    const UNSETTLED: &str = "SELECT COUNT(*) FROM jobs WHERE status IN ('pending', 'running') \
                             AND kind IN ('deliver_message', 'broadcast_start')";
    let started = Instant::now();
    loop {
        let settled = received.recipients.missing(&phones) == 0 && scalar(&db, UNSETTLED).await? == 0;
        if settled || started.elapsed() > Duration::from_secs(300) {
            break;
        }
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
    tokio::time::sleep(Duration::from_millis(500)).await;
    let Tally {
        lost,
        twice,
        unacknowledged: strangers,
        last_after_fault,
    } = received.recipients.tally(&phones, fault_ended);
    let channel = Channel::from_shared(format!("http://{}", serve.grpc.expect("grpc")))?
        .connect()
        .await?;
    let stats = BroadcastsClient::new(channel)
        .get_broadcast(keyed(
            &key,
            GetBroadcastRequest {
                broadcast_id: broadcast.clone(),
            },
        ))
        .await?
        .into_inner()
        .broadcast
        .and_then(|b| b.stats)
        .unwrap_or_default();
    let failed = scalar(
        &db,
        "SELECT COUNT(*) FROM messages WHERE broadcast_id <> '' AND status = 'failed'",
    )
    .await?;
    tear_down(setup, &database, [db, engine.db], serve).await?;

    let store = store(args.sqlite);
    println!(
        "drill, broadcast ({store}): {}, {recipients} recipients",
        args.fault.describe(args.kills, args.window, args.outage)
    );
    println!("| figure | value |\n|---|---|");
    println!("| recipients | {recipients} |");
    println!("| missed (never received the opener) | {lost} |");
    println!(
        "| received it twice or more | {twice} ({:.2}%) |",
        100.0 * twice as f64 / recipients.max(1) as f64
    );
    println!("| sent to a number not in the audience | {strangers} |");
    println!("| messages failed | {failed} |");
    println!(
        "| the broadcast's counts: recipients, sent | {}, {} |",
        stats.total, stats.sent
    );
    println!(
        "| last receipt after the fault ended | {:.2} s |",
        last_after_fault.as_secs_f64()
    );
    anyhow::ensure!(lost == 0, "{lost} recipients never received the broadcast");
    anyhow::ensure!(
        u64::try_from(stats.total).unwrap_or(0) == recipients && u64::try_from(stats.sent).unwrap_or(0) == recipients,
        "the broadcast counts {} recipients and {} sent for {recipients}",
        stats.total,
        stats.sent
    );
    Ok(())
}
