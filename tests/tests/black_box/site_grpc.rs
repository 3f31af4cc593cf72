//! The site API called directly over gRPC with the generated client, plus health and reflection.

use frontdesk_api::site::v0::{
    CreateOrderRequest, HealthRequest, VerifyPaymentRequest, payments_client::PaymentsClient, site_client::SiteClient,
};
use frontdesk_tests::{Db, Server, checkout_signature, on_both_databases, razorpay::TEST_KEY_SECRET, violated_fields};
use tonic::Code;
use tonic_types::StatusExt;

fn checkout(plan: &str, phone: &str) -> CreateOrderRequest {
    CreateOrderRequest {
        plan: plan.to_owned(),
        currency: "USD".to_owned(),
        phone: phone.to_owned(),
        ..Default::default()
    }
}

on_both_databases!(site_calls_over_grpc, |db: Db| async move {
    let server = Server::start(&db, &[]).await;
    let mut site = SiteClient::connect(server.grpc.clone()).await.unwrap();
    let mut request = tonic::Request::new(HealthRequest {});
    request
        .metadata_mut()
        .insert("x-request-id", "grpc-trace-1".parse().unwrap());
    let answer = site.health(request).await.unwrap();
    assert_eq!(
        answer.metadata().get("x-request-id").unwrap(),
        "grpc-trace-1",
        "request ids are echoed"
    );
    let health = answer.into_inner();
    assert_eq!((health.status.as_str(), health.version.as_str()), ("ok", "0.1.0"));

    let mut payments = PaymentsClient::connect(server.grpc.clone()).await.unwrap();
    let order = payments
        .create_order(checkout("scale", "+14155550123"))
        .await
        .unwrap()
        .into_inner();
    assert_eq!((order.amount, order.currency.as_str()), (24_900, "USD"));

    let status = payments.create_order(checkout("gold", "98123")).await.unwrap_err();
    assert_eq!(status.code(), Code::InvalidArgument);
    let details = status.get_error_details();
    assert_eq!(details.error_info().unwrap().reason, "INVALID_ARGUMENT");
    assert_eq!(violated_fields(&status), ["plan", "phone"]);

    let verify = |payment: &str, signature: String| VerifyPaymentRequest {
        order_id: order.order_id.clone(),
        payment_id: payment.to_owned(),
        signature,
    };
    let bad = payments
        .verify_payment(verify("pay_1", "00".repeat(32)))
        .await
        .unwrap_err();
    assert_eq!(
        bad.get_error_details().error_info().unwrap().reason,
        "INVALID_SIGNATURE"
    );
    let signature = checkout_signature(TEST_KEY_SECRET, &order.order_id, "pay_1");
    let ok = payments
        .verify_payment(verify("pay_1", signature.clone()))
        .await
        .unwrap()
        .into_inner();
    assert!(ok.success);
    assert_eq!((ok.status.as_str(), ok.plan.as_str()), ("active", "scale"));
    let again = payments
        .verify_payment(verify("pay_1", signature))
        .await
        .unwrap()
        .into_inner();
    assert_eq!(again, ok);
    let paid = payments
        .verify_payment(verify(
            "pay_2",
            checkout_signature(TEST_KEY_SECRET, &order.order_id, "pay_2"),
        ))
        .await
        .unwrap_err();
    assert_eq!(paid.code(), Code::FailedPrecondition);
    assert_eq!(
        paid.get_error_details().error_info().unwrap().reason,
        "ORDER_ALREADY_PAID"
    );
    let unknown = payments
        .verify_payment(VerifyPaymentRequest {
            order_id: "order_00000000000000".into(),
            payment_id: "pay_1".into(),
            signature: "00".into(),
        })
        .await
        .unwrap_err();
    assert_eq!(
        unknown.get_error_details().error_info().unwrap().reason,
        "UNKNOWN_ORDER"
    );
});

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn grpc_health_and_reflection_list_the_services() {
    use tonic_reflection::pb::v1::{
        ServerReflectionRequest, server_reflection_client::ServerReflectionClient,
        server_reflection_request::MessageRequest, server_reflection_response::MessageResponse,
    };

    let db = Db::sqlite();
    let server = Server::start(&db, &[]).await;
    let channel = tonic::transport::Endpoint::from_shared(server.grpc.clone())
        .unwrap()
        .connect()
        .await
        .unwrap();

    let mut health = tonic_health::pb::health_client::HealthClient::new(channel.clone());
    let serving = health
        .check(tonic_health::pb::HealthCheckRequest {
            service: "frontdesk.site.v0.Payments".into(),
        })
        .await
        .unwrap()
        .into_inner();
    assert_eq!(
        serving.status,
        tonic_health::pb::health_check_response::ServingStatus::Serving as i32
    );

    // What `grpcurl -plaintext HOST:PORT list` asks.
    let mut reflection = ServerReflectionClient::new(channel);
    let request = ServerReflectionRequest {
        host: String::new(),
        message_request: Some(MessageRequest::ListServices(String::new())),
    };
    let mut answers = reflection
        .server_reflection_info(tokio_stream::iter([request]))
        .await
        .unwrap()
        .into_inner();
    let answer = answers.message().await.unwrap().unwrap();
    let Some(MessageResponse::ListServicesResponse(list)) = answer.message_response else {
        panic!("unexpected reflection answer: {answer:?}");
    };
    let names: Vec<_> = list.service.into_iter().map(|s| s.name).collect();
    for expected in [
        "frontdesk.site.v0.Site",
        "frontdesk.site.v0.Payments",
        "grpc.health.v1.Health",
    ] {
        assert!(names.iter().any(|n| n == expected), "{expected} missing from {names:?}");
    }
}
