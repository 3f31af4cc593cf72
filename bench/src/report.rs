//! The results table (markdown, ready for docs/BENCHMARKS.md) and the targets checked against it.

use std::fmt::Write;

use crate::{
    engine,
    scenarios::{Footprint, Measured},
    webchat,
};

/// A target's row: what, the figure, the goal, met.
type Target = (&'static str, String, &'static str, bool);

fn p99_ms(measured: &Measured) -> f64 {
    measured.outcome.latency_us.value_at_quantile(0.99) as f64 / 1000.0
}

pub fn table(results: &[Measured]) -> String {
    let limit = results.first().map_or(1.0, |r| r.outcome.per_second());
    let mut out = String::from(
        "| scenario | req/s | x limit | p50 ms | p90 ms | p99 ms | max ms | errors | server CPU s | PostgreSQL CPU s | machine CPU s | server peak RSS MiB |\n\
         |---|---:|---:|---:|---:|---:|---:|---|---:|---:|---:|---:|\n",
    );
    for r in results {
        let h = &r.outcome.latency_us;
        let ms = |q: f64| h.value_at_quantile(q) as f64 / 1000.0;
        let errors = if r.outcome.errors.is_empty() {
            "0".to_owned()
        } else {
            r.outcome
                .errors
                .iter()
                .map(|(k, v)| format!("{k}: {v}"))
                .collect::<Vec<_>>()
                .join(", ")
        };
        let _ = writeln!(
            out,
            "| {} | {:.0} | {:.2} | {:.2} | {:.2} | {:.2} | {:.2} | {} | {:.1} | {:.1} | {:.1} | {:.0} |",
            r.name,
            r.outcome.per_second(),
            r.outcome.per_second() / limit,
            ms(0.5),
            ms(0.9),
            ms(0.99),
            h.max() as f64 / 1000.0,
            errors,
            r.server_cpu,
            r.database_cpu,
            r.machine_cpu,
            r.server_peak_rss,
        );
    }
    out
}

/// One line per target of the performance issue: the figure, the target, met or not.
pub fn targets(results: &[Measured], footprint: &Footprint) -> String {
    let find = |prefix: &str| results.iter().find(|r| r.name.starts_with(prefix));
    let rps = |prefix: &str| find(prefix).map_or(0.0, |r| r.outcome.per_second());
    let limit = rps("limit");
    let auth = find("GET /v1/api-keys/current, serve");
    let auth_ratio = rps("GET /v1/api-keys/current, serve") / limit.max(1e-9);
    let auth_p99 = auth.map_or(f64::INFINITY, p99_ms);
    let edge_ratio = rps("GET /v1/api-keys/current, split") / rps("GetCurrentApiKey").max(1e-9);
    let peak = auth.map_or(0.0, |r| r.server_peak_rss);
    let floor = rps("floor:");
    let floor_share = if floor > 0.0 {
        format!("{:.0}%", rps("GET /v1/api-keys/current, serve") / floor * 100.0)
    } else {
        "not run".to_owned()
    };
    let call_limit = rps(crate::scenarios::CALL_LIMIT);
    let call_limit_share = if call_limit > 0.0 {
        format!(
            "{:.0}% (the call limit itself {:.0}% of bare)",
            rps("GET /v1/api-keys/current, serve") / call_limit * 100.0,
            call_limit / limit.max(1e-9) * 100.0
        )
    } else {
        "not run".to_owned()
    };
    let fan_out = rps("webhook fan-out:");
    let fan_out_p99 = find("webhook fan-out:").map_or(f64::INFINITY, p99_ms);
    let capacity = rps(crate::scenarios::FAN_OUT_BACKLOG);
    let half_p99 = find(crate::scenarios::FAN_OUT_HALF).map_or(f64::INFINITY, p99_ms);
    let rows: [Target; 14] = [
        (
            "authenticated call, serve: share of the bare limit",
            format!("{:.0}%", auth_ratio * 100.0),
            ">= 35%",
            auth_ratio >= 0.35,
        ),
        (
            "authenticated call, serve: share of the storage floor (no goal set)",
            floor_share,
            "-",
            true,
        ),
        (
            "authenticated call, serve: share of the call limit, bare axum + the rate-limit call (no goal set)",
            call_limit_share,
            "-",
            true,
        ),
        (
            "authenticated call, serve: p99",
            format!("{auth_p99:.2} ms"),
            "< 5 ms",
            auth_p99 < 5.0,
        ),
        (
            "edge overhead: split REST / direct gRPC",
            format!("{:.0}%", edge_ratio * 100.0),
            ">= 60%",
            edge_ratio >= 0.60,
        ),
        (
            "serve idle RSS (SQLite)",
            format!("{:.1} MiB", footprint.idle_rss),
            "< 60 MB",
            footprint.idle_rss < 57.2,
        ),
        (
            "serve peak RSS under the authenticated load",
            format!("{peak:.1} MiB"),
            "< 200 MB",
            peak < 190.7,
        ),
        {
            let deals = find("GET /v1/deals?limit=50,");
            let p99 = deals.map_or(f64::INFINITY, p99_ms);
            (
                "deals list, 100,000 deals, 32 concurrent: p99",
                format!("{p99:.2} ms"),
                "< 20 ms",
                p99 < 20.0,
            )
        },
        (
            "webhook fan-out: deliveries per second",
            format!("{fan_out:.0}/s"),
            ">= 2,000/s",
            fan_out >= 2_000.0,
        ),
        (
            "webhook fan-out: share of the receiver's limit (no goal set)",
            format!("{:.0}%", fan_out / rps("limit: the same receiver").max(1e-9) * 100.0),
            "-",
            true,
        ),
        (
            "webhook fan-out: commit-to-receipt p99 (no goal set)",
            format!("{fan_out_p99:.0} ms"),
            "-",
            true,
        ),
        (
            "webhook fan-out of a committed backlog: deliveries per second (the capacity)",
            format!("{capacity:.0}/s"),
            ">= 10,000/s",
            capacity >= 10_000.0,
        ),
        (
            "webhook fan-out with events made at half the capacity: commit-to-receipt p99",
            format!("{half_p99:.0} ms"),
            "< 1 s",
            half_p99 < 1_000.0,
        ),
        (
            "start to healthy (SQLite)",
            format!("{:.0} ms", footprint.started_in.as_secs_f64() * 1000.0),
            "< 1 s",
            footprint.started_in.as_secs_f64() < 1.0,
        ),
    ];
    let mut out = String::from("| target | measured | goal | met |\n|---|---:|---|---|\n");
    let rows = rows
        .into_iter()
        .chain(daily_targets(results))
        .chain(engine_targets(results, footprint))
        .chain(webchat_targets(results, footprint));
    for (name, measured, goal, met) in rows {
        let _ = writeln!(
            out,
            "| {name} | {measured} | {goal} | {} |",
            if met { "yes" } else { "**no**" }
        );
    }
    out
}

/// The daily summary's p99, and its floor's (the same queries without HTTP and gRPC).
fn daily_targets(results: &[Measured]) -> Vec<Target> {
    let find = |name: &str| results.iter().find(|r| r.name == name);
    let mut rows = Vec::new();
    if let Some(daily) = find(crate::daily::DAILY) {
        rows.push(p99_under(
            "daily summary, 1,000,000 messages, 4 concurrent: p99",
            daily,
            100.0,
            "< 100 ms",
        ));
        if let Some(floor) = find(crate::daily::DAILY_FLOOR) {
            rows.push((
                "daily summary: its floor's p99, the queries alone (no goal set)",
                format!("{:.2} ms", p99_ms(floor)),
                "-",
                true,
            ));
        }
    }
    rows
}

/// The conversation engine's targets, for the scenarios that ran: each figure against its goal, and against
/// the limit it is measured by (the authenticated call on the same server, the receiver's own limit).
fn engine_targets(results: &[Measured], footprint: &Footprint) -> Vec<Target> {
    let find = |name: &str| results.iter().find(|r| r.name == name);
    let mut rows = Vec::new();
    let accepting = [
        (
            engine::SEND_API_ONLY,
            engine::BASELINE_API_ONLY,
            "accepting a send, API-only replica: share of GET /v1/api-keys/current on it",
            "accepting a send, API-only replica: p99",
            "accepting a send, API-only replica: CPU per send / per call, server + PostgreSQL (no goal set)",
        ),
        (
            engine::SEND,
            engine::BASELINE,
            "accepting a send, delivering on the same cores: share of GET /v1/api-keys/current",
            "accepting a send, delivering on the same cores: p99",
            "accepting a send, delivering on the same cores: CPU per send / per call, server + PostgreSQL (no goal \
             set)",
        ),
    ];
    // The most a send's share of the call can be on this machine (the floors' scenarios measure it).
    let ceiling = match (
        find(engine::CALL_FLOOR),
        find(engine::SEND_FLOOR),
        find(engine::BASELINE_API_ONLY),
    ) {
        (Some(call), Some(send), Some(baseline)) => {
            let call_cost = baseline.machine_us_per_request();
            let rows_cost = send.machine_us_per_request() - call.machine_us_per_request();
            Some(call_cost / (call_cost + rows_cost).max(1e-9))
        }
        _ => None,
    };
    for (send, baseline, share_name, p99_name, cpu_name) in accepting {
        if let (Some(send), Some(baseline)) = (find(send), find(baseline)) {
            let share = send.outcome.per_second() / baseline.outcome.per_second().max(1e-9);
            rows.push(match ceiling {
                Some(most) => (
                    share_name,
                    format!(
                        "{:.0}% (the most it can be here {:.0}%: {:.0}% of it)",
                        share * 100.0,
                        most * 100.0,
                        share / most.max(1e-9) * 100.0
                    ),
                    ">= 80% of the most it can be",
                    share >= 0.8 * most,
                ),
                None => (share_name, format!("{:.0}% (floors not run)", share * 100.0), "-", true),
            });
            rows.push(p99_under(p99_name, send, 25.0, "< 25 ms"));
            let (per_send, per_call) = (send.cpu_us_per_request(), baseline.cpu_us_per_request());
            rows.push((
                cpu_name,
                format!(
                    "{per_send:.0} / {per_call:.0} µs ({:.0}%)",
                    per_call / per_send.max(1e-9) * 100.0
                ),
                "-",
                true,
            ));
        }
    }
    if let (Some(call), Some(send), Some(baseline), Some(service)) = (
        find(engine::CALL_FLOOR),
        find(engine::SEND_FLOOR),
        find(engine::BASELINE_API_ONLY),
        find(engine::SEND_API_ONLY),
    ) {
        // A send does at least what the call does, plus writing its rows; the floors' difference is the
        // least those rows cost: the whole machine's, and (the least of all) PostgreSQL's part of it.
        let call_cost = baseline.machine_us_per_request();
        let rows_cost = send.machine_us_per_request() - call.machine_us_per_request();
        let rows_database = send.cpu_us_per_request() - call.cpu_us_per_request();
        let ceiling = call_cost / (call_cost + rows_cost).max(1e-9);
        rows.push((
            "accepting a send: the most its share can be here, the API replica's call over the call plus the \
             accept's rows (CPU per request; no goal set)",
            format!(
                "{:.0}% ({call_cost:.0} / {:.0} µs: the rows {rows_cost:.0} µs of the machine, floors {:.0} - {:.0}); \
                 {:.0}% counting only the rows' PostgreSQL CPU ({rows_database:.0} µs)",
                ceiling * 100.0,
                call_cost + rows_cost,
                send.machine_us_per_request(),
                call.machine_us_per_request(),
                call_cost / (call_cost + rows_database).max(1e-9) * 100.0,
            ),
            "-",
            true,
        ));
        let share = service.outcome.per_second() / baseline.outcome.per_second().max(1e-9);
        rows.push((
            "accepting a send, API-only replica: its share of that most (no goal set)",
            format!("{:.0}%", share / ceiling.max(1e-9) * 100.0),
            "-",
            true,
        ));
    }
    if let Some(capacity) = find(engine::PIPELINE) {
        rows.push(at_least(
            "pipeline: messages per second, first accept to last receipt",
            capacity,
            2_000.0,
            ">= 2,000/s",
        ));
        let limit = find(engine::TWILIO_LIMIT).map_or(0.0, |r| r.outcome.per_second());
        rows.push((
            "pipeline: share of the Twilio receiver's limit (no goal set)",
            format!("{:.0}%", capacity.outcome.per_second() / limit.max(1e-9) * 100.0),
            "-",
            true,
        ));
    }
    if let Some(half) = find(engine::PIPELINE_HALF) {
        rows.push(p99_under(
            "pipeline at half capacity: accept-to-provider p99",
            half,
            1_000.0,
            "< 1 s",
        ));
    }
    if let Some(expansion) = find(engine::EXPANSION) {
        let seconds = expansion.outcome.elapsed.as_secs_f64();
        rows.push((
            "broadcast: 100,000 contacts by tag expanded into recipients",
            format!("{seconds:.2} s"),
            "< 5 s",
            seconds < 5.0,
        ));
    }
    if let (Some(rate), Some(baseline)) = (find(engine::BROADCAST_RATE), find(engine::BROADCAST_BASELINE)) {
        let share = rate.outcome.per_second() / baseline.outcome.per_second().max(1e-9);
        rows.push((
            "broadcast: send rate, share of the pipeline's capacity in the same run",
            format!(
                "{:.0}/s / {:.0}/s = {:.0}%",
                rate.outcome.per_second(),
                baseline.outcome.per_second(),
                share * 100.0
            ),
            ">= 90%",
            share >= 0.9,
        ));
    }
    if let Some(beside) = find(engine::BESIDE_BROADCAST) {
        rows.push(p99_under(
            "broadcast draining: another tenant's and its own tenant's API sends, accept to provider p99",
            beside,
            1_000.0,
            "< 1 s",
        ));
    }
    if let Some(replies) = find(engine::BROADCAST_REPLIES) {
        rows.push(p99_under(
            "broadcast draining: its own tenant's AI replies, question stored to provider p99",
            replies,
            1_000.0,
            "< 1 s",
        ));
    }
    if let (Some(alone), Some(beside)) = (find(engine::QUIET_ALONE), find(engine::QUIET_BESIDE_BACKLOG)) {
        rows.push(p99_under(
            "fairness: a quiet tenant's send, accept to provider p99, beside 20,000 tenants' queues and a 20,000-send backlog",
            beside,
            1_000.0,
            "< 1 s",
        ));
        rows.push(p99_under(
            "fairness: the same with no backlog (no goal set)",
            alone,
            f64::INFINITY,
            "-",
        ));
    }
    rows.extend(compared_targets(results));
    if let Some(latency) = find(engine::REPLY_LATENCY) {
        rows.push(p99_under(
            "AI replies: question stored to reply queued p99, debounce 0, 10,000 FAQs, words alone",
            latency,
            50.0,
            "< 50 ms",
        ));
    }
    if let Some(rate) = find(engine::REPLY_RATE) {
        rows.push((
            "AI replies: replies stored per second, one serve, 1,000 conversations (no goal set)",
            format!("{:.0}/s", rate.outcome.per_second()),
            "-",
            true,
        ));
    }
    if let Some(latency) = find(engine::MODEL_LATENCY) {
        rows.push(p99_under(
            "AI replies with a model: question stored to model request p99, debounce 0, 20/s",
            latency,
            50.0,
            "< 50 ms",
        ));
    }
    if let Some(burst) = find(engine::MODEL_BURST) {
        rows.push((
            "AI replies with a model answering in 2 s: 500 conversations at once, all answered, replies per second (no goal set)",
            format!("{:.0}/s", burst.outcome.per_second()),
            "-",
            true,
        ));
    }
    if let Some(waiting) = &footprint.model_waiting {
        rows.push((
            "AI replies with a model: the service's memory per reply waiting on the model (no goal set)",
            format!("{:.1} KiB ({} waiting)", waiting.kib_per_reply(), waiting.replies),
            "-",
            true,
        ));
    }
    if let Some(decisions) = &footprint.ai_decisions {
        let (paced, closed) = (&decisions.paced, &decisions.closed_loop);
        rows.push((
            "AI replies: the local decision within 10 ms at 50 questions/s (context read, 10,000 FAQs searched by words, rule)",
            format!("{:.1}% of {:.0}", paced.share_within_10ms() * 100.0, paced.count),
            ">= 99% (p99 < 10 ms)",
            paced.share_within_10ms() >= 0.99,
        ));
        rows.push((
            "AI replies: the same in the closed loop, the cores saturated (no goal set)",
            format!("{:.1}% of {:.0}", closed.share_within_10ms() * 100.0, closed.count),
            "-",
            true,
        ));
    }
    if let Some(inbound) = find(engine::INBOUND) {
        rows.push(at_least(
            "inbound: signed requests stored per second",
            inbound,
            2_000.0,
            ">= 2,000/s",
        ));
        rows.push(p99_under("inbound: ack p99", inbound, 50.0, "< 50 ms"));
    }
    for (what, stored) in [
        (
            "inbound: each answered request stored one message and one message.received",
            &footprint.inbound_stored,
        ),
        (
            "inbound WhatsApp: each answered POST stored its 10 messages and their message.received",
            &footprint.meta_stored,
        ),
    ] {
        if let Some(stored) = stored {
            rows.push((
                what,
                format!(
                    "{} sent, {} refused, {} stored, {} distinct ids, {} events",
                    stored.sent, stored.refused, stored.messages, stored.distinct_sids, stored.events
                ),
                "all equal",
                stored.exact(),
            ));
        }
    }
    if let Some(batches) = find(engine::META_INBOUND) {
        let per_post = engine::PER_POST as f64;
        let stored = batches.outcome.per_second() * per_post;
        rows.push((
            "inbound WhatsApp: messages stored per second, 10 per signed POST",
            format!("{stored:.0}/s"),
            ">= 5,000/s",
            stored >= 5_000.0,
        ));
        rows.push(p99_under(
            "inbound WhatsApp: ack p99, closed loop (the queue kept full; no goal)",
            batches,
            f64::INFINITY,
            "-",
        ));
        if let Some(paced) = find(engine::META_PACED) {
            rows.push(p99_under(
                "inbound WhatsApp: ack p99 at 5,000 messages/s (500 POSTs/s)",
                paced,
                50.0,
                "< 50 ms",
            ));
        }
        if let Some(floor) = find(engine::META_REFUSED) {
            let most = floor.outcome.per_second() * per_post;
            rows.push((
                "inbound WhatsApp: the hook's floor (the same POSTs refused at the signature), x10 messages (no goal)",
                format!(
                    "{most:.0}/s: storing runs at {:.0}% of it",
                    stored / most.max(1.0) * 100.0
                ),
                "-",
                true,
            ));
        }
    }
    rows
}

/// This build against the previous one (`--previous`): the best of each build's runs, and the ratio.
fn compared_targets(results: &[Measured]) -> Vec<Target> {
    let best = |name: &str| {
        results
            .iter()
            .filter(|r| r.name == name)
            .map(|r| r.outcome.per_second())
            .fold(None, |best: Option<f64>, x| Some(best.map_or(x, |b| b.max(x))))
    };
    let mut rows = Vec::new();
    for (what, now, before) in [
        (
            "compared: webhook fan-out, this build / previous build (best of two runs each)",
            crate::scenarios::FAN_OUT_NOW,
            crate::scenarios::FAN_OUT_BEFORE,
        ),
        (
            "compared: send pipeline capacity, this build / previous build (best of two runs each)",
            crate::scenarios::PIPELINE_NOW,
            crate::scenarios::PIPELINE_BEFORE,
        ),
    ] {
        if let (Some(now), Some(before)) = (best(now), best(before)) {
            let ratio = now / before.max(1e-9);
            rows.push((
                what,
                format!("{now:.0}/s / {before:.0}/s = {:.0}%", ratio * 100.0),
                ">= 100% (within the machine's noise)",
                ratio >= 0.95,
            ));
        }
    }
    rows
}

/// Web chat's targets, for the scenarios that ran: memory per idle socket against the bare socket's, and
/// the two latencies of active sessions against the bare echo's round trip.
fn webchat_targets(results: &[Measured], footprint: &Footprint) -> Vec<Target> {
    let find = |name: &str| results.iter().find(|r| r.name == name);
    let mut rows = Vec::new();
    if let Some(idle) = &footprint.idle_sockets {
        rows.push((
            "web chat: extra resident memory per idle visitor socket, serve (SQLite)",
            format!("{:.1} KiB ({} sockets)", idle.service_kib, idle.sockets),
            "< 16 KiB",
            idle.service_kib < 16.0,
        ));
        rows.push((
            "web chat: the same on the bare axum socket (the limit; no goal set)",
            format!(
                "{:.1} KiB (service / limit {:.1}x); server CPU while idle {:.2} s",
                idle.limit_kib,
                idle.service_kib / idle.limit_kib.max(1e-9),
                idle.service_cpu_while_idle
            ),
            "-",
            true,
        ));
    }
    for (name, what) in [
        (
            webchat::ACTIVE_VISITOR,
            "web chat, 1,000 active sessions: visitor frame to message.received webhook, p99",
        ),
        (
            webchat::ACTIVE_API,
            "web chat, 1,000 active sessions: API send to the visitor's frame, p99",
        ),
    ] {
        if let Some(measured) = find(name) {
            rows.push(p99_under(what, measured, 100.0, "< 100 ms"));
        }
    }
    if let Some(echo) = find(webchat::ACTIVE_ECHO) {
        rows.push(p99_under(
            "web chat, 1,000 active sessions: visitor frame to its echo (stored, pushed back), p99 (no goal set)",
            echo,
            f64::INFINITY,
            "-",
        ));
    }
    if let Some(limit) = find(webchat::ACTIVE_LIMIT) {
        rows.push(p99_under(
            "web chat: bare WebSocket echo at the same rate, round trip p99 (the limit; no goal set)",
            limit,
            f64::INFINITY,
            "-",
        ));
    }
    rows
}

/// `what` at `goal` per second or more.
fn at_least(what: &'static str, measured: &Measured, goal: f64, goal_text: &'static str) -> Target {
    let per_second = measured.outcome.per_second();
    (what, format!("{per_second:.0}/s"), goal_text, per_second >= goal)
}

/// `what`: a p99 under `goal_ms`.
fn p99_under(what: &'static str, measured: &Measured, goal_ms: f64, goal_text: &'static str) -> Target {
    let p99 = p99_ms(measured);
    (what, format!("{p99:.2} ms"), goal_text, p99 < goal_ms)
}
