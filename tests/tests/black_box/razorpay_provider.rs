//! The `razorpay` payment provider against a local server speaking the Orders API, its errors included,
//! and the cross-check that Razorpay's own Python SDK accepts every signature the service accepts.

use frontdesk_tests::{
    Db, Server, call, checkout_signature,
    razorpay::{FakeRazorpay, Mode, TEST_KEY_ID, TEST_KEY_SECRET},
};
use serde_json::json;

async fn start(db: &Db, fake: &FakeRazorpay, extra: &[(&str, &str)]) -> Server {
    let env = fake.env();
    let mut vars: Vec<(&str, &str)> = env.iter().map(|(k, v)| (*k, v.as_str())).collect();
    vars.extend_from_slice(extra);
    Server::start(db, &vars).await
}

fn order_body() -> String {
    json!({"plan": "launch", "currency": "INR", "phone": "+919812345678", "businessName": "Rao Dental"}).to_string()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn orders_are_created_through_the_orders_api() {
    let fake = FakeRazorpay::start().await;
    for db in [Db::sqlite(), Db::postgres().await] {
        let server = start(&db, &fake, &[]).await;
        let answer = call("POST", &server.url("/payments/create-order"), Some(&order_body())).await;
        assert_eq!(answer.status, 200, "{}", answer.body);
        let order_id = answer.body["orderId"].as_str().unwrap();
        assert!(
            order_id.starts_with("order_FAKE"),
            "the provider's id is used: {order_id}"
        );
        assert_eq!(answer.body["keyId"], TEST_KEY_ID);
        assert_eq!(answer.body["amount"], 299_900);

        let sent = fake.requests().last().cloned().unwrap();
        assert_eq!(sent["amount"], 299_900);
        assert_eq!(sent["currency"], "INR");
        let receipt = sent["receipt"].as_str().unwrap();
        assert!(!receipt.is_empty() && receipt.len() <= 40, "{receipt}");
        assert_eq!(sent["notes"]["plan"], "launch");
        assert_eq!(sent["notes"]["phone"], "+919812345678");

        let signature = checkout_signature(TEST_KEY_SECRET, order_id, "pay_R1");
        let verify = json!({"orderId": order_id, "paymentId": "pay_R1", "signature": signature}).to_string();
        let answer = call("POST", &server.url("/payments/verify"), Some(&verify)).await;
        assert_eq!((answer.status, answer.body["status"].as_str()), (200, Some("active")));
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn provider_failures_are_500_and_store_nothing() {
    let fake = FakeRazorpay::start().await;
    let db = Db::postgres().await;
    let server = start(&db, &fake, &[("FRONTDESK_PAYMENT_TIMEOUT_MS", "700")]).await;
    for mode in [Mode::BadRequest, Mode::Garbage, Mode::Slow] {
        fake.set_mode(mode);
        let started = std::time::Instant::now();
        let answer = call("POST", &server.url("/payments/create-order"), Some(&order_body())).await;
        assert_eq!(
            (answer.status, answer.code()),
            (500, "payment_provider_error"),
            "{mode:?}: {}",
            answer.body
        );
        let message = answer.body["error"]["message"].as_str().unwrap();
        assert!(
            !message.contains("BAD_REQUEST") && !message.contains("html"),
            "{message}"
        );
        assert!(
            started.elapsed().as_secs() < 4,
            "{mode:?} gave up within the configured time limit"
        );
    }
    assert_eq!(
        db.scalar("SELECT COUNT(*) FROM orders WHERE provider = $1", "razorpay")
            .await
            .as_deref(),
        Some("0")
    );

    // Wrong credentials: Razorpay answers 401, which is the provider's failure, not the client's.
    drop(server);
    fake.set_mode(Mode::Ok);
    let server = start(&db, &fake, &[("RAZORPAY_KEY_SECRET", "wrong")]).await;
    let answer = call("POST", &server.url("/payments/create-order"), Some(&order_body())).await;
    assert_eq!((answer.status, answer.code()), (500, "payment_provider_error"));
    assert!(!server.logs().contains("wrong"), "the key secret is never logged");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn razorpay_python_sdk_accepts_the_signatures_we_accept() {
    let db = Db::sqlite();
    let server = Server::start(&db, &[]).await;
    let order = call("POST", &server.url("/payments/create-order"), Some(&order_body())).await;
    let order_id = order.body["orderId"].as_str().unwrap();
    let signature = checkout_signature(TEST_KEY_SECRET, order_id, "pay_SDK1");
    let verify = json!({"orderId": order_id, "paymentId": "pay_SDK1", "signature": signature}).to_string();
    assert_eq!(
        call("POST", &server.url("/payments/verify"), Some(&verify))
            .await
            .status,
        200
    );

    let script = r#"
import sys, razorpay
client = razorpay.Client(auth=(sys.argv[1], sys.argv[2]))
ok = client.utility.verify_payment_signature({
    "razorpay_order_id": sys.argv[3], "razorpay_payment_id": sys.argv[4], "razorpay_signature": sys.argv[5]})
print("accepted" if ok else "refused")
"#;
    let output = std::process::Command::new("python3")
        .args([
            "-c",
            script,
            TEST_KEY_ID,
            TEST_KEY_SECRET,
            order_id,
            "pay_SDK1",
            &signature,
        ])
        .output()
        .expect("python3 runs (pip install -r tests/requirements.txt)");
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert_eq!(
        stdout.trim(),
        "accepted",
        "razorpay SDK: {}",
        String::from_utf8_lossy(&output.stderr)
    );
}
