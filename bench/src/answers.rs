//! The local provider's decision and the knowledge gaps at scale (`frontdesk-bench answers`):
//!
//! - the decision of a reply over an agent with 10,000 FAQs (the passages searched, the question's subject
//!   checked against each, the excerpt cut, then the rule), in process on SQLite with the embedding model,
//!   against its floor measured in the same run: the question's embedding alone;
//! - the list of an agent's knowledge gaps over 100,000 handed-off questions through the REST API
//!   (`GET /v1/agents/{id}/knowledge-gaps`), on SQLite and on PostgreSQL, against its floor: the database's
//!   own count of the same rows, grouped by gap, on the same connection string.

use std::{sync::Arc, time::Instant};

use frontdesk_ai::replies::{
    local::LocalModel,
    passages,
    provider::{Context, Decision, Profile},
};
use frontdesk_domain::{
    agents::fields::AgentFields,
    knowledge::{
        embeddings::{Embedder, LocalModel as Embeddings},
        retrieval::{
            DENSE_WEIGHT, Owner, Retrieval,
            vectors::{Take, embed_owner},
        },
    },
};
use frontdesk_kernel::{clock::SystemClock, jobs::Wake, store::entities::agents, tenant::AccountId};
use hdrhistogram::Histogram;
use rand::{Rng, SeedableRng, rngs::StdRng};
use sea_orm::{ConnectionTrait, Database, EntityTrait, Statement};

use crate::{
    knowledge::{Api, query, seed_faqs, serve},
    scenarios::{Setup, funded_account, push_row},
};

#[derive(clap::Args)]
pub struct AnswersArgs {
    /// The agent's FAQs for the decision (0: the decision is not measured).
    #[arg(long, default_value_t = 10_000)]
    pub faqs: usize,
    /// Handed-off questions for the knowledge gaps.
    #[arg(long, default_value_t = 100_000)]
    pub questions: usize,
    /// Gaps they are grouped in.
    #[arg(long, default_value_t = 5_000)]
    pub gaps: usize,
    /// The embedding model's folder.
    #[arg(long, default_value = "models/all-MiniLM-L6-v2")]
    pub model: std::path::PathBuf,
}

/// Timings in milliseconds.
struct Latency(Histogram<u64>);

impl Latency {
    fn new() -> anyhow::Result<Self> {
        Ok(Self(Histogram::new_with_bounds(1, 600_000_000, 3)?))
    }

    fn record(&mut self, since: Instant) -> anyhow::Result<()> {
        Ok(self.0.record(since.elapsed().as_micros().max(1) as u64)?)
    }

    fn show(&self) -> String {
        let ms = |q: f64| self.0.value_at_quantile(q) as f64 / 1000.0;
        format!(
            "p50 {:.2} ms, p99 {:.2} ms ({} samples)",
            ms(0.5),
            ms(0.99),
            self.0.len()
        )
    }
}

pub async fn run(setup: &Setup, args: AnswersArgs) -> anyhow::Result<()> {
    if args.faqs > 0 {
        decision(setup, &args).await?;
    }
    for postgres in [false, true] {
        gaps(setup, &args, postgres).await?;
    }
    Ok(())
}

/// The decision of a reply over `args.faqs` FAQs, and the question's embedding alone, on the same questions.
async fn decision(setup: &Setup, args: &AnswersArgs) -> anyhow::Result<()> {
    let embedder: Arc<dyn Embedder> = Arc::new(Embeddings::load(&args.model)?);
    let url = setup.sqlite_database()?;
    frontdesk_kernel::store::migrate_at(&url).await?;
    let db = Database::connect(&url).await?;
    let account = AccountId::of_row("acc_answers");
    let now = chrono::Utc::now();
    let agent = AgentFields {
        name: Some("Bench desk".into()),
        ..AgentFields::default()
    }
    .into_new("agt_answersbench".into(), &account, now);
    agents::Entity::insert(agents::ActiveModel::from(agent.clone()))
        .exec_without_returning(&db)
        .await?;
    seed_faqs(&url, account.as_str(), &agent.id, args.faqs).await?;
    let started = Instant::now();
    let owner = Owner::Agent(agent.id.to_string());
    embed_owner(&db, &embedder, &account, &owner, Take::All).await?;
    println!(
        "answers: {} FAQs embedded in {:.0} s",
        args.faqs,
        started.elapsed().as_secs_f64()
    );
    let retrieval = Retrieval::new(
        Some(Arc::clone(&embedder)),
        DENSE_WEIGHT,
        Arc::new(SystemClock),
        Wake::default(),
    );
    let profile = Profile {
        language: agent.language.clone(),
        ..Profile::default()
    };
    let local = LocalModel::default();
    let mut rng = StdRng::seed_from_u64(51);
    let questions: Vec<String> = (0..600).map(|_| query(&mut rng)).collect();
    let (mut decided, mut embedded) = (Latency::new()?, Latency::new()?);
    let mut answered = 0;
    for (n, question) in questions.iter().enumerate() {
        // The first 100 warm the index and the words' vectors up.
        let at = Instant::now();
        let found = passages::for_messages(&retrieval, &db, &agent, &[question.as_str()]).await?;
        let context = Context {
            agent: profile.clone(),
            question: question.clone(),
            passages: found.passages,
            semantic: true,
            ..Context::default()
        };
        let made = local.decide_now(&context);
        if n >= 100 {
            decided.record(at)?;
            answered += usize::from(matches!(made, Decision::Answer { .. }));
            let at = Instant::now();
            let model = Arc::clone(&embedder);
            let q = question.clone();
            tokio::task::spawn_blocking(move || model.embed(&[q.as_str()])).await??;
            embedded.record(at)?;
        }
    }
    println!(
        "answers: the local decision over {} FAQs: {} ({answered} answered); the question's embedding alone: {}",
        args.faqs,
        decided.show(),
        embedded.show()
    );
    Ok(())
}

/// The knowledge gaps of an agent whose customers had `args.questions` questions handed off.
async fn gaps(setup: &Setup, args: &AnswersArgs, postgres: bool) -> anyhow::Result<()> {
    let url = setup.database(!postgres).await?;
    let server = serve(setup, &url, &[("FRONTDESK_EMBEDDING_MODEL", "none")])?;
    let (account, key) = funded_account(server.grpc.expect("grpc"), "100").await?;
    let api = Api::new(&server, &key);
    let agent = api.agent().await?;
    let db = Database::connect(&url).await?;
    seed_gaps(&db, &account, &agent, args).await?;
    let path = format!("/v1/agents/{agent}/knowledge-gaps");
    let (mut listed, mut counted) = (Latency::new()?, Latency::new()?);
    let count = Statement::from_sql_and_values(
        db.get_database_backend(),
        "SELECT gap_id, COUNT(*) FROM gap_questions WHERE agent_id = $1 GROUP BY gap_id ORDER BY COUNT(*) DESC LIMIT 20",
        [agent.clone().into()],
    );
    let mut largest = 0;
    for n in 0..60 {
        let at = Instant::now();
        let list = api.call(reqwest::Method::GET, &path, None).await?;
        if n >= 10 {
            listed.record(at)?;
        }
        largest = list["gaps"][0]["count"].as_i64().unwrap_or_default();
        let at = Instant::now();
        db.query_all_raw(count.clone()).await?;
        if n >= 10 {
            counted.record(at)?;
        }
    }
    println!(
        "answers: knowledge gaps over {} questions in {} gaps ({}): the list {} (largest gap {largest}); the database's count alone {}",
        args.questions,
        args.gaps,
        if postgres { "PostgreSQL" } else { "SQLite" },
        listed.show(),
        counted.show()
    );
    drop(server);
    db.close().await?;
    setup.drop_database(&url).await?;
    Ok(())
}

/// `args.gaps` open gaps of the agent and `args.questions` handed-off questions asked over the last week,
/// spread over the gaps as real questions are (a few large, many small).
async fn seed_gaps(db: &impl ConnectionTrait, account: &str, agent: &str, args: &AnswersArgs) -> anyhow::Result<()> {
    let backend = db.get_database_backend();
    let now = chrono::Utc::now();
    let mut rng = StdRng::seed_from_u64(100_000);
    for start in (0..args.gaps).step_by(500) {
        let mut sql = String::from(
            "INSERT INTO knowledge_gaps (id, account_id, agent_id, question, centroid, question_vector, members, terms, status, faq_id, created_at, updated_at) VALUES ",
        );
        let mut values: Vec<sea_orm::Value> = Vec::new();
        for i in start..(start + 500).min(args.gaps) {
            push_row(&mut sql, values.len(), 12);
            values.extend([
                format!("gap_bench{i:011}").into(),
                account.into(),
                agent.into(),
                format!("Do you sell item {i}?").into(),
                sea_orm::Value::Bytes(None),
                sea_orm::Value::Bytes(None),
                1i32.into(),
                format!("[\"item\",\"{i}\"]").into(),
                "open".into(),
                "".into(),
                now.into(),
                now.into(),
            ]);
        }
        db.execute_raw(Statement::from_sql_and_values(backend, sql, values))
            .await?;
    }
    for start in (0..args.questions).step_by(500) {
        let mut sql = String::from(
            "INSERT INTO gap_questions (conversation_id, account_id, agent_id, gap_id, question, asked_at) VALUES ",
        );
        let mut values: Vec<sea_orm::Value> = Vec::new();
        for i in start..(start + 500).min(args.questions) {
            // Squared: gap 0 gets the most questions, the last ones few.
            let u: f64 = rng.random();
            let gap = ((u * u) * args.gaps as f64) as usize;
            let asked = now - chrono::Duration::seconds(rng.random_range(0..7 * 86_400));
            push_row(&mut sql, values.len(), 6);
            values.extend([
                format!("cnv_bench{i:011}").into(),
                account.into(),
                agent.into(),
                format!("gap_bench{gap:011}").into(),
                format!("Do you sell item {gap}, please?").into(),
                asked.into(),
            ]);
        }
        db.execute_raw(Statement::from_sql_and_values(backend, sql, values))
            .await?;
    }
    Ok(())
}
