//! `create-order` and `verify`: checkout orders stored with status `created`, verified by the checkout's
//! HMAC signature, after which the order is `paid` and its subscriber `active`, all in one transaction.

use std::{sync::Arc, time::Duration};

use frontdesk_api::site::v0::{
    CreateOrderRequest, CreateOrderResponse, VerifyPaymentRequest, VerifyPaymentResponse, payments_server::Payments,
};
use sea_orm::{ColumnTrait, DatabaseConnection, EntityTrait, QueryFilter, Set, sea_query::OnConflict};
use tonic::{Code, Request, Response, Status};

use super::{
    checkout::{Checkout, CheckoutInput},
    prices::PriceTable,
    signature::{self, OrderPayment},
};
use crate::error::Reason;
use crate::{
    clock::Clock,
    error::{ApiError, ApiResult, FieldViolation},
    integrations::payments::{OrderRequest, PaymentProvider},
    store::entities::{orders, subscribers},
};

#[derive(Clone, Debug)]
pub struct PaymentsService {
    db: DatabaseConnection,
    provider: Arc<dyn PaymentProvider>,
    prices: PriceTable,
    clock: Arc<dyn Clock>,
    provider_timeout: Duration,
}

impl PaymentsService {
    pub fn new(
        db: DatabaseConnection,
        provider: Arc<dyn PaymentProvider>,
        prices: PriceTable,
        clock: Arc<dyn Clock>,
        provider_timeout: Duration,
    ) -> Self {
        Self {
            db,
            provider,
            prices,
            clock,
            provider_timeout,
        }
    }

    async fn create(&self, checkout: Checkout) -> ApiResult<CreateOrderResponse> {
        let amount = self.prices.amount(checkout.plan, checkout.currency);
        let request = OrderRequest {
            amount,
            currency: checkout.currency.as_str(),
            receipt: crate::ids::new_id(crate::ids::Kind::Receipt),
            notes: vec![
                ("plan", checkout.plan.as_str().to_owned()),
                ("phone", checkout.phone.as_str().to_owned()),
                ("business_name", checkout.business_name.clone()),
            ],
        };
        let created = tokio::time::timeout(self.provider_timeout, self.provider.create_order(&request)).await;
        let order_id = match created {
            Ok(Ok(id)) => id,
            Ok(Err(err)) => return Err(provider_error(err)),
            Err(_) => return Err(provider_error("timed out")),
        };
        let row = orders::ActiveModel {
            id: Set(order_id.clone()),
            provider: Set(self.provider.name().to_owned()),
            plan: Set(checkout.plan.as_str().to_owned()),
            currency: Set(checkout.currency.as_str().to_owned()),
            amount: Set(amount),
            phone: Set(checkout.phone.as_str().to_owned()),
            name: Set(checkout.name),
            email: Set(checkout.email.map(|e| e.as_str().to_owned()).unwrap_or_default()),
            business_name: Set(checkout.business_name),
            status: Set(orders::STATUS_CREATED.to_owned()),
            payment_id: Set(None),
            created_at: Set(self.clock.now()),
            paid_at: Set(None),
        };
        orders::Entity::insert(row).exec_without_returning(&self.db).await?;
        tracing::info!(order_id, plan = checkout.plan.as_str(), amount, "order created");
        Ok(CreateOrderResponse {
            order_id,
            amount,
            currency: checkout.currency.as_str().to_owned(),
            key_id: self.provider.key_id().to_owned(),
        })
    }

    async fn verify(&self, input: VerifyInput) -> ApiResult<VerifyPaymentResponse> {
        let order = orders::Entity::find_by_id(&input.order_id)
            .one(&self.db)
            .await?
            .ok_or_else(|| ApiError::new(Code::InvalidArgument, Reason::UnknownOrder, "no order has this orderId"))?;
        let paid = OrderPayment {
            order_id: &order.id,
            payment_id: &input.payment_id,
        };
        if !signature::verify(self.provider.key_secret(), &paid, &input.signature) {
            return Err(ApiError::new(
                Code::InvalidArgument,
                Reason::InvalidSignature,
                "signature does not match this order and payment",
            ));
        }
        if order.status == orders::STATUS_PAID {
            return settled(&order, &input.payment_id);
        }

        let now = self.clock.now();
        let txn = crate::store::begin_write(&self.db).await?;
        // Only a `created` order may become paid: a concurrent verify of the same order finds zero rows here.
        let updated = orders::Entity::update_many()
            .col_expr(orders::Column::Status, orders::STATUS_PAID.into())
            .col_expr(orders::Column::PaymentId, input.payment_id.clone().into())
            .col_expr(orders::Column::PaidAt, now.into())
            .filter(orders::Column::Id.eq(&order.id))
            .filter(orders::Column::Status.eq(orders::STATUS_CREATED))
            .exec(&txn)
            .await?;
        if updated.rows_affected == 0 {
            // Another verify won the race; release the transaction (and SQLite's write lock) at once.
            txn.rollback().await?;
            let current = orders::Entity::find_by_id(&order.id)
                .one(&self.db)
                .await?
                .ok_or_else(|| ApiError::internal("order vanished during verify"))?;
            return settled(&current, &input.payment_id);
        }
        let subscriber = subscribers::ActiveModel {
            phone: Set(order.phone.clone()),
            name: Set(order.name.clone()),
            email: Set(order.email.clone()),
            business_name: Set(order.business_name.clone()),
            plan: Set(order.plan.clone()),
            status: Set(subscribers::STATUS_ACTIVE.to_owned()),
            last_order_id: Set(order.id.clone()),
            activated_at: Set(now),
            updated_at: Set(now),
        };
        subscribers::Entity::insert(subscriber)
            .on_conflict(
                OnConflict::column(subscribers::Column::Phone)
                    .update_columns([
                        subscribers::Column::Name,
                        subscribers::Column::Email,
                        subscribers::Column::BusinessName,
                        subscribers::Column::Plan,
                        subscribers::Column::Status,
                        subscribers::Column::LastOrderId,
                        subscribers::Column::ActivatedAt,
                        subscribers::Column::UpdatedAt,
                    ])
                    .to_owned(),
            )
            .exec_without_returning(&txn)
            .await?;
        txn.commit().await?;
        tracing::info!(
            order_id = order.id,
            plan = order.plan,
            "payment verified, subscriber active"
        );
        Ok(verified(&order, &input.payment_id))
    }
}

/// The answer for an order that is already paid: the same success for the same payment, else a conflict.
fn settled(order: &orders::Model, payment_id: &str) -> ApiResult<VerifyPaymentResponse> {
    if order.payment_id.as_deref() == Some(payment_id) {
        Ok(verified(order, payment_id))
    } else {
        Err(ApiError::new(
            Code::FailedPrecondition,
            Reason::OrderAlreadyPaid,
            "this order is already paid with another payment",
        ))
    }
}

fn verified(order: &orders::Model, payment_id: &str) -> VerifyPaymentResponse {
    VerifyPaymentResponse {
        success: true,
        status: subscribers::STATUS_ACTIVE.to_owned(),
        order_id: order.id.clone(),
        payment_id: payment_id.to_owned(),
        plan: order.plan.clone(),
    }
}

fn provider_error(cause: impl std::fmt::Display) -> ApiError {
    tracing::error!(error = %cause, "payment provider failed");
    ApiError::new(
        Code::Internal,
        Reason::PaymentProviderError,
        "the payment provider could not create the order; try again",
    )
}

/// A verify request whose fields are present and of sane length.
struct VerifyInput {
    order_id: String,
    payment_id: String,
    signature: String,
}

impl VerifyInput {
    fn parse(request: VerifyPaymentRequest) -> ApiResult<Self> {
        let mut violations = Vec::new();
        for (field, value) in [
            ("orderId", &request.order_id),
            ("paymentId", &request.payment_id),
            ("signature", &request.signature),
        ] {
            if value.is_empty() {
                violations.push(FieldViolation::new(field, "is required"));
            } else if value.len() > 128 {
                violations.push(FieldViolation::new(field, "must be at most 128 characters"));
            }
        }
        if !violations.is_empty() {
            return Err(ApiError::invalid(violations));
        }
        Ok(Self {
            order_id: request.order_id,
            payment_id: request.payment_id,
            signature: request.signature,
        })
    }
}

#[tonic::async_trait]
impl Payments for PaymentsService {
    async fn create_order(
        &self,
        request: Request<CreateOrderRequest>,
    ) -> Result<Response<CreateOrderResponse>, Status> {
        let r = request.into_inner();
        let checkout = Checkout::parse(CheckoutInput {
            plan: &r.plan,
            currency: &r.currency,
            phone: &r.phone,
            name: &r.name,
            email: &r.email,
            business_name: &r.business_name,
        })?;
        Ok(Response::new(self.create(checkout).await?))
    }

    async fn verify_payment(
        &self,
        request: Request<VerifyPaymentRequest>,
    ) -> Result<Response<VerifyPaymentResponse>, Status> {
        let input = VerifyInput::parse(request.into_inner())?;
        Ok(Response::new(self.verify(input).await?))
    }
}
